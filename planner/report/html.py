"""A self-contained HTML report (inline SVG, CSS and a few lines of JS; no network requests)."""

from __future__ import annotations

from html import escape

from costmodels.outputs import UncertaintyOut
from planner.search.explain import layout_text
from planner.report.render import band_detail, band_text, band_warning, pct
from planner.report.runblock import duration_text, money, whole_run_rows
from planner.report.data import MAX_SIMULATED_STAGES, ReportData, drawn_text, picked, rank_coordinates

GIB = 2**30
PARTS = [("weights_bytes", "weights", "#4e79a7"), ("grads_bytes", "grads", "#f28e2b"),
         ("optimizer_bytes", "optimizer", "#e15759"), ("activations_bytes", "activations", "#76b7b2"),
         ("other_bytes", "other", "#b07aa1"), ("transient_bytes", "transient", "#9c755f")]  # the peak's whole
TIME_PARTS = ["compute_s", "recompute_s", "bubble_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s",
              "dp_comm_exposed_s", "optimizer_s", "overhead_s"]
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]
CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd}
.lead{font-size:15px;background:#f4f7fb;padding:10px 14px;border-left:4px solid #4e79a7}
.kpi{display:flex;flex-wrap:wrap;gap:14px;margin:12px 0}.kpi div{background:#fafafa;border:1px solid #e4e4e4;padding:8px 12px}
.kpi b{display:block;font-size:18px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f0f0f0;cursor:pointer}
td:first-child,th:first-child,td:nth-child(2){text-align:left}
table.run td{text-align:left}svg text{font-size:11px;font-family:inherit}.note{color:#666;font-size:12px}
.band{font-size:14px;margin:4px 0}.warn{color:#a05a00;font-weight:600;margin:4px 0}"""
SORT_JS = """document.querySelectorAll('table.sortable th').forEach((th,i)=>th.onclick=()=>{const t=th.closest('table'),
b=t.tBodies[0],r=[...b.rows],d=th.dataset.d=th.dataset.d==='1'?'-1':'1';r.sort((x,y)=>{const a=x.cells[i].dataset.v??
x.cells[i].textContent,c=y.cells[i].dataset.v??y.cells[i].textContent;const n=parseFloat(a)-parseFloat(c);
return (isNaN(n)?a.localeCompare(c):n)*d});r.forEach(e=>b.appendChild(e))});"""


MAX_BARS = 64  # stages drawn in the memory chart (evenly picked, with the peak, past that)


def _memory_svg(d: ReportData) -> str:
    mem = d.plan.memory
    stages = [mem.stages[i] for i in picked(len(mem.stages), MAX_BARS, mem.peak_stage)]
    usable = mem.unhindered_usable_bytes
    top = max(max(s.total_bytes for s in stages), d.plan.memory.hbm_bytes) * 1.05
    w, h, left = max(640, min(1200, 60 + 40 * len(stages))), 260, 50
    bw = min((w - left - 10) / len(stages), 90)
    y = lambda b: h - 20 - (h - 40) * b / top  # noqa: E731
    out = [f'<svg width="{w}" height="{h}" role="img" aria-label="memory per stage">']
    for i, s in enumerate(stages):
        base = 0.0
        for key, _, color in PARTS:
            v = getattr(s, key)
            out.append(f'<rect x="{left + i * bw + 1:.1f}" y="{y(base + v):.1f}" width="{max(bw - 2, 1):.1f}" '
                       f'height="{y(base) - y(base + v):.1f}" fill="{color}"><title>stage {s.stage} {key}: '
                       f'{v / GIB:.2f} GiB</title></rect>')
            base += v
        if len(stages) <= 32:
            out.append(f'<text x="{left + i * bw + bw / 2:.1f}" y="{h - 6}" text-anchor="middle">{s.stage}</text>')
    out.append(f'<line x1="{left}" x2="{w}" y1="{y(usable):.1f}" y2="{y(usable):.1f}" stroke="#c00" '
               f'stroke-dasharray="5,3"/><text x="{left + 4}" y="{y(usable) - 4:.1f}" fill="#c00">allocated budget '
               f'{usable / GIB:.1f} GiB</text>')
    for g in range(0, int(top / GIB) + 1, max(1, int(top / GIB / 5))):
        out.append(f'<text x="{left - 6}" y="{y(g * GIB):.1f}" text-anchor="end">{g}</text>')
    legend = "".join(f'<rect x="{left + 95 * k}" y="2" width="10" height="10" fill="{c}"/><text x="'
                     f'{left + 14 + 95 * k}" y="11">{n}</text>' for k, (_, n, c) in enumerate(PARTS))
    return "".join(out) + legend + "</svg>"


def _gantt_svg(name: str, blocks, d: ReportData) -> str:
    ranks = 1 + max(b.rank for b in blocks)
    end = max(b.end_s for b in blocks)
    w, row, left = 1200, 16 if ranks <= 32 else 6, 60
    h = ranks * row + 24
    sx = (w - left - 10) / end
    out = [f'<svg width="{w}" height="{h}" role="img" aria-label="{escape(name)} timeline">',
           f'<rect x="{left}" y="0" width="{end * sx:.1f}" height="{ranks * row}" fill="#ddd"/>']
    for b in blocks:
        color = PALETTE[b.microbatch % len(PALETTE)]
        opacity = "1" if b.kind == "F" else "0.6"
        out.append(f'<rect x="{left + b.start_s * sx:.1f}" y="{b.rank * row + 1}" width="{max((b.end_s - b.start_s) * sx, 0.5):.1f}" '
                   f'height="{row - 2}" fill="{color}" fill-opacity="{opacity}"><title>{b.kind} mb {b.microbatch} '
                   f'chunk {b.chunk} on stage {b.rank}</title></rect>')
    if ranks <= 32:
        out += [f'<text x="{left - 6}" y="{r * row + row - 4}" text-anchor="end">stage {r}</text>' for r in range(ranks)]
    out.append(f'<text x="{left}" y="{h - 6}">{escape(name)}: {end * 1e3:.1f} ms for {drawn_text(d)} '
               f'(forward solid, backward pale, idle grey)</text></svg>')
    return "".join(out)


def _mesh_svg(d: ReportData) -> str:
    lay, g = d.plan.layout, d.gpus_per_node
    nodes = min(d.num_nodes, 16)
    cell, w = 36, 80 + g * 38
    out = [f'<svg width="{w}" height="{nodes * 40 + 10}" role="img" aria-label="device mesh">']
    for n in range(nodes):
        node = n if d.num_nodes <= 16 else n * (d.num_nodes // nodes)
        out.append(f'<text x="4" y="{n * 40 + 24}">node {node}</text>')
        for k in range(g):
            c = rank_coordinates(node * g + k, lay)
            label = f"t{c['tp']} c{c['cp']} d{c['dp']} p{c['pp']}" + (f"; experts: e{c['ep']} et{c['etp']} "
                                                                       f"ed{c['edp']}" if lay.ep > 1 else "")
            second = f"d{c['dp'] % 1000}" + (f" e{c['ep'] % 100}" if lay.ep > 1 else "")
            fit = f' textLength="{cell - 4}" lengthAdjust="spacingAndGlyphs"' if lay.ep > 1 else ""
            out.append(f'<rect x="{70 + k * 38}" y="{n * 40 + 4}" width="{cell}" height="{cell}" rx="4" '
                       f'fill="{PALETTE[c["pp"] % len(PALETTE)]}"><title>rank {node * g + k}: {label}</title></rect>'
                       f'<text x="{72 + k * 38}" y="{n * 40 + 20}" fill="#fff">t{c["tp"]}p{c["pp"]}</text>'
                       f'<text x="{72 + k * 38}" y="{n * 40 + 33}" fill="#fff"{fit}>{second}</text>')
    return "".join(out) + "</svg>"


def _breakdown_svg(d: ReportData) -> str:
    """The step time as one bar, labelled where a slice is wide enough, and a legend naming every slice
    (narrow ones too: their share in the bar alone would be unlabelled)."""
    return _breakdown_bar(d) + _breakdown_legend(d)


def _breakdown_legend(d: ReportData) -> str:
    t = d.plan.time
    items = [f'<span style="white-space:nowrap;margin-right:14px"><span style="display:inline-block;width:10px;'
             f'height:10px;background:{PALETTE[k]}"></span> {key.removesuffix("_s").replace("_", " ")} '
             f'{getattr(t, key) * 1e3:,.1f} ms ({pct(getattr(t, key) / t.step_s)})</span>'
             for k, key in enumerate(TIME_PARTS) if getattr(t, key) > 0]
    return f'<p class="note" id="breakdown-legend">{"".join(items)}</p>'


def _breakdown_bar(d: ReportData) -> str:
    t = d.plan.time
    w, x, out = 1100, 0.0, ['<svg width="1200" height="46" role="img" aria-label="step time breakdown">']
    for k, key in enumerate(TIME_PARTS):
        v = getattr(t, key)
        if v <= 0:
            continue
        width = w * v / t.step_s
        out.append(f'<rect x="{x:.1f}" y="4" width="{width:.1f}" height="20" fill="{PALETTE[k]}"><title>'
                   f'{key}: {v * 1e3:.1f} ms</title></rect>')
        if width > 60:
            out.append(f'<text x="{x + 3:.1f}" y="38">{key.removesuffix("_s")} {v / t.step_s:.0%}</text>')
        x += width
    return "".join(out) + "</svg>"


def _expert_note(d: ReportData) -> str:
    lay = d.plan.layout
    if lay.ep <= 1:
        return ""
    return (f"; e = expert-parallel coordinate (ep={lay.ep}, etp={lay.etp}: the experts' ranks run etp innermost, "
            "then ep, then expert data-parallel, inside each pipeline stage)")


def _error_table(d: ReportData) -> str:
    """The held-out error of this plan's own regime (not other GPUs' or other models' runs), or that there
    are no held-out runs behind it."""
    u = d.plan.uncertainty
    if u is None or not u.rows:
        regime = "this regime" if u is None else f"regime {escape(u.regime)}"
        return f'<p class="warn" id="error-rows">No held-out published runs in {regime} or any fallback.</p>'
    basis = ("this regime" if u.basis == "regime" else
             f"{escape(u.basis)} (no held-out runs in regime {escape(u.regime)} itself)")
    cells = [escape(u.regime), basis, str(u.rows), pct(u.mean) if u.mean is not None else "",
             pct(u.rel_error_p50) if u.rel_error_p50 is not None else "",
             pct(u.rel_error_p90) if u.rel_error_p90 is not None else "",
             pct(u.bias, signed=True) if u.bias is not None else "", "yes" if u.validated else "no"]
    head = "".join(f"<th>{h}</th>" for h in ("regime", "rows from", "held-out runs", "mean", "median", "p90",
                                            "bias", "validated"))
    return (f'<table id="error-rows" class="run"><tr>{head}</tr><tr>{"".join(f"<td>{c}</td>" for c in cells)}</tr>'
            "</table>")


def _band_cell(u: UncertaintyOut | None) -> str:
    """The median held-out error of a layout's regime, '*' when not validated (title: the whole band)."""
    if u is None:
        return "<td></td>"
    text = ("?" if u.rel_error_p50 is None else pct(u.rel_error_p50)) + ("" if u.validated else "*")
    return f'<td data-v="{u.rel_error_p50 or 0}" title="{escape(band_detail(u))}">{text}</td>'


def _alternatives_table(d: ReportData) -> str:
    rows = []
    for i, e in enumerate([d.plan] + d.alternatives):
        rows.append(f'<tr><td>{"winner" if i == 0 else i + 1}</td><td>{escape(layout_text(e.layout))}</td>'
                    f'<td data-v="{e.time.step_s}">{e.time.step_s:.3f}</td>{_band_cell(e.uncertainty)}'
                    f'<td data-v="{e.memory.peak_bytes}">{e.memory.peak_bytes / GIB:.1f}</td>'
                    f'<td data-v="{e.throughput.mfu}">{e.throughput.mfu:.1%}</td>'
                    f'<td>{e.throughput.tokens_per_s:,.0f}</td></tr>')
    head = ("<tr><th>#</th><th>layout</th><th>step s</th><th>± (* not validated)</th><th>peak GiB</th><th>MFU</th>"
            "<th>tokens/s</th></tr>")
    return f'<table class="sortable"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _band_html(d: ReportData, ident: str = "") -> str:
    """The step time with its band, and the warning when the regime is not validated."""
    anchor = f' id="{ident}"' if ident else ""
    out = f'<p class="band"{anchor}>step time {escape(band_text(d.plan))}</p>'
    if (warning := band_warning(d.plan.uncertainty)) is not None:
        out += f'<p class="warn">&#9888; {escape(warning)}</p>'
    return out


def _step_kpi(d: ReportData) -> str:
    u, step = d.plan.uncertainty, f"{d.plan.time.step_s:.3f} s"
    return step if u is None or u.rel_error_p50 is None else f"{step} ± {pct(u.rel_error_p50)}"


def _memory_note(d: ReportData) -> str:
    count = len(d.plan.memory.stages)
    if count <= MAX_BARS:
        return ""
    drawn = len(picked(count, MAX_BARS, d.plan.memory.peak_stage))
    return f'<p class="note">{drawn} of {count:,} stages drawn (evenly picked, with the peak).</p>'


def _no_timeline(d: ReportData) -> str:
    return (f'<p class="note">Not drawn for pp={d.plan.layout.pp:,}: more than {MAX_SIMULATED_STAGES} stages '
            "to simulate.</p>")


def _whole_run_kpis(d: ReportData) -> list[tuple[str, str]]:
    """Days, goodput, checkpoint interval and cost of the whole run (none without a token budget)."""
    w = d.whole_run
    if w is None:
        return []
    kpis = [("days with failures", f"{w.days_with_failures:,.1f}"), ("goodput", f"{w.goodput:.1%}"),
            ("checkpoint every", duration_text(w.checkpoint_interval_s))]
    return kpis + ([("cost with failures", money(w.cost_with_failures_usd))] if w.cost_usd is not None else [])


def _whole_run_html(d: ReportData) -> str:
    """The whole-run section: a table of what the run costs, and the assumptions' sources."""
    if d.whole_run is None:
        return ""
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in whole_run_rows(d.whole_run))
    return (f'<h2 id="whole-run">The whole run</h2><table class="run">{rows}</table><p class="note">Failures: a '
            "Poisson process at the rate shown (default: Llama 3, 419 unexpected interruptions in 54 days on 16,384 "
            "GPUs); checkpoint interval by Daly 2006 (Young 1974 to first order); goodput = the expected useful "
            "fraction of the wall time (Daly 2006). Energy counts GPU board power only.</p>")


def render_html(d: ReportData) -> str:
    """The whole page."""
    p = d.plan
    kpis = [("allocated peak / budget", f"{p.memory.peak_bytes / GIB:.1f} / {p.memory.unhindered_usable_bytes / GIB:.1f} GiB"),
            ("step time", _step_kpi(d)), ("tokens/s", f"{p.throughput.tokens_per_s:,.0f}"),
            ("MFU", f"{p.throughput.mfu:.1%}")] + ([("days for the token budget", f"{d.days:.1f}")] if d.days else [])
    kpis += _whole_run_kpis(d)
    groups = "".join(f"<li>{k}: {n} ranks, stride {s}, {'crosses the network' if x else 'inside a node'}</li>"
                     for k, n, s, x in d.groups)
    timelines = "".join(f"<h3>{escape(name)}{' (chosen)' if i == 0 else ''}</h3>{_gantt_svg(name, b, d)}"
                        for i, (name, b) in enumerate(d.timelines.items())) or _no_timeline(d)
    reasons = "".join(f"<li>{escape(r)}</li>" for r in d.reasons) or "<li>(no alternatives saved)</li>"
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(d.title)}</title>
<style>{CSS}</style></head><body><h1>{escape(d.title)}</h1>
<p class="lead" id="summary">{escape(d.sentence)}</p>
<div class="kpi">{"".join(f"<div>{k}<b>{v}</b></div>" for k, v in kpis)}</div>{_band_html(d, "band")}
{_whole_run_html(d)}
<h2 id="memory">Memory per GPU, by pipeline stage</h2>{_memory_note(d)}{_memory_svg(d)}
<h2 id="pipeline">One step of the pipeline</h2>{timelines}
<h2 id="mesh">Device mesh (node x local rank; colour = pipeline stage)</h2>
<p class="note">t = tensor, c = context, d = data-parallel, p = pipeline coordinate{_expert_note(d)}; showing
{min(d.num_nodes, 16)} of {d.num_nodes} nodes.</p>{_mesh_svg(d)}<ul>{groups}</ul>
<h2 id="breakdown">Step-time breakdown</h2>{_breakdown_svg(d)}
<h2 id="alternatives">Alternatives (click a header to sort)</h2>{_alternatives_table(d)}
<h2 id="why">Why this layout</h2><ul>{reasons}</ul>
<h2 id="error">Expected error of the prediction</h2>{_band_html(d)}<p class="note">The band is the
held-out error of the layout's regime (stack x sharding x scale), measured by benchmarks/accuracy.py on
published runs the fit never saw.</p>{_error_table(d)}<p class="note">From docs/accuracy.md
(benchmarks/accuracy.py).</p>
<script>{SORT_JS}</script></body></html>"""
