"""Rich tables for people: per-stage memory, step-time breakdown, throughput. Units converted here only."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from costmodels.estimate import Estimate
from costmodels.framework import FRAMEWORKS
from costmodels.outputs import MemoryOut, UncertaintyOut
from costmodels.uncertainty import MAX_MEAN_ERROR, MIN_ROWS, parse_regime
from planner.search.explain import inside_error, layout_text, memory_error_bytes
from planner.report.fit import prose_soft_wrap
from planner.safetext import plain, visible

GIB = 2**30
COMPACT = {"box": box.MINIMAL, "pad_edge": False, "show_edge": False, "padding": (0, 1)}  # cells split by │, no outer frame
EDGE_ROWS = 4  # stages listed at each end of a long pipeline's memory table


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


def pct(x: float, signed: bool = False) -> str:
    """A fraction as a percentage: whole percents from 1%, one decimal below."""
    spec = ("+" if signed else "") + (".0%" if abs(x) >= 0.01 or x == 0 else ".1%")
    return format(x, spec)


def step_text(step_s: float) -> str:
    """A step time with three significant digits: seconds from 1 s, milliseconds below."""
    return f"{step_s:.3g} s" if step_s >= 1 else f"{step_s * 1e3:.3g} ms"


def band_detail(u: UncertaintyOut) -> str:
    """'± 6% (p90 14%, bias -3%, 12 held-out runs, megatron-core/zero1-2/<=512)'."""
    if u.rel_error_p50 is None:
        return f"(no error band: no held-out runs, {u.regime})"
    runs = f"{u.rows} held-out run{'s' if u.rows != 1 else ''}"
    p90 = f"p90 {pct(u.rel_error_p90)}, " if u.rel_error_p90 is not None else ""
    bias = f"bias {pct(u.bias, signed=True)}, " if u.bias is not None else ""
    where = u.regime if u.basis in (None, "regime") else f"borrowed: {u.regime} has none"
    return f"± {pct(u.rel_error_p50)} ({p90}{bias}{runs}, {where})"


def band_text(e: Estimate) -> str:
    """The step time with its held-out error band, e.g. '15.1 s ± 6% (p90 14%, bias -3%, 12 held-out
    runs, megatron-core/zero1-2/<=512)'; the bare step time when the estimate carries no band."""
    text = step_text(e.time.step_s)
    return text if e.uncertainty is None else f"{text} {band_detail(e.uncertainty)}"


def band_warning(u: UncertaintyOut | None) -> str | None:
    """Why the band is not validated (None when it is, or when there is no band)."""
    if u is None or u.validated:
        return None
    if u.extrapolated:
        return (f"not validated: extrapolated ({u.extrapolated}); the band is theirs, and this estimate lies "
                "beyond them")
    if u.basis != "regime":
        if not u.rows:
            return f"not validated: no held-out runs in regime {u.regime} or any fallback (no error band)"
        return (f"not validated: no held-out runs in regime {u.regime}; the band comes from {u.basis} "
                f"({u.rows} runs)")
    if u.rows < MIN_ROWS:
        runs = f"{u.rows} held-out run{'s' if u.rows != 1 else ''}"
        return f"not validated: only {runs} in this regime (at least {MIN_ROWS} needed)"
    mean = u.mean if u.mean is not None else u.rel_error_p50
    return f"not validated: held-out mean error {pct(mean)} > {pct(MAX_MEAN_ERROR)}"


def print_band(e: Estimate, console: Console) -> None:
    """'step time: ...' with the band, and the warning line when the regime is not validated."""
    if e.time is None:
        return
    console.print(Text(f"step time: {band_text(e)}"), soft_wrap=prose_soft_wrap())
    if (warning := band_warning(e.uncertainty)) is not None:
        console.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=prose_soft_wrap())


