"""DeepSpeed settings that change which GPUs share a ZeRO shard or a layer, which parplan's DeepSpeed reader cannot
express (its layout shards ZeRO over every data-parallel rank and has no tensor parallelism: hardware_profiles/
frameworks/deepspeed.yaml, tp false, hsdp false). Pricing them as plain ZeRO would understate the memory, so
each is refused with the key, its value and what it does; off values pass.

Sources:
- MiCS `zero_optimization.mics_shard_size` N > 0 (default -1, off) under ZeRO-3: its parameters, gradients and
  optimizer states are sharded over groups of N ranks and replicated across groups (DeepSpeed 0.9.5
  runtime/zero/mics.py MiCS_Init / MiCS_Optimizer, runtime/engine.py _configure_zero_optimizer); DeepSpeed 0.19.8
  removed MiCS and refuses the key (runtime/config.py _REMOVED_ZERO_CONFIG_KEYS).
- ZeRO++ hpZ `zero_optimization.zero_hpz_partition_size` N > 1 (default 1): each rank keeps a secondary copy of
  its ZeRO-3 weights partitioned over N ranks, in the parameter dtype on the GPU (0.19.8
  runtime/zero/partition_parameters.py _partition_param_sec: tensor_size // num_ranks_in_param_group), 2/N bytes
  per parameter more in bf16; stage 3 only.
- AutoTP `tensor_parallel.autotp_size` N > 1 (default 0, off): every layer split over N GPUs and the data-parallel
  world divided by N (0.19.8 runtime/tensor_parallel/config.py TPTrainingConfig, runtime/engine.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files.config_values import short, whole


def _count(section, key: str, name: str, path: Path) -> Optional[int]:
    """section[key] as a whole number (None when absent, null or "auto")."""
    value = section.get(key) if isinstance(section, dict) else None
    if value is None or value == "auto":
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not whole(value):
        raise UserError(f"{path}: {name}={short(value)} must be a whole number")
    return value


def refuse_mics(zero, path: Path) -> None:
    size = _count(zero, "mics_shard_size", "zero_optimization.mics_shard_size", path)
    if size is not None and size > 0 and zero.get("stage") == 3:
        raise UserError(f"{path}: zero_optimization.mics_shard_size={size}: MiCS shards ZeRO-3's states over groups of "
                        f"{size} GPUs and replicates them across groups (DeepSpeed 0.9.5 runtime/zero/mics.py; 0.19.8 "
                        "removed it and refuses the key); parplan's DeepSpeed reader shards over every "
                        "data-parallel rank, which would understate the memory. Remove the key to price ZeRO-3, or "
                        f"check a plan file whose layout has shard_group: {size}")


def refuse_hpz(zero, path: Path) -> None:
    size = _count(zero, "zero_hpz_partition_size", "zero_optimization.zero_hpz_partition_size", path)
    stage = zero.get("stage") if isinstance(zero, dict) else None
    if size is not None and size > 1 and stage == 3:
        raise UserError(f"{path}: zero_optimization.zero_hpz_partition_size={size}: ZeRO++ hpZ keeps a second copy of "
                        f"the weights on every GPU, partitioned over {size} ranks (2/{size} bytes per parameter more "
                        "in bf16: runtime/zero/partition_parameters.py _partition_param_sec); parplan does not price "
                        "it, and plain ZeRO-3 would understate the memory. Remove the key (or set it to 1) to price "
                        "ZeRO-3 without hpZ")


def refuse_autotp(cfg: dict, path: Path) -> None:
    size = _count(cfg.get("tensor_parallel"), "autotp_size", "tensor_parallel.autotp_size", path)
    if size is not None and size > 1:
        raise UserError(f"{path}: tensor_parallel.autotp_size={size}: DeepSpeed AutoTP splits every layer over {size} "
                        f"GPUs and divides the data-parallel world by {size} (runtime/tensor_parallel/config.py); "
                        "parplan's DeepSpeed reader prices no tensor parallelism, and its batch rule and memory would "
                        "be wrong. Remove the key (or set it to 0) to price the run without AutoTP")


def refuse(cfg: dict, path: Path) -> None:
    """Every refusal above, on the config (after planner.frameworks.deepspeed.legacy's rewrites)."""
    zero = cfg.get("zero_optimization")
    refuse_mics(zero, path)
    refuse_hpz(zero, path)
    refuse_autotp(cfg, path)
