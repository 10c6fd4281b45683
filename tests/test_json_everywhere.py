"""`export --json` and `report --json`: every command that writes or draws has a JSON answer a script can read,
checked against the published schema (before, both printed only human lines: a script had to parse "wrote PATH")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app
from planner.schema import ExportOutput, ReportOutput

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "llama3-8b-plan.json"


def test_export_json_lists_what_was_written(tmp_path: Path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["export", str(EXAMPLE), "--out", str(out), "--format", "megatron", "--json"])
    assert res.exit_code == 0, res.output
    doc = ExportOutput.model_validate(json.loads(res.stdout))
    assert doc.written == [str(out / "launch_megatron.sh")] and (out / "launch_megatron.sh").exists()
    assert doc.format == "megatron" and doc.refused == {} and doc.forced == {}


def test_export_json_names_the_formats_left_out(tmp_path: Path):
    res = CliRunner().invoke(app, ["export", str(EXAMPLE), "--out", str(tmp_path / "o"), "--format", "all", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert len(doc["written"]) >= 2 and all(Path(p).exists() for p in doc["written"])
    assert set(doc["refused"]) <= {"megatron", "deepspeed", "torchrun", "torchtitan", "slurm"}
    assert len(doc["warnings"]) == len(doc["refused"])


def test_report_json_carries_the_plan_the_mesh_and_the_timeline(tmp_path: Path):
    res = CliRunner().invoke(app, ["report", str(EXAMPLE), "--json", "--tokens", "1e12"])
    assert res.exit_code == 0, res.output
    doc = ReportOutput.model_validate(json.loads(res.stdout))
    plan = json.loads(EXAMPLE.read_text())
    assert doc.plan.layout.tp == plan["estimate"]["layout"]["tp"] and doc.html is None
    first = next(iter(doc.timelines.values()))
    assert first and all(b.end_s > b.start_s for b in first)
    assert doc.whole_run is not None and doc.whole_run.tokens == 1e12
    assert "tokens/s" in doc.summary and "Best" not in res.stdout  # JSON only: no terminal pictures


def test_report_json_with_html_writes_both(tmp_path: Path):
    html = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", str(EXAMPLE), "--json", "-o", str(html)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["html"] == str(html) and html.read_text().startswith("<!")


def test_report_of_a_plan_that_no_longer_fits_says_so(tmp_path):
    """A plan file edited to a 10 GiB GPU drew 'allocated peak 58.0 of the 9.1 GiB' with no warning, and the timeline
    said '24 micro-batches' of a plan with more (a new-user pass)."""
    doc = json.loads(EXAMPLE.read_text())
    doc["cluster"]["gpu"]["hbm_gib"] = 10  # the example's cluster is written out in full
    path = tmp_path / "small.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["report", str(path)])
    assert res.exit_code == 0, res.output
    assert "warning: this layout does not fit" in res.stderr and "DOES NOT FIT" in res.stdout
    big = EXAMPLE.parent / "llama3.1-405b-1024nodes-plan.json"  # 32 micro-batches; interleaving draws 16 (pp's)
    drawn = json.loads(CliRunner().invoke(app, ["report", str(big), "--json"]).stdout)
    total = drawn["plan"]["layout"]["num_microbatches"]
    assert drawn["drawn_microbatches"] < total
    shown = CliRunner().invoke(app, ["report", str(big)], terminal_width=200).stdout
    assert f"{drawn['drawn_microbatches']} of {total} micro-batches" in shown


def test_report_tokens_prints_the_whole_run_in_the_terminal_with_a_price():
    """report --tokens drew the whole run in HTML and JSON only, and the HTML's 'no price (--price-per-gpu-hour)'
    named an option report did not have (a new-user pass)."""
    res = CliRunner().invoke(app, ["report", str(EXAMPLE), "--tokens", "1e12", "--price-per-gpu-hour", "2"],
                             terminal_width=140)
    assert res.exit_code == 0, res.output
    assert "Whole run" in res.stdout and "GPU-hours, $" in res.stdout
    doc = json.loads(CliRunner().invoke(app, ["report", str(EXAMPLE), "--tokens", "1e12", "--price-per-gpu-hour", "2",
                                              "--json"]).stdout)
    assert doc["whole_run"]["cost_usd"] > 0


def test_json_before_the_command_is_read_as_the_commands():
    """`parplan --json models` was refused ("No such option: --json"): the flag is moved after the command's
    name, where every command takes it; the answer is the same as `parplan models --json`."""
    from planner.cli_main import hoist_json

    est = ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "8",
           "--layout", "tp=8,pp=1,mbs=1"]
    for args in (["models"], ["hardware"], est):
        before, after = CliRunner().invoke(app, ["--json", *args]), CliRunner().invoke(app, [*args, "--json"])
        assert before.exit_code == after.exit_code == 0, before.output
        assert json.loads(before.stdout) == json.loads(after.stdout)
    assert hoist_json(["--json", "--debug", "plan", "x"]) == ["--debug", "plan", "--json", "x"]
    assert hoist_json(["plan", "--", "--json"]) == ["plan", "--", "--json"]
    assert hoist_json(["--json"]) == ["--json"]
    assert hoist_json(["--json", "--help"]) == ["--help"]