def shown_stages(stages: list, peak: int) -> list:
    """The rows of a long pipeline's table: the first and last EDGE_ROWS stages and the peak, with the
    number of stages left out (an int) where they are missing; every stage up to 2 * EDGE_ROWS + 1."""
    n = len(stages)
    if n <= 2 * EDGE_ROWS + 1:
        return list(stages)
    out, last = [], -1
    for i in sorted({*range(EDGE_ROWS), *range(n - EDGE_ROWS, n), peak}):
        if i > last + 1:
            out.append(i - last - 1)
        out.append(stages[i])
        last = i
    return out


MEMORY_COLUMNS = ("stage", "layers", "weights", "grads", "optimizer", "activations", "other", "transient",
                  "allocated", "reserved", "device", "")
MEMORY_PARTS = ("transient", "other", "grads", "weights", "optimizer")  # the terms `allocated` sums (with activations)
BIG_PART = 0.1  # a term at least this share of the allocated peak is left out only after reserved and layers


def memory_optional(e: Estimate) -> tuple[str, ...]:
    """The columns a narrow terminal may leave out, least useful first: the memory terms under BIG_PART of the
    allocated peak (smallest first), then reserved and layers, then the big terms (smallest first). A fixed
    order had dropped `transient` first, which under FSDP can be the largest term (86 of 128 GiB)."""
    peak = max(e.memory.peak_bytes, 1)
    size = {c: max(getattr(s, f"{c}_bytes") for s in e.memory.stages) for c in MEMORY_PARTS}
    ranked = sorted(MEMORY_PARTS, key=lambda c: (size[c], MEMORY_PARTS.index(c)))
    return (*[c for c in ranked if size[c] < BIG_PART * peak], "reserved", "layers",
            *[c for c in ranked if size[c] >= BIG_PART * peak])


def memory_table(e: Estimate, width: int | None = None) -> Table:
    """Per-stage memory of one GPU, GiB, against the device budget; at `width` columns the least useful
    columns are left out (planner.report.fit, memory_optional) rather than cut."""
    from planner.report.fit import fit_table

    return fit_table(lambda out: _memory_table(e, out), width or 10_000, memory_optional(e))


def _memory_table(e: Estimate, left_out: frozenset) -> Table:
    mem = e.memory
    table = Table(title=f"Memory per GPU (GiB): device use against the device budget {gib(mem.device_budget_bytes)} "
                        f"(HBM {gib(mem.hbm_bytes)} less a {gib(mem.margin_bytes)} margin)", **COMPACT)
    cols = [c for c in MEMORY_COLUMNS if c not in left_out]
    for col in cols:
        table.add_column(col, justify="right" if col else "left", no_wrap=True)
    rows = shown_stages(mem.stages, mem.peak_stage)
    if len(rows) < len(mem.stages):
        table.caption = (f"{len(mem.stages) - sum(not isinstance(r, int) for r in rows):,} of {len(mem.stages):,} "
                         f"stages not listed (the first and last {EDGE_ROWS}, and the peak, are)")
    for s in rows:
        if isinstance(s, int):
            table.add_row("…", *[""] * (len(cols) - 1))
            continue
        fits = s.device_bytes <= mem.device_budget_bytes
        mark = Text("ok", style="green") if fits else Text("OVER", style="bold red")
        if s.stage == mem.peak_stage:
            mark.append(" peak")
        cells = {"stage": str(s.stage), "layers": str(s.layers), "weights": gib(s.weights_bytes),
                 "grads": gib(s.grads_bytes), "optimizer": gib(s.optimizer_bytes),
                 "activations": gib(s.activations_bytes), "other": gib(s.other_bytes),
                 "transient": gib(s.transient_bytes), "allocated": gib(s.total_bytes),
                 "reserved": gib(s.reserved_bytes), "device": gib(s.device_bytes), "": mark}
        table.add_row(*(cells[c] for c in cols))
    return table


