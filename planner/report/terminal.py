"""The report's essentials in the terminal, under 100 columns: summary, the step time with its
held-out error band, memory bars per stage, the pipeline timeline in block characters, the
step-time breakdown."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from planner.report.render import band_text, band_warning
from planner.report.runblock import print_whole_run
from planner.report.data import MAX_SIMULATED_STAGES, ReportData, drawn_text, picked

GIB = 2**30
WIDTH = 72  # the widest bar, in characters
LABEL = 10  # 'stage   0 '
TAIL = 12  # ' 123.4 GiB' after a memory bar


def bar_width(console_width: int) -> int:
    """The bars' width for a terminal `console_width` wide: WIDTH, narrower where the label, the bar and its
    tail would not fit (never under 20)."""
    return max(20, min(WIDTH, console_width - LABEL - TAIL))
MEMORY_PARTS = [("weights_bytes", "w", "blue"), ("grads_bytes", "g", "yellow"), ("optimizer_bytes", "o", "red"),
                ("activations_bytes", "a", "cyan"), ("other_bytes", "x", "magenta")]
COLORS = ["blue", "yellow", "red", "cyan", "green", "magenta", "bright_blue", "bright_red", "bright_green", "white"]


def memory_bars(d: ReportData, width: int = WIDTH) -> list[Text]:
    """One bar per stage (at most 16 and the peak, evenly picked), scaled to HBM, with the allocated budget as '|'."""
    mem = d.plan.memory
    scale = width / mem.hbm_bytes
    stages = [mem.stages[i] for i in picked(len(mem.stages), 16, mem.peak_stage)]
    out = [] if len(stages) == len(mem.stages) else [Text(f"({len(stages)} of {len(mem.stages):,} stages, "
                                                          "evenly picked, with the peak)")]
    for s in stages:
        line = Text(f"stage {s.stage:>3} ")
        for key, ch, color in MEMORY_PARTS:
            line.append(ch * round(getattr(s, key) * scale), style=color)
        cut = round(mem.unhindered_usable_bytes * scale)
        pad = max(0, cut - (len(line) - 10))
        line.append(" " * pad + "|" + f" {s.total_bytes / GIB:.1f} GiB")
        out.append(line)
    return out


def timeline_rows(d: ReportData, width: int = WIDTH) -> list[Text]:
    """The chosen schedule: one row per stage (at most 16), micro-batch digits, idle as '.'."""
    name, blocks = next(iter(d.timelines.items()))
    end = max(b.end_s for b in blocks)
    ranks = 1 + max(b.rank for b in blocks)
    rows = [[(".", "dim")] * width for _ in range(ranks)]
    for b in blocks:
        lo, hi = int(b.start_s / end * width), max(int(b.start_s / end * width) + 1, int(b.end_s / end * width))
        for col in range(lo, min(hi, width)):
            rows[b.rank][col] = (str(b.microbatch % 10), ("bold " if b.kind == "F" else "") + COLORS[b.microbatch % 10])
    out = []
    for r in picked(ranks, 16):
        line = Text(f"stage {r:>3} ")
        for ch, style in rows[r]:
            line.append(ch, style=style)
        out.append(line)
    return out


def breakdown_bar(d: ReportData, width: int = WIDTH) -> Text:
    """The step time as one bar, a letter per part."""
    t, line = d.plan.time, Text("step      ")
    parts = [("compute_s", "C"), ("recompute_s", "R"), ("bubble_s", "b"), ("tp_comm_s", "T"), ("cp_comm_s", "X"),
             ("ep_comm_s", "E"), ("pp_comm_s", "P"), ("dp_comm_exposed_s", "D"), ("optimizer_s", "O")]
    for k, (key, ch) in enumerate(parts):
        line.append(ch * round(getattr(t, key) / t.step_s * width), style=COLORS[k])
    return line


def print_timeline(d: ReportData, console: Console) -> None:
    """The chosen schedule's rows, or why there are none (too many stages to simulate)."""
    if not d.timelines:
        console.print(f"pipeline: not drawn for pp={d.plan.layout.pp:,} (more than {MAX_SIMULATED_STAGES} stages)")
        return
    name = next(iter(d.timelines))
    console.print(f"pipeline, {name}, {drawn_text(d)} (bold forward, plain backward, . idle):")
    for line in timeline_rows(d, bar_width(console.width)):
        console.print(line, no_wrap=True, crop=True)


def print_report(d: ReportData, console: Console) -> None:
    """Everything, in order."""
    prose = min(99, console.width)
    console.print(Text(d.sentence, style="bold"), width=prose)
    console.print(Text(f"step time: {band_text(d.plan)}"), width=prose)
    if (warning := band_warning(d.plan.uncertainty)) is not None:
        console.print(Text(f"warning: {warning}", style="yellow"), width=prose)
    console.print("memory per GPU (w weights, g grads, o optimizer, a activations, x other; | allocated budget):")
    for line in memory_bars(d, bar_width(console.width)):
        console.print(line, no_wrap=True, crop=True)
    print_timeline(d, console)
    console.print("C compute, R recompute, b bubble, T tp, X cp, E ep, P pp, D dp, O optimizer:")
    console.print(breakdown_bar(d, bar_width(console.width)), no_wrap=True, crop=True)
    print_whole_run(d.whole_run, console)  # with --tokens: days, GPU-hours, cost, goodput (as estimate prints them)
