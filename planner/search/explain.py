"""Why the winner won, what binds it, and — when nothing fits — why not and what would help.

Every statement carries numbers from the cost model; nothing here computes costs itself beyond
calling costmodels (estimates) and planner.search.costing (memory lower bounds).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Optional

import hardware_profiles as hp
from costmodels.estimate import Estimate, estimate, estimate_memory
from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from costmodels.uncertainty import validated_regimes
from planner.search.costing import Coster, balanced_split
from planner.search.explain_empty import no_layout_reasons
from planner.search import SearchResult
from planner.search.space import SpaceOptions, enumerate_layouts

GIB = 2**30
TIME_PARTS = ("compute_s", "recompute_s", "bubble_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s",
              "dp_comm_exposed_s", "optimizer_s")


def layout_text(lay) -> str:
    """Degrees and choices of a layout in one compact string (degrees of 1 left out but tp, pp, dp), which
    `--layout` reads back as the same choices: sp, a cp algorithm other than p2p and an HSDP shard group are
    said where set (a workflow pass: two rows that differed only in shard_group printed alike, and a pasted
    tp=8 line lost sequence parallelism). The stage split is not printed: `estimate` chooses one, the simplest
    within 0.1% of the best (planner.search.stage_split), where the search reports the best exactly."""
    parts = [f"tp={lay.tp}"] + (["sp=1"] if lay.sp else []) + [f"pp={lay.pp}", f"dp={lay.dp}"]
    parts += [f"{k}={getattr(lay, k)}" for k in ("cp", "ep", "etp", "vpp") if getattr(lay, k) > 1]
    if lay.cp > 1 and lay.cp_comm != "p2p":
        parts.append(f"cp_comm={lay.cp_comm}")
    parts.append(f"zero={lay.zero}")
    if lay.shard_group is not None and lay.shard_group != lay.dp * lay.cp:
        parts.append(f"shard_group={lay.shard_group}")
    return " ".join(parts + [f"mbs={lay.mbs}", f"recompute={lay.recompute}"])


def short_layout(e: Estimate) -> str:
    """layout_text of an Estimate's layout."""
    return layout_text(e.layout)


def why_winner(result: SearchResult) -> list[str]:
    """Reasons, in numbers: the winner against the runner-up, its binding constraint, the faster
    layouts that did not fit."""
    if not result.plans:
        return []
    win = result.plans[0]
    out = [f"winner {short_layout(win)}: step {win.time.step_s * 1e3:.1f} ms, MFU {win.throughput.mfu:.1%}, "
           f"allocated peak {win.memory.peak_bytes / GIB:.1f} of the {win.memory.unhindered_usable_bytes / GIB:.1f} GiB "
           f"allocated budget "
           f"(stage {win.memory.peak_stage})"]
    if len(result.plans) > 1:
        out.append(_versus(win, result.plans[1]))
    fastest = result.stats.fastest_pruned
    if fastest is not None and fastest[0] < win.time.step_s:
        out.append(f"binding constraint: memory — {layout_text(fastest[2])} could take as little as "
                   f"{fastest[0] * 1e3:.1f} ms but needs at least {fastest[1] / GIB:.1f} GiB per GPU on the device "
                   f"(device budget {win.memory.device_budget_bytes / GIB:.1f})")
    else:
        out.append("binding constraint: time — no faster layout was rejected for memory")
    return out + _safer(result.plans) + _batch_note(win.layout)


def memory_error_bytes(mem) -> Optional[float]:
    """The held-out error of a MemoryOut's device peak, in bytes at that peak: the mean |error|, or the bias when
    predictions run lower; None without held-out peaks behind it."""
    u = mem.uncertainty
    if u is None or not u.rows or u.mean is None:
        return None
    return max(u.mean, -(u.bias or 0.0)) * mem.device_bytes


def inside_error(mem) -> bool:
    """Whether a fit's headroom is smaller than the held-out error of its peak (the run may not fit)."""
    error = memory_error_bytes(mem)
    return error is not None and 0 <= mem.headroom_bytes < error


