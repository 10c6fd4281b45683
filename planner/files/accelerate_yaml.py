"""Hugging Face Accelerate config files (`accelerate launch --config_file X.yaml`, as TRL, axolotl and
LLaMA-Factory ship them) read as the run they start, for `parplan check`.

Source: accelerate 1.15 commands/config/cluster.py (the questions that write the file) and utils/dataclasses.py
(how FSDP reads them). What is read:
- `distributed_type`: DEEPSPEED, FSDP, MULTI_GPU (DDP) or NO (one process); others are refused by name.
- `num_processes` (all machines together) over `num_machines` nodes sizes the cluster, unless --nodes is given
  (processes per machine other than the preset's GPUs per node are priced as such nodes, said in a note).
- `mixed_precision`: no (fp32), fp16, bf16, fp8; it fills a DeepSpeed config's "auto" bf16/fp16.
- DEEPSPEED: `deepspeed_config.deepspeed_config_file` (a JSON read as `check` reads DeepSpeed JSON, its "auto"
  values from the Trainer; looked for in the current directory, where accelerate opens it (utils/dataclasses.py
  DeepSpeedPlugin: HfDeepSpeedConfig(path) open()s it as given), then beside the YAML), else the config Accelerate
  builds from `zero_stage`, `offload_optimizer_device`, `offload_param_device` and `gradient_accumulation_steps`.
- FSDP: `fsdp_config.fsdp_reshard_after_forward` (FSDP2: true = FULL_SHARD, false = SHARD_GRAD_OP; FSDP1: a
  sharding strategy name) or the older `fsdp_sharding_strategy` (a name or 1-5): FULL_SHARD ZeRO-3,
  SHARD_GRAD_OP ZeRO-2, NO_SHARD ZeRO-0, HYBRID_SHARD / HYBRID_SHARD_ZERO2 ZeRO-3 / ZeRO-2 sharded inside a node;
  `fsdp_activation_checkpointing` full recompute; `fsdp_offload_params` parameters, gradients and the optimizer
  step on the host. Priced with the `fsdp` stack (eager PyTorch, one FSDP unit per block).
- micro-batch, gradient accumulation and global batch come from the Trainer as for DeepSpeed "auto" (check's
  --micro-batch, --grad-accum, --global-batch, else TrainingArguments' defaults, each named).
- `parallelism_config` (accelerate >= 1.10, FSDP2 only): tp, cp, dp and the shard group, read by
  planner.files.accelerate_yaml_parallel (its docstring says how).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, Optional

from planner.errors import UserError, closest
from planner.safetext import clipped
from planner.files.accelerate_yaml_parallel import parallelism
from planner.files.safe_read import first_file, parse_json
from planner.frameworks.deepspeed.auto import HF_GRAD_ACCUM, HF_MICRO_BATCH, ReadNotes, TrainerFlags, seq_note

ACCELERATE_KEYS = {"distributed_type", "compute_environment", "num_processes", "mixed_precision", "num_machines"}
TYPES = ("DEEPSPEED", "FSDP", "MULTI_GPU", "NO")
PRECISION = {"no": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8"}
STRATEGIES = {"FULL_SHARD": (3, False), "SHARD_GRAD_OP": (2, False), "NO_SHARD": (0, False),
              "HYBRID_SHARD": (3, True), "HYBRID_SHARD_ZERO2": (2, True)}


def is_accelerate(data) -> bool:
    """An Accelerate config: its distributed_type beside another of its keys."""
    return isinstance(data, dict) and "distributed_type" in data and len(ACCELERATE_KEYS & set(data)) >= 2


def framework(cfg: dict) -> str:
    """The parplan framework that runs the config: deepspeed, else fsdp (FSDP, and DDP under torchrun)."""
    return "deepspeed" if cfg.get("distributed_type") == "DEEPSPEED" else "fsdp"


def world(cfg: dict, path: Path) -> Optional[int]:
    """num_processes; None when absent: accelerate 1.15 commands/config/config_args.py ClusterConfig.num_processes
    defaults to -1, and commands/launch.py then refuses the file unless `accelerate launch --num_processes` is given
    (only distributed_type NO is given 1, config_args.py process_config), so the file alone does not fix the count."""
    value = cfg.get("num_processes")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**6:
        raise UserError(f"{path}: num_processes={str(value)[:30]!r}: expected a whole number of processes (GPUs)")
    return value


def machines(cfg: dict, path: Path) -> int:
    value = cfg.get("num_machines", 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**5:
        raise UserError(f"{path}: num_machines={str(value)[:30]!r}: expected a whole number of machines (nodes)")
    return value


def machines_cluster(cfg: dict, path: Path, cluster, nodes, gpus: Optional[int], read: ReadNotes):
    """The cluster the run uses: --nodes, else num_processes GPUs (all machines together: accelerate 1.15
    commands/config/cluster.py asks "How many processes in total") over num_machines nodes. When the
    processes per machine differ from the preset's GPUs per node, the nodes are priced with that many GPUs
    each and a note says so; a count that does not divide over the machines is priced as num_processes
    GPUs, said likewise."""
    from planner.files import native  # noqa: PLC0415 - native dispatches here

    count = machines(cfg, path)
    if gpus is None:  # no num_processes (world): num_machines whole nodes, else the cluster as given, said
        if nodes is None and count > 1:
            read.assumed.append(f"num_processes not set (accelerate launch needs --num_processes with this file): "
                                f"num_machines {count} whole nodes assumed; set --nodes")
            nodes = count
        return native._sized_cluster(cluster, nodes, None, path, "num_processes", read)
    if nodes is not None or count == 1 or gpus == 1:
        return native._sized_cluster(cluster, nodes, gpus, path, "num_processes")
    base = native._load_cluster(cluster)
    per, rest = divmod(gpus, count)
    if rest or per == 0:
        read.notes.append(f"num_processes {gpus} (all machines) does not divide over num_machines {count}; priced as "
                          f"{gpus} GPUs of {base.name} ({base.gpus_per_node} per node)")
        return native._sized_cluster(cluster, None, gpus, path, "num_processes")
    if per != base.gpus_per_node:
        read.notes.append(f"num_machines {count} with num_processes {gpus} (all machines): {per} processes per "
                          f"machine, not {base.name}'s {base.gpus_per_node} GPUs per node; priced as {count} nodes x "
                          f"{per} GPUs")
    return native._cluster(cluster, None, per, count, str(path))


def precision(cfg: dict, path: Path, flags: TrainerFlags) -> str:
    """--precision, else `mixed_precision` (a file without it: accelerate's default "no", fp32)."""
    if flags.precision is not None:
        return flags.precision
    value = cfg.get("mixed_precision", "no")
    if value not in PRECISION:
        raise UserError(f"{path}: mixed_precision={str(value)[:30]!r}: Accelerate knows {', '.join(PRECISION)}")
    return PRECISION[value]


def kind(cfg: dict, path: Path) -> str:
    value = cfg.get("distributed_type")
    if value not in TYPES:
        raise UserError(f"{path}: distributed_type={str(value)[:30]!r}: parplan reads {', '.join(TYPES)}")
    return value


def deepspeed_config(cfg: dict, path: Path, read_json: Callable[[Path], dict], extra: tuple = ()) -> dict:
    """The DeepSpeed config the run uses: its file (config_file; `extra`: more folders to look in), else the one
    Accelerate builds from the YAML's fields."""
    ds = cfg.get("deepspeed_config") or {}
    if not isinstance(ds, dict):
        raise UserError(f"{path}: deepspeed_config must be a mapping")
    name = ds.get("deepspeed_config_file")
    if name:
        return read_json(config_file(str(name), path, extra))
    stage = ds.get("zero_stage", 2)
    if stage not in (0, 1, 2, 3):
        raise UserError(f"{path}: deepspeed_config.zero_stage={str(stage)[:20]!r}: DeepSpeed has stages 0 to 3")
    zero = {"stage": stage}
    for key, section in (("offload_optimizer_device", "offload_optimizer"), ("offload_param_device", "offload_param")):
        device = ds.get(key, "none")
        if device not in ("none", "cpu", "nvme"):
            raise UserError(f"{path}: deepspeed_config.{key}={str(device)[:20]!r}: expected none, cpu or nvme")
        if device != "none":
            zero[section] = {"device": device}
    gas = ds.get("gradient_accumulation_steps", "auto")
    return {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": gas, "train_batch_size": "auto",
            "zero_optimization": zero, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}}


