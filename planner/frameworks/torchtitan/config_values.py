"""Pure readers of torchtitan 0.2.x TOML settings (no spec loading): the [parallelism] degrees, the
stage split, [training] numbers; for planner.files.native, the torchtitan exporter and the search.

Source: benchmarks/data/launch_formats.md, section "torchtitan" (the degree keys, dp_shard -1 = the rest,
the stage split of torchtitan's generate_llm_fqn_per_model_part, or torchtitan 0.1.0's explicit
pipeline_parallel_split_points, where the older layouts' reader, config_old, puts its splits). Every problem is a UserError naming the
key and its value: types are strict, degrees at least 1 and of sane size (planner.files.config_values).
Moved here from planner.files.read_configs (which re-exports it for one release).
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files.config_values import MAX_COUNT, short, whole
from planner.frameworks.torchtitan import schedules

# the schedules parplan models as they run (every torch schedule is read: planner.frameworks.torchtitan.schedules)
TT_SCHEDULES_SINGLE = {"1F1B": "1f1b", "GPipe": "gpipe"}
TT_SCHEDULES_LOOPED = {"Interleaved1F1B": "interleaved"}
TT_RESHARD = ("default", "always", "never")


def section(cfg: dict, name: str, path: Path) -> dict:
    value = cfg.get(name, {})
    if not isinstance(value, dict):
        raise UserError(f"{path}: [{name}] must be a table")
    return value


def tt_int(section: dict, key: str, path: Path, default: int, name: str = "parallelism", minimum: int = 1,
           maximum: int = MAX_COUNT) -> int:
    value = section.get(key, default)
    if not whole(value) or not minimum <= value <= maximum:
        raise UserError(f"{path}: {name}.{key}={short(value)} must be a whole number from {minimum} to {maximum}")
    return value


def tt_bool(section: dict, key: str, path: Path, name: str = "parallelism") -> bool:
    """A TOML boolean (false when absent); the string "true" is refused."""
    value = section.get(key, False)
    if not isinstance(value, bool):
        raise UserError(f"{path}: {name}.{key}={short(value)} must be true or false")
    return value


def _sequence_parallel(par: dict, path: Path) -> bool:
    """parallelism.enable_sequence_parallel: torchtitan 0.3.0 (config/configs.py, default true; a launch line's
    --parallelism.no-enable_sequence_parallel turns it off); 0.1-0.2 always shard activations over TP."""
    if "enable_sequence_parallel" not in par:
        return True
    return tt_bool(par, "enable_sequence_parallel", path)


def tt_shard(par: dict, path: Path) -> int:
    """data_parallel_shard_degree: -1 (the GPUs left over) or a whole number >= 1; 0 is refused."""
    value = par.get("data_parallel_shard_degree", -1)
    if value != -1 and (not whole(value) or not 1 <= value <= MAX_COUNT):
        raise UserError(f"{path}: parallelism.data_parallel_shard_degree={short(value)} must be -1 (the rest) "
                        f"or a whole number from 1 to {MAX_COUNT}")
    return value


def _tt_choice(par: dict, key: str, path: Path, default: str, known) -> str:
    value = par.get(key, default)
    if not isinstance(value, str) or value not in known:
        raise UserError(f"{path}: parallelism.{key}={short(value)}: parplan models {', '.join(known)}")
    return value


def tt_layout(par: dict, path: Path, world: int, layers: int,
              notes: Optional[list] = None, training: Optional[dict] = None) -> tuple[dict, int]:
    """(layout fields, dp) of [parallelism]; `notes` receives the warning of a pipeline schedule priced as
    another (planner.frameworks.torchtitan.schedules). With [training] given, a pipeline's micro-batches per
    step are held to torchtitan's and torch's rules (schedules.microbatch_refusal)."""
    degrees = {k: tt_int(par, f"{k}_degree", path, 1) for k in
               ("tensor_parallel", "context_parallel", "pipeline_parallel", "expert_parallel",
                "data_parallel_replicate")}
    tp, cp, pp, ep, rep = (degrees[k] for k in ("tensor_parallel", "context_parallel", "pipeline_parallel",
                                                 "expert_parallel", "data_parallel_replicate"))
    shard = tt_shard(par, path)
    if shard == -1:
        shard = world // (rep * cp * tp * pp)
    if shard < 1 or rep * shard * cp * tp * pp != world:
        raise UserError(f"{path}: data_parallel_replicate*shard*cp*tp*pp = {rep}*{shard}*{cp}*{tp}*{pp} must equal "
                        f"the {world} GPUs")
    reshard = _tt_choice(par, "fsdp_reshard_after_forward", path, "default", TT_RESHARD)
    zero = tt_zero(reshard, shard, cp)
    sp = _sequence_parallel(par, path)  # read (and checked) whatever tp is
    lay = {"tp": tp, "sp": tp > 1 and sp, "cp": cp, "pp": pp, "ep": ep, "zero": zero}
    if rep > 1 and zero:  # HSDP: FSDP over dp_shard*cp, replicated rep times
        lay["shard_group"] = shard * cp
    if pp > 1:
        lay.update(_tt_stages(par, path, layers, pp, [] if notes is None else notes, training))
    return lay, rep * shard


def tt_expert_tp(par: dict, path: Path, tp: int, ep: int) -> int:
    """Layout.etp of a torchtitan 0.1-0.2.x MoE model (models/llama4 and deepseek_v3 infra/parallelize.py
    apply_moe_ep_tp, 0.2.2): with ep = 1 the routed experts are tensor-parallel over the tp mesh (TensorParallel():
    etp = tp); with ep > 1, parallelism.expert_tensor_parallel_degree (config/job_config.py, default 1; 1 or tp:
    distributed/parallel_dims.py asserts "Currently we only support ETP=TP or ETP=1")."""
    if ep == 1:
        return tp
    etp = tt_int(par, "expert_tensor_parallel_degree", path, 1)
    if etp not in (1, tp):
        raise UserError(f"{path}: parallelism.expert_tensor_parallel_degree={etp}: torchtitan runs 1 or the "
                        f"tensor_parallel_degree, {tp} (distributed/parallel_dims.py)")
    return etp


def tt_zero(reshard: str, shard: int, cp: int) -> int:
    """Layout.zero of torchtitan's data parallelism. FSDP2 runs when dp_shard * cp > 1 (ParallelDims.fsdp_enabled =
    dp_shard_enabled or cp_enabled: torchtitan 0.1.0-0.2.2 distributed/parallel_dims.py, models/llama3/infra/
    parallelize.py parallelize_llama; 0.3.0 shards over its "fsdp" mesh of dp_shard * cp ranks), so context
    parallelism alone shards the model states over the cp ranks; with dp_shard * cp = 1 torchtitan runs DDP (0.1-0.2
    apply_ddp) or one rank (0.3: fully_shard over one rank), sharding nothing whatever fsdp_reshard_after_forward
    says. "default" reshards after forward (3) except under pipelining (apply_fsdp: not pp_enabled), which zero 3
    with pp > 1 already prices (costmodels.memory.memory_zero: weights kept gathered across the micro-batches)."""
    if shard * cp == 1:
        return 0
    return {"never": 2, "always": 3}.get(reshard, 3)


def _tt_stages(par: dict, path: Path, layers: int, pp: int, notes: list, training: Optional[dict] = None) -> dict:
    """vpp, layers per rank and the schedule priced (planner.frameworks.torchtitan.schedules: a V places stages
    r and 2p-1-r on rank r; a schedule parplan does not model is priced as the closest one, said in `notes`)."""
    name = par.get("pipeline_parallel_schedule", "1F1B")
    sched = schedules.lookup(name, path, par.get("pipeline_parallel_schedule_csv"))
    points = par.get("pipeline_parallel_split_points")
    counts = split_counts(points, layers, path) if points else _titan_counts(par, path, layers, pp, sched.multi)
    stages = len(counts)
    if stages % pp:
        raise UserError(f"{path}: {stages} virtual stages do not divide over pipeline_parallel_degree={pp}")
    per_rank = schedules.rank_layers(counts, pp, sched, path)
    schedule, vpp = schedules.priced(sched, stages // pp)
    notes.extend(n for n in (schedules.warning(sched, name), _microbatches(par, training, path, sched, pp, stages))
                 if n)
    return {"vpp": vpp, "stage_layers": per_rank, "schedule": schedule}


def _microbatches(par: dict, training: Optional[dict], path: Path, sched, pp: int, stages: int) -> Optional[str]:
    """A UserError where torchtitan or torch refuses the micro-batches per step; the note of a schedule whose
    bubble parplan prices low with so few (schedules.few_microbatches); None without [training]."""
    if training is None:
        return None
    local = tt_int(training, "local_batch_size", path, 8, "training")
    size = tt_int(par, "pipeline_parallel_microbatch_size", path, 1)
    why = schedules.microbatch_refusal(sched, pp, stages, local, size)
    if why:
        raise UserError(f"{path}: parallelism.pipeline_parallel_schedule={sched.name!r}: {why}")
    return schedules.few_microbatches(sched, pp, stages // pp, local // size)


def _titan_counts(par: dict, path: Path, layers: int, pp: int, multi: bool) -> list[int]:
    """Layers per virtual stage from 0.2's layers_per_stage and first/last_stage_less_layers."""
    first = tt_int(par, "pipeline_parallel_first_stage_less_layers", path, 1, minimum=0, maximum=layers)
    last = tt_int(par, "pipeline_parallel_last_stage_less_layers", path, 1, minimum=0, maximum=layers)
    per = par.get("pipeline_parallel_layers_per_stage")
    if per is None:
        stages = pp * (2 if multi else 1)
    else:
        per = tt_int(par, "pipeline_parallel_layers_per_stage", path, 1, maximum=layers)
        stages = math.ceil((layers + first + last) / per)
    return titan_split(stages, layers, first, last)


