"""The `parplan` command line (docs/design.md sections 5 and 6): commands, exit codes, JSON keys.

typer.testing.CliRunner keeps stdout and stderr apart (result.stdout / result.stderr; result.output
holds both), so `--json` output is checked to parse on its own. One test runs the real process,
`python -m planner.cli`, for the exit code the shell sees.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import hardware_profiles as hp
from planner.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

LAYOUT_70B = "tp=8,pp=4,dp=2,mbs=1,zero=1,recompute=selective,sp=1"
FIT_PLAN = {
    "model": "llama3-70b",
    "cluster": {"preset": "dgx-h100", "num_nodes": 8},
    "train": {"global_batch_size": 64},
    "layout": {"tp": 8, "pp": 4, "dp": 2, "mbs": 1, "zero": 1, "recompute": "selective", "sp": True},
}
# 70B parameters at 16 bytes each on one GPU: far beyond 80 GB.
OVER_PLAN = {
    "model": "llama3-70b",
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "train": {"global_batch_size": 8},
    "layout": {"tp": 1, "pp": 1},
}

STAGE_KEYS = {"stage", "layers", "weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes",
              "other_bytes", "transient_bytes", "total_bytes"}
LAYOUT_KEYS = {"tp", "pp", "vpp", "cp", "ep", "etp", "dp", "zero", "mbs", "recompute", "sp", "schedule",
               "stage_layers", "num_microbatches"}
TIME_KEYS = {"step_s", "compute_s", "recompute_s", "bubble_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s",
             "dp_comm_exposed_s", "optimizer_s"}


def invoke(*args: str):
    return runner.invoke(app, list(args))


def write(tmp_path: Path, name: str, data) -> str:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data)
    elif name.endswith(".json"):
        path.write_text(json.dumps(data))
    else:
        path.write_text(yaml.safe_dump(data))
    return str(path)


def assert_bad_input(result, *needles: str) -> None:
    """Exit 2, a message naming the offending field/value, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert "parplan: error:" in result.stderr
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} not in {result.stderr!r}"


# ---- estimate ------------------------------------------------------------------------------------


def _stage_rows(text: str) -> dict[int, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│|┃]", line) if c.strip()]
        if len(cells) >= 8 and cells[0].isdigit() and cells[1].isdigit():
            rows[int(cells[0])] = cells
    return rows


def test_estimate_prints_per_stage_table():
    result = invoke("estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--layout", LAYOUT_70B,
                    "--global-batch", "64")
    assert result.exit_code == 0, result.output
    rows = _stage_rows(result.stdout)
    assert sorted(rows) == [0, 1, 2, 3]
    assert all(rows[i][1] == "20" for i in range(4))  # 80 layers over 4 stages
    assert "fits" in result.stdout
    assert "MFU" in result.stdout


def test_estimate_json_has_every_contract_key():
    result = invoke("estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--layout", LAYOUT_70B,
                    "--global-batch", "64", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"layout", "fits", "memory", "time", "throughput", "params"} <= set(data)
    lay = data["layout"]
    assert LAYOUT_KEYS <= set(lay)
    assert (lay["tp"], lay["pp"], lay["dp"], lay["zero"], lay["mbs"]) == (8, 4, 2, 1, 1)
    assert lay["stage_layers"] == [20, 20, 20, 20]
    assert lay["num_microbatches"] == 64 // (1 * 2)
    assert lay["recompute"] == "selective" and lay["schedule"] == "1f1b" and lay["sp"] in (True, 1)
    assert isinstance(data["fits"], bool)
    mem = data["memory"]
    assert {"hbm_bytes", "usable_bytes", "peak_bytes", "peak_stage", "stages"} <= set(mem)
    for key in ("hbm_bytes", "usable_bytes", "peak_bytes", "peak_stage"):
        assert isinstance(mem[key], int)
    assert [s["stage"] for s in mem["stages"]] == [0, 1, 2, 3]
    for stage in mem["stages"]:
        assert STAGE_KEYS <= set(stage)
        assert stage["total_bytes"] == sum(stage[k] for k in STAGE_KEYS - {"stage", "layers", "total_bytes"})
    assert mem["peak_bytes"] == max(s["total_bytes"] for s in mem["stages"])
    assert mem["stages"][mem["peak_stage"]]["total_bytes"] == mem["peak_bytes"]
    assert data["fits"] == (mem["peak_bytes"] <= mem["usable_bytes"])
    # the three numbers of issue 13: allocated <= reserved <= device, fits decided on device bytes
    assert mem["peak_allocated_bytes"] == mem["peak_bytes"] <= mem["peak_reserved_bytes"] <= mem["device_bytes"]
    assert data["fits"] == (mem["device_bytes"] <= mem["hbm_bytes"] - mem["margin_bytes"])
    assert mem["headroom_bytes"] == mem["hbm_bytes"] - mem["margin_bytes"] - mem["device_bytes"]
    assert TIME_KEYS <= set(data["time"])
    assert all(isinstance(data["time"][k], (int, float)) and data["time"][k] >= 0 for k in TIME_KEYS)
    assert {"tokens_per_s", "model_tflops_per_gpu", "mfu"} <= set(data["throughput"])
    assert 0 < data["throughput"]["mfu"] < 1
    assert data["params"]["total"] == data["params"]["active"] == 70_553_706_496


