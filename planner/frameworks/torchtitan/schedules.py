"""torchtitan's pipeline schedules (torch.distributed.pipelining), each priced as the closest schedule parplan
models (Layout.schedule 1f1b, gpipe or interleaved), with one warning naming the approximation and its direction.

Sources: torch 2.13 torch/distributed/pipelining/schedules.py: get_schedule_class (the names torchtitan accepts,
matched case-insensitively; PipelineScheduleSingle is abstract and PipelineScheduleMulti has no order of its
own: both run only from a pipeline_parallel_schedule_csv), the schedule classes' _calculate_single_rank_operations
and _check_torch_compile_compatibility (InterleavedZeroBubble, ZBVZeroBubble and DualPipeV refuse stage modules
compiled with torch.compile; DualPipeV needs at least 2p micro-batches). torchtitan 0.2.2 (and 0.3.0)
distributed/pipeline_parallel.py: pipeline_llm (1 stage per rank for a PipelineScheduleSingle, 2 by default for a
PipelineScheduleMulti, at least 2 with pipeline_parallel_layers_per_stage), pipeline_module_split (ZBVZeroBubble and
DualPipeV place the stages in a V: rank r holds stages r and 2p-1-r, exactly 2 per rank; the others loop: rank r
holds r, r+p, ...); the early-2025 layout (custom-torchtitan 0.0.2.1 models/llama/pipeline_llama.py) already put
ZBVZeroBubble in a V.

In flight: micro-batch activations a rank holds at its peak, counted from each class's rank order (F +1, B or W
-1; p ranks, v stages per rank, m >= p micro-batches), in whole-rank units:
  Interleaved1F1B  ((v-1)p + 2(p-1-r) + 1) / v on rank r (parplan's interleaved; the first rank holds most)
  LoopedBFS        m on every rank (every forward before any backward: GPipe's)
  InterleavedZeroBubble, ZBVZeroBubble  p on every rank;  DualPipeV  p + 1/2 on every rank
Interleaved1F1B's first rank holds ((v+1)p - 1)/v >= p + 1/2, so pricing the zero-bubble schedules as it puts
the peak at or above the run's unless the heaviest rank is in the later half of the pipeline.
Bubble, as a share of the ideal step: 1F1B and GPipe (p-1)/m; Interleaved1F1B and LoopedBFS (p-1)/(vm); the
zero-bubble schedules fill most of it with weight-gradient work (ZBV about none when F = I = W).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from costmodels.pipeline import few_microbatches_excess
from planner.errors import UserError
from planner.files.config_values import short


@dataclass(frozen=True)
class Schedule:
    """One torch schedule as torchtitan builds it and as parplan prices it."""

    name: str  # torch's spelling (get_schedule_class's key)
    multi: bool  # PipelineScheduleMulti: 2+ stages per rank (2 by default)
    v_shape: bool  # stages placed in a V (rank r: r and 2p-1-r)
    priced: str  # Layout.schedule
    why: str = ""  # the approximation and its direction; "" = modelled as is
    csv_only: bool = False  # runs only from pipeline_parallel_schedule_csv


_V = "2 stages per rank in a V (rank r: stages r and 2p-1-r{extra}), "
_ZB = ("priced as Interleaved1F1B over those layers: memory with its ((v+1)p-1)/v micro-batches in flight on the "
       "first rank where the run holds {held} on every rank (peak at or above the run's, later ranks below it); "
       "time with its bubble (p-1)/(v*m), larger than the run's ({how}), so slower than the run")
_SPLIT = "the weight gradient split out of backward fills the bubble"
SCHEDULES = (
    Schedule("1F1B", False, False, "1f1b"),
    Schedule("GPipe", False, False, "gpipe"),
    Schedule("Interleaved1F1B", True, False, "interleaved"),
    Schedule("LoopedBFS", True, False, "gpipe",
             "priced as GPipe: memory as the run (all m micro-batches of every stage in flight); time with GPipe's "
             "bubble (p-1)/m where BFS's looped stages give (p-1)/(v*m), so slower than the run"),
    Schedule("InterleavedZeroBubble", True, False, "interleaved",
             _ZB.replace(" over those layers", "").format(held="p", how=_SPLIT)),
    Schedule("ZBVZeroBubble", True, True, "interleaved", _V.format(extra="") + _ZB.format(held="p", how=_SPLIT)),
    Schedule("DualPipeV", True, True, "interleaved",
             _V.format(extra="; torch needs m >= 2p") + _ZB.format(
                 held="p + 1/2", how="one micro-batch's forward overlaps another's backward and " + _SPLIT)),
    Schedule("PipelineScheduleSingle", False, False, "1f1b",
             "the CSV's order is not read: priced as 1F1B", csv_only=True),
    Schedule("PipelineScheduleMulti", True, False, "interleaved",
             "the CSV's order is not read: priced as Interleaved1F1B", csv_only=True),
)
BY_NAME = {s.name.lower(): s for s in SCHEDULES}
COMPILE_REFUSED = ("InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV")  # _check_torch_compile_compatibility


def lookup(value, path: Path, csv=None) -> Schedule:
    """The schedule parallelism.pipeline_parallel_schedule names (any case, as torch matches it); a name torch
    does not define, or a CSV-only class without pipeline_parallel_schedule_csv, is a UserError."""
    found = BY_NAME.get(value.lower()) if isinstance(value, str) else None
    if found is None:
        raise UserError(f"{path}: parallelism.pipeline_parallel_schedule={short(value)}: torch's schedules are "
                        f"{', '.join(s.name for s in SCHEDULES)}")
    if found.csv_only and not csv:
        raise UserError(f"{path}: parallelism.pipeline_parallel_schedule={value!r} runs only from a "
                        "pipeline_parallel_schedule_csv (torch's class has no order of its own)")
    return found


def stages_per_rank(value) -> Optional[int]:
    """torchtitan's default stages per rank for a schedule name (1 single, 2 multi); None for no such name."""
    found = BY_NAME.get(value.lower()) if isinstance(value, str) else None
    return None if found is None else (2 if found.multi else 1)