def split_counts(points, layers: int, path: Path) -> list[int]:
    """Layers per virtual stage of explicit split points, each the first layer of the next stage, e.g.
    ["layers.20", "layers.40"]: torchtitan 0.1.0 parallelism.pipeline_parallel_split_points and the early-2025
    experimental.pipeline_parallel_split_points (custom-torchtitan 0.0.2.1 models/llama/pipeline_llama.py keeps
    layers from one split's name, inclusive, to the next, exclusive)."""
    key = "parallelism.pipeline_parallel_split_points"
    if not isinstance(points, list) or not all(isinstance(p, str) and re.fullmatch(r"layers\.\d+", p) for p in points):
        raise UserError(f"{path}: {key}={short(points)} must be a list of layer names such as \"layers.20\"")
    starts = [int(p.split(".")[1]) for p in points]
    if starts != sorted(set(starts)) or not 0 < starts[0] <= starts[-1] < layers:
        raise UserError(f"{path}: {key}={short(points)} must name rising layers from 1 to {layers - 1}")
    bounds = [0, *starts, layers]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def titan_split(stages: int, layers: int, first: int, last: int) -> list[int]:
    """Transformer layers per virtual stage as torchtitan's generate_llm_fqn_per_model_part assigns them."""
    effective = layers + first + last
    per, extra = divmod(effective, stages)
    counts, left = [], layers
    for i in range(stages):
        n = per + (1 if i < extra else 0) - (first if i == 0 else 0) - (last if i == stages - 1 else 0)
        n = max(0, min(n, left))
        counts.append(n)
        left -= n
    return counts