def memory_verdict(e: Estimate) -> str:
    """How close to the edge, and how far to trust it: 'memory: 71.2 of 78.6 GiB on the device
    (allocated 57.1, reserved 65.0): 7.4 GiB headroom; held-out device peaks: mean error 10% (p90 35%, 8 runs)'."""
    mem = e.memory
    room = mem.device_budget_bytes
    text = _pressure_text(mem, room) if mem.allocator_pressure else _headroom_text(mem, room)
    u = mem.uncertainty
    if u is None or not u.rows:
        return text + "; no held-out measured peaks behind this stack's device numbers"
    return text + (f"; held-out {u.kind} peaks: mean error {pct(u.mean)} (p90 {pct(u.p90)}, bias {pct(u.bias, True)}, "
                   f"{u.rows} runs)") + _inside_error(mem)


def _inside_error(mem: MemoryOut) -> str:
    """A fit whose headroom is smaller than the held-out error of its peak (the mean |error|, or the bias when
    predictions run low) is said to be one: the plan's search stops at the budget, so its winners sit at the
    edge (0.1 GiB of 78.6 with device peaks predicted 9% low on held-out runs)."""
    if not inside_error(mem):
        return ""
    return (f"; the headroom is inside that error ({gib(memory_error_bytes(mem))} GiB at this peak): the run may "
            "not fit, so leave "
            "room (a cluster file's memory_reserve_gib) or try it before a long job")


def _headroom_text(mem: MemoryOut, room: int) -> str:
    """The device use against the budget: headroom, or how much is short even with the cache released."""
    edge = "headroom" if mem.headroom_bytes >= 0 else "short"
    text = (f"memory: {gib(mem.device_bytes)} of {gib(room)} GiB on the device "
            f"(allocated {gib(mem.peak_allocated_bytes)}, reserved {gib(mem.peak_reserved_bytes)}): "
            f"{gib(abs(mem.headroom_bytes))} GiB {edge} "
            f"({pct(abs(mem.headroom_bytes) / mem.hbm_bytes)} of the device)")
    if mem.headroom_bytes < 0:
        text += f"; even with the allocator's cache released it needs {gib(mem.floor_bytes - room)} GiB less"
    return text


def _pressure_text(mem: MemoryOut, room: int) -> str:
    """A fit that lasts only because the caching allocator releases its cache: how much fragmentation it can bear."""
    spare, fixed = room - mem.floor_bytes, mem.floor_bytes - mem.peak_allocated_bytes
    return (f"memory: fits only under allocator pressure: unhindered the device would hold "
            f"{gib(mem.unhindered_device_bytes)} of {gib(room)} GiB, so the caching allocator must release its cache "
            f"(synchronising cudaFree, slower steps{_expandable_hint(mem)}); "
            f"allocated {gib(mem.peak_allocated_bytes)} + context and NCCL {gib(fixed)} leave {gib(spare)} GiB "
            "for fragmentation")


def _expandable_hint(mem: MemoryOut) -> str:
    """The allocator setting that helps, unless the run has it already (it was said to runs that set it)."""
    return "" if mem.expandable_segments else "; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps"


def time_table(e: Estimate) -> Table | None:
    """Step-time breakdown in milliseconds and throughput."""
    if e.time is None:
        return None
    t = e.time
    table = Table(title=f"Step time {t.step_s * 1e3:.1f} ms", **COMPACT)
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
    against = "" if tp.mfu_bf16 is None else (f", against the peak of the run's precision; {tp.mfu_bf16:.1%} against "
                                              "the bf16 peak, as torchtitan and Megatron log it")
    return (f"throughput: {tp.tokens_per_s:,.0f} tokens/s, {tp.model_tflops_per_gpu:.0f} model TFLOP/s per GPU, "
            f"MFU {tp.mfu:.1%} (model FLOPs, no recompute{against})")


def verdict_text(e: Estimate) -> Text:
    """'fits', 'fits under allocator pressure' or 'does not fit', coloured."""
    if not e.fits:
        return Text("does not fit", style="bold red")
    if e.memory.allocator_pressure:
        return Text("fits under allocator pressure", style="bold yellow")
    return Text("fits", style="bold green")


