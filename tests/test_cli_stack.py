"""Software stacks on the command line: --stack / --stack-file and the TrainSpec switches, the
held-out error band beside every step time, plan's validated alternative and --validated-only.

Stacks with made-up held-out errors are written to files here, so that the tests do not depend on
the numbers benchmarks/accuracy.py writes into the shipped profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import hardware_profiles as hp
from planner.cli import app
from planner.files.native import load_native

runner = CliRunner()
EST = ["estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--global-batch", "64",
       "--layout", "tp=8,pp=4,dp=2,mbs=1,zero=1,recompute=selective,sp=1"]
PLAN = ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "32", "--seq-len", "4096"]
GOOD = {"rows": 9, "mean": 0.05, "p50": 0.04, "p90": 0.09, "bias": -0.01}
BAND_KEYS = {"rel_error_p50", "rel_error_p90", "bias", "rows", "regime", "validated"}


def invoke(*args: str):
    return runner.invoke(app, list(args))


def stack_file(tmp_path: Path, held_out: dict, name: str = "test-stack", **changes) -> str:
    """A copy of megatron-core under another name, with these held-out errors and field changes."""
    data = {**hp.load_stack("megatron-core").model_dump(mode="json"), "name": name, "held_out": held_out, **changes}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def as_json(result) -> dict:
    assert result.exit_code in (0, 1), (result.exit_code, result.output)
    return json.loads(result.stdout)


def assert_bad_input(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output and "parplan: error:" in result.stderr
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} not in {result.stderr!r}"


# ---- --stack and --stack-file ---------------------------------------------------------------------


def test_unknown_stack_lists_the_known_names():
    result = invoke(*EST, "--stack", "megatron-cor")
    assert_bad_input(result, "--stack", "'megatron-cor'", "did you mean megatron-core", *hp.list_stacks())


@pytest.mark.parametrize("command", ["plan", "check", "export"])
def test_unknown_stack_on_other_commands(command: str, tmp_path: Path):
    plan = tmp_path / "plan.json"
    assert invoke(*PLAN, "--save", str(plan)).exit_code == 0
    args = {"plan": PLAN, "check": ["check", str(plan)],
            "export": ["export", str(plan), "--format", "megatron", "--out", str(tmp_path / "out")]}[command]
    assert_bad_input(invoke(*args, "--stack", "nemoo"), "'nemoo'", "nemo")


@pytest.mark.parametrize("field, value, needles", [
    ("gemm_scale", 7, ("gemm_scale", "7")),
    ("framework", "jax", ("framework", "'jax'")),
    ("bogus_key", 1, ("bogus_key",)),
    ("ep_dispatcher", "nccl", ("ep_dispatcher", "'nccl'")),
])
def test_stack_file_bad_field_names_it(tmp_path: Path, field: str, value, needles):
    path = stack_file(tmp_path, {}, **{field: value})
    assert_bad_input(invoke(*EST, "--stack-file", path), "test-stack.yaml", *needles)


def test_stack_file_bad_held_out_row_names_it(tmp_path: Path):
    path = stack_file(tmp_path, {"zero1-2/<=64": {**GOOD, "rows": -1}})
    assert_bad_input(invoke(*EST, "--stack-file", path), "held_out", "rows", "-1")


def test_stack_and_stack_file_together_refused(tmp_path: Path):
    assert_bad_input(invoke(*EST, "--stack", "nemo", "--stack-file", stack_file(tmp_path, {})), "--stack-file")


def test_missing_stack_file(tmp_path: Path):
    assert_bad_input(invoke(*EST, "--stack-file", str(tmp_path / "nope.yaml")), "nope.yaml")


def test_default_is_the_fitted_megatron_core_profile(tmp_path: Path):
    """No --stack gives exactly what --stack megatron-core gives, on estimate and on a plan file."""
    default = as_json(invoke(*EST, "--json"))
    named = as_json(invoke(*EST, "--json", "--stack", "megatron-core"))
    assert default["time"] == named["time"]
    assert default["uncertainty"]["regime"] == "megatron-core/zero1-2/<=64/hopper"  # the GPU generation last
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"model": "llama3-70b", "cluster": {"preset": "dgx-h100", "num_nodes": 8},
                                    "train": {"global_batch_size": 64}, "layout": EST[-1]}))
    assert as_json(invoke("estimate", str(plan), "--json"))["time"] == default["time"]


def test_stack_changes_the_step_time():
    base = as_json(invoke(*EST, "--json"))["time"]["step_s"]
    old = as_json(invoke(*EST, "--json", "--stack", "megatron-2021"))
    assert old["time"]["step_s"] != pytest.approx(base, rel=1e-6)
    assert old["uncertainty"]["regime"].startswith("megatron-2021/")


def test_plan_file_with_unknown_stack_name(tmp_path: Path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"model": "llama3-8b", "cluster": "dgx-h100", "layout": "tp=8",
                                    "train": {"global_batch_size": 8, "stack": "deepspeeed"}}))
    assert_bad_input(invoke("check", str(plan)), "train.stack", "'deepspeeed'", "deepspeed")


# ---- the TrainSpec switches -----------------------------------------------------------------------


def _step(*extra: str) -> float:
    return as_json(invoke(*EST, "--json", *extra))["time"]["step_s"]


def _peak_stage(*extra: str) -> dict:
    data = as_json(invoke(*EST, "--json", *extra))
    return data["memory"]["stages"][0]


def test_flash_attention_flag_changes_step_time():
    assert _step("--no-flash-attention") > _step("--flash-attention") == pytest.approx(_step())


def test_tp_comm_overlap_flag_changes_step_time():
    assert _step("--tp-comm-overlap") < _step("--no-tp-comm-overlap")


def test_tp_comm_overlap_without_sp_is_priced_exposed_and_noted():
    """sp=0 runs all-reduces, which no TP overlap hides: the flag changes nothing and stderr says why."""
    no_sp = [*EST[:-1], EST[-1].replace(",sp=1", "")]
    on, off = (invoke(*no_sp, "--json", flag) for flag in ("--tp-comm-overlap", "--no-tp-comm-overlap"))
    assert as_json(on)["time"]["step_s"] == as_json(off)["time"]["step_s"]
    assert "TP communication overlap needs sp=1" in on.stderr and "needs sp=1" not in off.stderr
    assert "needs sp=1" not in invoke(*EST, "--json", "--tp-comm-overlap").stderr


def test_overlap_grad_reduce_flag_changes_step_time():
    assert _step("--no-overlap-grad-reduce") > _step("--overlap-grad-reduce")


def test_optimizer_and_grad_dtype_flags_change_memory():
    base = _peak_stage()
    assert _peak_stage("--optimizer", "sgd")["optimizer_bytes"] < base["optimizer_bytes"]
    # megatron-core (the default stack) keeps fp32 main grads unless told otherwise (memory_semantics)
    assert _peak_stage("--grad-dtype", "bf16")["grads_bytes"] * 2 == base["grads_bytes"]
    assert _peak_stage("--grad-dtype", "fp32")["grads_bytes"] == base["grads_bytes"]


def test_fp8_recipe_flag_changes_step_time():
    assert _step("--precision", "fp8", "--fp8-recipe", "rowwise") != _step("--precision", "fp8")


@pytest.mark.parametrize("flag, value, field", [("--optimizer", "lamb", "optimizer"),
                                                ("--grad-dtype", "fp8", "--grad-dtype"),
                                                ("--fp8-recipe", "perblock", "--fp8-recipe")])
def test_bad_switch_values_exit_2(flag: str, value: str, field: str):
    assert_bad_input(invoke(*EST, flag, value), field, repr(value))


# ---- the band ------------------------------------------------------------------------------------


def test_estimate_prints_band_and_regime(tmp_path: Path):
    result = invoke(*EST, "--stack-file", stack_file(tmp_path, {"zero1-2/<=64": GOOD}))
    assert result.exit_code == 0, result.output
    assert "± 4% (p90 9%, bias -1%, 9 held-out runs, test-stack/zero1-2/<=64)" in result.stdout
    assert "not validated" not in result.stdout


def test_estimate_warns_when_not_validated(tmp_path: Path):
    few = invoke(*EST, "--stack-file", stack_file(tmp_path, {"zero1-2/<=64": {**GOOD, "rows": 3}}))
    assert "±" in few.stdout and "not validated: only 3 held-out runs in this regime" in few.stdout
    bad = invoke(*EST, "--stack-file", stack_file(tmp_path, {"zero1-2/<=64": {**GOOD, "mean": 0.3}}))
    assert "not validated: held-out mean error 30% > 15%" in bad.stdout
    fallback = invoke(*EST, "--stack-file", stack_file(tmp_path, {"zero1-2/*": GOOD}))
    assert "not validated" in fallback.stdout and "stack and sharding, any scale" in fallback.stdout


def test_estimate_default_prints_regime():
    result = invoke(*EST)
    assert result.exit_code == 0, result.output
    assert "step time:" in result.stdout and "megatron-core/zero1-2/<=64" in result.stdout


def test_estimate_json_has_the_uncertainty_contract(tmp_path: Path):
    data = as_json(invoke(*EST, "--json", "--stack-file", stack_file(tmp_path, {"zero1-2/<=64": GOOD})))
    band = data["uncertainty"]
    assert BAND_KEYS <= set(band)
    assert (band["rel_error_p50"], band["rel_error_p90"], band["bias"], band["rows"]) == (0.04, 0.09, -0.01, 9)
    assert band["regime"] == "test-stack/zero1-2/<=64" and band["validated"] is True


def test_plan_json_plans_carry_uncertainty():
    data = as_json(invoke(*PLAN, "--json", "--top", "2"))
    assert data["plans"] and all(BAND_KEYS <= set(p["uncertainty"]) for p in data["plans"])
    assert "validated_alternative" in data


# ---- validated winners ---------------------------------------------------------------------------


def test_validated_only_returns_a_validated_winner(tmp_path: Path):
    path = stack_file(tmp_path, {"zero1-2/<=64": GOOD, "zero3/<=64": {**GOOD, "rows": 2}})
    data = as_json(invoke(*PLAN, "--json", "--validated-only", "--stack-file", path))
    assert data["status"] == "optimal" and data["plans"]
    for plan in data["plans"]:
        assert plan["uncertainty"]["validated"] is True and plan["layout"]["zero"] in (1, 2)
    assert data["validated_alternative"] is None and data["search"]["filtered_out"] > 0


def test_validated_only_moves_the_winner(tmp_path: Path):
    """Only plain data parallelism (ZeRO 0) validated: the winner changes to a ZeRO-0 layout."""
    path = stack_file(tmp_path, {"ddp/<=64": GOOD})
    free = as_json(invoke(*PLAN, "--json", "--stack-file", path))
    only = as_json(invoke(*PLAN, "--json", "--validated-only", "--stack-file", path))
    assert free["plans"][0]["layout"]["zero"] != 0
    assert only["plans"][0]["layout"]["zero"] == 0 and only["plans"][0]["uncertainty"]["validated"]
    assert only["plans"][0]["time"]["step_s"] >= free["plans"][0]["time"]["step_s"]


def test_unvalidated_winner_names_the_validated_alternative(tmp_path: Path):
    path = stack_file(tmp_path, {"ddp/<=64": GOOD})
    data = as_json(invoke(*PLAN, "--json", "--top", "1", "--stack-file", path))
    assert len(data["plans"]) == 1 and data["plans"][0]["uncertainty"]["validated"] is False
    alt = data["validated_alternative"]
    assert alt["uncertainty"]["validated"] is True and alt["layout"]["zero"] == 0
    assert alt["time"]["step_s"] >= data["plans"][0]["time"]["step_s"]
    text = invoke(*PLAN, "--top", "1", "--stack-file", path)
    assert text.exit_code == 0, text.output
    assert "is not validated" in text.stdout and "best validated alternative" in text.stdout
    assert "test-stack/ddp/<=64" in text.stdout


def test_no_validated_regime_at_all(tmp_path: Path):
    path = stack_file(tmp_path, {})
    plan = invoke(*PLAN, "--stack-file", path)
    assert plan.exit_code == 0 and "no layout that fits falls in a validated regime" in plan.stdout
    only = invoke(*PLAN, "--json", "--validated-only", "--stack-file", path)
    assert only.exit_code == 1
    data = json.loads(only.stdout)
    assert data["status"] == "infeasible" and "--validated-only" in data["reasons"][0]


# ---- plan files, native configs, listings, reports -------------------------------------------------


def test_saved_plan_keeps_a_named_stack_by_name_and_an_inline_one_inline(tmp_path: Path):
    named, inline = tmp_path / "named.json", tmp_path / "inline.json"
    assert invoke(*PLAN, "--stack", "nemo", "--save", str(named)).exit_code == 0
    assert json.loads(named.read_text())["train"]["stack"] == "nemo"
    path = stack_file(tmp_path, {"zero1-2/<=64": GOOD})
    assert invoke(*PLAN, "--stack-file", path, "--save", str(inline)).exit_code == 0
    saved = json.loads(inline.read_text())
    assert saved["train"]["stack"]["name"] == "test-stack"
    again = as_json(invoke("estimate", str(inline), "--json"))
    assert again["time"]["step_s"] == pytest.approx(saved["estimate"]["time"]["step_s"], rel=1e-12)
    assert again["uncertainty"] == saved["estimate"]["uncertainty"]


def test_check_stack_overrides_the_plan_file(tmp_path: Path):
    plan = tmp_path / "plan.json"
    assert invoke(*PLAN, "--save", str(plan)).exit_code == 0
    data = as_json(invoke("check", str(plan), "--json", "--stack", "deepspeed"))
    assert data["uncertainty"]["regime"].startswith("deepspeed/")


def _exported(tmp_path: Path, stack: str, layout: str = "tp=8,mbs=1,zero=1,sp=1") -> Path:
    plan = tmp_path / f"{stack}-{len(layout)}.yaml"
    plan.write_text(yaml.safe_dump({"model": "llama3-8b", "cluster": {"preset": "dgx-h100", "num_nodes": 1},
                                    "train": {"global_batch_size": 16, "stack": stack}, "layout": layout}))
    out = tmp_path / f"out-{plan.stem}"
    # --force: every format, also those whose stack the layout does not fit (exported files say so)
    assert invoke("export", str(plan), "--format", "all", "--out", str(out), "--force").exit_code == 0
    return out


def _stack(config: Path, model: str | None = None) -> str:
    return load_native(config, model, "dgx-h100", 1).train.stack.name


def test_native_configs_pick_their_stack(tmp_path: Path):
    core, nemo = _exported(tmp_path, "megatron-core"), _exported(tmp_path, "nemo")
    assert "--tp-comm-overlap" in (nemo / "launch_megatron.sh").read_text()
    assert _stack(core / "launch_megatron.sh") == "megatron-core"
    assert _stack(nemo / "launch_megatron.sh") == "nemo"
    data_parallel = _exported(tmp_path, "megatron-core", "tp=1,mbs=1,zero=1")
    assert _stack(data_parallel / "ds_config.json", "llama3-8b") == "deepspeed"
    toml = data_parallel / "torchtitan_0.2.toml"  # the export turns compile on: the torchtitan stack priced it
    assert _stack(toml, "llama3-8b") == "torchtitan"
    toml.write_text(toml.read_text().replace("[compile]\nenable = true", "[compile]\nenable = false"))
    assert _stack(toml, "llama3-8b") == "torchtitan-eager"


def test_check_stack_overrides_a_native_config(tmp_path: Path):
    script = _exported(tmp_path, "megatron-core") / "launch_megatron.sh"
    result = invoke("check", str(script), "--cluster", "dgx-h100", "--nodes", "1", "--json", "--stack", "deepspeed")
    assert as_json(result)["uncertainty"]["regime"].startswith("deepspeed/")


def test_hardware_lists_the_stacks():
    text = invoke("hardware")
    assert text.exit_code == 0
    data = as_json(invoke("hardware", "--json"))
    assert [s["name"] for s in data["stacks"]] == hp.list_stacks()
    for row in data["stacks"]:
        assert row["name"] in text.stdout and row["framework"] in text.stdout and row["description"]


def test_reports_show_the_band(tmp_path: Path):
    plan = tmp_path / "plan.json"
    bands = {k: dict(GOOD) for k in ("zero1-2/<=64", "zero3/<=64", "ddp/<=64")}  # copies: no YAML aliases
    assert invoke(*PLAN, "--save", str(plan), "--stack-file", stack_file(tmp_path, bands)).exit_code == 0
    term = invoke("report", str(plan))
    assert term.exit_code == 0 and "step time:" in term.stdout and "±" in term.stdout
    html = tmp_path / "plan.html"
    assert invoke("report", str(plan), "-o", str(html), "--stack", "deepspeed").exit_code == 0
    page = html.read_text()
    assert 'id="band"' in page and "deepspeed/" in page