def tt_world(par: dict, path: Path) -> Optional[int]:
    keys = ("data_parallel_replicate", "context_parallel", "tensor_parallel", "pipeline_parallel", "expert_parallel")
    degrees = [tt_int(par, f"{k}_degree", path, 1) for k in keys]
    shard = tt_shard(par, path)
    return None if shard == -1 else math.prod(degrees[:4]) * shard


@functools.lru_cache(maxsize=None)
def stage_options(layers: int, pp: int, v: int) -> dict[tuple[int, int, int], tuple[int, ...]]:
    """Every (layers_per_stage, first_less, last_less) torchtitan accepts here -> the layers per rank
    it builds (no rank's largest chunk above ceil(n / vpp)): the splits a torchtitan plan can run."""
    count, out = pp * v, {}
    for first in range(layers // count + 1):
        for last in range(layers // count + 1):
            effective = layers + first + last
            per = math.ceil(effective / count)
            if max(first, last) > effective // count or math.ceil(effective / per) != count:
                continue
            split = titan_split(count, layers, first, last)
            chunks = [[split[k * pp + r] for k in range(v)] for r in range(pp)]
            if all(min(c) >= 1 and max(c) == math.ceil(sum(c) / v) for c in chunks):
                out.setdefault((per, first, last), tuple(sum(c) for c in chunks))
    return out