def test_estimate_json_stdout_stays_clean_when_batch_defaulted():
    """Without --global-batch a note goes to stderr; stdout is still one JSON document."""
    result = invoke("estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=8", "--json")
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert "global-batch" in result.stderr


def test_estimate_accepts_plan_file(tmp_path: Path):
    plan = write(tmp_path, "plan.yaml", FIT_PLAN)
    result = invoke("estimate", plan, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["layout"]["stage_layers"] == [20, 20, 20, 20]


# ---- check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_check_fits_exit_0(tmp_path: Path, suffix: str):
    result = invoke("check", write(tmp_path, "plan" + suffix, FIT_PLAN))
    assert result.exit_code == 0, result.output
    assert "fits" in result.stdout


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_check_does_not_fit_exit_1(tmp_path: Path, suffix: str):
    result = invoke("check", write(tmp_path, "plan" + suffix, OVER_PLAN))
    assert result.exit_code == 1, result.output
    assert "does not fit" in result.stdout
    assert "Traceback" not in result.output


def test_check_json_reports_fits(tmp_path: Path):
    ok = invoke("check", write(tmp_path, "ok.json", FIT_PLAN), "--json")
    over = invoke("check", write(tmp_path, "over.json", OVER_PLAN), "--json")
    assert (ok.exit_code, over.exit_code) == (0, 1)
    assert json.loads(ok.stdout)["fits"] is True
    assert json.loads(over.stdout)["fits"] is False


def test_check_under_allocator_pressure_fits_unless_strict(tmp_path: Path):
    """A margin that puts the device budget halfway between the fitting plan's floor and its unhindered
    device use leaves a fit that lasts only if the caching allocator releases its cache: exit 0 with the
    warning and the fragmentation it can bear; --strict makes it exit 1."""
    base = json.loads(invoke("check", write(tmp_path, "base.json", FIT_PLAN), "--json").stdout)["memory"]
    middle = (base["floor_bytes"] + base["device_bytes"]) / 2
    reserve_gib = round((base["hbm_bytes"] - middle) / 2**30, 2)
    plan = dict(FIT_PLAN, cluster=dict(FIT_PLAN["cluster"], memory_reserve_gib=reserve_gib))
    path = write(tmp_path, "plan.json", plan)
    loose, strict = invoke("check", path), invoke("check", path, "--strict")
    assert (loose.exit_code, strict.exit_code) == (0, 1), loose.output
    assert "fits under allocator pressure" in loose.stdout and "for fragmentation" in loose.stdout
    mem = json.loads(invoke("check", path, "--json").stdout)["memory"]
    assert mem["allocator_pressure"] is True and mem["headroom_bytes"] == 0
    assert mem["floor_bytes"] <= mem["device_bytes"] == mem["hbm_bytes"] - mem["margin_bytes"] < mem["unhindered_device_bytes"]
    assert invoke("check", write(tmp_path, "ok.json", FIT_PLAN), "--strict").exit_code == 0
    # --strict --json exited 1 beside "fits": true with nothing saying why (a contract pass)
    doc = json.loads(invoke("check", path, "--strict", "--json").stdout)
    assert doc["fits"] is True and doc["strict_fits"] is False and doc["warnings"][-1].startswith("--strict: ")


def test_check_nodes_option_overrides_plan(tmp_path: Path):
    """The fitting plan on 8 nodes needs tp*pp*dp = 64 GPUs: --nodes 4 breaks the product (exit 2)."""
    result = invoke("check", write(tmp_path, "plan.yaml", FIT_PLAN), "--nodes", "4")
    assert_bad_input(result, "GPUs=32")


def test_check_layout_string_in_plan(tmp_path: Path):
    plan = dict(FIT_PLAN, layout=LAYOUT_70B)
    assert invoke("check", write(tmp_path, "plan.yaml", plan)).exit_code == 0


def test_check_real_process_exit_codes(tmp_path: Path):
    """The exit code the shell sees, through `python -m planner.cli`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    over = subprocess.run([sys.executable, "-m", "planner.cli", "check", write(tmp_path, "over.yaml", OVER_PLAN)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert over.returncode == 1, over.stderr
    bad = subprocess.run([sys.executable, "-m", "planner.cli", "check", str(tmp_path / "missing.yaml")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "missing.yaml" in bad.stderr and "Traceback" not in bad.stderr + bad.stdout


# ---- bad input: exit 2 ---------------------------------------------------------------------------


def test_check_missing_file(tmp_path: Path):
    assert_bad_input(invoke("check", str(tmp_path / "nope.yaml")), "nope.yaml", "does not exist")


def test_check_layout_product_not_world(tmp_path: Path):
    plan = dict(FIT_PLAN, layout={"tp": 8, "pp": 4, "dp": 4})
    assert_bad_input(invoke("check", write(tmp_path, "plan.json", plan)), "tp*cp*pp*dp=8*1*4*4=128", "GPUs=64")


def test_check_unknown_model_preset_suggests_close_names(tmp_path: Path):
    plan = dict(FIT_PLAN, model="llama3-70")
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", plan)), "'llama3-70'", "did you mean",
                     "llama3-70b")


def test_check_unknown_cluster_preset_suggests_close_names(tmp_path: Path):
    plan = dict(FIT_PLAN, cluster={"preset": "dgx-h10", "num_nodes": 8})
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", plan)), "'dgx-h10'", "dgx-h100")


def test_check_unknown_plan_key(tmp_path: Path):
    plan = dict(FIT_PLAN, bogus_key=1)
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", plan)), "bogus_key")


def test_check_invalid_yaml(tmp_path: Path):
    path = write(tmp_path, "plan.yaml", "model: [llama3-70b\ncluster: dgx-h100\n")
    assert_bad_input(invoke("check", path), "plan.yaml", "invalid YAML", "line")


def test_check_invalid_json(tmp_path: Path):
    path = write(tmp_path, "plan.json", '{"model": "llama3-70b",,}')
    assert_bad_input(invoke("check", path), "plan.json", "invalid JSON", "line 1")


def test_check_yaml_alias_refused(tmp_path: Path):
    text = ("model: &a llama3-70b\ncluster: {preset: dgx-h100, num_nodes: 8}\n"
            "train: {global_batch_size: 64}\nlayout: {tp: 8, pp: 4}\nestimate: *a\n")
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", text)), "plan.yaml", "alias")


def test_check_empty_file(tmp_path: Path):
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", "")), "plan.yaml", "empty")


def test_check_binary_file(tmp_path: Path):
    path = write(tmp_path, "plan.yaml", bytes(range(256)) * 4)
    assert_bad_input(invoke("check", path), "plan.yaml")


def test_check_non_mapping_top_level(tmp_path: Path):
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", "- 1\n- 2\n")), "plan.yaml", "mapping", "list")


def test_check_unknown_layout_key(tmp_path: Path):
    plan = dict(FIT_PLAN, layout={"tp": 8, "pp": 4, "pipeline": 2})
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", plan)), "layout.pipeline")


def test_check_wrong_type_names_field_and_value(tmp_path: Path):
    plan = dict(FIT_PLAN, train={"global_batch_size": "64"})
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", plan)), "train.global_batch_size", "'64'")


def test_check_plan_without_layout(tmp_path: Path):
    plan = {k: v for k, v in FIT_PLAN.items() if k != "layout"}
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", plan)), "layout")


def test_check_plan_missing_train(tmp_path: Path):
    plan = {k: v for k, v in FIT_PLAN.items() if k != "train"}
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", plan)), "'train'")


def test_check_directory_instead_of_file(tmp_path: Path):
    assert_bad_input(invoke("check", str(tmp_path)), str(tmp_path))


def test_estimate_unknown_model_preset():
    assert_bad_input(invoke("estimate", "llama3-70", "--cluster", "dgx-h100"), "'llama3-70'", "llama3-70b")


def test_estimate_unknown_cluster_preset():
    assert_bad_input(invoke("estimate", "llama3-8b", "--cluster", "dgx-h1000"), "'dgx-h1000'", "dgx-h100")


def test_estimate_unknown_layout_key():
    assert_bad_input(invoke("estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=8,foo=1"),
                     "unknown key 'foo'")


@pytest.mark.parametrize("text, needle", [("tp8", "'tp8'"), ("tp=8,pp", "'pp'"), ("tp=", "'tp='"),
                                          ("tp=eight", "tp='eight'"), ("tp=8,tp=4", "tp is given twice")])
def test_estimate_bad_layout_syntax(text: str, needle: str):
    assert_bad_input(invoke("estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", text), needle)


def test_estimate_bad_layout_value():
    assert_bad_input(invoke("estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=8,recompute=most"),
                     "layout.recompute", "'most'")


def test_estimate_layout_rule_broken():
    assert_bad_input(invoke("estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--layout",
                            "tp=8,pp=4,dp=4", "--global-batch", "64"), "tp*cp*pp*dp=8*1*4*4=128", "GPUs=64")
    assert_bad_input(invoke("estimate", "llama3-70b", "--cluster", "dgx-h100", "--layout", "tp=3",
                            "--gpus", "6", "--global-batch", "6"), "num_attention_heads=64", "tp=3")


def test_estimate_needs_cluster():
    assert_bad_input(invoke("estimate", "llama3-8b"), "--cluster")


# Rich markup in error messages: user-supplied text is printed with markup=True (planner/cli.py _fail),
# so square brackets in a value are parsed as Rich tags.


def test_error_message_with_closing_tag_is_not_a_traceback():
    result = invoke("estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=8,recompute=[/x]")
    assert_bad_input(result, "[/x]")


def test_error_message_keeps_square_brackets(tmp_path: Path):
    result = invoke("check", str(tmp_path / "plan[x].yaml"))
    assert_bad_input(result, "plan[x].yaml")


def test_plan_with_non_string_unknown_key(tmp_path: Path):
    text = yaml.safe_dump(FIT_PLAN) + "1: x\nfoo: y\n"
    assert_bad_input(invoke("check", write(tmp_path, "plan.yaml", text)), "foo")


def test_unknown_preset_with_dot_suggests_close_names():
    assert_bad_input(invoke("estimate", "llama3.1-405", "--cluster", "dgx-h100"), "'llama3.1-405'", "llama3.1-405b")


# ---- listings ------------------------------------------------------------------------------------


def test_models_lists_every_preset():
    result = invoke("models")
    assert result.exit_code == 0, result.output
    for name in hp.list_models():
        assert name in result.stdout


def test_models_json():
    result = invoke("models", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == hp.list_models()
    by_name = {r["name"]: r for r in rows}
    assert by_name["llama3-8b"]["params"] == 8_030_261_248
    assert by_name["mixtral-8x7b"]["active"] < by_name["mixtral-8x7b"]["params"]
    assert (by_name["llama4-maverick"]["moe_layers"], by_name["deepseek-v3"]["moe_layers"]) == (24, 58)


def test_hardware_lists_every_preset():
    result = invoke("hardware")
    assert result.exit_code == 0, result.output
    for name in hp.list_gpus() + hp.list_clusters():
        assert name in result.stdout


def test_hardware_table_gives_each_cluster_its_own_gpus_per_node():
    """The cluster table once said "8 GPUs per node" for every preset; gb200-nvl72's node is its 72-GPU NVLink
    domain, so `--nodes 4` there is 288 GPUs."""
    from planner.report.listing import hardware_tables

    table = hardware_tables()[1]
    names, per_node = (next(c for c in table.columns if c.header == h)._cells for h in ("name", "GPUs/node"))
    assert dict(zip(names, per_node))["gb200-nvl72"] == "72"
    assert "8 GPUs per node" not in str(table.title)


def test_hardware_json():
    result = invoke("hardware", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [g["name"] for g in data["gpus"]] == hp.list_gpus()
    assert [c["name"] for c in data["clusters"]] == hp.list_clusters()
    h100 = next(c for c in data["clusters"] if c["name"] == "dgx-h100")
    assert h100["gpu"]["name"] == "h100-sxm" and h100["gpus_per_node"] == 8


def test_estimate_without_a_layout_says_what_it_priced():
    """`estimate llama3-70b` with no --layout priced plain data parallelism over 64 GPUs (1.3 TiB a GPU) without a
    word; it is now a warning, on stderr and in --json."""
    res = runner.invoke(app, ["estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--json"])
    warnings = json.loads(res.stdout)["warnings"]
    assert any(w.startswith("no --layout given: plain data parallelism over every GPU is priced (tp=1 pp=1 dp=64")
               for w in warnings)