def _safer(plans: list[Estimate]) -> list[str]:
    """When the winner's headroom is inside the memory model's held-out error, the fastest layout shown whose
    headroom is not: the search stops at the budget, so its winner can sit 0.2 GiB from it while one 0.9% slower
    leaves 8 GiB (Llama 2 70B on 64 H100, found by a new-user pass)."""
    win = plans[0].memory
    if not inside_error(win):
        return []
    for other in plans[1:]:
        error = memory_error_bytes(other.memory)
        if error is not None and other.memory.headroom_bytes >= error:
            slower = other.time.step_s / plans[0].time.step_s - 1
            return [f"safer: {short_layout(other)} is {slower:.1%} slower and leaves "
                    f"{other.memory.headroom_bytes / GIB:.1f} GiB headroom, outside the memory model's held-out "
                    f"error ({error / GIB:.1f} GiB); the winner's {win.headroom_bytes / GIB:.1f} GiB is inside "
                    f"its own ({memory_error_bytes(win) / GIB:.1f} GiB)"]
    return [f"the winner's {win.headroom_bytes / GIB:.1f} GiB headroom is inside the memory model's held-out error "
            f"({memory_error_bytes(win) / GIB:.1f} GiB), and no other layout shown leaves headroom outside its own "
            "(a larger --top may show one)"]


def _batch_note(lay) -> list[str]:
    """One line when the global batch rules out data parallelism over every GPU (fewer sequences than GPUs, each
    data-parallel rank holding one; or sequences that do not divide over them) and the winner splits the model
    instead: a GB200 NVL72 rack's 72 GPUs with a batch of 512 won
    pp=9 at 51% MFU where a batch of 576 runs dp=72, and the reasons said only "binding constraint: time". The
    batch named is the nearest multiple of the GPU count (the larger on a tie)."""
    world = lay.tp * lay.cp * lay.pp * lay.dp
    batch = lay.dp * lay.mbs * (lay.num_microbatches or 1)
    if batch < world:  # each data-parallel rank holds one sequence: the batch, not memory, made it split the model
        if lay.dp != batch:
            return []
        return [f"global batch {batch} is smaller than the {world:,} GPUs, so at least {-(-world // batch)} of them "
                f"share each sequence (tp x pp x cp); a batch of {world:,} or more would allow data parallelism "
                "over all of them"]
    if batch % world == 0 or (lay.tp == 1 and lay.pp == 1):
        return []
    below, above = batch // world * world, -(-batch // world) * world
    nearest = below if batch - below < above - batch else above
    return [f"global batch {batch} is not a multiple of the {world} GPUs, so no layout runs data parallelism over "
            f"all of them (dp={world}); a batch of {nearest} would allow it"]


def _versus(win: Estimate, other: Estimate) -> str:
    """The runner-up's largest differences, part by part."""
    diffs = sorted(((getattr(other.time, k) - getattr(win.time, k), k) for k in TIME_PARTS), reverse=True)
    worse = [f"{k.removesuffix('_s').replace('_', ' ')} +{d * 1e3:.1f} ms" for d, k in diffs[:2] if d >= 5e-5]
    better = [f"{k.removesuffix('_s').replace('_', ' ')} {d * 1e3:.1f} ms" for d, k in diffs[-2:] if d <= -5e-5]
    slower = other.time.step_s / win.time.step_s - 1
    if slower < 5e-4:
        return f"runner-up {short_layout(other)} ties with the winner (same predicted step time within 0.05%)"
    text = f"runner-up {short_layout(other)} is {slower:.1%} slower"
    if worse:
        text += ": " + ", ".join(worse)
    if better:
        text += " (it saves " + ", ".join(better) + ")"
    return text


def least_memory_options(opts: SpaceOptions) -> SpaceOptions:
    """The part of the space where the smallest memory bound lies: micro-batch 1 and full recompute (when the
    space has it). Per-GPU memory only grows with either: activations scale with the micro-batch and the
    micro-batches in flight (min(pp, m) x mbs is least at mbs 1), and full recompute keeps only each layer's
    input (tests/test_explain_speed.py checks the minimum against the whole space)."""
    recompute = ("full",) if "full" in opts.recompute else opts.recompute
    return replace(opts, max_mbs=1, recompute=recompute)