def rank_layers(counts: list[int], pp: int, schedule: Schedule, path: Path) -> list[int]:
    """Transformer layers per rank from the layers per stage: a V sums stages r and 2p-1-r, a loop r, r+p, ..."""
    stages = len(counts)
    if schedule.v_shape:
        if stages != 2 * pp:
            raise UserError(f"{path}: {schedule.name} places exactly 2 stages per rank in a V, but the split makes "
                            f"{stages} stages for pipeline_parallel_degree={pp}")
        return [counts[r] + counts[stages - 1 - r] for r in range(pp)]
    return [sum(counts[r::pp]) for r in range(pp)]


def microbatch_refusal(schedule: Schedule, pp: int, stages: int, local: int, size: int) -> Optional[str]:
    """Why torchtitan or torch refuses the micro-batches of one pipeline step, or None. n = local_batch_size //
    pipeline_parallel_microbatch_size (torchtitan distributed/pipeline_parallel.py build_pipeline_schedule, 0.1.0 to
    0.3.0, which refuses a remainder and only warns when n < pp * stages per rank); then torch 2.13 schedules.py:
    Schedule1F1B needs n >= its stages (pp), ScheduleInterleaved1F1B and ScheduleInterleavedZeroBubble n a multiple of
    their rounds max(1, n // pp) (so any n < 2pp runs), ScheduleDualPipeV n >= its 2pp stages; GPipe, LoopedBFS and
    ZBVZeroBubble take any n."""
    keys = "training.local_batch_size / parallelism.pipeline_parallel_microbatch_size"
    if local % size:
        return (f"training.local_batch_size={local} is not divisible by parallelism.pipeline_parallel_microbatch_size="
                f"{size}: torchtitan refuses it (build_pipeline_schedule)")
    n, said = local // size, f"{keys} = {local}/{size} = {local // size} micro-batches per step"
    if schedule.name == "1F1B" and n < pp:
        return f"{said}: torch's Schedule1F1B needs at least pipeline_parallel_degree={pp}"
    if schedule.name == "DualPipeV" and n < stages:
        return f"{said}: torch's ScheduleDualPipeV needs at least its {stages} stages (2 x pipeline_parallel_degree)"
    rounds = max(1, n // pp)
    if schedule.name in ("Interleaved1F1B", "InterleavedZeroBubble") and n % rounds:
        return (f"{said}: torch's Schedule{schedule.name} needs a multiple of its rounds max(1, {n} // "
                f"pipeline_parallel_degree={pp}) = {rounds}")
    return None


def few_microbatches(schedule: Schedule, pp: int, vpp: int, n: int) -> Optional[str]:
    """A note when Interleaved1F1B runs fewer micro-batches per step than ranks (torch accepts it, Megatron would
    not): each micro-batch then crosses all v*p stages with the ranks idle between its chunks, a bubble of
    (v*p - 1 - n(v - 1))/v micro-batch times per rank (checked on the order torch builds:
    _schedule_visualizer.get_schedule_ops, simulated with F = 1, B = 2), more than the (p - 1)/v of n >= p;
    costmodels.pipeline.bubble_s prices it so."""
    if schedule.name != "Interleaved1F1B" or vpp < 2 or n >= pp:
        return None
    full = (pp - 1) / vpp
    run = full + few_microbatches_excess(pp, vpp, n)  # (v p - 1 - n (v - 1)) / v
    return (f"parallelism.pipeline_parallel_schedule='Interleaved1F1B' with {n} micro-batches per step on "
            f"pipeline_parallel_degree={pp} (fewer than the ranks; torch runs it, Megatron's interleaving would not): "
            f"torch's order idles each rank between a micro-batch's {vpp} chunks, a bubble of {run:g} micro-batch "
            f"times per rank (priced so), against {full:g} with at least {pp} micro-batches")


def priced(schedule: Schedule, vpp: int) -> tuple[str, int]:
    """(Layout.schedule, Layout.vpp) parplan prices: GPipe runs no virtual stages."""
    return schedule.priced, 1 if schedule.priced == "gpipe" else vpp


def warning(schedule: Schedule, value: str) -> Optional[str]:
    """The note for a schedule priced as another (None when modelled as is)."""
    if not schedule.why:
        return None
    return f"parallelism.pipeline_parallel_schedule={value!r}: {schedule.why}"


def compile_note(value, model_compiled: bool) -> Optional[str]:
    """A note when torch refuses the schedule with compiled stage modules (torchtitan compiles each block when
    compile.enable with "model")."""
    found = BY_NAME.get(value.lower()) if isinstance(value, str) else None
    if not model_compiled or found is None or found.name not in COMPILE_REFUSED:
        return None
    return (f"parallelism.pipeline_parallel_schedule={value!r} with torch.compile of the model: torch's "
            f"{found.name} refuses compiled stage modules (schedules.py _check_torch_compile_compatibility, torch "
            "2.13) and the run stops at start; priced as asked")
