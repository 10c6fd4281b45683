"""`parplan sweep` (docs/design.md sections 5 and 6): the node grid and the other options, the Pareto
front and the pick on hand-made points, exit codes, `--json` keys, the report's no-clobber rule, the
issue's 70B example (12 plans in a bounded search, run once for the module) and its page in headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from helpers import chromium, png_distinct_rows
from sweep_cache import shared_sweep_points
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import UserError
from planner.report.sweep_html import render_sweep_html
from planner.sweep import Point, pareto_front, pick, why_no_pick
from planner.sweep_grid import default_batch, parse_duration_s, parse_money, parse_nodes, parse_prices

runner = CliRunner()
SMALL = ["sweep", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1,2", "--tokens", "1e12", "--jobs", "1",
         "--time-limit", "5"]
EXAMPLE = ["sweep", "llama3-70b", "--cluster", "dgx-h100,dgx-b200", "--nodes", "8..256", "--tokens", "15e12"]
POINT_KEYS = {"cluster", "gpu", "nodes", "gpus", "global_batch", "status", "fits", "cut_short", "reason", "layout",
              "layouts_considered", "step_s", "step_rel_error_p50", "mfu", "tokens_per_s", "tokens_per_s_per_gpu",
              "days", "gpu_hours", "cost_usd", "goodput", "pareto", "picked", "estimate"}
DOC_KEYS = {"model", "tokens", "deadline_s", "budget_usd", "cost_basis", "points", "pareto", "pick",
            "no_pick_reason", "completed", "total", "interrupted"}


def invoke(*args: str):
    return runner.invoke(app, list(args))


_chromium, _png_distinct_rows = chromium, png_distinct_rows


@pytest.mark.parametrize("text, nodes", [
    ("8..256", [8, 16, 32, 64, 128, 256]), ("8..256:x2", [8, 16, 32, 64, 128, 256]), ("8..256:x4", [8, 32, 128]),
    ("8..100", [8, 16, 32, 64]), ("8..32:+8", [8, 16, 24, 32]), ("64,8,16,8", [8, 16, 64]), ("3", [3]),
    ("1..4,24", [1, 2, 4, 24])])
def test_nodes_grid(text, nodes):
    assert parse_nodes(text) == nodes


@pytest.mark.parametrize("text", ["", "8..", "..8", "256..8", "8..64:x1", "8..64:+0", "eight", "8,,16", "0",
                                  "1..100000000:+1", "8..64:/2"])
def test_bad_nodes_exit_2_naming_the_option(text):
    with pytest.raises(UserError, match="--nodes"):
        parse_nodes(text)
    result = invoke("sweep", "llama3-8b", "--cluster", "dgx-h100", "--nodes", text, "--tokens", "1e12")
    assert result.exit_code == 2 and "--nodes" in result.stderr and "Traceback" not in result.output


def test_durations_money_prices():
    assert parse_duration_s("30d") == 30 * 86400 and parse_duration_s("720h") == 30 * 86400
    assert parse_duration_s("2w") == 14 * 86400 and parse_duration_s(None) is None
    assert parse_money("$2,000,000") == 2e6 == parse_money("2M") == parse_money("2e6")
    names = {"dgx-h100": ("dgx-h100", "dgx-h100", "h100-sxm"), "dgx-b200": ("dgx-b200", "dgx-b200", "b200")}
    assert parse_prices("h100=2.5,b200=4", names) == {"dgx-h100": 2.5, "dgx-b200": 4.0}
    assert parse_prices("3", names) == {"dgx-h100": 3.0, "dgx-b200": 3.0}
    assert parse_prices(None, names) == {"dgx-h100": None, "dgx-b200": None}
    for bad, option in [("30", "--deadline"), ("-1d", "--deadline"), ("soon", "--deadline")]:
        with pytest.raises(UserError, match=option):
            parse_duration_s(bad)
    for bad in ("free", "-5", "0"):
        with pytest.raises(UserError, match="--budget"):
            parse_money(bad)
    for bad in ("h100=2.5", "a100=2,h100=1,b200=1", "h100=x,b200=1", "h100=1,sxm=2,b200=1"):
        with pytest.raises(UserError, match="--price-per-gpu-hour"):
            parse_prices(bad, names)


def test_default_batch_divides_every_data_parallel_degree():
    assert default_batch(64) == 512 and default_batch(2048) == 512
    for gpus in (24, 40, 96, 192, 8 * 48):
        batch = default_batch(gpus)
        odd = gpus
        while odd % 2 == 0:
            odd //= 2
        assert batch % odd == 0 and 256 <= batch <= 1024 + odd, (gpus, batch)


def test_sweep_and_plan_default_to_the_same_global_batch():
    from planner.cli_common import DEFAULT_PLAN_BATCH
    from planner.sweep_grid import DEFAULT_BATCH

    assert DEFAULT_BATCH == DEFAULT_PLAN_BATCH == 512


def test_pareto_front_on_hand_made_points():
    pairs = [(10, 100), (5, 120), (20, 90), (12, 110), None, (5, 130), (40, 90), (2, 300)]
    # (12, 110) loses to (10, 100); (5, 130) to (5, 120); (40, 90) to (20, 90); None never counts
    assert pareto_front(pairs) == [7, 1, 0, 2]
    assert pareto_front([]) == [] and pareto_front([None]) == []


def _point(i: int, days: float, cost: float, fits: bool = True) -> Point:
    p = Point(i, "c", "c", "g", 8 * (i + 1), 64 * (i + 1), 1024, "optimal" if fits else "infeasible",
              object() if fits else None, 0.1)
    p.run = {"days": days, "gpu_hours": cost / 2, "cost_usd": cost} if fits else {}
    return p


def test_pick_is_the_cheapest_that_meets_deadline_and_budget():
    points = [_point(0, 100, 1000), _point(1, 50, 1100), _point(2, 25, 1300), _point(3, 0, 0, fits=False)]
    assert pick(points, "cost_usd", None, None) == 0
    assert pick(points, "cost_usd", 60 * 86400, None) == 1
    assert pick(points, "cost_usd", 60 * 86400, 1050) is None
    assert pick(points, "cost_usd", 30 * 86400, 2000) == 2
    assert pick(points, "gpu_hours", 10 * 86400, None) is None
    assert "takes 25.0 days" in why_no_pick(points, "cost_usd", 10 * 86400, None)
    assert "fits" in why_no_pick([points[3]], "cost_usd", None, None)
    tie = [_point(0, 40, 1000), _point(1, 20, 1000)]
    assert pick(tie, "cost_usd", None, None) == 1  # equal cost: the faster
    near = [_point(0, 40, 1000), _point(1, 20, 1005), _point(2, 10, 1020)]
    assert pick(near, "cost_usd", None, None) == 1  # 0.5% dearer and twice as fast; 2% dearer is not a tie


def test_a_point_is_priced_by_the_whole_run_model():
    doc = json.loads(invoke(*SMALL, "--json", "--price-per-gpu-hour", "2").stdout)
    p = doc["points"][0]
    assert p["run_model"].startswith("costmodels.whole_run") and 0 < p["goodput"] <= 1
    assert p["days"] == pytest.approx(p["days_failure_free"] / p["goodput"])
    assert p["gpu_hours_failure_free"] == pytest.approx(p["days_failure_free"] * 24 * p["gpus"])
    assert p["cost_usd"] == pytest.approx(2 * p["gpu_hours"])


def test_small_sweep_json_keys_and_exit_codes(tmp_path: Path):
    ok = invoke(*SMALL, "--json", "--deadline", "365d", "--price-per-gpu-hour", "2.5")
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert DOC_KEYS <= set(doc) and doc["completed"] == doc["total"] == 2 and not doc["interrupted"]
    assert all(POINT_KEYS <= set(p) for p in doc["points"]) and doc["cost_basis"] == "cost_usd"
    assert doc["pick"] in doc["pareto"] and doc["points"][doc["pick"]]["picked"]
    p = doc["points"][0]
    assert p["gpus"] == 8 and p["fits"] and p["cost_usd"] == pytest.approx(p["gpu_hours"] * 2.5)
    missed = invoke(*SMALL, "--deadline", "1h")
    assert missed.exit_code == 1 and "no point ends within" in missed.stdout and "deadline" in missed.stdout
    assert invoke(*SMALL, "--budget", "1M").exit_code == 2  # a budget needs a price


def test_infeasible_points_are_shown_as_such():
    result = invoke("sweep", "llama3-70b", "--cluster", "dgx-a100", "--nodes", "1", "--tokens", "1e12", "-j", "1",
                    "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 1 and doc["pick"] is None and doc["pareto"] == []
    p = doc["points"][0]
    assert not p["fits"] and p["status"] == "infeasible" and "nothing fits" in p["reason"]
    assert "nothing fits" in render_sweep_html(doc)


@pytest.mark.parametrize("model, nodes, code", [("llama3-70b", "1,2", 0), ("llama3.1-405b", "1", 1)])
def test_a_first_point_that_fits_nowhere_is_a_row_not_a_crash(model, nodes, code):
    """Issue 36: the table read the first point's whole-run source, None when it fits nowhere: exit 3.
    The row says why, the pick comes from the points that fit, and the exit is 0 (1 when none fits)."""
    result = invoke("sweep", model, "--cluster", "dgx-h100", "--nodes", nodes, "--tokens", "1e12", "-j", "1")
    assert result.exit_code == code, result.output[-2000:]
    assert "internal error" not in result.output and "dgx-h100 x 1: nothing fits" in result.stdout
    assert ("pick (cheapest" in result.stdout) == (code == 0)


def test_report_is_never_clobbered(tmp_path: Path):
    page = tmp_path / "sweep.html"
    page.write_text("mine")
    refused = invoke(*SMALL, "--report", str(page))
    assert refused.exit_code == 2 and "--force" in refused.stderr and page.read_text() == "mine"
    forced = invoke(*SMALL, "--report", str(page), "--force")
    assert forced.exit_code == 0 and page.read_text().startswith("<!doctype html>")


# each point searches the four frameworks' layouts, as `plan` does (planner.sweep.plan_point): the example's
# largest point looks at 591,618 layouts over the four (Megatron's alone, before: 39,642)
MAX_LAYOUTS_PER_POINT = 800_000


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[dict, Path]:
    """The issue's example, run once: (its JSON, its page). Its points are the README tour's sweep's
    (tests/test_readme_tour.py, which runs first), searched once per session (tests/sweep_cache.py)."""
    page = tmp_path_factory.mktemp("sweep") / "sweep.html"
    with shared_sweep_points():
        result = runner.invoke(app, [*EXAMPLE, "--json", "--report", str(page)])
    assert result.exit_code == 0, result.output[-2000:]
    return json.loads(result.stdout), page


def test_the_70b_example_plans_12_points_in_a_bounded_search(example):
    """The issue asked for 12 plans within 60 s (11.5 s on the 2-core CI machine); the test bounds the
    work instead of the clock: each point's search looks at a bounded number of layouts."""
    doc, page = example
    assert all(0 < p["layouts_considered"] <= MAX_LAYOUTS_PER_POINT for p in doc["points"])
    assert doc["total"] == doc["completed"] == 12 and all(p["fits"] for p in doc["points"])
    assert {p["nodes"] for p in doc["points"]} == {8, 16, 32, 64, 128, 256}
    assert doc["pareto"] and doc["pick"] is not None and page.exists()


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (.ci/run installs it)")
def test_sweep_report_in_headless_chromium(example, tmp_path: Path):
    """The sweep page renders offline: a non-blank screenshot, both plots drawn, no network request."""
    _, page = example
    html = page.read_text()
    assert html.count("<svg") == 2 and "scaling efficiency" in html and "<script" not in html
    png, log = tmp_path / "shot.png", tmp_path / "net.json"
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--no-pings",
           f"--user-data-dir={tmp_path / 'u'}", f"--log-net-log={log}", f"--screenshot={png}",
           "--window-size=1100,1800", page.as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert png.exists() and _png_distinct_rows(png.read_bytes()) > 50
    text = log.read_text() if log.exists() else ""
    # Chromium's own service pings (Google hosts) are the browser's; anything else would be the page's
    assert [u for u in re.findall(r'"url":"(https?://[^"/]+)', text)
            if not re.search(r"\.(google\.com|googleapis\.com|gvt1\.com)$", u)] == []


