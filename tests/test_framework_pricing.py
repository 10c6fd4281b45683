"""`--framework any` prices each layout with the stack of a framework that runs it, exports only the
formats whose framework runs the layout, and `check` of a framework's own file refuses what that
framework cannot run (planner.search.frameworks: priced_frameworks, merge_ranked, framework_refusals)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.cli import app
from planner.exporters import ExportRefused, render_all
from planner.exporters.common import plan_from_doc
from planner.exporters.pricing import priced_for
from planner.files.planfile import plan_document
from planner.search.frameworks import framework_refusals, priced_frameworks

runner = CliRunner()


def _train() -> TrainSpec:
    return hp.resolve_train(TrainSpec(global_batch_size=64))


def test_any_prices_each_framework_with_its_own_stack():
    """One entry per framework, each with that framework's default stack; a given stack prices alone."""
    pairs = priced_frameworks(_train(), False)
    assert {fw.name: tr.stack_spec.name for fw, tr in pairs} == {
        "megatron": "megatron-core", "deepspeed": "deepspeed", "torchtitan": "torchtitan", "fsdp": "fsdp"}
    given = hp.resolve_train(TrainSpec(global_batch_size=64), "deepspeed")
    assert [fw.name for fw, _ in priced_frameworks(given, True)] == ["deepspeed"]


def test_zero2_with_pipeline_is_refused_by_megatron_and_its_export():
    """ZeRO-2 with pp > 1 is a torchtitan layout: Megatron's table refuses it, and so does the Megatron
    export of a plan holding it (it used to be written, and approved by check)."""
    model, clus, train = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", num_nodes=2), _train()
    lay = Layout(tp=2, pp=2, zero=2, mbs=1)
    result = estimate(model, clus, train, lay)
    assert framework_refusals("megatron", result.layout, train, moe=False)
    assert framework_refusals(None, result.layout, train, moe=False) == []
    doc = plan_document(model, clus, train, result)
    with pytest.raises(ExportRefused, match="megatron cannot run this layout"):
        render_all(plan_from_doc(doc), "megatron")
    files, refused = render_all(plan_from_doc(doc), "all")
    assert "megatron" in refused and "slurm" in refused
    assert not any(name.endswith("megatron.sh") for name in files)


def test_plan_any_names_the_pricing_framework_first():
    """plan (default --framework any): every row's first runner is the framework whose stack priced it,
    and it runs the layout."""
    res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch", "64",
                              "--time-limit", "20", "--top", "3", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["runs_on"] and all(names for names in doc["runs_on"])
    train = _train()
    for plan, names in zip(doc["plans"], doc["runs_on"]):
        assert framework_refusals(names[0], Layout.model_validate(plan["layout"]), train, moe=False) == []


def test_torchtitan_plans_no_zero1_and_runs_an_exported_one_as_zero2():
    """torchtitan has no ZeRO-1 (FSDP2 shards gradients with the optimizer states): `plan --framework torchtitan`
    ranked zero=1 layouts at ZeRO-1's price and wrote them as fsdp_reshard_after_forward "never", which `check` of
    the file priced as ZeRO-2 (Llama 3.1 405B on 32 DGX-H100: 44.5 s planned, 53.2 s as written). A zero=1 plan of
    another framework still exports to torchtitan, priced as the ZeRO-2 it runs."""
    model, clus = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", num_nodes=1)
    train = hp.resolve_train(TrainSpec(global_batch_size=64), "torchtitan")
    zero1 = estimate(model, clus, train, Layout(dp=8, zero=1))
    assert any("zero=1" in w for w in framework_refusals("torchtitan", zero1.layout, train, moe=False))
    res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "64",
                              "--framework", "torchtitan", "--top", "5", "--json"])
    assert {p["layout"]["zero"] for p in json.loads(res.stdout)["plans"]} <= {0, 2, 3}
    doc = plan_document(model, clus, train, zero1)
    files, refused = render_all(plan_from_doc(doc), "torchtitan")
    assert not refused and 'fsdp_reshard_after_forward = "never"' in files["torchtitan_0.2.toml"][0]
    assert priced_for("torchtitan", plan_from_doc(doc)).layout.zero == 2