def print_estimate(e: Estimate, console: Console, title: str, chosen_split: bool = False) -> None:
    """Render one Estimate: header, memory table, time table, throughput; the stage split when it is
    uneven or parplan chose it (`chosen_split`: the layout gave none and pp does not divide the layers)."""
    verdict = verdict_text(e)
    console.print(Text(f"{visible(title)}: ").append(verdict), soft_wrap=True)
    console.print(layout_summary(e))
    if chosen_split or len(set(e.layout.stage_layers)) > 1:
        console.print(f"stage layers{' (chosen by parplan)' if chosen_split else ''}: "
                      + ",".join(map(str, e.layout.stage_layers)), highlight=False, soft_wrap=True)
    console.print(f"parameters: {e.params.total / 1e9:.2f} B total, {e.params.active / 1e9:.2f} B active")
    print_band(e, console)
    console.print(Text(memory_verdict(e)), soft_wrap=prose_soft_wrap())
    parts = [memory_table(e, console.width)]
    if (tt := time_table(e)) is not None:
        parts.append(tt)
    console.print(Group(*parts))
    if line := throughput_line(e):
        console.print(line)


PLAN_OPTIONAL = ("on", "tokens/s", "±", "stage layers", "mbs")  # left out first when the terminal is narrow


def plans_table(plans: list[Estimate], runs_on: list[list[str]] | None = None, width: int | None = None) -> Table:
    """The ranked layouts: degrees (cp with its algorithm, ep, vpp only when some plan uses them), stage
    layers, allocated peak against the allocated budget, step time with its band, tokens/s, MFU, and the
    frameworks that run each; at `width` columns the least useful columns are left out, never cut."""
    from planner.report.fit import fit_table

    return fit_table(lambda out: _plans_table(plans, runs_on, out), width or 10_000, PLAN_OPTIONAL)


def _plans_table(plans: list[Estimate], runs_on: list[list[str]] | None, left_out: frozenset) -> Table:
    caption = "peak/budget: allocated peak / allocated budget, GiB"
    if "±" not in left_out:
        caption += "; ± median held-out error of the layout's regime; * not validated"
    if runs_on and "on" not in left_out:
        caption += ("; on: the frameworks that can express the layout (" + ", ".join(f"{n[0].upper()} {n}"
                                                                              for n in FRAMEWORKS)
                    + "); each prices it with its own stack, which may not fit it: export --format all says")
    table = Table(title="Best layouts (fastest first)", caption=caption, caption_justify="left", **COMPACT)
    degrees = ["tp", "pp", "dp"] + [k for k in ("cp", "ep", "vpp") if any(getattr(e.layout, k) > 1 for e in plans)]
    cols = [c for c in ("#", *degrees, "zero", "mbs", "recompute", "stage layers", "peak/budget", "step s", "±",
                        "tokens/s", "MFU", *(("on",) if runs_on else ())) if c not in left_out]
    for col in cols:
        table.add_column(col, justify="left" if col in ("recompute", "stage layers", "on") else "right", no_wrap=True)
    for i, e in enumerate(plans, 1):
        lay = e.layout
        cells = {"#": str(i), **{k: _degree_cell(lay, k) for k in degrees}, "zero": str(lay.zero),
                 "mbs": str(lay.mbs), "recompute": lay.recompute, "stage layers": _stages_text(lay.stage_layers),
                 "peak/budget": f"{gib(e.memory.peak_bytes)}/{gib(e.memory.unhindered_usable_bytes)}",
                 "step s": f"{e.time.step_s:.3f}", "±": _band_cell(e.uncertainty),
                 "tokens/s": f"{e.throughput.tokens_per_s:,.0f}", "MFU": f"{e.throughput.mfu:.1%}",
                 "on": "".join(n[0].upper() for n in runs_on[i - 1]) or "-" if runs_on else ""}
        table.add_row(*(cells[c] for c in cols))
    return table


def _degree_cell(lay, key: str) -> str:
    """A degree; cp > 1 with its algorithm when it is not the ring ("4 a2a", "2 ag" for all-gather)."""
    value = str(getattr(lay, key))
    if key == "cp" and lay.cp > 1 and lay.cp_comm != "p2p":
        return f"{value} {'ag' if lay.cp_comm == 'allgather' else lay.cp_comm}"
    return value