def test_a_sweep_point_is_the_plan_of_that_point(example):
    """Without --framework a point searches each framework's layouts with its own stack, as `plan` does: a single
    search priced every layout as Megatron-Core, and its H100 rows were ZeRO-2 with pp > 1 (which Megatron cannot
    run) where `plan` of the same point picked tp4 pp1 dp16 ZeRO-3."""
    from planner.search import frameworks as fws

    doc, _ = example
    for point in doc["points"]:
        lay = point["estimate"]["layout"]
        assert not (lay["zero"] >= 2 and lay["pp"] > 1 and point["framework"] == "megatron"), point["layout"]
    h100_8 = next(p for p in doc["points"] if p["cluster"] == "dgx-h100" and p["nodes"] == 8)
    assert h100_8["layout"].startswith("tp=4 sp=1 pp=1 dp=16 zero=3")
    assert fws.load(h100_8["framework"]) is not None


def test_the_sweep_table_marks_a_band_that_is_not_validated():
    """plan's table prints '3%*' for a band from too few held-out runs; the sweep table printed '±3%' for the
    same (a new-user pass)."""
    from planner.report.sweep_table import _cells

    point = {"cluster": "dgx-h100", "nodes": 8, "gpus": 64, "global_batch": 512, "fits": True, "status": "optimal",
             "estimate": {"layout": {"tp": 1, "pp": 1, "dp": 64, "cp": 1, "ep": 1, "zero": 1, "mbs": 1,
                                     "recompute": "none"}},
             "step_s": 1.0, "step_rel_error_p50": 0.03, "mfu": 0.5, "tokens_per_s": 1e6, "days": 1.0,
             "gpu_hours": 10.0, "cost_usd": None, "goodput": None, "pareto": False, "picked": False,
             "cut_short": [], "reason": None}
    assert _cells({**point, "validated": False}, False, False)["step s"] == "1 ±3%*"
    assert _cells({**point, "validated": True}, False, False)["step s"] == "1 ±3%"


def test_a_redirected_sweep_leaves_stderr_empty():
    """The progress bar, drawn for a terminal, left a blank line in a redirected stderr (a new-user pass)."""
    import io  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415

    from planner.sweep_pool import progress_bar  # noqa: PLC0415

    stream = io.StringIO()
    with progress_bar(Console(file=stream, force_terminal=False)) as bar:
        bar.add_task("", total=2)
    assert stream.getvalue() == ""


def test_sweep_json_validates_against_the_schema(example):
    """`parplan schema` had no definition of sweep's JSON (a contract pass): SweepOutput holds a real one."""
    import jsonschema  # noqa: PLC0415

    from planner.schema import json_schema  # noqa: PLC0415

    defs = json_schema()["$defs"]
    jsonschema.validate(example[0], {"$defs": defs, **defs["SweepOutput"]})
