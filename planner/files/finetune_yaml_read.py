"""Axolotl and LLaMA-Factory YAML read into Settings: the run's values in the Hugging Face Trainer's terms
(TrainerFlags, the --fsdp / --fsdp_config / --optim flags, the DeepSpeed config), for planner.files.finetune_yaml to
price as the Trainer run the tool starts.

Axolotl (axolotl 0.19.0): micro_batch_size and gradient_accumulation_steps (default 1 each, schemas/training.py; the
default is filled before normalize_config could derive it from batch_size, so a batch_size beside micro_batch_size
leaves it at 1), sequence_len (default 512, schemas/config.py), bf16 (default "auto": bf16 where the GPU has it,
which every GPU parplan models does; resolve_dtype), fp16, tf32 (default "auto": TF32 GEMMs in an fp32 run on NVIDIA
Ampere or newer), gradient_checkpointing (true, "offload", "offload_disk"), deepspeed (a path or a
mapping), fsdp (the Trainer's words: full_shard, shard_grad_op, hybrid_shard, offload) and fsdp_config (keys with or
without the old `fsdp_` prefix, schemas/validation.py check_fsdp_config_kwargs_prefix; reshard_after_forward,
offload_params, activation_checkpointing; a sharding_strategy there is dropped by Axolotl's schema), base_model.
`adapter` (lora, qlora) and load_in_8bit/load_in_4bit are refused: parplan prices full training.
LLaMA-Factory (llamafactory 0.9.5): the YAML is TrainingArguments (per_device_train_batch_size,
gradient_accumulation_steps, bf16, fp16, deepspeed, fsdp) plus model_name_or_path, cutoff_len (default 2048,
hparams/data_args.py), finetuning_type (default lora: refused unless full, hparams/finetuning_args.py),
quantization_bit (refused), stage (ppo refused; dpo/kto's reference model and rm's second sequence noted), disable_gradient_checkpointing
(gradient checkpointing is on unless it is true, model/model_utils/checkpointing.py), pure_bf16 (bf16 compute without
bf16: true, hparams/parser.py). Any key outside the ones LLaMA-Factory's HfArgumentParser takes
(planner.files.llamafactory_keys) that misspells one of them is refused, as LLaMA-Factory refuses to start on it
(hparams/parser.py parse_dict(allow_extra_keys=False)), naming the key meant; a key close to none (another release's)
and any key of a launch that sets ALLOW_EXTRA_ARGS or USE_MCA are let through with a note.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

from planner.errors import UserError, closest
from planner.files import llamafactory_keys
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

FSDP_WORDS = {"full_shard": "FULL_SHARD", "shard_grad_op": "SHARD_GRAD_OP", "no_shard": "NO_SHARD",
              "hybrid_shard": "HYBRID_SHARD", "hybrid_shard_zero2": "HYBRID_SHARD_ZERO2"}  # transformers FSDPOption


@dataclasses.dataclass
class Settings:
    """What the YAML says, in the Trainer's terms; `read` holds what was assumed or is not priced."""

    tool: str
    model_key: str
    model_id: Any
    deepspeed: Any  # a path, an inline mapping (Axolotl), or None
    extra: dict  # more Trainer flags: --fsdp, --fsdp_config, --optim
    flags: TrainerFlags
    read: ReadNotes
    # the GEMM precision when the Trainer's flags alone train in fp32 but the tool computes in another: tf32
    # (Axolotl's tf32), bf16 (LLaMA-Factory's pure_bf16); planner.files.finetune_yaml prices it
    compute: Optional[str] = None


# ---- reading the YAML -----------------------------------------------------------------------------------------------

def _count(d: dict, key: str, where, default: Optional[int], read: ReadNotes, tool: str) -> Optional[int]:
    """A whole number >= 1 under `key`, else the tool's default (said under assumed; None: left to the Trainer)."""
    value = d.get(key)
    if value is None:
        if default is not None:
            read.assumed.append(f"{key} not set: {tool}'s default {default}")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**7:
        raise UserError(f"{where}: {key}={str(value)[:30]!r}: expected a whole number of at least 1")
    return value


def _switch(d: dict, key: str, where) -> Optional[bool]:
    value = d.get(key)
    if value is not None and not isinstance(value, bool):
        raise UserError(f"{where}: {key}={str(value)[:30]!r}: expected true or false")
    return value


