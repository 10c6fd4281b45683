"""The `parplan sweep --report` page, drawn from the sweep document (`sweep --json`): self-contained
(inline SVG and CSS, no script, font or image from anywhere). Two plots: days versus cost (GPU-hours
without prices) with the Pareto front, the deadline and the budget, and the scaling efficiency
(tokens/s per GPU against the GPU count, one line per cluster); then the table."""

from __future__ import annotations

import math
from html import escape
from typing import Callable, Optional

from planner.report.html import CSS, PALETTE
from planner.report.render import pct
from planner.report.sweep_table import batch_text, big, compact_layout, days_text, money, pick_lines
from planner.safetext import visible

W, H, LEFT, BOTTOM, TOP, RIGHT = 720, 380, 70, 44, 16, 150


def _e(text: object) -> str:
    return escape(visible(text))


class Axis:
    """A linear or (when the values span more than 4x and are positive) logarithmic axis onto pixels."""

    def __init__(self, values: list[float], lo_px: float, hi_px: float, at: Optional[list[float]] = None):
        lo, hi = min(values), max(values)
        self.at = at  # the ticks, when given (GPU counts: the sweep's own)
        self.log = lo > 0 and hi / lo > 4
        if self.log:
            lo, hi = math.log10(lo) - 0.05, math.log10(hi) + 0.05
        else:
            pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
            lo, hi = min(lo - pad, 0) if lo >= 0 and lo - pad < 0 else lo - pad, hi + pad
        self.lo, self.hi, self.lo_px, self.hi_px = lo, hi, lo_px, hi_px

    def __call__(self, v: float) -> float:
        x = math.log10(v) if self.log else v
        return self.lo_px + (x - self.lo) / (self.hi - self.lo) * (self.hi_px - self.lo_px)

    def ticks(self) -> list[float]:
        """Round values inside the axis: 1-2-5 steps (decades and their 2x, 5x when logarithmic)."""
        if self.at:
            return sorted(set(self.at))
        if self.log:
            out = [m * 10 ** e for e in range(math.floor(self.lo), math.ceil(self.hi) + 1) for m in (1, 2, 5)]
            return [v for v in out if self.lo <= math.log10(v) <= self.hi]
        raw = (self.hi - self.lo) / 5
        step = min((m * 10 ** math.floor(math.log10(raw)) for m in (1, 2, 5, 10)), key=lambda s: abs(s - raw))
        first = math.ceil(self.lo / step) * step
        return [first + i * step for i in range(int((self.hi - first) / step) + 1)]


def _tick_text(v: float) -> str:
    """'1,024' for whole numbers below 100,000, '250k' above, '0.5' below one."""
    if v >= 1e5:
        return big(v)
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:g}"


def _frame(x: Axis, y: Axis, xlabel: str, ylabel: str, fmt_y: Callable[[float], str] = _tick_text) -> list[str]:
    out = [f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" fill="#fcfcfc" '
           'stroke="#bbb"/>']
    for v in x.ticks():
        out.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#eee"/>'
                   f'<text x="{x(v):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{_tick_text(v)}</text>')
    for v in y.ticks():
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
                   f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{fmt_y(v)}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">{_e(xlabel)}</text>'
               f'<text transform="translate(14,{(TOP + H - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">'
               f'{_e(ylabel)}</text>')
    return out


def _colors(points: list[dict]) -> dict[str, str]:
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(dict.fromkeys(p["cluster"] for p in points))}


def _legend(colors: dict[str, str]) -> list[str]:
    return [f'<circle cx="{W - RIGHT + 16}" cy="{TOP + 10 + 18 * i}" r="5" fill="{c}"/>'
            f'<text x="{W - RIGHT + 26}" y="{TOP + 14 + 18 * i}">{_e(name)}</text>' for i, (name, c) in
            enumerate(colors.items())]


def _days(p: dict) -> float:
    return p["days"]