def _band_cell(u: UncertaintyOut | None) -> str:
    if u is None:
        return ""
    band = "?" if u.rel_error_p50 is None else pct(u.rel_error_p50)
    return band if u.validated else band + "*"


def _stages_text(stages: list[int]) -> str:
    if len(set(stages)) == 1:
        return f"{len(stages)} x {stages[0]}"
    text = ",".join(map(str, stages))
    return text if len(text) <= 24 else f"{stages[0]},{stages[1]},…,{stages[-1]} ({len(stages)} stages)"


def _gap_text(result) -> str:
    if result.stats.truncated:
        return " (time limit reached before every layout was costed: not proven optimal)"
    return f" (gap {result.gap:.1%})" if result.gap else ""


def alternative_lines(win: Estimate, alternative: Estimate | None, unfinished: bool = False) -> list[str]:
    """When the winner's regime is not validated: that, and the best validated layout with its band and
    how much slower it is, or that none fits; or, when `unfinished` (the time limit cut a search that may
    hold one: validated_search_cut), that none was found in time. Nothing when the winner is validated."""
    u = win.uncertainty
    if u is None or u.validated:
        return []
    head = f"the winner's regime {u.regime} is not validated"
    if alternative is None and unfinished:
        return [head + "; no layout in a validated regime was found before the time limit (raise --time-limit)"]
    if alternative is None:
        return [head + "; no layout that fits falls in a validated regime"]
    slower = alternative.time.step_s / win.time.step_s - 1
    stack = parse_regime(alternative.uncertainty.regime)[0] if alternative.uncertainty else ""
    same = (f" (the winner's own layout, as stack {stack} runs it)" if alternative.layout == win.layout and stack
            else "")
    return [head + ";", f"best validated alternative ({pct(slower)} slower): {layout_text(alternative.layout)}{same}",
            f"  step time: {band_text(alternative)}"]


def validated_search_cut(stats) -> bool:
    """Whether the time limit cut a search that may hold a layout in a validated regime: the search itself
    (stats.truncated) or the search for the validated alternative (named in stats.cut)."""
    return stats.truncated or any(c.endswith("validated alternative") for c in stats.cut)


def _solver_text(stats) -> str:
    """How the survivors were ranked: by CP-SAT, or by their bounds alone (planner.search.cpsat: no model
    was needed, every pipeline degree's memory-aware bounds exceeded the best found)."""
    if getattr(stats, "solver_models", 1) or not stats.solver_candidates:
        return f"CP-SAT over {stats.solver_candidates:,}"
    return f"{stats.solver_candidates:,} settled by their bounds (no CP-SAT model needed)"


def print_plan(result, reasons: list[str], console: Console, title: str, alternative: Estimate | None = None,
               runs_on: list[list[str]] | None = None) -> None:
    """Render a search result: ranked table, the validated alternative when the winner's regime is not
    validated, the winner's breakdown, the reasons."""
    s = result.stats
    console.print(plain(title, "bold"))  # names come from files: never markup, never escape sequences
    outside = f"{s.filtered_out:,} outside --framework/--validated-only, " if s.filtered_out else ""
    console.print(f"search: {s.layouts_considered:,} layouts, {outside}{s.memory_pruned:,} cannot fit, "
                  f"{s.bound_pruned:,} provably slower, {_solver_text(s)}; "
                  f"{result.seconds:.2f} s; status {result.status}" + _gap_text(result), highlight=False)
    if result.plans:
        console.print(plans_table(result.plans, runs_on, console.width))
        for line in alternative_lines(result.plans[0], alternative, validated_search_cut(s)):
            console.print(Text(line, style="bold yellow"), soft_wrap=prose_soft_wrap())
        print_estimate(result.plans[0], console, "winner")
    for line in reasons:
        console.print(plain(f"• {line}"), highlight=False)