def min_memory_bound(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, opts: SpaceOptions,
                     deadline: Optional[float] = None, keep=None):
    """(bytes, layout) of the smallest per-GPU memory lower bound over the whole space (over what was
    enumerated before `deadline`, a time.perf_counter() value; of the layouts `keep` accepts, if given):
    searched where it lies (least_memory_options), which is 10-20x fewer layouts."""
    coster = Coster(model, cluster, train)
    best = None
    for n, lay in enumerate(enumerate_layouts(model, cluster, train, least_memory_options(opts))):
        if deadline is not None and n % 256 == 0 and time.perf_counter() > deadline:
            break
        if keep is not None and not keep(lay):  # a layout the chosen framework cannot run
            continue
        b = coster.memory_bound(lay)  # no layer time needed for memory
        if best is None or b < best[0]:
            best = (b, lay)
    return best


def why_nothing_fits(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, result: SearchResult,
                     opts: SpaceOptions = SpaceOptions(), validated_only: bool = False,
                     deadline: Optional[float] = None, keep=None) -> list[str]:
    """Numbers that explain infeasibility and the changes that would make a layout fit; with
    `validated_only` (plan --validated-only), first how many layouts that filter removed; when no layout
    could be formed at all, why (planner.search.explain_empty). When the time limit cut the search, that
    this is no proof, and what the layouts it did look at need (no suggestions: the one that would change
    the verdict is more time); past `deadline` the suggestions (which enumerate bigger clusters) are left
    out, and the last line says so. `keep`: the chosen framework's predicate (planner.search.frameworks.keep):
    the suggestions name only layouts that framework runs (a workflow pass: --framework megatron was told to
    try ZeRO-3)."""
    out = _time_limit_reason(result) + (_validated_only_reason(cluster, train, result) if validated_only else [])
    stats = result.stats
    if not stats.layouts_considered and not stats.truncated:  # nothing to fit: say why none was formed
        return out + no_layout_reasons(model, cluster, train, opts)
    if validated_only and stats.filtered_out and stats.filtered_out == stats.layouts_considered:
        return out
    if stats.truncated:
        return out + _cut_memory_reasons(model, cluster, train, result)
    return out + _memory_reasons(model, cluster, train, result, opts, deadline, keep)


def _time_limit_reason(result: SearchResult) -> list[str]:
    if not result.stats.truncated and "solver" not in result.stats.cut:
        return []
    return [f"time limit reached after {result.stats.layouts_considered:,} layouts, before any layout that fits "
            "was found: this is not a proof that nothing fits (raise --time-limit)"]


def time_limit_note(result: SearchResult) -> list[str]:
    """One line when the time limit cut any part of the command (planner.search.SearchStats.cut). A winner
    whose status is still "optimal" (what was cut is the runners-up or the validated alternative) is said
    to be so."""
    stats = result.stats
    if not stats.cut:
        return []
    if result.plans and result.status == "optimal":
        return [f"time limit reached ({', '.join(stats.cut)} cut short) after the winner was proven optimal"]
    if result.plans:
        return [f"time limit reached after {stats.layouts_considered:,} layouts ({', '.join(stats.cut)} cut short): "
                "the answer is the best found, not proven optimal"]
    return [f"time limit reached ({', '.join(stats.cut)} cut short)"]


def _validated_only_reason(cluster: ClusterSpec, train: TrainSpec, result: SearchResult) -> list[str]:
    stats, stack = result.stats, train.stack_spec
    if not stats.filtered_out:
        return []
    known = ", ".join(validated_regimes(stack)) or "none"
    return [f"--validated-only: {stats.filtered_out:,} of {stats.layouts_considered:,} layouts fall in regimes of "
            f"stack {stack.name} not validated at {cluster.num_gpus} GPUs (validated: {known})"]


def _layouts(n: int) -> str:
    """'1 layout is' or '3 layouts are'."""
    return f"{n:,} layout is" if n == 1 else f"{n:,} layouts are"


def _passed_bound(stats) -> int:
    """Layouts the search priced in full or was about to: those its keep and memory lower bound let through."""
    return max(stats.layouts_considered - stats.filtered_out - stats.memory_pruned, 0)


