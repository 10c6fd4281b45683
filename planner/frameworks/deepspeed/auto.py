"""DeepSpeed JSON as Hugging Face Trainer users write it: `"auto"` values filled as the Trainer fills them.

Source: transformers 5.24.0 integrations/deepspeed.py, HfTrainerDeepSpeedConfig.trainer_config_process
(train_micro_batch_size_per_gpu <- per_device_train_batch_size, gradient_accumulation_steps <-
gradient_accumulation_steps, train_batch_size <- world_size * micro * GAS, gradient_clipping <-
max_grad_norm, fp16.enabled / bf16.enabled <- the --fp16 / --bf16 flags, optimizer and scheduler
hyper-parameters <- learning_rate, adam_beta1/2, adam_epsilon, weight_decay) and trainer_config_finalize
(reduce_bucket_size <- hidden^2, stage3_prefetch_bucket_size <- 0.9 hidden^2,
stage3_param_persistence_threshold <- 10 hidden, total_num_steps, warmup_num_steps); the defaults are
TrainingArguments' (training_args.py): per_device_train_batch_size 8, gradient_accumulation_steps 1,
max_grad_norm 1.0, bf16 and fp16 False (so with neither flag the run trains in fp32, the Trainer's
`_dtype = torch.float32`). `check`'s flags stand for the Trainer's: --micro-batch, --grad-accum,
--global-batch (world * micro * GAS), --precision. Every value taken from a default, rather than from
a flag, is reported as an assumption. DeepSpeed's own `"bfloat16"` section is read as `"bf16"` (its
deprecated alias, deepspeed/runtime/constants.py BFLOAT16_OLD). --precision must agree with a bf16/fp16/amp
`enabled` boolean the file states, as the Trainer's fill_match requires (integrations/deepspeed.py), except fp8
over bf16 (Transformer Engine FP8 inside DeepSpeed's bf16 training). zero_optimization.stage and the offload devices
are "auto" only to Accelerate's DeepSpeedPlugin, which the Trainer runs: ACCELERATE_AUTO. Before any of this,
`_deepspeed_reads` applies what DeepSpeed itself does with the keys (planner.frameworks.deepspeed.ds_keys, legacy,
sharding); ZeRO-3's persistence threshold needs the model and is read after (planner.files.native._deepspeed).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, get_args

from costmodels.hardware_spec import Precision
from planner.errors import UserError
from planner.frameworks.deepspeed import checkpointing, ds_keys, legacy, sharding

BATCH_KEYS = ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size")
HF_MICRO_BATCH = 8  # TrainingArguments.per_device_train_batch_size default
HF_GRAD_ACCUM = 1  # TrainingArguments.gradient_accumulation_steps default
HF_MAX_GRAD_NORM = 1.0  # TrainingArguments.max_grad_norm default
# "auto" values the Trainer fills that change neither memory nor step time in parplan's model
UNPRICED = ("gradient_clipping", "optimizer.params.", "scheduler.params.", "zero_optimization.reduce_bucket_size",
            "zero_optimization.stage3_prefetch_bucket_size", "zero_optimization.stage3_param_persistence_threshold")


@dataclass
class ReadNotes:
    """What a reader tells the user beside its result: values it assumed (a default in place of an
    "auto" or of a missing flag) and things it read but does not price. One line each."""

    assumed: list = field(default_factory=list)
    notes: list = field(default_factory=list)


@dataclass(frozen=True)
class TrainerFlags:
    """What `check` was told in place of the Trainer's arguments (None = not given)."""

    micro_batch: Optional[int] = None
    grad_accum: Optional[int] = None
    global_batch: Optional[int] = None
    precision: Optional[str] = None
    recompute: Optional[str] = None  # --gradient_checkpointing: full
    seq_len: Optional[int] = None  # check's --seq-len (the Trainer's max_seq_length / block_size)


def auto_keys(cfg: dict, prefix: str = "") -> list[str]:
    """Dotted names of every "auto" value in `cfg`, depth first."""
    found = []
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if value == "auto":
            found.append(name)
        elif isinstance(value, dict):
            found += auto_keys(value, name + ".")
    return found