def _refuse(where, tool: str, said: str, why: str, fix: str) -> None:
    raise UserError(f"{where}: an {tool} config with {said} ({why}): parplan prices full training (gradients and "
                    f"Adam states for every weight), which would overstate this run several times, so it cannot "
                    f"check it. {fix}")


def axolotl(d: dict, where, gpu=None) -> Settings:
    """An Axolotl config's run (see the module docstring for the keys and their sources). gpu: the cluster's
    GPUProfile (where tf32 "auto" turns on), None when not known."""
    if d.get("adapter") or d.get("load_in_4bit") or d.get("load_in_8bit"):
        key = "adapter" if d.get("adapter") else "load_in_4bit" if d.get("load_in_4bit") else "load_in_8bit"
        _refuse(where, "Axolotl", f"{key}: {str(d.get(key))[:20]}", "LoRA/QLoRA fine-tuning: the base model frozen, "
                "small adapters trained", "For a full fine-tune, remove adapter, load_in_8bit and load_in_4bit.")
    read, tool = ReadNotes(), "Axolotl"
    micro = _count(d, "micro_batch_size", where, 1, read, tool)
    gas = _axolotl_accumulation(d, where, micro, read)
    precision = _axolotl_precision(d, where, read)
    flags = TrainerFlags(micro, gas, None, precision, _axolotl_recompute(d, where, read),
                         _count(d, "sequence_len", where, 512, read, tool))
    _axolotl_unpriced(d, read)
    extra = {**fsdp_flags(_axolotl_fsdp_config(d, read), where, str(d.get("fsdp_version")) == "2"),
             **_optim(d.get("optimizer"))}
    compute = _axolotl_tf32(d, where, gpu, read) if precision == "fp32" else None
    return Settings("axolotl", "base_model", d.get("base_model"), d.get("deepspeed"), extra, flags, read, compute)


def _axolotl_accumulation(d: dict, where, micro: int, read: ReadNotes) -> int:
    """gradient_accumulation_steps, default 1 (axolotl 0.19.0 schemas/training.py HyperparametersConfig). The
    default is filled when the config is validated, before normalize_config (utils/config/__init__.py; cli/train.py
    for ray) could derive it from batch_size // micro_batch_size, so a batch_size beside micro_batch_size leaves the
    Trainer's accumulation at 1. batch_size alone, or beside gradient_accumulation_steps, Axolotl refuses
    (schemas/validation.py check_batch_size_fields, check_gas_bsz)."""
    if d.get("batch_size") is None:
        return _count(d, "gradient_accumulation_steps", where, 1, read, "Axolotl")
    size = _count(d, "batch_size", where, None, read, "Axolotl")
    if d.get("gradient_accumulation_steps") is not None:
        raise UserError(f"{where}: batch_size={size} and gradient_accumulation_steps="
                        f"{str(d['gradient_accumulation_steps'])[:30]}: Axolotl refuses both (please set only one of "
                        "gradient_accumulation_steps or batch_size); keep gradient_accumulation_steps")
    if d.get("micro_batch_size") is None:
        raise UserError(f"{where}: batch_size={size} without micro_batch_size: Axolotl refuses it (at least two of "
                        "micro_batch_size, gradient_accumulation_steps, batch_size must be set); set micro_batch_size")
    read.assumed.append(f"gradient_accumulation_steps not set: Axolotl's default 1, not batch_size {size} // "
                        f"micro_batch_size {micro} (axolotl 0.19.0 fills the default before normalize_config would "
                        "derive it); set gradient_accumulation_steps")
    return 1


def _axolotl_fsdp_config(d: dict, read: ReadNotes) -> dict:
    """The config without fsdp_config's (fsdp_)sharding_strategy, which axolotl 0.19.0 drops: its FSDPConfig
    (schemas/fsdp.py) has no such field, so pydantic ignores it, and the Trainer takes the strategy from
    reshard_after_forward or the `fsdp` list alone (transformers 5.16.1 training_args.py _process_fsdp_args: FSDP1
    default full_shard, FSDP2 reshard_after_forward default true)."""
    cfg = d.get("fsdp_config")
    names = ("sharding_strategy", "fsdp_sharding_strategy")
    dropped = [k for k in cfg if k in names] if isinstance(cfg, dict) else []
    if not dropped:
        return d
    read.notes.append(f"fsdp_config.{dropped[0]}: {str(cfg[dropped[0]])[:30]} is not read by Axolotl (no such field "
                      "in its fsdp_config schema); the strategy priced comes from reshard_after_forward or the fsdp "
                      "list, else FULL_SHARD")
    kept = {k: v for k, v in cfg.items() if k not in dropped}
    return {**d, "fsdp_config": kept or {"fsdp_version": d.get("fsdp_version") or 1}}  # still FSDP, as in Axolotl


