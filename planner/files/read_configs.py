"""Pure readers of DeepSpeed JSON and torchtitan 0.2.x TOML settings (no spec loading), for planner.files.native.

Source: benchmarks/data/launch_formats.md, section "DeepSpeed" (batch rule train_batch_size == micro * GAS
* DP, "auto" is not DeepSpeed's, ZeRO < 2 with pipeline stages, offload devices) and section "torchtitan"
(the degree keys, dp_shard -1 = the rest, the stage split of torchtitan's generate_llm_fqn_per_model_part).
Every problem is a UserError naming the key and its value: types are strict (a string "true" is no
boolean, a list no number), degrees and batch sizes at least 1 and of sane size.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Optional

from planner.errors import UserError

TT_SCHEDULES_SINGLE = {"1F1B": "1f1b", "GPipe": "gpipe"}
TT_SCHEDULES_LOOPED = {"Interleaved1F1B": "interleaved"}
TT_RESHARD = ("default", "always", "never")
MAX_COUNT = 10**8  # degrees, batch sizes and sequence lengths beyond this are no real run


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ds_int(cfg: dict, key: str, path: Path, section: str = "", minimum: int = 0) -> Optional[int]:
    value = cfg.get(key)
    name = f"{section}.{key}" if section else key
    if value is None:
        return None
    if value == "auto":
        raise UserError(f"{path}: {name}=\"auto\": the Hugging Face Trainer fills no such key (planner/files/"
                        "ds_auto.py lists those it fills); give a number")
    if not _whole(value) or not minimum <= value <= MAX_COUNT:
        raise UserError(f"{path}: {name}={_short(value)} must be a whole number from {minimum} to {MAX_COUNT}")
    return value


def _ds_section(cfg: dict, key: str, path: Path, section: str = "") -> dict:
    """cfg[key] as a mapping ({} when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        name = f"{section}.{key}" if section else key
        raise UserError(f"{path}: {name}={_short(value)} must be a section (mapping)")
    return value


def _ds_bool(cfg: dict, key: str, path: Path, section: str = "") -> Optional[bool]:
    """cfg[key] as a JSON boolean (None when absent); "true" or 1 are refused."""
    value = cfg.get(key)
    if value is not None and not isinstance(value, bool):
        name = f"{section}.{key}" if section else key
        raise UserError(f"{path}: {name}={_short(value)} must be true or false")
    return value


def ds_pipeline(cfg: dict, path: Path) -> int:
    pipe = _ds_section(cfg, "pipeline", path)
    return _ds_int(pipe, "stages", path, "pipeline", minimum=1) or 1


def ds_zero(cfg: dict, path: Path, pp: int) -> int:
    zero = _ds_section(cfg, "zero_optimization", path)
    stage = _ds_int(zero, "stage", path, "zero_optimization") or 0
    if stage > 3:
        raise UserError(f"{path}: zero_optimization.stage={stage} must be 0, 1, 2 or 3")
    if stage >= 2 and pp > 1:
        raise UserError(f"{path}: zero_optimization.stage={stage} with pipeline.stages={pp}: DeepSpeed's pipeline "
                        "engine needs stage 0 or 1")
    return stage


OFFLOAD_DEVICES = ("none", "cpu", "nvme")


def _offload_device(zero: dict, key: str, path: Path) -> str:
    """zero_optimization.<key>.device: none, cpu or nvme ("none" when the section or the key is absent)."""
    device = _ds_section(zero, key, path, "zero_optimization").get("device", "none")
    if device is None:
        return "none"
    if not isinstance(device, str) or device.lower() not in OFFLOAD_DEVICES:
        raise UserError(f"{path}: zero_optimization.{key}.device={_short(device)} must be none, cpu or nvme")
    return device.lower()


def ds_offload(cfg: dict, path: Path, stage: int) -> dict:
    """The TrainSpec offload fields of zero_optimization.offload_optimizer / offload_param (DeepSpeed
    runtime/zero/offload_config.py: device none|cpu|nvme; offload_optimizer.ratio, the share of the
    optimizer states stepped on the CPU, ZeRO-3 only, default 1). Optimizer offload needs ZeRO >= 1
    and parameter offload ZeRO-3 (DeepSpeed asserts both: runtime/engine.py, zero/stage3.py)."""
    zero = _ds_section(cfg, "zero_optimization", path)
    opt, par = _offload_device(zero, "offload_optimizer", path), _offload_device(zero, "offload_param", path)
    if opt != "none" and stage < 1:
        raise UserError(f"{path}: zero_optimization.offload_optimizer.device={opt!r} needs zero_optimization.stage "
                        f">= 1 (got {stage})")
    if par != "none" and stage != 3:
        raise UserError(f"{path}: zero_optimization.offload_param.device={par!r} needs zero_optimization.stage 3 "
                        f"(got {stage})")
    out = {"offload_optimizer": opt, "offload_params": par}
    ratio = _ds_section(zero, "offload_optimizer", path, "zero_optimization").get("ratio")
    if ratio is not None and opt != "none":
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise UserError(f"{path}: zero_optimization.offload_optimizer.ratio={_short(ratio)} must be from 0 to 1")
        out["offload_optimizer_fraction"] = float(ratio)
    return out




def ds_batch(cfg: dict, path: Path, dp: int) -> tuple[int, int, int]:
    """(micro, GAS, train_batch_size) from any two of them; the third must agree exactly."""
    micro = _ds_int(cfg, "train_micro_batch_size_per_gpu", path, minimum=1)
    gas = _ds_int(cfg, "gradient_accumulation_steps", path, minimum=1)
    total = _ds_int(cfg, "train_batch_size", path, minimum=1)
    if micro is None and gas is None and total is None:
        raise UserError(f"{path}: give at least train_batch_size or train_micro_batch_size_per_gpu")
    if total is None:
        micro, gas = micro or 1, gas or 1
        total = micro * gas * dp
    elif micro is None:
        gas = gas or 1
        micro, rest = divmod(total, gas * dp)
        if rest or micro < 1:
            raise UserError(f"{path}: train_batch_size={total} is not divisible by gradient_accumulation_steps*DP="
                            f"{gas}*{dp}")
    elif gas is None:
        gas, rest = divmod(total, micro * dp)
        if rest or gas < 1:
            raise UserError(f"{path}: train_batch_size={total} is not divisible by train_micro_batch_size_per_gpu*DP="
                            f"{micro}*{dp}")
    if total != micro * gas * dp:
        raise UserError(f"{path}: train_batch_size={total} but train_micro_batch_size_per_gpu * "
                        f"gradient_accumulation_steps * DP = {micro}*{gas}*{dp} = {micro * gas * dp}")
    return micro, gas, total


def ds_precision(cfg: dict, path: Path) -> str:
    """bf16 or fp16 when its section is enabled; fp32 when neither is (DeepSpeed's default: its engine
    trains in the model's dtype, fp32, without a bf16/fp16 section). "bfloat16" is DeepSpeed's old
    name of "bf16" (runtime/constants.py BFLOAT16_OLD)."""
    bf16 = cfg.get("bf16", cfg.get("bfloat16"))
    on = [k for k, sec in (("bf16", bf16), ("fp16", cfg.get("fp16")))
          if _ds_bool(_ds_section({k: sec}, k, path), "enabled", path, k)]
    if len(on) > 1:
        raise UserError(f"{path}: bf16.enabled and fp16.enabled are both true; DeepSpeed allows one")
    return on[0] if on else "fp32"


def ds_optimizer(cfg: dict, path: Path) -> str:
    name = _ds_section(cfg, "optimizer", path).get("type", "adam")
    if not isinstance(name, str):
        raise UserError(f"{path}: optimizer.type={_short(name)} must be an optimizer name")
    name = name.lower()
    if "adam" in name:
        return "adam"
    if name == "sgd":
        return "sgd"
    raise UserError(f"{path}: optimizer.type={name!r}: parplan models Adam-family optimizers and SGD")


def ds_overlap(cfg: dict, path: Path) -> Optional[bool]:
    """zero_optimization.overlap_comm (None when absent)."""
    return _ds_bool(_ds_section(cfg, "zero_optimization", path), "overlap_comm", path, "zero_optimization")


def ds_recompute(cfg: dict, path: Path) -> str:
    """full when an activation_checkpointing section is given (DeepSpeed checkpoints whole layers), else none."""
    if cfg.get("activation_checkpointing") is None:
        return "none"
    _ds_section(cfg, "activation_checkpointing", path)  # a mapping, or refused
    return "full"


def section(cfg: dict, name: str, path: Path) -> dict:
    value = cfg.get(name, {})
    if not isinstance(value, dict):
        raise UserError(f"{path}: [{name}] must be a table")
    return value


def tt_int(section: dict, key: str, path: Path, default: int, name: str = "parallelism", minimum: int = 1,
           maximum: int = MAX_COUNT) -> int:
    value = section.get(key, default)
    if not _whole(value) or not minimum <= value <= maximum:
        raise UserError(f"{path}: {name}.{key}={_short(value)} must be a whole number from {minimum} to {maximum}")
    return value


def tt_bool(section: dict, key: str, path: Path, name: str = "parallelism") -> bool:
    """A TOML boolean (false when absent); the string "true" is refused."""
    value = section.get(key, False)
    if not isinstance(value, bool):
        raise UserError(f"{path}: {name}.{key}={_short(value)} must be true or false")
    return value


def tt_shard(par: dict, path: Path) -> int:
    """data_parallel_shard_degree: -1 (the GPUs left over) or a whole number >= 1; 0 is refused."""
    value = par.get("data_parallel_shard_degree", -1)
    if value != -1 and (not _whole(value) or not 1 <= value <= MAX_COUNT):
        raise UserError(f"{path}: parallelism.data_parallel_shard_degree={_short(value)} must be -1 (the rest) "
                        f"or a whole number from 1 to {MAX_COUNT}")
    return value


def _tt_choice(par: dict, key: str, path: Path, default: str, known) -> str:
    value = par.get(key, default)
    if not isinstance(value, str) or value not in known:
        raise UserError(f"{path}: parallelism.{key}={_short(value)}: parplan models {', '.join(known)}")
    return value


def tt_layout(par: dict, path: Path, world: int, layers: int) -> tuple[dict, int]:
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
    zero = {"never": 2, "always": 3}.get(reshard, 3 if shard > 1 else 0)
    lay = {"tp": tp, "sp": tp > 1, "cp": cp, "pp": pp, "ep": ep, "zero": zero}
    if rep > 1 and shard > 1:  # HSDP: FSDP over dp_shard*cp, replicated rep times
        lay["shard_group"] = shard * cp
    if pp > 1:
        lay.update(_tt_stages(par, path, layers, pp))
    return lay, rep * shard


def _tt_stages(par: dict, path: Path, layers: int, pp: int) -> dict:
    name = _tt_choice(par, "pipeline_parallel_schedule", path, "1F1B", [*TT_SCHEDULES_SINGLE, *TT_SCHEDULES_LOOPED])
    first = tt_int(par, "pipeline_parallel_first_stage_less_layers", path, 1, minimum=0, maximum=layers)
    last = tt_int(par, "pipeline_parallel_last_stage_less_layers", path, 1, minimum=0, maximum=layers)
    per = par.get("pipeline_parallel_layers_per_stage")
    if per is None:
        stages = pp * (1 if name in TT_SCHEDULES_SINGLE else 2)
    else:
        per = tt_int(par, "pipeline_parallel_layers_per_stage", path, 1, maximum=layers)
        stages = math.ceil((layers + first + last) / per)
    if stages % pp:
        raise UserError(f"{path}: {stages} virtual stages do not divide over pipeline_parallel_degree={pp}")
    counts = titan_split(stages, layers, first, last)
    vpp = stages // pp
    per_rank = [sum(counts[v * pp + r] for v in range(vpp)) for r in range(pp)]
    schedule = TT_SCHEDULES_SINGLE.get(name) or TT_SCHEDULES_LOOPED[name]
    return {"vpp": vpp, "stage_layers": per_rank, "schedule": schedule}


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


def ds_sequence_parallel(cfg: dict, path: Path) -> int:
    """Ulysses degree: `sequence_parallel_size` (1 when absent)."""
    value = _ds_int(cfg, "sequence_parallel_size", path)
    if value == 0:
        raise UserError(f"{path}: sequence_parallel_size=0 must be at least 1")
    return value or 1


def ds_world(cfg: dict, path: Path, pp: int) -> Optional[int]:
    keys = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    values = [_ds_int(cfg, k, path, minimum=1) for k in keys]
    if None in values or not values[1] or not values[2] or values[0] % (values[1] * values[2]):
        return None
    return values[0] // (values[1] * values[2]) * pp


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


# DeepSpeed keys that change memory or time but that parplan does not price (named, never silent):
# ZeRO++ (quantized weights/gradients, hierarchical partitioning), activation partitioning and CPU
# checkpointing, the gradient accumulation and communication dtypes, ZeRO-3's live-parameter and
# prefetch limits (parplan's ZeRO-3 keeps the stack's units in flight).
DS_UNPRICED = ("zero_optimization.zero_quantized_weights", "zero_optimization.zero_quantized_gradients",
               "zero_optimization.zero_hpz_partition_size", "zero_optimization.stage3_max_live_parameters",
               "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.sub_group_size",
               "activation_checkpointing.partition_activations", "activation_checkpointing.cpu_checkpointing",
               "data_types.grad_accum_dtype", "communication_data_type")


def ds_unpriced(cfg: dict) -> list[str]:
    """One note naming the DS_UNPRICED keys the config sets (to anything but false/null), or none."""
    found = []
    for dotted in DS_UNPRICED:
        node = cfg
        for name in dotted.split("."):
            node = node.get(name) if isinstance(node, dict) else None
        if node not in (None, False):
            found.append(f"{dotted}={_short(node)}")
    return [f"read but not priced by parplan: {', '.join(found)}"] if found else []
