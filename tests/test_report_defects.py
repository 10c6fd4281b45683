"""The report's defects (issue 36 part 6), each pinned: the device mesh shows expert parallelism; a
single-stage plan draws one pipeline timeline, not two identical ones; every step-time slice is named;
the error table shows the plan's own regime (not A100 dense runs for an H100 MoE plan); a sweep point's
label never runs across the deadline line; one name per memory limit ('usable' meant two numbers)."""

from __future__ import annotations

import re

from rich.console import Console

from planner.report.data import build
from planner.report.html import TIME_PARTS, render_html
from planner.report.sweep_html import _point_label
from planner.report.terminal import print_report

MOE = {"model": "mixtral-8x7b", "cluster": "dgx-h100", "train": {"global_batch_size": 64},
       "layout": {"tp": 1, "ep": 8, "mbs": 1, "zero": 1, "recompute": "full"}}
TWO_STAGES = {"model": "llama3-8b", "cluster": "dgx-h100", "train": {"global_batch_size": 64},
              "layout": {"tp": 2, "pp": 2, "mbs": 1, "zero": 1}}


def section(html: str, ident: str) -> str:
    start = html.index(f'id="{ident}"')
    end = html.find("<h2", start)
    return html[start:end if end > 0 else None]


def test_mesh_shows_expert_parallelism():
    d = build(MOE)
    assert ("ep", 8, 1, False) in d.groups
    mesh = section(render_html(d), "mesh")
    assert "ep: 8 ranks" in mesh and "e = expert-parallel coordinate" in mesh
    assert re.search(r"rank 3: t0 c0 d3 p0; experts: e3 et0 ed0", mesh)


def test_single_stage_draws_one_timeline_and_two_stages_two():
    one, two = build(MOE), build(TWO_STAGES)
    assert list(one.timelines) == ["1f1b"]
    assert section(render_html(one), "pipeline").count("<h3>") == 1
    assert set(two.timelines) == {"1f1b", "gpipe"}


def test_every_step_time_slice_is_named():
    d = build(MOE)
    legend = section(render_html(d), "breakdown")
    parts = [k for k in TIME_PARTS if getattr(d.plan.time, k) > 0]
    assert len(parts) >= 3
    for key in parts:
        assert f'{key.removesuffix("_s").replace("_", " ")} ' in legend, key


def test_error_table_is_the_plans_own_regime():
    d = build(MOE)
    errors = section(render_html(d), "error")
    assert "A100" not in errors and "Narayanan" not in errors
    assert d.plan.uncertainty.regime.replace("<", "&lt;") in errors
    assert f"<td>{d.plan.uncertainty.rows}</td>" in errors


def test_sweep_label_moves_off_the_deadline_line():
    right = _point_label(100, 50, "128", deadline_x=400)
    crossing = _point_label(100, 50, "128", deadline_x=115)
    assert 'text-anchor="start"' in right and 'x="108.0"' in right
    assert 'text-anchor="end"' in crossing and 'x="92.0"' in crossing


def test_one_name_per_memory_limit():
    d = build(MOE)
    html = render_html(d)
    console = Console(width=100, record=True, file=open("/dev/null", "w"))
    print_report(d, console)
    for text in (html, console.export_text(), d.sentence):
        assert not re.search(r"\busable\b", text)
    assert "allocated budget" in html and "allocated budget" in d.sentence


def test_pick_label_clears_its_ring_and_the_deadline_label_sits_above_the_plot():
    from planner.report.sweep_html import TOP, cost_svg

    picked = _point_label(100, 50, "2", deadline_x=110, picked=True)
    assert 'text-anchor="end"' in picked and 'x="85.0"' in picked  # 13 px ring + 2
    point = {"cluster": "c", "gpu": "g", "nodes": 2, "gpus": 16, "fits": True, "pareto": True, "picked": True,
             "days": 10.0, "gpu_hours": 100.0, "cost_usd": None, "cut_short": False, "status": "optimal",
             "layout": "tp=1", "step_s": 1.0, "mfu": 0.5, "tokens_per_s": 1.0, "goodput": None, "reason": None,
             "estimate": {"layout": {"tp": 1, "pp": 1, "dp": 16, "zero": 2, "mbs": 1}}, "step_rel_error_p50": None,
             "tokens_per_s_per_gpu": 1.0}
    svg = cost_svg({"cost_basis": "gpu_hours", "points": [point], "pareto": [0], "deadline_s": 12 * 86400,
                    "budget_usd": None})
    assert re.search(rf'y="{TOP - 4}" fill="#c00" text-anchor="middle">deadline 12 d', svg)