def cost_svg(doc: dict) -> str:
    """Days (x) against cost or GPU-hours (y): every point that fits, the front joined, the pick ringed,
    the deadline a vertical and the budget a horizontal dashed line."""
    basis = doc["cost_basis"]
    pts = [p for p in doc["points"] if p["fits"]]
    if not pts:
        return '<p class="note">No point has a layout that fits: nothing to plot.</p>'
    deadline = doc["deadline_s"] / 86400 if doc["deadline_s"] else None
    budget = doc["budget_usd"] if basis == "cost_usd" else None
    x = Axis([_days(p) for p in pts] + ([deadline] if deadline else []), LEFT, W - RIGHT)
    y = Axis([p[basis] for p in pts] + ([budget] if budget else []), H - BOTTOM, TOP)
    ylabel = "cost (USD)" if basis == "cost_usd" else "GPU-hours"
    out = [f'<svg width="{W}" height="{H}" role="img" aria-label="days versus {ylabel}">']
    out += _frame(x, y, "days to train" + (" (log)" if x.log else ""), ylabel + (" (log)" if y.log else ""),
                  money if basis == "cost_usd" else _tick_text)
    front = [doc["points"][i] for i in doc["pareto"]]
    if len(front) > 1:
        path = " ".join(f"{x(_days(p)):.1f},{y(p[basis]):.1f}" for p in front)
        out.append(f'<polyline points="{path}" fill="none" stroke="#222" stroke-width="2" stroke-opacity=".5"/>')
    if deadline:
        out.append(f'<line x1="{x(deadline):.1f}" x2="{x(deadline):.1f}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#c00" '
                   f'stroke-dasharray="6,4"/><text x="{x(deadline):.1f}" y="{TOP - 4}" fill="#c00" '
                   f'text-anchor="middle">deadline {deadline:.3g} d</text>')  # above the plot: clear of points
    if budget:
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(budget):.1f}" y2="{y(budget):.1f}" stroke="#a05a00" '
                   f'stroke-dasharray="6,4"/><text x="{LEFT + 4}" y="{y(budget) - 4:.1f}" fill="#a05a00">budget '
                   f'{money(budget)}</text>')
    colors = _colors(doc["points"])
    for p in pts:
        cx, cy = x(_days(p)), y(p[basis])
        r = 7 if p["pareto"] else 5
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}" fill="{colors[p["cluster"]]}" '
                   f'stroke="{"#000" if p["pareto"] else "none"}" stroke-width="1.5"><title>{_e(_tip(p))}</title>'
                   f'</circle>{_point_label(cx, cy, str(p["nodes"]), x(deadline) if deadline else None, p["picked"])}')
        if p["picked"]:
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="13" fill="none" stroke="#2a9d2a" stroke-width="3"/>')
    out += _legend(colors)
    out.append(f'<text x="{W - RIGHT + 10}" y="{TOP + 30 + 18 * len(colors)}">black ring: Pareto</text>'
               f'<text x="{W - RIGHT + 10}" y="{TOP + 48 + 18 * len(colors)}" fill="#2a9d2a">green ring: pick</text>'
               f'<text x="{W - RIGHT + 10}" y="{TOP + 66 + 18 * len(colors)}">labels: nodes</text>')
    return "".join(out) + "</svg>"


HALO = ' stroke="#fff" stroke-width="3" paint-order="stroke"'  # text stays legible over lines
CHAR_PX = 7  # width of a character at the 11 px chart font, generously


def _point_label(cx: float, cy: float, text: str, deadline_x: float | None, picked: bool = False) -> str:
    """A point's label above-right of it, or above-left where it would run across the deadline line; clear
    of the pick's ring (radius 13) when the point is the pick."""
    gap = 15 if picked else 8
    width = CHAR_PX * len(text)
    left = deadline_x is not None and cx < deadline_x <= cx + gap + width + 2
    x, anchor = (cx - gap, "end") if left else (cx + gap, "start")
    return f'<text x="{x:.1f}" y="{cy - gap + 2:.1f}" fill="#555" text-anchor="{anchor}"{HALO}>{text}</text>'


def _tip(p: dict) -> str:
    cost = f", {money(p['cost_usd'])}" if p["cost_usd"] is not None else ""
    return (f"{p['cluster']} x {p['nodes']} nodes ({p['gpus']} GPUs): {compact_layout(p['estimate']['layout'])}, "
            f"{_days(p):.1f} days, {big(p['gpu_hours'])} GPU-hours{cost}")