def _optim(name) -> dict:
    return {"--optim": name} if isinstance(name, str) and name else {}


def _axolotl_precision(d: dict, where, read: ReadNotes) -> str:
    """axolotl 0.19.0 resolve_dtype and core/builders/base.py: bf16 "auto" (the default) is on unless fp16 is;
    TrainingArguments gets bf16 = bf16 or bfloat16 and fp16 = fp16 and not bf16."""
    bf16, fp16 = d.get("bf16", "auto"), _switch(d, "fp16", where)
    if bf16 not in ("auto", "full", True, False, None):
        raise UserError(f"{where}: bf16={str(bf16)[:20]!r}: Axolotl takes true, false or auto")
    if bf16 == "auto":
        bf16 = not fp16
        if bf16:
            read.assumed.append("bf16: auto: bf16, as Axolotl turns it on on GPUs that have it (every GPU parplan "
                                "models, Ampere or newer)")
    bf16 = bool(bf16) or d.get("bfloat16") is True
    return "bf16" if bf16 else "fp16" if fp16 else "fp32"


NVIDIA_TF32 = ("ampere", "hopper", "blackwell", "blackwell-ultra")  # CUDA compute capability 8.0 or newer


def _axolotl_tf32(d: dict, where, gpu, read: ReadNotes) -> Optional[str]:
    """tf32 for an Axolotl run in fp32 where its TF32 switch is on, else None (fp32 GEMMs). tf32 defaults to "auto"
    (axolotl 0.19.0 schemas/config.py), which check_tf32 resolves to transformers' is_torch_tf32_available (CUDA,
    compute capability 8.0 or newer; not ROCm); core/builders/base.py then passes TrainingArguments tf32 True."""
    value = d.get("tf32", "auto")
    if value not in ("auto", True, False, None):
        raise UserError(f"{where}: tf32={str(value)[:20]!r}: Axolotl takes true, false or auto")
    if not value:
        return None
    said = "auto (Axolotl's default)" if value == "auto" else "true"
    if getattr(gpu, "tensor_core_gen", None) in NVIDIA_TF32:
        read.assumed.append(f"tf32: {said}: fp32 training with TF32 tensor-core GEMMs, as Axolotl turns TF32 on on "
                            f"NVIDIA GPUs of Ampere or newer ({gpu.name}); priced as precision tf32")
        return "tf32"
    read.assumed.append(f"tf32: {said}: fp32 GEMMs priced: {getattr(gpu, 'name', 'the GPU')} is not an NVIDIA GPU "
                        "of Ampere or newer, where Axolotl's TF32 applies")
    return None


def _axolotl_recompute(d: dict, where, read: ReadNotes) -> str:
    value = d.get("gradient_checkpointing", False)
    if value in ("offload", "offload_disk"):
        read.notes.append(f"gradient_checkpointing: {value}: the checkpointed activations go to the host/disk, not "
                          "priced (priced as full recompute with them on the GPU)")
        return "full"
    if value not in (True, False, None):
        raise UserError(f"{where}: gradient_checkpointing={str(value)[:20]!r}: Axolotl takes true, false, offload "
                        "or offload_disk")
    return "full" if value else "none"


def _axolotl_unpriced(d: dict, read: ReadNotes) -> None:
    """Keys that change memory but are not priced, named in one note."""
    said = [f"{k}: {d[k]}" for k in ("tensor_parallel_size", "context_parallel_size", "sequence_parallel_degree",
                                     "dp_shard_size") if isinstance(d.get(k), int) and d[k] > 1]
    said += [f"{k}: true" for k in ("bfloat16", "float16", "fp8", "activation_offloading") if d.get(k) is True]
    if d.get("rl"):
        said.append(f"rl: {str(d['rl'])[:20]} (a reference model, where the method keeps one)")
    said += [f"{k}: true (a score head of a few outputs: the vocabulary head priced, its weights, optimizer state "
             "and logits, over-estimates it)"
             for k in ("reward_model", "process_reward_model") if d.get(k) is True]
    if said:
        read.notes.append("read but not priced: " + "; ".join(said))