def _cut_memory_reasons(model, cluster, train, result: SearchResult) -> list[str]:
    """What the layouts a cut search enumerated need, against the budget: no claim that nothing fits, and no
    suggestion but more time (_time_limit_reason says so)."""
    stats = result.stats
    if stats.smallest_memory_bound is None:
        return []
    need, lay = stats.smallest_memory_bound
    usable = Coster(model, cluster, train).budget(lay)
    if need > usable:
        return [f"none of the {stats.layouts_considered:,} layouts enumerated before the time limit fits: the "
                f"smallest per-GPU device memory any of them can reach is at least {need / GIB:.1f} GiB "
                f"({layout_text(lay)}), above the {usable / GIB:.1f} GiB device budget"]
    passed = _passed_bound(stats)
    head = (f"{passed:,} of the {stats.layouts_considered:,} layouts enumerated {'is' if passed == 1 else 'are'} "
            f"within the {usable / GIB:.1f} GiB device budget by their per-GPU memory lower bound (the least: "
            f"{need / GIB:.1f} GiB, {layout_text(lay)})")
    if any(c.endswith("costing") for c in stats.cut):
        return [head + ": the time limit cut their pricing before one was found to fit"]
    return [head + ", but none fits once priced in full; the time limit stopped the enumeration before the "
            "other layouts were looked at"]


def _memory_reasons(model, cluster, train, result: SearchResult, opts: SpaceOptions,
                    deadline: Optional[float] = None, keep=None) -> list[str]:
    """Why nothing fits after a search that looked at every layout: the least memory any needs by its lower
    bound, the full price of that layout (every part of its peak), and the changes that would make a
    layout fit (_suggestions)."""
    stats = result.stats
    smallest = stats.smallest_memory_bound
    if smallest is None:
        return [f"no layout of the {stats.layouts_considered} considered has a stage split that fits "
                f"the {cluster.usable_bytes / GIB:.1f} GiB device budget per GPU"]
    need, lay = smallest
    usable = Coster(model, cluster, train).budget(lay)
    if need > usable:
        out = [f"nothing fits: the smallest per-GPU device memory any of {stats.layouts_considered} layouts can "
               f"reach is at least {need / GIB:.1f} GiB ({layout_text(lay)}), above the {usable / GIB:.1f} GiB "
               "device budget (already including full recompute and ZeRO-3 in the search)"]
    else:
        out = [f"nothing fits: {_layouts(_passed_bound(stats))} within the {usable / GIB:.1f} GiB device budget "
               f"by the per-GPU memory lower bound (the least: {need / GIB:.1f} GiB, {layout_text(lay)}), but none "
               "fits once priced in full, as the next line shows for that least one"]
    example = _example(model, cluster, train, lay)
    out.append(_peak_of(example))
    if example.memory.allocator_pressure:
        out.append(f"that layout fits only under allocator pressure (allocated + context + NCCL "
                   f"{example.memory.floor_bytes / GIB:.1f} GiB): plan does not pick such layouts, which run only "
                   "while the caching allocator releases its cache; `parplan estimate` or `check` reports them")
    out += _suggestions(model, cluster, train, need, opts, deadline, example.layout, keep)
    return out


def _example(model, cluster, train, lay) -> Estimate:
    """The estimate of candidate `lay` with a time-balanced stage split."""
    table = Coster(model, cluster, train).table(lay)
    return estimate(model, cluster, train, lay.to_layout(balanced_split(model, table)))


def _peak_of(est: Estimate) -> str:
    """The real per-stage peak of a candidate with a time-balanced stage split: every allocated part that
    adds up to it, and the device use (with the allocator's reserve, CUDA context and NCCL buffers) the
    budget is held against."""
    mem = est.memory
    stage = mem.stages[mem.peak_stage]
    parts = ", ".join(f"{name} {getattr(stage, f'{name}_bytes') / GIB:.1f}"
                      for name in ("weights", "grads", "optimizer", "activations", "other", "transient"))
    return (f"with balanced stages it peaks at {mem.peak_bytes / GIB:.1f} GiB allocated on stage {stage.stage} "
            f"({parts} GiB), {mem.unhindered_device_bytes / GIB:.1f} GiB on the device against the "
            f"{mem.device_budget_bytes / GIB:.1f} GiB device budget")


