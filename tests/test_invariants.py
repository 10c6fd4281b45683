"""Issue 6 invariants: JSON output validates against `parplan schema`; monotonicity of the cost model;
`plan` returns or explains, never crashes; the time limit is honoured."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from helpers import cluster, gpt, llama_like
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout, LayoutError
from costmodels.train_spec import TrainSpec
from planner.cli import app
from planner.search.explain import why_nothing_fits, why_winner
from planner.schema import json_schema
from planner.search import search
from planner.search.space import SpaceOptions

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "docs" / "examples").glob("*.json"))
SCHEMA = json_schema()
runner = CliRunner()
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# a search per example (~60 ms): 100 in the suite (~6 of them fit nowhere), the 1,000 of FUZZ under -m fuzz
PLAN = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _validate(instance: dict, name: str) -> None:
    jsonschema.validate(instance, {"$defs": SCHEMA["$defs"], **SCHEMA["$defs"][name]})


def test_schema_command_prints_every_definition():
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    defs = json.loads(result.stdout)["$defs"]
    assert {"ModelSpec", "ClusterSpec", "GPUProfile", "TrainSpec", "Layout", "PlanFile", "Estimate",
            "PlanOutput"} <= set(defs)
    assert "description" in defs["ModelSpec"]["properties"]["num_kv_heads"]  # documents the spec files


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_plan_files_validate(path: Path):
    _validate(json.loads(path.read_text()), "PlanFile")


def test_an_error_under_json_validates_and_schema_takes_json():
    """Any command's error document under --json has a definition (ErrorOutput), and `schema --json` is accepted
    (it exited 2, "No such option", though its output is always JSON: a contract pass)."""
    bad = runner.invoke(app, ["estimate", "no-such-model", "--cluster", "dgx-h100", "--json"])
    assert bad.exit_code == 2
    _validate(json.loads(bad.stdout), "ErrorOutput")
    assert json.loads(runner.invoke(app, ["schema", "--json"]).stdout)["$defs"].keys() >= {"SweepOutput",
                                                                                          "CalibrateOutput"}


def test_cli_json_validates():
    est = runner.invoke(app, ["estimate", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "8", "--global-batch",
                              "64", "--layout", "tp=1,pp=4,ep=8,mbs=1,zero=1,recompute=full", "--json"])
    _validate(json.loads(est.stdout), "EstimateOutput")
    plan = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "16", "--json"])
    _validate(json.loads(plan.stdout), "PlanOutput")
    saved = Path(__file__).resolve().parents[1] / "docs" / "examples" / "llama3-8b-plan.json"
    check = runner.invoke(app, ["check", str(saved), "--json"])  # with assumed, notes and read: CheckOutput
    _validate(json.loads(check.stdout), "CheckOutput")
    script = Path(__file__).resolve().parent / "data" / "configs" / "mlm_llama3_8b_fp8.sh"
    _validate(json.loads(runner.invoke(app, ["check", str(script), "--cluster", "dgx-h100", "--json"]).stdout),
              "CheckOutput")


# ---- random problems -------------------------------------------------------------------------------

H100 = hp.load_gpu("h100-sxm")


@st.composite
def problems(draw):
    layers = draw(st.integers(2, 12))
    if draw(st.booleans()):
        model = gpt(draw(st.sampled_from([128, 256, 512])), 8, layers, vocab=2048, seq=draw(st.sampled_from([256, 512])))
    else:
        model = llama_like(512, 8, draw(st.sampled_from([1, 2, 8])), layers, 1024, vocab=2048, seq=512)
    gpus = draw(st.sampled_from([1, 2, 4, 8, 16]))
    hbm = draw(st.floats(0.05, 4.0))
    clus = cluster(gpus, gpu=H100.model_copy(update={"hbm_gib": hbm}), memory_reserve_gib=0.0)
    train = TrainSpec(global_batch_size=draw(st.sampled_from([8, 16, 32])))
    return model, clus, train


OPTS = SpaceOptions(max_cp=2, max_mbs=4, max_vpp=2)


def _check_plans(model, clus, train, result) -> None:
    for p in result.plans:
        lay = p.layout
        assert lay.tp * lay.cp * lay.pp * lay.dp == clus.num_gpus
        assert sum(lay.stage_layers) == model.num_layers
        assert lay.mbs * lay.dp * lay.num_microbatches == train.global_batch_size
        assert p.fits and not p.memory.allocator_pressure and p.memory.peak_bytes <= p.memory.usable_bytes
        again = estimate(model, clus, train, lay)
        assert again.time.step_s == p.time.step_s and again.memory.peak_bytes == p.memory.peak_bytes


def _plan_returns_or_explains(problem) -> None:
    model, clus, train = problem
    result = search(model, clus, train, top=2, opts=OPTS)
    if result.plans:
        assert result.status == "optimal" and why_winner(result)
        _check_plans(model, clus, train, result)
    else:
        assert result.status == "infeasible"
        assert why_nothing_fits(model, clus, train, result, OPTS)


@PLAN
@given(problems())
def test_plan_returns_or_explains(problem):
    _plan_returns_or_explains(problem)


@pytest.mark.fuzz
@FUZZ
@given(problems())
def test_plan_returns_or_explains_fuzz(problem):
    _plan_returns_or_explains(problem)


@st.composite
def layouts(draw):
    model, clus, train = draw(problems())
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if clus.num_gpus % t == 0 and 8 % t == 0]))
    pp = draw(st.sampled_from([p for p in (1, 2) if clus.num_gpus % (tp * p) == 0]))
    lay = Layout(tp=tp, sp=tp > 1 and draw(st.booleans()), pp=pp, mbs=draw(st.sampled_from([1, 2])),
                 zero=draw(st.integers(0, 3)), recompute=draw(st.sampled_from(["none", "selective", "full"])),
                 stage_layers=None if model.num_layers % pp == 0 else [model.num_layers // 2,
                                                                       model.num_layers - model.num_layers // 2])
    return model, clus, train, lay


def _estimate_or_skip(model, clus, train, lay):
    try:
        return estimate(model, clus, train, lay)
    except LayoutError:
        return None


@FAST
@given(layouts(), st.floats(1.01, 8.0))
def test_more_hbm_never_unfits(case, factor):
    model, clus, train, lay = case
    base = _estimate_or_skip(model, clus, train, lay)
    if base is None or not base.fits:
        return
    bigger = clus.model_copy(update={"gpu": clus.gpu_profile.model_copy(update={"hbm_gib": clus.gpu_profile.hbm_gib
                                                                                * factor})})
    assert estimate(model, bigger, train, lay).fits


@FAST
@given(layouts(), st.floats(1.01, 10.0), st.floats(1.01, 10.0))
def test_more_bandwidth_never_slows(case, up, out):
    model, clus, train, lay = case
    base = _estimate_or_skip(model, clus, train, lay)
    if base is None:
        return
    faster = clus.model_copy(update={"scale_up_gb_per_s": clus.scale_up_gb_per_s * up,
                                     "scale_out_gb_per_s": clus.scale_out_gb_per_s * out})
    assert estimate(model, faster, train, lay).time.step_s <= base.time.step_s * (1 + 1e-12)


@FAST
@given(layouts())
def test_more_recompute_never_adds_activation_memory(case):
    """none -> selective -> full, with flash attention (without it, full recompute's one-layer
    working set holds the s x s scores that selective never keeps)."""
    model, clus, train, lay = case
    acts = []
    for rc in ("none", "selective", "full"):
        e = _estimate_or_skip(model, clus, train, lay.model_copy(update={"recompute": rc}))
        if e is None:
            return
        acts.append([s.activations_bytes for s in e.memory.stages])
    for more, less in zip(acts[1:], acts):
        assert all(a <= b + 1 for a, b in zip(more, less))


def test_time_limit_is_honoured():
    """A tiny limit on the largest ladder problem stops the search: status feasible, not optimal, and
    the search says the limit cut it short (its own account, not a clock: issue 36)."""
    model, clus = hp.load_model("llama3.1-405b"), hp.load_cluster("dgx-h100", 2048)
    result = search(model, clus, TrainSpec(global_batch_size=2048, seq_length=8192), top=1, time_limit_s=0.2)
    assert result.status == "feasible" and result.stats.truncated and result.gap is None
    assert result.stats.cut
