"""`export PLAN --out DIR` without --format or --framework writes the launch files of the framework whose stack
priced the plan (a new-user pass: it exited 2 asking for --format even for a plan saved with a framework)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "llama3-8b-plan.json"


def _export(tmp_path: Path, doc: dict):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    return CliRunner().invoke(app, ["export", str(plan), "--out", str(tmp_path / "out")])


def test_the_pricing_stacks_framework_chooses_the_format(tmp_path: Path):
    doc = json.loads(EXAMPLE.read_text())
    assert doc["train"]["stack"] == "megatron-core"
    result = _export(tmp_path, doc)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["launch_megatron.sh"]
    assert "--format not given: megatron" in result.stderr


def test_a_plan_without_a_known_stack_still_asks(tmp_path: Path):
    doc = json.loads(EXAMPLE.read_text())
    doc["train"]["stack"] = None
    result = _export(tmp_path, doc)
    assert result.exit_code == 2 and "give --format" in result.stderr
