"""The `parallelism_config` section of a Hugging Face Accelerate config (planner.files.accelerate_yaml reads the
rest of the file): the layout fields it gives an FSDP2 run.

Source: accelerate 1.15. What is read:
- `parallelism_config` (accelerate >= 1.10, FSDP2 only: commands/config/cluster.py lines 511-556 write the keys
  parallelism_config_dp_replicate_size, _dp_shard_size, _tp_size, _cp_size, _cp_comm_strategy; parallelism_config.py
  checks them): tp and cp into the layout, dp = dp_replicate x dp_shard, FSDP sharding over dp_shard x cp (the
  dp_shard_cp mesh), HSDP (a shard group) when dp_replicate > 1. Their product must be num_processes
  (parallelism_config.py _validate_accelerator). sp_size (DeepSpeed's Ulysses, ALST) is refused by name.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import UserError

PARALLEL = ("dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "sp_size")


def parallelism(cfg: dict, path: Path, run: str, world: int) -> dict:
    """Layout fields of `parallelism_config` (see the module docstring): tp, cp, cp_comm, shard_group; {} when the
    file has none. cp_comm: accelerate's cp_comm_strategy (allgather, alltoall) is torch's context_parallel rotate
    method (accelerator.py set_rotate_method), priced as the overlapped ring, p2p, as torchtitan's."""
    pc = cfg.get("parallelism_config") or {}
    if not isinstance(pc, dict):
        raise UserError(f"{path}: parallelism_config must be a mapping")
    if not pc:
        return {}
    sizes = {k: _size(pc, k, path) for k in PARALLEL}
    where = f"{path}: parallelism_config"
    if sizes["sp_size"] > 1:
        raise UserError(f"{where}_sp_size={sizes['sp_size']}: DeepSpeed sequence parallelism (Ulysses, ALST) under "
                        "Accelerate is not priced by parplan; check the DeepSpeed JSON with sequence_parallel_size")
    version = (cfg.get("fsdp_config") or {}).get("fsdp_version", 1)
    if run != "FSDP" or str(version) != "2":
        raise UserError(f"{where}: accelerate 1.15 uses it with FSDP2 only (commands/launch.py line 1211; this file: "
                        f"distributed_type {run}, fsdp_version {version})")
    total = sizes["dp_replicate_size"] * sizes["dp_shard_size"] * sizes["tp_size"] * sizes["cp_size"]
    if total != world:
        raise UserError(f"{where}: dp_replicate x dp_shard x tp x cp = {total}, not num_processes {world} "
                        "(accelerate parallelism_config.py: total_size must equal num_processes)")
    if sizes["dp_shard_size"] * sizes["cp_size"] == 1:
        raise UserError(f"{where}_dp_shard_size=1 and _cp_size=1: FSDP has no dimension to shard over (accelerate "
                        "parallelism_config.py _validate_accelerator refuses it)")
    out = {"tp": sizes["tp_size"], "cp": sizes["cp_size"]}
    if sizes["cp_size"] > 1:
        out["cp_comm"] = "p2p"
    if sizes["dp_replicate_size"] > 1:
        out["shard_group"] = sizes["dp_shard_size"] * sizes["cp_size"]
    return out


def _size(pc: dict, key: str, path: Path) -> int:
    value = pc.get(f"parallelism_config_{key}", pc.get(key, 1))
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**6:
        raise UserError(f"{path}: parallelism_config_{key}={str(value)[:20]!r}: expected a whole number of at least 1")
    return value

__all__ = ["PARALLEL", "parallelism"]