def _llamafactory_keys(d: dict, where, read: ReadNotes, extra_ok: bool) -> None:
    """UserError naming the keys LLaMA-Factory's HfArgumentParser does not take (up to three, each with the closest
    valid key), as llamafactory refuses them before training, when one misspells a key it takes; a note instead when
    none does (a key of another release) or with extra_ok (the launch sets ALLOW_EXTRA_ARGS or USE_MCA)."""
    unknown = [str(k) for k in d if str(k) not in llamafactory_keys.KEYS]
    if not unknown:
        return
    near = {k: closest(k, llamafactory_keys.KEYS) for k in unknown}
    shown = [k[:60] + (f" (did you mean {near[k]}?)" if near[k] else "") for k in unknown[:3]]
    said = ", ".join(shown) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
    one = len(unknown) == 1
    if extra_ok or not any(near.values()):  # no key it misspells: maybe another release's, so said, not refused
        why = ("let through by the launch's ALLOW_EXTRA_ARGS/USE_MCA" if extra_ok else
               "LLaMA-Factory refuses unknown keys unless ALLOW_EXTRA_ARGS is set, so check the release you run")
        read.notes.append(f"{said}: not {'a ' if one else ''}{llamafactory_keys.VERSION} key{'' if one else 's'}, "
                          f"{why}; not priced")
        return
    raise UserError(f"{where}: {said}: not {'a ' if one else ''}{llamafactory_keys.VERSION} key{'' if one else 's'}: "
                    "LLaMA-Factory refuses to start on unknown keys (HfArgumentParser.parse_dict(allow_extra_keys="
                    "False), hparams/parser.py), and parplan would price its default in place of the value meant")


def llamafactory(d: dict, where, extra_ok: bool = False) -> Settings:
    """A LLaMA-Factory config's run (see the module docstring). extra_ok: the launch sets ALLOW_EXTRA_ARGS or
    USE_MCA, under which LLaMA-Factory takes keys its own parser does not know."""
    tool, read = "LLaMA-Factory", ReadNotes()
    _llamafactory_keys(d, where, read, extra_ok)
    kind = d.get("finetuning_type", "lora")
    if kind != "full":
        _refuse(where, tool, f"finetuning_type: {str(kind)[:20]}" + ("" if "finetuning_type" in d else
                                                                      " (LLaMA-Factory's default)"),
                "only adapters or some layers trained", "For a full fine-tune, set finetuning_type: full.")
    if d.get("quantization_bit"):
        _refuse(where, tool, f"quantization_bit: {str(d['quantization_bit'])[:5]}", "a quantized frozen base model",
                "For a full fine-tune, remove quantization_bit.")
    stage = d.get("stage", "sft")
    if stage == "ppo":
        raise UserError(f"{where}: a LLaMA-Factory config with stage: ppo trains a policy and a value model beside a "
                        "reference and a reward model; parplan prices one model's training and cannot check it (for the policy alone, "
                        "check a copy with stage: sft)")
    if stage in ("dpo", "kto"):
        read.notes.append(f"stage: {stage}: the frozen reference model's weights are not priced, nor the second "
                          "sequence each sample runs (DPO's rejected answer, KTO's KL sample: data/collator.py): an "
                          "under-estimate")
    if stage == "rm":  # llamafactory 0.9.5 data/collator.py PairwiseDataCollatorWithPadding: chosen and rejected
        read.notes.append("stage: rm: each sample runs two sequences (chosen and rejected answers) through the model; "
                          "priced as one: an under-estimate")
    disabled = _switch(d, "disable_gradient_checkpointing", where)
    on = _switch(d, "gradient_checkpointing", where) or not disabled
    if disabled is None and not d.get("gradient_checkpointing"):
        read.assumed.append("gradient checkpointing on (full recompute): LLaMA-Factory enables it unless "
                            "disable_gradient_checkpointing: true")
    bf16, fp16 = _switch(d, "bf16", where), _switch(d, "fp16", where)
    if bf16 and fp16:
        raise UserError(f"{where}: bf16 and fp16 are both true; the Trainer refuses that (At most one of fp16 and "
                        "bf16 can be True)")
    flags = TrainerFlags(_count(d, "per_device_train_batch_size", where, None, read, tool),
                         _count(d, "gradient_accumulation_steps", where, None, read, tool), None,
                         "bf16" if bf16 else "fp16" if fp16 else "fp32", "full" if on else "none",
                         _count(d, "cutoff_len", where, 2048, read, tool))
    if d.get("pure_bf16") is True:
        read.notes.append("read but not priced: pure_bf16 (bf16 weights and states without an fp32 master copy; "
                          "priced with one)")
    if d.get("fp8") is True:
        read.notes.append(f"read but not priced: fp8: true (Accelerate's FP8 linear layers, fp8_backend "
                          f"{str(d.get('fp8_backend', 'auto'))[:20]}): priced at the bf16/fp16 settings unless check "
                          "--precision fp8 is given (FP8 GEMMs)")
    compute = _pure_bf16(d, bf16, fp16, read)
    said = [k for k in ("use_badam", "use_galore", "use_apollo", "use_adam_mini", "use_muon") if d.get(k) is True]
    if said:
        read.notes.append(f"read but not priced: {', '.join(said)} (optimizer states for part of the weights, or "
                          "smaller ones); priced as AdamW's two moments for every weight, an over-estimate")
    extra = {**fsdp_flags(d, where, None), **_optim(d.get("optim"))}
    if isinstance(d.get("fsdp_config"), str):  # TrainingArguments: a JSON file
        extra["--fsdp_config"] = d["fsdp_config"]
    return Settings("llamafactory", "model_name_or_path", d.get("model_name_or_path"), d.get("deepspeed"), extra,
                    flags, read, compute)