def config_file(name: str, path: Path, extra: tuple = ()) -> Path:
    """Where `deepspeed_config_file` is: as given from the current directory (accelerate opens it so), then beside
    the YAML `path`, then in `extra` folders; a UserError naming every place tried when it is in none."""
    tried = [Path(name)] if Path(name).is_absolute() else [Path.cwd() / name, path.parent / name,
                                                             *(Path(d) / name for d in extra)]
    found = first_file(tried, f"{path}: deepspeed_config.deepspeed_config_file={clipped(name)!r}")
    if found is None:
        raise UserError(f"{path}: deepspeed_config.deepspeed_config_file={clipped(name)!r} is not a regular file in "
                        f"any of {', '.join(str(p) for p in dict.fromkeys(tried))} (accelerate opens it from the "
                        "current directory)")
    return found


def fsdp_layout(cfg: dict, path: Path, gpus_per_node: int) -> dict:
    """Layout fields of an FSDP run: zero stage, shard group, recompute."""
    fsdp = cfg.get("fsdp_config") or {}
    if not isinstance(fsdp, dict):
        raise UserError(f"{path}: fsdp_config must be a mapping")
    zero, hybrid = _strategy(fsdp, path)
    out = {"zero": zero, "recompute": "full" if _on(fsdp.get("fsdp_activation_checkpointing")) else "none"}
    if hybrid:
        out["shard_group"] = gpus_per_node
    return out


