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


def test_a_deepseek_v3_plan_saved_before_routing_groups_says_so(tmp_path):
    """A DeepSeek-V3 model saved before moe_router_num_groups reads as unrestricted routing, where today's preset
    limits each token to 4 of 8 groups: said for both fields, never silently."""
    import hardware_profiles as hp
    from costmodels.estimate import estimate
    from costmodels.layout import Layout
    from costmodels.train_spec import TrainSpec
    from planner.files.planfile import plan_document

    model, clus = hp.load_model("deepseek-v3"), hp.load_cluster("dgx-h100", num_nodes=32)
    train = hp.resolve_train(TrainSpec(global_batch_size=256))
    lay = Layout(tp=2, pp=8, ep=32, mbs=1, zero=1, sp=True, stage_layers=[7, 7, 7, 8, 8, 8, 8, 8])
    doc = json.loads(json.dumps(plan_document(model, clus, train, estimate(model, clus, train, lay))))
    for field in ("moe_router_num_groups", "moe_router_group_topk"):
        del doc["model"][field]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    res = runner.invoke(app, ["estimate", str(path), "--json"])
    said = [w for w in json.loads(res.stdout)["warnings"] if "saved by an older parplan" in w]
    assert len(said) == 2 and "today's deepseek-v3 preset says 8" in said[0]


def test_a_plan_from_a_newer_parplan_is_said(tmp_path):
    """parplan_version "99.0" was accepted without a word (a new-user pass): its saved numbers are another version's."""
    doc = json.loads((Path(__file__).resolve().parents[1] / "docs" / "examples" / "llama3-8b-plan.json").read_text())
    path = tmp_path / "new.json"
    for version, said in (("99.0", True), ("0.0.1", False), ("dev", False)):
        path.write_text(json.dumps({**doc, "parplan_version": version}))
        warnings = json.loads(runner.invoke(app, ["estimate", str(path), "--json"]).stdout)["warnings"]
        assert any("saved by a newer parplan" in w for w in warnings) is said, version
