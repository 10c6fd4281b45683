"""A plan file saved before a spec field existed reads that field as its default; where today's preset of the same
name says otherwise, parplan says so (a review: an MI300X plan saved before scale_up_topology silently priced the
node as a switch, 27.7 s against 34 s on today's preset)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()


def _document(cluster: str) -> dict:
    import hardware_profiles as hp
    from costmodels.estimate import estimate
    from costmodels.layout import Layout
    from costmodels.train_spec import TrainSpec
    from planner.files.planfile import plan_document

    model, clus = hp.load_model("llama3-8b"), hp.load_cluster(cluster, num_nodes=1)
    train = hp.resolve_train(TrainSpec(global_batch_size=8))
    return plan_document(model, clus, train, estimate(model, clus, train, Layout(tp=2, dp=4, mbs=1, zero=1)))


def _saved(tmp_path: Path, cluster: str, drop: str = "") -> Path:
    doc = json.loads(json.dumps(_document(cluster)))
    if drop:
        node = doc["cluster"]
        *parents, leaf = drop.split(".")
        for key in parents:
            node = node[key]
        del node[leaf]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_mi300x_plan_without_the_mesh_field_says_so(tmp_path: Path):
    res = runner.invoke(app, ["estimate", str(_saved(tmp_path, "mi300x-node", "scale_up_topology"))])
    assert res.exit_code == 0
    assert "scale_up_topology is not in this plan file" in res.stderr and "'mesh'" in res.stderr


def test_a_b200_plan_without_curve_gen_says_so(tmp_path: Path):
    res = runner.invoke(app, ["estimate", str(_saved(tmp_path, "dgx-b200", "gpu.efficiency.curve_gen"))])
    assert res.exit_code == 0 and "curve_gen is not in this plan file" in res.stderr


def test_a_current_plan_says_nothing(tmp_path: Path):
    res = runner.invoke(app, ["estimate", str(_saved(tmp_path, "mi300x-node"))])
    assert res.exit_code == 0 and "is not in this plan file" not in res.stderr