def resolve(cfg: dict, flags: TrainerFlags, path: Path, read: ReadNotes) -> dict:
    """The config with every "auto" that parplan prices filled; the assumptions made, and the "auto"
    values left unpriced, go to `read`, one line each.

    Batch keys: a flag fills an "auto" or absent key and must equal a number that is given; "auto"
    without a flag takes the Trainer's default, except that GAS is left to the batch rule when
    --global-batch is given, and train_batch_size is always the batch rule's (world * micro * GAS)."""
    out, notes = copy.deepcopy(cfg), []
    _deepspeed_reads(out, path, read)
    notes += _accelerate_autos(out)
    if not any(k in out for k in BATCH_KEYS):  # no batch at all: what the Trainer (through Accelerate) fills
        out.update({k: "auto" for k in BATCH_KEYS})
        notes.append(f"no {', '.join(BATCH_KEYS)}: the Trainer's values are used, as for \"auto\"")
    _batch_key(out, "train_micro_batch_size_per_gpu", flags.micro_batch, "--micro-batch",
               None if flags.global_batch and flags.grad_accum else HF_MICRO_BATCH,
               "per_device_train_batch_size", path, notes)
    _batch_key(out, "gradient_accumulation_steps", flags.grad_accum, "--grad-accum",
               None if flags.global_batch else HF_GRAD_ACCUM, "gradient_accumulation_steps", path, notes)
    _batch_key(out, "train_batch_size", flags.global_batch, "--global-batch", None, "", path, notes)
    read.notes.extend(_precision_flag(out, flags.precision, path))
    read.notes.extend(legacy.amp(out, path))
    notes += _precision(out, flags.precision)
    notes += checkpointing.assumptions(out, path, flags.recompute)
    read.assumed.extend(notes)
    read.notes.extend(checkpointing.notes(out, path, flags.recompute))
    unpriced = [k for k in auto_keys(out) if k.startswith(UNPRICED)]
    if unpriced:
        clip = f" (gradient_clipping: max_grad_norm={HF_MAX_GRAD_NORM:g})" if "gradient_clipping" in unpriced else ""
        read.notes.append(f'"auto" left to the Trainer, not priced by parplan: {", ".join(unpriced)}{clip}')
    for key in unpriced:
        _drop(out, key)
    return out


def _deepspeed_reads(cfg: dict, path: Path, read: ReadNotes) -> None:
    """What DeepSpeed itself does with the keys before any "auto" is filled, on cfg (a copy): unknown keys in its
    pydantic sections refused (ds_keys), the old "bfloat16" section and the deprecated offload switches read as
    their replacements (legacy), shard groups parplan cannot express refused (sharding). Each reading is named in
    read.notes. ZeRO-3's persistence threshold is read where the model is known (planner.files.native._deepspeed,
    persistence.apply with the ModelSpec)."""
    ds_keys.refuse_unknown(cfg, path)
    read.notes.extend(ds_keys.removed_note(cfg) + ds_keys.near_miss_notes(cfg))
    if "bfloat16" in cfg and "bf16" not in cfg:
        cfg["bf16"] = cfg.pop("bfloat16")
    read.notes.extend(legacy.offload(cfg, path))
    sharding.refuse(cfg, path)


# "auto" values Accelerate's DeepSpeedPlugin fills (the Trainer builds one from the JSON: training_args.py
# `DeepSpeedPlugin(hf_ds_config=...)`): accelerate 1.15.0 utils/dataclasses.py DeepSpeedPlugin.__post_init__, zero_stage
# from ACCELERATE_DEEPSPEED_ZERO_STAGE (default 2), offload_*_device from ACCELERATE_DEEPSPEED_OFFLOAD_*_DEVICE (default
# "none"), written into the "auto" keys by fill_match. `accelerate launch --zero_stage` / `--offload_*_device` set them.
ACCELERATE_AUTO = {"zero_optimization.stage": (2, "--zero_stage"),
                   "zero_optimization.offload_optimizer.device": ("none", "--offload_optimizer_device"),
                   "zero_optimization.offload_param.device": ("none", "--offload_param_device")}


def _accelerate_autos(cfg: dict) -> list[str]:
    """Fill ACCELERATE_AUTO's "auto" values with Accelerate's defaults (cfg is the caller's copy); one `assumed:`
    line each."""
    out = []
    for dotted, (default, option) in ACCELERATE_AUTO.items():
        *parents, leaf = dotted.split(".")
        node = cfg
        for name in parents:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(leaf) == "auto":
            node[leaf] = default
            out.append(f'{dotted}="auto": {default} assumed (the default of Accelerate\'s DeepSpeedPlugin, which '
                       f"the Trainer fills it from; accelerate launch {option} sets it)")
    return out


def _batch_key(cfg: dict, key: str, flag: Optional[int], option: str, default: Optional[int], hf_name: str,
               path: Path, notes: list[str]) -> None:
    """Fill cfg[key] from the flag, else (when "auto") from the Trainer's default; None leaves the key
    to DeepSpeed's batch rule (planner.frameworks.deepspeed.config_json.ds_batch)."""
    value = cfg.get(key)
    if flag is not None:
        if value not in (None, "auto") and value != flag:
            raise UserError(f"{path}: {key}={value!r} but {option} {flag}; give one or make them agree")
        cfg[key] = flag
        return
    if value != "auto":
        return
    if default is None:
        cfg.pop(key)
        if key == "train_batch_size":
            notes.append(f'{key}="auto": world size x micro-batch x gradient accumulation, as the Trainer computes it')
        return
    cfg[key] = default
    notes.append(f'{key}="auto": {default} assumed (TrainingArguments.{hf_name} default; set {option})')


