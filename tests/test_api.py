"""The Python API (issue 36 part 7): `from planner import plan, estimate, check` returns the objects the
CLI prints (the same numbers as its --json), takes presets, files or spec objects, and `import planner`
imports no heavy module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import hardware_profiles as hp
from planner import CheckResult, PlanResult, check, estimate, plan
from planner.cli import app
from planner.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
MIXTRAL_SH = ROOT / "tests/data/configs/mlm_mixtral_8x7b.sh"
runner = CliRunner()


def cli_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_import_planner_is_light():
    code = ("import sys, planner; from planner import plan, estimate, check; "
            "print(sorted(m for m in ('ortools', 'numpy', 'pandas', 'costmodels', 'typer', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_estimate_is_the_cli_estimate():
    e = estimate("llama3-8b", "dgx-h100", "tp=2,pp=2,mbs=1,recompute=selective", global_batch=64)
    cli = cli_json("estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=2,pp=2,mbs=1,recompute=selective",
                   "--global-batch", "64")
    assert e.model_dump(mode="json") == {k: v for k, v in cli.items() if k in e.model_dump(mode="json")}


def test_estimate_takes_spec_objects_and_layout_dicts():
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100")
    by_name = estimate("llama3-8b", "dgx-h100", "tp=2,mbs=1", nodes=2, global_batch=64)
    by_spec = estimate(model, cluster, {"tp": 2, "mbs": 1}, nodes=2, global_batch=64)
    assert by_spec.model_dump() == by_name.model_dump()
    assert by_spec.layout.dp == 8  # 16 GPUs / tp 2: the cluster was resized


def test_estimate_default_batch_is_the_clis():
    """No batch given: 4 x pp micro-batches per data-parallel rank, as `estimate` without --global-batch."""
    e = estimate("llama3-8b", "dgx-h100", "tp=2,pp=2,mbs=1")
    assert e.layout.num_microbatches == 8


def test_plan_is_the_cli_plan():
    r = plan("llama3-8b", "dgx-h100", nodes=2, top=3)
    cli = cli_json("plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--top", "3")
    assert isinstance(r, PlanResult) and r.status == cli["status"]
    assert [p.model_dump(mode="json") for p in r.plans] == cli["plans"]
    assert r.reasons == cli["reasons"] and r.best is r.plans[0]
    assert r.to_json()["plans"] == cli["plans"]
    assert r.train.global_batch_size == 512


def test_plan_with_nothing_that_fits_says_why():
    r = plan("llama3.1-405b", "dgx-h100", gpus=2, time_limit_s=5)
    assert r.status == "infeasible" and r.best is None and r.plans == []
    assert any("nothing fits" in line for line in r.reasons)


def test_check_is_the_cli_check():
    v = check(MIXTRAL_SH, cluster="dgx-h100", nodes=8)
    cli = cli_json("check", str(MIXTRAL_SH), "--cluster", "dgx-h100", "--nodes", "8")
    assert isinstance(v, CheckResult) and v.fits == cli["fits"] and v.exit_code == 0
    dumped = v.estimate.model_dump(mode="json")
    assert dumped == {k: cli[k] for k in dumped}
    assert v.warnings[:len(cli["warnings"])] == cli["warnings"]
    assert any("overrides the script's" in w for w in v.warnings)  # the reader's stderr lines, collected


def test_check_plan_file_and_strict(tmp_path):
    saved = tmp_path / "plan.json"
    assert runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--save", str(saved)]).exit_code == 0
    v = check(saved)
    assert v.fits and v.estimate.layout.tp >= 1 and v.warnings == []


@pytest.mark.parametrize("call, words", [
    (lambda: estimate("llama3-8b", "dgx-h100", "tp=2", optimiser="adam"), "unknown option 'optimiser'"),
    (lambda: estimate("no-such-model", "dgx-h100"), "no-such-model"),
    (lambda: estimate("llama3-8b", None), "cluster is required"),
    (lambda: plan("llama3-8b", "dgx-h100", top=0), "top 0"),
    (lambda: check("/no/such/file.sh", cluster="dgx-h100"), "does not exist"),
])
def test_mistakes_raise_one_user_error(call, words):
    with pytest.raises(UserError, match=words.replace("(", r"\(")):
        call()