def _on(value) -> bool:
    """A YAML bool, or the "true" string accelerate's launch options and Trainer fsdp_config JSON carry (both go
    through str_to_bool: accelerate utils/dataclasses.py FullyShardedDataParallelPlugin)."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _fsdp2(fsdp: dict) -> bool:
    return str(fsdp.get("fsdp_version", 1)) == "2"  # accelerate 1.15 FSDP_VERSION default "1"


def _strategy(fsdp: dict, path: Path) -> tuple[int, bool]:
    # FSDP2 reads fsdp_reshard_after_forward alone (default true), never fsdp_sharding_strategy: accelerate 1.15.0
    # utils/dataclasses.py FullyShardedDataParallelPlugin.__post_init__ takes the strategy for fsdp_version 1 only
    default = True if _fsdp2(fsdp) else fsdp.get("fsdp_sharding_strategy", True)
    value = fsdp.get("fsdp_reshard_after_forward", default)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if isinstance(value, bool):
        return (3, False) if value else (2, False)
    if isinstance(value, int) and 1 <= value <= len(STRATEGIES):
        return list(STRATEGIES.values())[value - 1]
    name = str(value).upper()
    if name not in STRATEGIES:
        raise UserError(f"{path}: fsdp_config sharding {str(value)[:30]!r}: expected one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name]


def batch(flags: TrainerFlags, dp: int, read: ReadNotes) -> tuple[int, int, int]:
    """(micro-batch, gradient accumulation, global batch) as the Trainer sets them, each default named."""
    micro, gas = flags.micro_batch, flags.grad_accum
    if micro is None:
        micro = HF_MICRO_BATCH if not (flags.global_batch and gas) else flags.global_batch // (dp * gas)
        if not (flags.global_batch and gas):
            read.assumed.append(f"micro-batch {micro} (TrainingArguments.per_device_train_batch_size default; "
                                "set --micro-batch)")
    if gas is None:
        gas = flags.global_batch // (dp * micro) if flags.global_batch else HF_GRAD_ACCUM
        if not flags.global_batch:
            read.assumed.append(f"gradient accumulation {gas} (TrainingArguments default; set --grad-accum)")
    total = micro * gas * dp
    if not micro or not gas or (flags.global_batch is not None and flags.global_batch != total):
        raise UserError(f"--global-batch {flags.global_batch} is not --micro-batch {micro} x gradient accumulation "
                        f"{gas} x {dp} data-parallel ranks")
    return micro, gas, total


# accelerate 1.15.0 utils/dataclasses.py FullyShardedDataParallelPlugin.__post_init__: auto_wrap_policy from
# FSDP_AUTO_WRAP_POLICY (fsdp_auto_wrap_policy in the YAML, --fsdp_auto_wrap_policy on the launch), default NO_WRAP,
# which it turns into None: FSDP1 wraps the root alone, FSDP2 (fsdp2_prepare_model) fully_shards the root alone
NO_WRAP_NOTE = ("fsdp_auto_wrap_policy not set: accelerate's default NO_WRAP makes the whole model one FSDP unit, "
                "all-gathered at once for forward and backward; priced per transformer block (TRANSFORMER_BASED_WRAP), "
                "so the real peak is higher by about the unsharded 16-bit weights and gradients; set "
                "fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP")


# the fsdp_config keys `accelerate launch` turns into FSDP settings (accelerate 1.15.0 commands/launch.py launch
# arguments, utils/launch.py prepare_multi_gpu_env); it passes over any other key without a word
FSDP_KEYS = ("fsdp_activation_checkpointing", "fsdp_activation_checkpointing_offload", "fsdp_auto_wrap_policy",
             "fsdp_backward_prefetch", "fsdp_cpu_ram_efficient_loading", "fsdp_forward_prefetch",
             "fsdp_ignored_modules", "fsdp_min_num_params", "fsdp_offload_params", "fsdp_reshard_after_forward",
             "fsdp_sharding_strategy", "fsdp_state_dict_type", "fsdp_sync_module_states",
             "fsdp_transformer_layer_cls_to_wrap", "fsdp_use_orig_params", "fsdp_version")


def note_unpriced(cfg: dict, read: ReadNotes) -> None:
    fsdp = cfg.get("fsdp_config") or {}
    _note_unknown_keys(fsdp, read)
    if isinstance(fsdp, dict) and _fsdp2(fsdp) and "fsdp_sharding_strategy" in fsdp \
            and "fsdp_reshard_after_forward" not in fsdp:
        read.notes.append(f"fsdp_sharding_strategy={str(fsdp['fsdp_sharding_strategy'])[:30]!r} is not read by FSDP2 "
                          "(fsdp_version 2): fsdp_reshard_after_forward, default true (FULL_SHARD), is priced")
    if cfg.get("distributed_type") == "FSDP" and isinstance(fsdp, dict) and not fsdp.get("fsdp_auto_wrap_policy"):
        read.notes.append(NO_WRAP_NOTE)
    if isinstance(fsdp, dict) and _on(fsdp.get("fsdp_offload_params")):
        read.notes.append("fsdp_offload_params: parameters, gradients and the optimizer step on the host, priced as "
                          "ZeRO-3 offload of parameters and optimizer")


def prefixed(cfg: dict) -> dict:
    """`cfg` with its fsdp_config keys as accelerate reads them: a key without the fsdp prefix gains it
    (accelerate 1.15.0 commands/launch.py: defaults.fsdp_config.x becomes args.fsdp_x), so reshard_after_forward
    is fsdp_reshard_after_forward; the prefixed key wins when a file gives both."""
    fsdp = cfg.get("fsdp_config")
    if not isinstance(fsdp, dict):
        return cfg
    named = {f"fsdp_{k}": v for k, v in fsdp.items() if not str(k).startswith("fsdp")}
    return {**cfg, "fsdp_config": {**named, **{k: v for k, v in fsdp.items() if str(k).startswith("fsdp")}}}


def _note_unknown_keys(fsdp, read: ReadNotes) -> None:
    """A note per fsdp_config key accelerate does not read (at most three), with the key it likely meant: accelerate
    ignores it, so a misspelt fsdp_sharding_stratgy runs, and is priced, with the default strategy."""
    if not isinstance(fsdp, dict):
        return
    for key in [str(k) for k in fsdp if str(k) not in FSDP_KEYS][:3]:
        near = closest(key, FSDP_KEYS)
        read.notes.append(f"fsdp_config.{key[:60]}: not a key accelerate reads" + (f" (did you mean {near}?)" if near
                          else "") + "; accelerate ignores it, and so does the pricing")


def offload(cfg: dict) -> dict:
    fsdp = cfg.get("fsdp_config") or {}
    if isinstance(fsdp, dict) and _on(fsdp.get("fsdp_offload_params")):
        return {"offload_params": "cpu", "offload_optimizer": "cpu"}
    return {}


def load(path: Path, cfg: dict, model, cluster, nodes, flags: TrainerFlags, read: ReadNotes):
    """The run an Accelerate config starts, as a loading.Problem (planner.files.native's readers do the rest)."""
    from planner.files import native  # noqa: PLC0415 - native dispatches here

    run = kind(cfg, path)
    gpus = 1 if run == "NO" else world(cfg, path)
    clus = machines_cluster(cfg, path, native._need_cluster(cluster, path, "Accelerate"), nodes, gpus, read)
    return priced(path, cfg, model, clus, flags, read)


def priced(path: Path, cfg: dict, model, clus, flags: TrainerFlags, read: ReadNotes, say_seq: bool = True):
    """The run of `cfg` on the sized cluster `clus` (also planner.files.shell_trainer_accel's, for a Trainer
    launched with --fsdp or through this file)."""
    from planner.files import native  # noqa: PLC0415 - native dispatches here

    cfg = prefixed(cfg)
    run = kind(cfg, path)
    prec, par = precision(cfg, path, flags), parallelism(cfg, path, run, clus.num_gpus)
    if run == "DEEPSPEED":
        ds = deepspeed_config(cfg, path, lambda p: _read_json(p, native))
        if prec == "fp8":  # the DeepSpeed config has bf16/fp16 switches only
            read.notes.append("mixed_precision fp8 with DeepSpeed: priced as bf16 (Transformer Engine's FP8 GEMMs "
                              "under DeepSpeed are not priced)")
            prec = "bf16"
        given = dataclasses.replace(flags, precision=_deepspeed_precision(cfg, ds, prec, flags, read))
        prob = native._deepspeed(path, json.dumps(ds), model, clus, clus.num_nodes, given, read)
        _note_defaults(cfg, flags, prob.train, read, say_seq)
        return prob
    spec = native._need_model(model, path, "Accelerate")
    lay = fsdp_layout(cfg, path, clus.gpus_per_node) if run == "FSDP" else {"zero": 0, "recompute": "none"}
    lay.update(par)
    if flags.recompute is not None:
        lay["recompute"] = flags.recompute
    elif lay["recompute"] == "none":
        read.assumed.append("activation recompute none (the Trainer's --gradient_checkpointing, full recompute, is "
                            "not in this file; set --recompute full if the run uses it)")
    micro, gas, total = batch(flags, clus.num_gpus // (lay.get("tp", 1) * lay.get("cp", 1)), read)
    note_unpriced(cfg, read)
    train = native._train({"global_batch_size": total, "seq_length": spec.seq_length, "precision": prec,
                           "stack": "fsdp", **offload(cfg)}, str(path))
    _note_defaults(cfg, flags, train, read, say_seq)
    layout = native._layout({**lay, "mbs": micro, "num_microbatches": gas}, str(path))
    return native.loading.Problem(spec, clus, train, layout)


def _deepspeed_precision(cfg: dict, ds: dict, prec: str, flags: TrainerFlags, read: ReadNotes) -> Optional[str]:
    """The precision handed to the DeepSpeed reader: mixed_precision "no" (accelerate's default) sets nothing, so a
    bf16/fp16 section the file turns on stands (accelerate 1.15.0 utils/dataclasses.py DeepSpeedPlugin.
    set_mixed_precision fills only "auto" values, and checks the other dtype only when mixed_precision is not "no");
    None then, said in a note. Otherwise `prec`, which must agree with the file."""
    if prec != "fp32" or flags.precision is not None:
        return prec
    on = [k for k in ("bf16", "bfloat16", "fp16") if isinstance(ds.get(k), dict) and ds[k].get("enabled") is True]
    if not on:
        return prec
    said = f"mixed_precision {cfg['mixed_precision']!r}" if "mixed_precision" in cfg else "no mixed_precision ('no')"
    read.notes.append(f"{said} leaves the DeepSpeed file's {on[0]}.enabled=true as it is (accelerate fills only "
                      "\"auto\" values): priced in the file's precision")
    return None


def _note_defaults(cfg: dict, flags: TrainerFlags, train, read: ReadNotes, say_seq: bool = True) -> None:
    """Say what the run took from defaults rather than the file: fp32 when neither `mixed_precision` nor the
    DeepSpeed file set a 16-bit mode (accelerate's default "no"), and the model's sequence length."""
    if train.precision == "fp32" and "mixed_precision" not in cfg and flags.precision is None:
        read.assumed.append("mixed_precision not set: fp32 training (Accelerate's default 'no'; set --precision "
                            "bf16|fp16 if the launch passes --mixed_precision)")
    if flags.seq_len is None and say_seq:
        read.assumed.append(seq_note(train.seq_length))


def _read_json(path: Path, native) -> dict:
    cfg = parse_json(native._read_text(path), str(path))
    if not isinstance(cfg, dict):
        raise UserError(f"{path}: not a DeepSpeed config (a JSON object)")
    return cfg
