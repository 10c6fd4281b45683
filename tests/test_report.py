"""Reports (issue 7): the schedule simulator against the closed forms, the HTML page (sections,
offline, escaped), the terminal version under 100 columns, and the page as headless Chromium shows it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from helpers import chromium, png_distinct_rows
from rich.console import Console

from costmodels.pipeline import pipeline_span_s
from costmodels.schedule_timeline import makespan_s, simulate
from planner.report.html import render_html
from planner.report.data import build
from planner.report.terminal import print_report

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "docs" / "examples").glob("*.json"))
BIG = Path(__file__).resolve().parents[1] / "docs" / "examples" / "llama3.1-405b-1024nodes-plan.json"
SECTIONS = ["summary", "memory", "pipeline", "mesh", "breakdown", "alternatives", "why", "error"]


@pytest.mark.parametrize("schedule,p,m,v", [("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("1f1b", 8, 3, 1),
                                            ("interleaved", 4, 8, 2), ("interleaved", 4, 16, 4)])
def test_uniform_stages_match_the_closed_forms(schedule, p, m, v):
    """(m + p - 1) t for GPipe and 1F1B, (m + (p-1)/v) t interleaved (Narayanan SC'21 section 2.2)."""
    assert makespan_s(simulate(schedule, [1.0] * p, m, v)) == pytest.approx(pipeline_span_s([1.0] * p, m, v))


def test_blocks_never_overlap_and_1f1b_bounds_in_flight():
    blocks = simulate("1f1b", [1.0, 2.0, 1.5, 1.0], 12)
    for r in range(4):
        mine = sorted((b for b in blocks if b.rank == r), key=lambda b: b.start_s)
        assert all(a.end_s <= b.start_s + 1e-12 for a, b in zip(mine, mine[1:]))
        in_flight = peak = 0
        for b in mine:
            in_flight += 1 if b.kind == "F" else -1
            peak = max(peak, in_flight)
        assert peak <= 4 - r  # 1F1B: at most p - s micro-batches in flight


def test_nonuniform_span_within_the_formula():
    """The formula's sum-over-stages fill is an upper bound of the simulated schedule."""
    t = [1.0, 2.0, 1.5]
    assert makespan_s(simulate("1f1b", t, 10)) <= pipeline_span_s(t, 10) + 1e-9


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_html_has_every_section_and_no_network(path: Path):
    html = render_html(build(json.loads(path.read_text()), tokens=1e12))
    for section in SECTIONS:
        assert f'id="{section}"' in html
    assert not re.search(r"https?://", html) and not re.search(r"""(src|href)=["'](?!#)""", html)
    assert "days for the token budget" in html


def test_html_escapes_hostile_names():
    doc = json.loads(EXAMPLES[0].read_text())
    doc["model"]["name"] = "<script>alert(1)</script>"
    html = render_html(build(doc))
    assert "<script>alert" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_terminal_report_fits_in_100_columns(path: Path):
    console = Console(width=99, record=True, force_terminal=False)
    print_report(build(json.loads(path.read_text())), console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) < 100
    assert "stage   0" in text and "memory per GPU" in text


_chromium, _png_distinct_rows = chromium, png_distinct_rows


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (.ci/run installs it)")
def test_report_in_headless_chromium(tmp_path: Path):
    """The 405B report renders offline: a non-blank screenshot and no network request attempted."""
    page, png, log = tmp_path / "report.html", tmp_path / "shot.png", tmp_path / "net.json"
    page.write_text(render_html(build(json.loads(BIG.read_text()), tokens=15e12)))
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--no-pings",
           "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter",
           f"--user-data-dir={tmp_path / 'u'}",
           f"--log-net-log={log}", f"--screenshot={png}", "--window-size=1400,2400", page.as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert png.exists() and _png_distinct_rows(png.read_bytes()) > 50
    requested = re.findall(r'"url":"(https?://[^"/]+)', log.read_text()) if log.exists() else []
    # Chromium's own service pings (account list, component updates on Google hosts) are the browser's,
    # not the page's; anything else would be the report reaching out.
    from_page = [u for u in requested if not re.search(r"\.(google\.com|googleapis\.com|gvt1\.com)$", u)]
    assert from_page == []