def _pure_bf16(d: dict, bf16, fp16, read: ReadNotes) -> Optional[str]:
    """bf16 for pure_bf16 without bf16/fp16: the Trainer's flags alone would train in fp32, but llamafactory 0.9.5
    hparams/parser.py sets compute_dtype bfloat16 for pure_bf16 (the model loads in it) and model/adapter.py
    init_adapter keeps the trainable weights in it (no fp32 upcast), so the GEMMs and activations are bf16."""
    if d.get("pure_bf16") is not True or bf16 or fp16:
        return None
    read.assumed.append("pure_bf16: true without bf16: LLaMA-Factory loads and trains the weights in bf16 "
                        "(compute_dtype bfloat16), so bf16 GEMMs and activations are priced, not fp32")
    return "bf16"


def fsdp_flags(d: dict, where, version2: Optional[bool]) -> dict:
    """The Trainer's --fsdp words and --fsdp_config JSON (transformers 5.24.0 training_args.py: keys lose an `fsdp_`
    prefix; version, reshard_after_forward, activation_checkpointing, cpu_offload) for the YAML's `fsdp` words and
    `fsdp_config` mapping (Axolotl: offload_params, sharding_strategy; FSDP2 only with fsdp_version 2, accelerate's
    default being FSDP1). {} when the run has no FSDP. `version2`: None leaves the version to the Trainer."""
    words, cfg = d.get("fsdp"), d.get("fsdp_config")
    words = words.split() if isinstance(words, str) else words or []
    if not isinstance(words, list) or not isinstance(cfg or {}, (dict, str)):
        raise UserError(f"{where}: fsdp must be a list of words (full_shard, auto_wrap, offload...) and fsdp_config "
                        "a mapping")
    if not words and (version2 is None or not isinstance(cfg, dict) or not cfg):  # the Trainer needs --fsdp
        return {}
    cfg = {(str(k)[5:] if str(k).startswith("fsdp_") else str(k)): v for k, v in (cfg if isinstance(cfg, dict)
                                                                                  else {}).items()}
    conf = {} if version2 is None else {"version": 2 if version2 else 1}
    for key, to in (("reshard_after_forward", "reshard_after_forward"), ("activation_checkpointing",
                    "activation_checkpointing"), ("offload_params", "cpu_offload"), ("cpu_offload", "cpu_offload")):
        if key in cfg:
            conf[to] = cfg[key]
    strategy = str(cfg.get("sharding_strategy", "")).lower()
    words = [str(w).lower() for w in words] + ([strategy] if strategy in FSDP_WORDS else [])
    if not any(w in FSDP_WORDS for w in words):
        words.append("full_shard")  # accelerate's default strategy
    return {"--fsdp": " ".join(dict.fromkeys(words)), "--fsdp_config": json.dumps(conf)}


def settings(tool: str, data: dict, where, gpu=None, extra_ok: bool = False) -> Settings:
    """gpu: the cluster's GPUProfile (Axolotl's tf32 "auto" depends on it), None when not known; extra_ok: a
    LLaMA-Factory launch that lets unknown keys through (llamafactory)."""
    return axolotl(data, where, gpu) if tool == "axolotl" else llamafactory(data, where, extra_ok)


__all__ = ["FSDP_WORDS", "Settings", "axolotl", "fsdp_flags", "llamafactory", "settings"]
