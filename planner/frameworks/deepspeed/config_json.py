"""Pure readers of DeepSpeed JSON settings (no spec loading), for planner.files.native.

Source: benchmarks/data/launch_formats.md, section "DeepSpeed" (batch rule train_batch_size == micro * GAS
* DP, "auto" is not DeepSpeed's, ZeRO < 2 with pipeline stages, offload devices). Every problem is a
UserError naming the key and its value: types are strict (a string "true" is no boolean, a list no
number), degrees and batch sizes at least 1 and of sane size (planner.files.config_values).
Moved here from planner.files.read_configs (which re-exports it for one release).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files.config_values import MAX_COUNT, short, whole

def _ds_int(cfg: dict, key: str, path: Path, section: str = "", minimum: int = 0) -> Optional[int]:
    value = cfg.get(key)
    name = f"{section}.{key}" if section else key
    if value is None:
        return None
    if value == "auto":
        raise UserError(f"{path}: {name}=\"auto\": the Hugging Face Trainer fills no such key (planner/frameworks/"
                        "deepspeed/auto.py lists those it fills); give a number")
    if not whole(value) or not minimum <= value <= MAX_COUNT:
        raise UserError(f"{path}: {name}={short(value)} must be a whole number from {minimum} to {MAX_COUNT}")
    return value


def _ds_section(cfg: dict, key: str, path: Path, section: str = "") -> dict:
    """cfg[key] as a mapping ({} when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        name = f"{section}.{key}" if section else key
        raise UserError(f"{path}: {name}={short(value)} must be a section (mapping)")
    return value


def _ds_bool(cfg: dict, key: str, path: Path, section: str = "") -> Optional[bool]:
    """cfg[key] as a JSON boolean (None when absent, or "auto", which DeepSpeed drops before its pydantic models read
    the section: runtime/config_utils.py DeepSpeedConfigModel.__init__); "true" or 1 are refused."""
    value = cfg.get(key)
    if value == "auto":
        return None
    if value is not None and not isinstance(value, bool):
        name = f"{section}.{key}" if section else key
        raise UserError(f"{path}: {name}={short(value)} must be true or false")
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
        raise UserError(f"{path}: zero_optimization.{key}.device={short(device)} must be none, cpu or nvme")
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
            raise UserError(f"{path}: zero_optimization.offload_optimizer.ratio={short(ratio)} must be from 0 to 1")
        if ratio < 1 and stage != 3:  # runtime/zero/config.py DeepSpeedZeroConfig.offload_ratio_check asserts it
            raise UserError(f"{path}: zero_optimization.offload_optimizer.ratio={short(ratio)} (a partial offload) "
                            f"needs zero_optimization.stage 3 (got {stage}): DeepSpeed refuses it (runtime/zero/"
                            "config.py offload_ratio_check); remove the ratio to offload every optimizer state")
        out["offload_optimizer_fraction"] = float(ratio)
    return out


def ds_sub_group(cfg: dict, path: Path, largest_partition_elements: float = 1.0) -> dict:
    """TrainSpec.zero_sub_group_mparams of zero_optimization.sub_group_size (elements per ZeRO-3 optimizer
    sub-group; DeepSpeed's default 1e9 when absent: runtime/zero/config.py, which allows 0). A sub-group closes
    once it holds sub_group_size elements (stage3.py _create_fp16_sub_groups), so 0 (axolotl's zero3_bf16.json)
    makes each parameter its own sub-group: priced as `largest_partition_elements`, the largest parameter's ZeRO-3
    partition on one GPU."""
    value = _ds_section(cfg, "zero_optimization", path).get("sub_group_size")
    if value is None:
        return {}
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e15:
        raise UserError(f"{path}: zero_optimization.sub_group_size={short(value)} must be a number of elements "
                        "from 0 to 1e15")
    return {"zero_sub_group_mparams": max(float(value), largest_partition_elements, 1.0) / 1e6}


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
    return on[0] if on else autocast_precision(cfg, path) or "fp32"


AUTOCAST_DTYPES = {"bfloat16": "bf16", "torch.bfloat16": "bf16", "bf16": "bf16", "float16": "fp16",
                   "torch.float16": "fp16", "fp16": "fp16"}


def autocast_precision(cfg: dict, path: Path) -> str | None:
    """bf16 or fp16 for an enabled torch_autocast section (DeepSpeed 0.16+: torch.autocast over fp32 weights, dtype
    default bfloat16), else None. Priced as that mixed precision: its 16-bit activations and GEMMs, and about the
    same bytes of state per parameter (fp32 weights and gradients with Adam's two moments, 16, against the 16-bit
    weights, gradients and fp32 master of bf16 training, 16 to 18)."""
    section = _ds_section(cfg, "torch_autocast", path)
    if not _ds_bool(section, "enabled", path, "torch_autocast"):
        return None
    dtype = section.get("dtype", "bfloat16")
    if dtype not in AUTOCAST_DTYPES:
        raise UserError(f"{path}: torch_autocast.dtype={short(dtype)}: expected bfloat16 or float16")
    return AUTOCAST_DTYPES[dtype]


TWO_MOMENTS = ("adam", "lamb")  # Adam, AdamW, OneBitAdam, ZeroOneAdam, MuAdam(W); Lamb, OneBitLamb
ONE_MOMENT = ("sgd", "lion", "adagrad", "muon")  # MuSGD and Muon (momentum), Lion (exp_avg), Adagrad (sum of squares)


def ds_optimizer(cfg: dict, path: Path) -> str:
    """The states DeepSpeed's optimizer.type keeps (deepspeed 0.19.8 runtime/config.py DEEPSPEED_OPTIMIZERS): two
    moments ("adam") for the Adam and LAMB families (FusedLamb keeps exp_avg and exp_avg_sq; its per-tensor trust
    ratio holds nothing per parameter), one ("sgd") for SGD, Lion, Adagrad and Muon (its momentum; the Adam it runs
    for the parameters Muon does not take is priced as that one moment too, a lower bound for them)."""
    name = _ds_section(cfg, "optimizer", path).get("type", "adam")
    if not isinstance(name, str):
        raise UserError(f"{path}: optimizer.type={short(name)} must be an optimizer name")
    name = name.lower()
    if any(k in name for k in TWO_MOMENTS):
        return "adam"
    if any(k in name for k in ONE_MOMENT):
        return "sgd"
    raise UserError(f"{path}: optimizer.type={name!r}: parplan models the Adam and LAMB families (two moments) "
                    "and SGD, Lion and Adagrad (one)")


def ds_overlap(cfg: dict, path: Path, zero: int, pp: int) -> bool:
    """Whether DeepSpeed 0.19.8 overlaps the gradient reduction with backward: zero_optimization.overlap_comm, which
    when absent defaults to stage == 3 (runtime/zero/config.py DeepSpeedZeroConfig.overlap_comm_valid), so ZeRO-1/2
    reduce on the compute stream (zero/stage_1_and_2.py reduce_gradients); never at stage 0 (runtime/engine.py
    allreduce_gradients runs after backward, whatever overlap_comm says) or under a PipelineModule (engine.py
    _configure_zero_optimizer turns overlap_comm off). `zero` and `pp`: ds_zero's and ds_pipeline's."""
    given = _ds_bool(_ds_section(cfg, "zero_optimization", path), "overlap_comm", path, "zero_optimization")
    if zero == 0 or pp > 1:
        return False
    return zero == 3 if given is None else given


def ds_checkpoint_interval(cfg: dict, path: Path) -> int:
    """pipeline.activation_checkpoint_interval (0 when absent): DeepSpeed 0.19.8 runtime/pipe/engine.py seeds the
    PipelineModule's interval from it when > 0, and runtime/pipe/module.py forward() then checkpoints the stage's
    layer specs in groups of that many (one input kept per group, a group rebuilt at once in backward)."""
    return _ds_int(_ds_section(cfg, "pipeline", path), "activation_checkpoint_interval", path, "pipeline") or 0


def ds_recompute(cfg: dict, path: Path) -> dict:
    """Layout recompute fields. pipeline.activation_checkpoint_interval N > 0: the pipeline engine's own full
    recompute, in groups of N layers (Megatron's uniform --recompute-num-layers N, which costmodels.memory
    prices) when N > 1. Else full when an activation_checkpointing section is given (it configures
    deepspeed.checkpointing, which whole layers go through when the model code calls it: read so, and said by
    planner.frameworks.deepspeed.auto), else none."""
    interval = ds_checkpoint_interval(cfg, path)
    if interval > 1:
        return {"recompute": "full", "recompute_num_layers": interval, "recompute_method": "uniform"}
    if interval == 1:
        return {"recompute": "full"}
    if cfg.get("activation_checkpointing") is None:
        return {"recompute": "none"}
    _ds_section(cfg, "activation_checkpointing", path)  # a mapping, or refused
    return {"recompute": "full"}


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


def ds_world_note(cfg: dict, path: Path, pp: int, sized, preset) -> Optional[str]:
    """The `assumed:` line for a cluster sized by the batch keys (ds_world) rather than by --nodes: the GPU count
    and how it was derived, and what it replaced. `sized`, `preset`: the cluster as sized and as given (ClusterSpecs:
    name, num_nodes, num_gpus); `pp`: pipeline stages x sequence-parallel size. None when the keys do not fix the
    count."""
    if ds_world(cfg, path, pp) is None:
        return None
    total, micro, gas = (cfg[k] for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                          "gradient_accumulation_steps"))
    times = f" x pipeline.stages*sequence_parallel_size {pp}" if pp > 1 else ""
    said = (f"overriding {preset.name}'s {preset.num_nodes} node(s) ({preset.num_gpus} GPUs)"
            if sized.num_gpus != preset.num_gpus else f"as many as {preset.name} has")
    return (f"{sized.num_gpus} GPUs ({sized.num_nodes} node(s)): derived from train_batch_size {total} / "
            f"(train_micro_batch_size_per_gpu {micro} x gradient_accumulation_steps {gas}){times}, {said}; --nodes "
            "sets the count (the batch keys must agree with it)")


# DeepSpeed keys that change memory or time but that parplan does not price (named, never silent):
# ZeRO++ quantized weights/gradients (hpZ, which adds memory, is refused: planner.frameworks.deepspeed.sharding),
# quantized frozen weights (zero_quantized_nontrainable_weights: LoRA-style runs), SuperOffload's CPU step
# (offload_optimizer.super_offload), activation partitioning and CPU checkpointing, the gradient accumulation and
# communication dtypes, ZeRO-3's live-parameter and prefetch limits (parplan's ZeRO-3 keeps the stack's units in
# flight).
DS_UNPRICED = ("zero_optimization.zero_quantized_weights", "zero_optimization.zero_quantized_gradients",
               "zero_optimization.zero_quantized_nontrainable_weights", "zero_optimization.stage3_max_live_parameters",
               "zero_optimization.stage3_prefetch_bucket_size",
               "zero_optimization.offload_optimizer.super_offload",
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
            found.append(f"{dotted}={short(node)}")
    return [f"read but not priced by parplan: {', '.join(found)}"] if found else []
