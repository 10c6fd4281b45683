"""Pipeline stages of torchtitan's early-2025 layout ([experimental] pipeline_parallel_*), as that layout built
them, written as 0.1.0's parallelism.pipeline_parallel_split_points and 0.2's pipeline_parallel_microbatch_size
(config_values reads both); for config_old.

Source: custom-torchtitan 0.0.2.1 (upstream torchtitan, early 2025; tag "2025" in known_keys.py):
distributed/pipeline.py generate_split_points (1 stage per rank for a PipelineScheduleSingle such as 1F1B or
GPipe, 2 for a PipelineScheduleMulti such as Interleaved1F1B; the first stage takes num_layers // stages
layers, each middle stage one more while num_layers % stages lasts, the last stage the rest; "Total stages
cannot be greater than the number of layers") and build_pipeline_schedule (experimental.
pipeline_parallel_microbatches microbatches, default the number of stages; "Batch size ... must be divisible
by number of microbatches"); config_manager.py string_list (split points may be one comma-separated string).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files.config_values import short, whole
from planner.frameworks.torchtitan import schedules
from planner.frameworks.torchtitan.config_keys import MISSING, get, put

OWN = ("experimental.pipeline_parallel_microbatches",)  # read here only: config_old sets it aside first
SPLIT = "parallelism.pipeline_parallel_split_points"
COUNT = "experimental.pipeline_parallel_microbatches"


def default_points(layers: int, pp: int, schedule, path: Path) -> Optional[list[str]]:
    """2025's generate_split_points (1 stage per rank for a PipelineScheduleSingle, 2 for a Multi: schedules.py);
    None for a name torch does not define (config_values says so)."""
    per_rank = schedules.stages_per_rank(schedule)
    if per_rank is None:
        return None
    total = pp * per_rank
    if total > layers:
        raise UserError(f"{path}: experimental.pipeline_parallel_degree={pp} with {schedule} makes {total} stages, "
                        f"more than the model's {layers} layers")
    base, extra = divmod(layers, total)
    sizes = [base] + [base + 1 if i < extra else base for i in range(total - 2)]
    return [f"layers.{sum(sizes[:i + 1])}" for i in range(total - 1)]


def _points(cfg: dict, path: Path, layers: int, pp: int) -> Optional[list[str]]:
    """The split points given (a list, or 2025's comma-separated string), else 2025's default ones."""
    given = get(cfg, SPLIT, [])
    if isinstance(given, str):
        given = [p.strip() for p in given.split(",") if p.strip()]
    if given:
        return given
    return default_points(layers, pp, get(cfg, "parallelism.pipeline_parallel_schedule", "1F1B"), path)


def _microbatch_size(cfg: dict, path: Path, stages: int, count, raw: dict) -> Optional[int]:
    """training.batch_size over the microbatches (default one per stage); None when the batch is not a number."""
    batch = get(cfg, "training.local_batch_size", 8)
    n = stages if count is MISSING or count is None else count
    if not whole(n) or n < 1:
        raise UserError(f"{path}: {COUNT}={short(count)} must be a whole number of at least 1")
    if not whole(batch):
        return None
    if batch % n:
        raise UserError(f"{path}: training.batch_size={batch} does not divide into {n} microbatches ({COUNT}"
                        f"{'' if count is not MISSING else ', by default one per stage'}): torchtitan refuses it")
    size = batch // n
    given = get(raw, "parallelism.pipeline_parallel_microbatch_size")
    if given is not MISSING and given != size:
        raise UserError(f"{path}: {COUNT} gives microbatches of {size}, parallelism.pipeline_parallel_microbatch_size "
                        f"says {short(given)}; each torchtitan release reads only one of them: keep one")
    return size


def stages(cfg: dict, path: Path, layers: int, old: dict, raw: dict) -> list[str]:
    """Writes the 2025 stage split and microbatch size into `cfg` when `raw` pipelines with
    experimental.pipeline_parallel_degree; returns what it read, for config_old's note."""
    pp = get(cfg, "parallelism.pipeline_parallel_degree", 1)
    if get(raw, "experimental.pipeline_parallel_degree") is MISSING or not whole(pp) or pp < 2:
        return []
    points = _points(cfg, path, layers, pp)
    if points is None:
        return []
    put(cfg, SPLIT, points)
    count = old.get(COUNT, MISSING)
    size = _microbatch_size(cfg, path, len(points) + 1, count, raw)
    if size is not None:
        put(cfg, "parallelism.pipeline_parallel_microbatch_size", size)
    given = "one per stage" if count is MISSING or count is None else f"{COUNT} {count}"
    return [f"the 2025 stage split ({len(points) + 1} stages) as {SPLIT}",
            f"microbatches ({given}) as parallelism.pipeline_parallel_microbatch_size {size}"]