# the DeepSpeed section a --precision turns on: fp8 is Transformer Engine's FP8 GEMMs inside bf16 training (DeepSpeed
# has no fp8 section); fp32 and tf32 turn none on. Apex AMP (amp.enabled) is fp16 mixed precision.
SECTION_OF = {"bf16": "bf16", "fp8": "bf16", "fp16": "fp16"}
KIND = {"bf16": "bf16", "fp16": "fp16", "amp": "fp16"}


def _stated(cfg: dict) -> dict:
    """{section: enabled} for each bf16 / fp16 / amp section whose `enabled` is a JSON boolean (not "auto")."""
    sections = {k: cfg.get(k) for k in KIND}
    return {k: s["enabled"] for k, s in sections.items() if isinstance(s, dict) and isinstance(s.get("enabled"), bool)}


def _option(flag: str, path: Path) -> str:
    """How the precision was asked for, for messages (an Accelerate config's mixed_precision fills it too)."""
    if path.suffix.lower() in (".yaml", ".yml"):
        return f"precision {flag} (--precision, or the Accelerate config's mixed_precision)"
    return f"--precision {flag}"


def _precision_flag(cfg: dict, flag: Optional[str], path: Path) -> list[str]:
    """--precision against the precision the file states (a bf16 / fp16 / amp `enabled` boolean): a contradiction
    is refused naming both, as the batch flags' are, except fp8 over bf16 (how DeepSpeed users add Transformer
    Engine FP8), which is said in a note. Notes also say when the flag asks for what the file alone would not run."""
    if flag not in get_args(Precision):  # none given, or one check_overrides refuses by name
        return []
    stated, wanted = _stated(cfg), SECTION_OF.get(flag)
    for key, on in stated.items():
        if on != (KIND[key] == wanted):
            raise UserError(f"{path}: {key}.enabled={str(on).lower()} but {_option(flag, path)}; give one or make "
                            "them agree (DeepSpeed trains in the file's precision)")
    if flag == "fp8" and stated.get("bf16"):
        return ["--precision fp8 is priced on top of the file's bf16 (bf16.enabled=true): Transformer Engine's FP8 "
                "GEMMs inside DeepSpeed's bf16 training; DeepSpeed itself has no fp8 setting"]
    autos = [k for k in ("bf16", "fp16") if isinstance(cfg.get(k), dict) and cfg[k].get("enabled") == "auto"]
    if wanted and not any(stated.values()) and wanted not in autos:
        return [f"{flag} is asked for, but the file has no {wanted} section that is on: DeepSpeed would train this "
                "file alone in fp32 (runtime/precision_config.py: bf16.enabled and fp16.enabled default to false)"]
    return []


def _precision(cfg: dict, flag: Optional[str]) -> list[str]:
    """Fill bf16/fp16 "enabled": "auto" from --precision (the Trainer's --bf16/--fp16; fp8 turns bf16 on); without
    the flag the Trainer leaves both off, and a run with neither trains in fp32. The assumption is said only where
    it sets the precision (an "auto" beside a section that is on changes nothing)."""
    autos = [k for k in ("bf16", "fp16") if isinstance(cfg.get(k), dict) and cfg[k].get("enabled") == "auto"]
    for key in autos:
        cfg[key] = {**cfg[key], "enabled": SECTION_OF.get(flag) == key}
    if not autos or flag is not None:
        return []
    names = " and ".join(f'{k}.enabled="auto"' for k in autos)
    on = next((k for k in ("bf16", "fp16") if k not in autos and _stated(cfg).get(k)), None)
    if on:
        return [f"{names}: off (TrainingArguments default False); {on}.enabled=true sets the precision"]
    return [f"{names}: off, so fp32 training assumed (TrainingArguments bf16/fp16 default False; "
            "set --precision bf16|fp16)"]


def _drop(cfg: dict, dotted: str) -> None:
    """Remove one "auto" leaf named by its dotted path."""
    *parents, leaf = dotted.split(".")
    for name in parents:
        cfg = cfg[name]
    cfg.pop(leaf, None)


def seq_note(seq_length: int) -> str:
    """The assumption behind a DeepSpeed JSON's or an Accelerate config's sequence length: neither file has one
    (the Trainer's max_seq_length / block_size, or the data collator, sets it), so the model's is used."""
    return (f"sequence length {seq_length} (the model's; a DeepSpeed or Accelerate config has none, the "
            "training script's max_seq_length / block_size sets it; set --seq-len)")
