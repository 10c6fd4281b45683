"""The whole run (costmodels.whole_run, issue 15 item 2): checkpoint intervals by Young (1974) and Daly (2006),
goodput by Daly's expected wall time, MTBF from Llama 3's interruptions, cost and energy, each against numbers
worked by hand; properties of the formulas; the CLI's options, JSON, terminal and HTML."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plan_cache import shared_plan_searches
from pydantic import ValidationError
from typer.testing import CliRunner

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from costmodels.whole_run import (DEFAULT_GPU_FAILURE_RATE_PER_HOUR, RunSpec, checkpoint_bytes, checkpoint_write_s,
                                  daly_interval_s, energy_kwh, expected_goodput, mtbf_s, whole_run, young_interval_s)
from planner.cli import app

runner = CliRunner()


def test_young_interval_by_hand():
    """Young 1974: tau = sqrt(2 d M); d = 300 s, M = 3 h = 10,800 s: sqrt(2 x 300 x 10,800) = sqrt(6,480,000)
    = 2,545.58 s (42.4 min)."""
    assert young_interval_s(300, 10800) == pytest.approx(2545.58, abs=0.01)


def test_daly_interval_by_hand():
    """Daly 2006: tau = sqrt(2 d M) [1 + sqrt(d/2M)/3 + (d/2M)/9] - d. d = 300 s, M = 10,800 s: d/2M =
    0.0138889, sqrt = 0.117851; bracket = 1 + 0.039284 + 0.001543 = 1.040827; 2,545.58 x 1.040827 = 2,649.51;
    minus 300 = 2,349.51 s. For d >= 2M, tau = M."""
    assert daly_interval_s(300, 10800) == pytest.approx(2349.51, abs=0.01)
    assert daly_interval_s(100, 40) == 40 and daly_interval_s(80, 40) == 40


def test_goodput_by_hand():
    """G = tau / (M e^(R/M) (e^((tau + d)/M) - 1)) (Daly 2006's expected wall time). M = 1,000 s, tau = 600 s,
    d = 1,000 ln 2 - 600 = 93.15 s, so e^((tau + d)/M) - 1 = 1: R = 0 gives G = 600/1,000 = 0.6; R = 1,000 ln 1.25
    = 223.1 s gives e^(R/M) = 1.25 and G = 0.6/1.25 = 0.48."""
    d = 1000 * math.log(2) - 600
    assert expected_goodput(600, d, 1000, 0) == pytest.approx(0.6, rel=1e-12)
    assert expected_goodput(600, d, 1000, 1000 * math.log(1.25)) == pytest.approx(0.48, rel=1e-12)


def test_goodput_near_first_order_when_failures_are_rare():
    """To first order 1 - G = d/tau + (tau/2 + R)/M: d = 60 s, M = 10^6 s, tau = sqrt(2 d M) = 10,954 s, R = 600 s:
    0.005477 + (5,477 + 600)/10^6 = 0.011554, so G = 0.98845; the exact form agrees to 1e-4."""
    tau = young_interval_s(60, 1e6)
    assert tau == pytest.approx(10954.45, abs=0.01)
    assert expected_goodput(tau, 60, 1e6, 600) == pytest.approx(0.98845, abs=1e-4)


def test_mtbf_from_llama3():
    """Llama 3 section 3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs: 419 / (54 x 24 x 16,384)
    = 1.973e-5 per GPU-hour; the cluster's MTBF = 54 x 24 / 419 = 3.093 h."""
    assert DEFAULT_GPU_FAILURE_RATE_PER_HOUR == pytest.approx(1.9733e-5, rel=1e-4)
    assert mtbf_s(16384, DEFAULT_GPU_FAILURE_RATE_PER_HOUR) / 3600 == pytest.approx(3.093, abs=1e-3)


def test_energy_and_checkpoint_by_hand():
    """16,384 GPUs x 700 W x 24 h = 275,251.2 kWh. 405.85e9 parameters x 14 bytes (bf16 weights 2 + fp32 master 4 +
    Adam 8) = 5.682e12 bytes; over 2,048 nodes at 0.9766 GB/s (2 TB/s in all) = 2.841 s."""
    assert energy_kwh(16384, 700.0, 24) == pytest.approx(275251.2)
    assert energy_kwh(16384, None, 24) is None
    train = TrainSpec(global_batch_size=1)
    assert checkpoint_bytes(405_853_388_800, train) == 405_853_388_800 * 14
    assert checkpoint_bytes(1000, TrainSpec(global_batch_size=1, optimizer="sgd")) == 1000 * (2 + 4 + 4)
    assert checkpoint_write_s(405_853_388_800 * 14, 2048, 2000 / 2048) == pytest.approx(2.841, abs=1e-3)


@pytest.fixture(scope="module")
def small():
    model, clus = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", 1)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096))
    return model, clus, train, estimate(model, clus, train, Layout(tp=1, pp=1, dp=8, zero=1))


def test_whole_run_by_hand(small):
    """steps = ceil(1e12 / (64 x 4,096)) = 3,814,698; days = steps x step_s / 86,400; GPU-hours = 8 x hours;
    cost = GPU-hours x price; energy = 8 x 700 W x hours; days with failures = days / goodput."""
    model, clus, train, est = small
    w = whole_run(est, model, clus, train, RunSpec(tokens=1e12, price_per_gpu_hour=2.5))
    hours = 3_814_698 * est.time.step_s / 3600
    assert w.steps == 3_814_698 and w.days == pytest.approx(hours / 24)
    assert w.gpu_hours == pytest.approx(8 * hours) and w.cost_usd == pytest.approx(8 * hours * 2.5)
    assert w.energy_kwh == pytest.approx(8 * 0.7 * hours)
    assert w.days_with_failures == pytest.approx(w.days / w.goodput)
    assert w.cost_with_failures_usd == pytest.approx(w.gpu_hours_with_failures * 2.5)
    assert w.expected_failures == pytest.approx(w.days_with_failures * 86400 / w.mtbf_s)
    assert w.mtbf_s == pytest.approx(3600 / (8 * DEFAULT_GPU_FAILURE_RATE_PER_HOUR))
    assert w.checkpoint_interval_steps == round(w.checkpoint_interval_s / est.time.step_s)


def test_checkpoint_is_the_memory_models_distinct_shards(small):
    """zero=1 over dp=8: the weights once (replicated: one copy) plus 8 optimizer shards = the checkpoint."""
    model, clus, train, est = small
    stage = est.memory.stages[0]
    assert stage.weights_bytes + 8 * stage.optimizer_bytes == checkpoint_bytes(est.params.total, train)


def test_write_rate_from_the_run_then_the_cluster(small):
    model, clus, train, est = small
    on_cluster = clus.model_copy(update={"checkpoint_write_gb_per_s_per_node": 10.0})
    ckpt = checkpoint_bytes(est.params.total, train)
    assert whole_run(est, model, on_cluster, train, RunSpec(tokens=1e9)).checkpoint_write_s == pytest.approx(ckpt / 1e10)
    run = RunSpec(tokens=1e9, checkpoint_write_gb_per_s_per_node=5.0)
    assert whole_run(est, model, on_cluster, train, run).checkpoint_write_s == pytest.approx(ckpt / 5e9)


def test_absurd_failures_are_refused(small):
    model, clus, train, est = small
    big = clus.model_copy(update={"num_nodes": 100_000})
    with pytest.raises(ValueError, match="never finishes"):
        whole_run(est, model, big, train, RunSpec(tokens=1e9, gpu_failure_rate_per_hour=1.0, restart_s=3600.0))


@pytest.mark.parametrize("field, value", [("tokens", 0.0), ("tokens", float("nan")), ("restart_s", -1.0),
                                          ("gpu_failure_rate_per_hour", 0.0), ("price_per_gpu_hour", float("inf")),
                                          ("checkpoint_write_gb_per_s_per_node", 0.0)])
def test_runspec_bounds(field, value):
    with pytest.raises(ValidationError):
        RunSpec(**{"tokens": 1e12, field: value})


DELTA = st.floats(1, 3600)
MTBF = st.floats(3600, 1e7)
RESTART = st.floats(0, 7200)


@settings(max_examples=200, deadline=None)
@given(DELTA, MTBF, RESTART, st.floats(1.01, 10))
def test_goodput_in_unit_interval_and_decreasing(delta, mtbf, restart, factor):
    """0 < G <= 1; G falls as failures get more frequent (M smaller) or restarts longer, each at its optimum
    interval (Daly) and at a fixed one."""
    g = expected_goodput(daly_interval_s(delta, mtbf), delta, mtbf, restart)
    assert 0 < g <= 1
    assert expected_goodput(daly_interval_s(delta, mtbf / factor), delta, mtbf / factor, restart) < g
    assert expected_goodput(daly_interval_s(delta, mtbf), delta, mtbf, restart + factor) < g
    tau = young_interval_s(delta, mtbf)
    assert expected_goodput(tau, delta, mtbf / factor, restart) < expected_goodput(tau, delta, mtbf, restart)


@settings(max_examples=200, deadline=None)
@given(DELTA, MTBF, st.floats(1.01, 10))
def test_interval_grows_with_delta_and_mtbf(delta, mtbf, factor):
    """Both intervals grow with the checkpoint time and with the MTBF (d < 2M here)."""
    for fn in (young_interval_s, daly_interval_s):
        assert fn(delta * factor, mtbf) > fn(delta, mtbf)
        assert fn(delta, mtbf * factor) > fn(delta, mtbf)


EXAMPLE = ["plan", "llama3.1-405b", "--cluster", "dgx-h100", "--nodes", "2048", "--global-batch", "2048",
           "--seq-len", "8192", "--tokens", "15e12"]


def test_405b_example_reports_interval_and_goodput():
    """The issue's example: 16,384 H100, 15T tokens. About 61 days failure-free (step ~5.9 s), MTBF 3.09 h,
    checkpoint 5.68 TB in ~2.8 s, every ~4 min, goodput ~93%. Its search is the README tour's 405B plan's
    (tests/plan_cache.py: run once per session)."""
    with shared_plan_searches():
        result = runner.invoke(app, EXAMPLE + ["--json"])
    assert result.exit_code == 0, result.output
    w = json.loads(result.stdout)["whole_run"]
    assert w["mtbf_s"] / 3600 == pytest.approx(3.093, abs=1e-3)
    assert w["checkpoint_bytes"] == 405_853_388_800 * 14
    assert 100 < w["checkpoint_interval_s"] < 600 and 0.85 < w["goodput"] < 0.97
    assert 45 < w["days"] < 80 and w["days_with_failures"] > w["days"]
    assert w["gpu_hours"] == pytest.approx(16384 * w["days"] * 24)
    assert w["energy_kwh"] == pytest.approx(w["gpu_hours"] * 0.7)


def test_estimate_terminal_and_json(tmp_path):
    base = ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=1,dp=8,zero=1", "--global-batch",
            "64", "--tokens", "1e12", "--price-per-gpu-hour", "2", "--restart-min", "5"]
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.output
    assert "Whole run" in result.stdout and "goodput" in result.stdout and "checkpoint every" in result.stdout
    data = json.loads(runner.invoke(app, base + ["--json"]).stdout)
    assert data["whole_run"]["restart_s"] == 300 and data["whole_run"]["cost_usd"] > 0
    page = tmp_path / "r.html"
    plan = ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "32", "--tokens",
            "1e12", "--price-per-gpu-hour", "2", "--report", str(page)]
    assert runner.invoke(app, plan).exit_code == 0
    html = page.read_text()
    assert "The whole run" in html and "goodput" in html and "cost with failures" in html