def scaling_svg(doc: dict) -> str:
    """Tokens/s per GPU against GPUs (log2), a line per cluster; the efficiency against each cluster's
    smallest point in the tooltips."""
    pts = [p for p in doc["points"] if p["fits"]]
    if not pts:
        return ""
    gpus = [p["gpus"] for p in pts]
    x = Axis(gpus + [g * 1.01 for g in gpus], LEFT, W - RIGHT, at=gpus if len(set(gpus)) <= 12 else None)
    y = Axis([p["tokens_per_s_per_gpu"] for p in pts] + [0.0], H - BOTTOM, TOP)
    y.log = False  # throughput per GPU from zero: the drop is what the plot shows
    y.lo, y.hi = 0.0, max(p["tokens_per_s_per_gpu"] for p in pts) * 1.12
    out = [f'<svg width="{W}" height="{H}" role="img" aria-label="scaling efficiency">']
    out += _frame(x, y, "GPUs" + (" (log)" if x.log else ""), "tokens/s per GPU")
    colors = _colors(doc["points"])
    for name, color in colors.items():
        line = sorted((p for p in pts if p["cluster"] == name), key=lambda p: p["gpus"])
        if not line:
            continue
        base = line[0]["tokens_per_s_per_gpu"]
        path = " ".join(f"{x(p['gpus']):.1f},{y(p['tokens_per_s_per_gpu']):.1f}" for p in line)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for p in line:
            eff = p["tokens_per_s_per_gpu"] / base
            out.append(f'<circle cx="{x(p["gpus"]):.1f}" cy="{y(p["tokens_per_s_per_gpu"]):.1f}" r="4" fill="{color}">'
                       f'<title>{_e(name)}: {p["gpus"]} GPUs, {p["tokens_per_s_per_gpu"]:,.0f} tokens/s per GPU, '
                       f'{pct(eff)} of {line[0]["gpus"]} GPUs</title></circle>')
    return "".join(out + _legend(colors)) + "</svg>"


def _table(doc: dict) -> str:
    with_cost = doc["cost_basis"] == "cost_usd"
    heads = ["", "cluster", "nodes", "GPUs", "layout", "step s", "± p50", "MFU", "tokens/s", "days", "GPU-hours"]
    heads += ["cost"] if with_cost else []
    heads += ["goodput", "status"]
    rows = []
    for p in doc["points"]:
        mark = ("pick " if p["picked"] else "") + ("front" if p["pareto"] else "")
        cells = [mark, _e(p["cluster"]), str(p["nodes"]), f"{p['gpus']:,}"]
        if p["fits"]:
            band = "" if p["step_rel_error_p50"] is None else pct(p["step_rel_error_p50"])
            cells += [_e(compact_layout(p["estimate"]["layout"])), f"{p['step_s']:.3g}", band, f"{p['mfu']:.1%}",
                      f"{p['tokens_per_s']:,.0f}", days_text(_days(p)), big(p["gpu_hours"])]
            cells += [money(p["cost_usd"])] if with_cost else []
            cells += [f"{p['goodput']:.1%}" if p["goodput"] is not None else ""]
        else:
            cells += [_e(p["reason"] or "nothing fits")] + [""] * (7 + with_cost)
        status = p["status"] + (" (cut short)" if p["cut_short"] and p["fits"] else "")
        cls = ' class="infeasible"' if not p["fits"] else ""
        rows.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells + [status]) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in heads)
    return f'<table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def render_sweep_html(doc: dict) -> str:
    """The whole page."""
    batches = sorted({p["global_batch"] for p in doc["points"]})
    title = f"parplan sweep: {visible(doc['model'])}, {doc['tokens']:.3g} tokens, {batch_text(batches, ' (by point: a multiple of every data-parallel degree it can use)')}"
    infeasible = [p for p in doc["points"] if not p["fits"]]
    missing = ("<p class=\"note\">Not plotted (no layout found): " + ", ".join(
        f"{_e(p['cluster'])} x {p['nodes']} nodes" for p in infeasible) + ".</p>") if infeasible else ""
    stopped = (f'<p class="warn">Interrupted after {doc["completed"]} of {doc["total"]} points.</p>'
               if doc["interrupted"] else "")
    basis = "cost" if doc["cost_basis"] == "cost_usd" else "GPU-hours (no price per GPU-hour given)"
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{CSS}\n.infeasible td{{color:#999}}td{{white-space:nowrap}}</style></head><body>"
            f"<h1>{escape(title)}</h1>"
            f"<p class=\"lead\">{_e(' '.join(pick_lines(doc)))}</p>{stopped}"
            f"<h2>Days to train versus {basis}</h2>{cost_svg(doc)}{missing}"
            "<p class=\"note\">Pareto front: points no other point beats on both days and "
            f"{escape(basis)}.</p><h2>Scaling efficiency</h2>{scaling_svg(doc)}"
            "<p class=\"note\">Tokens per second per GPU of each point's best layout; a flat line is perfect "
            "scaling.</p><h2>Every point</h2>" + _table(doc) + "</body></html>")
