"""Rich tables for people: per-stage memory, step-time breakdown, throughput. Units converted here only."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from costmodels.estimate import Estimate

GIB = 2**30


def gib(value: float) -> str:
    """Bytes as GiB with one decimal."""
    return f"{value / GIB:.1f}"


def layout_summary(e: Estimate) -> str:
    """One line: the degrees and choices of a layout."""
    lay = e.layout
    parts = [f"tp={lay.tp}", f"pp={lay.pp}", f"dp={lay.dp}"]
    parts += [f"{k}={getattr(lay, k)}" for k in ("cp", "ep", "etp", "vpp") if getattr(lay, k) > 1]
    parts += [f"sp={int(lay.sp)}", f"zero={lay.zero}", f"mbs={lay.mbs}", f"m={lay.num_microbatches}",
              f"recompute={lay.recompute}", f"schedule={lay.schedule}"]
    return " ".join(parts)


def memory_table(e: Estimate) -> Table:
    """Per-stage memory of one GPU, GiB, against usable HBM."""
    mem = e.memory
    table = Table(title=f"Memory per GPU (GiB) — usable {gib(mem.usable_bytes)} of {gib(mem.hbm_bytes)} HBM")
    for col in ("stage", "layers", "weights", "grads", "optimizer", "activations", "other", "total", ""):
        table.add_column(col, justify="right" if col not in ("",) else "left")
    for s in mem.stages:
        fits = s.total_bytes <= mem.usable_bytes
        mark = Text("ok", style="green") if fits else Text("OVER", style="bold red")
        if s.stage == mem.peak_stage:
            mark.append(" peak")
        table.add_row(str(s.stage), str(s.layers), gib(s.weights_bytes), gib(s.grads_bytes), gib(s.optimizer_bytes),
                      gib(s.activations_bytes), gib(s.other_bytes), gib(s.total_bytes), mark)
    return table


def time_table(e: Estimate) -> Table | None:
    """Step-time breakdown in milliseconds and throughput."""
    if e.time is None:
        return None
    t = e.time
    table = Table(title=f"Step time {t.step_s * 1e3:.1f} ms")
    table.add_column("part")
    table.add_column("ms", justify="right")
    table.add_column("share", justify="right")
    for key, value in t.model_dump().items():
        if key == "step_s" or not value:
            continue
        table.add_row(key.removesuffix("_s").replace("_", " "), f"{value * 1e3:.1f}", f"{value / t.step_s:.0%}")
    return table


def throughput_line(e: Estimate) -> str:
    """Tokens/s, model TFLOP/s per GPU and MFU."""
    if e.throughput is None:
        return ""
    tp = e.throughput
    return (f"throughput: {tp.tokens_per_s:,.0f} tokens/s, {tp.model_tflops_per_gpu:.0f} model TFLOP/s per GPU, "
            f"MFU {tp.mfu:.1%} (model FLOPs, no recompute)")


def print_estimate(e: Estimate, console: Console, title: str) -> None:
    """Render one Estimate: header, memory table, time table, throughput."""
    verdict = Text("fits", style="bold green") if e.fits else Text("does not fit", style="bold red")
    console.print(Text(f"{title}: ").append(verdict))
    console.print(layout_summary(e))
    console.print(f"parameters: {e.params.total / 1e9:.2f} B total, {e.params.active / 1e9:.2f} B active")
    parts = [memory_table(e)]
    if (tt := time_table(e)) is not None:
        parts.append(tt)
    console.print(Group(*parts))
    if line := throughput_line(e):
        console.print(line)


def plans_table(plans: list[Estimate]) -> Table:
    """The ranked layouts: degrees, stage layers, peak memory, step time, tokens/s, MFU."""
    table = Table(title="Best layouts (fastest first)")
    for col in ("#", "tp", "pp", "dp", "cp", "ep", "vpp", "zero", "mbs", "recompute", "stage layers",
                "peak GiB", "step s", "tokens/s", "MFU"):
        table.add_column(col, justify="left" if col in ("recompute", "stage layers") else "right")
    for i, e in enumerate(plans, 1):
        lay = e.layout
        stages = _stages_text(lay.stage_layers)
        table.add_row(str(i), str(lay.tp), str(lay.pp), str(lay.dp), str(lay.cp), str(lay.ep), str(lay.vpp),
                      str(lay.zero), str(lay.mbs), lay.recompute, stages,
                      f"{gib(e.memory.peak_bytes)}/{gib(e.memory.usable_bytes)}", f"{e.time.step_s:.3f}",
                      f"{e.throughput.tokens_per_s:,.0f}", f"{e.throughput.mfu:.1%}")
    return table


def _stages_text(stages: list[int]) -> str:
    if len(set(stages)) == 1:
        return f"{len(stages)} x {stages[0]}"
    text = ",".join(map(str, stages))
    return text if len(text) <= 24 else f"{stages[0]},{stages[1]},..,{stages[-1]}"


def _gap_text(result) -> str:
    if result.stats.truncated:
        return " (time limit reached before every layout was costed: not proven optimal)"
    return f" (gap {result.gap:.1%})" if result.gap else ""


def print_plan(result, reasons: list[str], console: Console, title: str) -> None:
    """Render a search result: ranked table, the winner's breakdown, the reasons."""
    s = result.stats
    console.print(f"[bold]{title}[/]")
    console.print(f"search: {s.layouts_considered:,} layouts, {s.memory_pruned:,} cannot fit, "
                  f"{s.bound_pruned:,} provably slower, CP-SAT over {s.solver_candidates:,}; "
                  f"{result.seconds:.2f} s; status {result.status}" + _gap_text(result), highlight=False)
    if result.plans:
        console.print(plans_table(result.plans))
        print_estimate(result.plans[0], console, "winner")
    for line in reasons:
        console.print(f"• {line}", highlight=False)