@pytest.mark.parametrize("extra, option", [(["--gpu-failure-rate", "nan"], "--gpu-failure-rate"),
                                           (["--gpu-failure-rate", "-1"], "--gpu-failure-rate"),
                                           (["--price-per-gpu-hour", "inf"], "--price-per-gpu-hour"),
                                           (["--restart-min", "1e9"], "--restart-min"),
                                           (["--checkpoint-gbps", "0"], "--checkpoint-gbps"),
                                           (["--tokens", "nan"], "--tokens")])
def test_bad_run_options_exit_2(extra, option):
    args = ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=8", "--global-batch", "8",
            "--tokens", "1e12", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and option in result.output, result.output


def test_run_options_need_tokens():
    result = runner.invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=8",
                                 "--global-batch", "8", "--price-per-gpu-hour", "2"])
    assert result.exit_code == 2 and "needs --tokens" in result.output


def test_check_and_export_take_tokens(tmp_path):
    """DESIGN.md section 5 names --tokens on plan, estimate, check and export; check and export refused it (a
    contract pass). check prices the whole run as estimate does; export sets the files' step count to the budget
    over one step's tokens: 1e10 tokens of 64 x 2,048-token steps = 76,294 steps (rounded up)."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": "llama3-8b", "cluster": "dgx-h100", "layout": "tp=1,dp=8,zero=3,mbs=1",
                                "train": {"global_batch_size": 64, "seq_length": 2048}}))
    checked = runner.invoke(app, ["check", str(plan), "--tokens", "1e10", "--json"])
    assert checked.exit_code == 0, checked.output
    whole = json.loads(checked.stdout)["whole_run"]
    assert whole["steps"] == math.ceil(1e10 / (64 * 2048)) == 76294
    out = tmp_path / "out"
    done = runner.invoke(app, ["export", str(plan), "--format", "all", "--out", str(out), "--tokens", "1e10"])
    assert done.exit_code == 0, done.output
    assert "--train-iters 76294" in (out / "launch_megatron.sh").read_text()
    assert "--training.steps 76294" in (out / "launch_torchtitan.sh").read_text()
    assert "steps = 76294" in (out / "torchtitan_0.2.toml").read_text()
    assert "Length: 1e+10 tokens = 76,294 steps" in (out / "launch_torchrun.sh").read_text()
    # plan --tokens --export writes the same step count (it wrote --train-iters 100: a review)
    planned = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "64", "--seq-len",
                                  "2048", "--framework", "megatron", "--tokens", "1e10", "--export",
                                  str(tmp_path / "p")])
    assert planned.exit_code == 0, planned.output
    assert "--train-iters 76294" in (tmp_path / "p" / "launch_megatron.sh").read_text()