def _fits(mem) -> bool:
    """Whether plan would take a layout of this memory: its device use within the budget, with no allocator
    pressure (costmodels.outputs.MemoryOut), and its host memory enough."""
    return mem.host_fits and mem.unhindered_device_bytes <= mem.device_budget_bytes


def _suggestions(model, cluster, train, need, opts, deadline: Optional[float] = None, example=None,
                 keep=None) -> list[str]:
    """Changes that would make a layout fit, each shown to: a GPU with more usable memory on which `example`
    (a resolved layout; none named without it) fits, the fewest more GPUs (up to 64x) and half the sequence
    length with a layout that fits once priced in full (not only by its memory lower bound, which may miss:
    _memory_reasons)."""
    if _late(deadline):
        return ["(no suggestions: the time limit was reached; raise --time-limit for them)"]
    out = []
    bigger = _bigger_gpus(model, cluster, train, need, example, deadline) if example is not None else []
    if bigger:
        out.append(f"a GPU with more HBM, on which {layout_text(example)} fits: "
                   + ", ".join(f"{g.name} ({g.hbm_gib:g} GiB: {used / GIB:.1f} GiB on the device)"
                               for g, used in bigger))
    for factor in (2, 4, 8, 16, 32, 64):
        if _late(deadline):
            return out + ["(suggestions cut short by the time limit)"]
        bigger_cluster = cluster.model_copy(update={"num_nodes": cluster.num_nodes * factor})
        fit = _fitting_least(model, bigger_cluster, train, opts, deadline, keep)
        if fit is not None:
            out.append(f"more GPUs: {bigger_cluster.num_gpus} ({factor}x): {layout_text(fit.layout)} fits at "
                       f"{fit.memory.unhindered_device_bytes / GIB:.1f} GiB on the device")
            break
    seq = train.seq_len(model)
    if seq >= 256:
        if _late(deadline):
            return out + ["(suggestions cut short by the time limit)"]
        fit = _fitting_least(model, cluster, train.model_copy(update={"seq_length": seq // 2}), opts, deadline, keep)
        if fit is not None:
            out.append(f"a shorter sequence: at {seq // 2} tokens {layout_text(fit.layout)} fits at "
                       f"{fit.memory.unhindered_device_bytes / GIB:.1f} GiB on the device")
    if _late(deadline):
        return out + ["(suggestions cut short by the time limit)"]
    if not out:
        out.append("none of: a bigger GPU preset, up to 64x the GPUs, half the sequence length, is shown to be "
                   "enough alone")
    return out


def _bigger_gpus(model, cluster, train, need, example, deadline: Optional[float]) -> list:
    """(GPU profile, device bytes) of the GPU presets with more usable memory than this cluster's and at
    least `need` (the least memory lower bound), on which `example` fits (_fits), smallest first."""
    out = []
    for g in sorted((hp.load_gpu(n) for n in hp.list_gpus()), key=lambda g: g.hbm_bytes):
        usable = g.hbm_bytes - cluster.memory_reserve_gib * GIB
        if usable <= cluster.usable_bytes or usable < need or _late(deadline):
            continue
        try:
            mem = estimate_memory(model, cluster.model_copy(update={"gpu": g}), train, example)
        except ValueError:  # a GPU this training cannot run on (e.g. a precision it lacks)
            continue
        if _fits(mem):
            out.append((g, mem.unhindered_device_bytes))
    return out


def _fitting_least(model, cluster, train, opts, deadline: Optional[float], keep=None) -> Optional[Estimate]:
    """The layout of least memory lower bound on this problem, estimated with balanced stages, when its bound
    is within the budget and it fits once priced in full (_fits); else None."""
    found = min_memory_bound(model, cluster, train, opts, deadline, keep)
    if found is None or found[0] > Coster(model, cluster, train).budget(found[1]) or _late(deadline):
        return None
    est = _example(model, cluster, train, found[1])
    return est if _fits(est.memory) else None


def _late(deadline: Optional[float]) -> bool:
    return deadline is not None and time.perf_counter() > deadline

