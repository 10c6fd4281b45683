"""A Megatron-Bridge configuration YAML (ConfigContainer.to_yaml), read as the Megatron-LM arguments it sets.

Source: Megatron-Bridge 0.3.1 megatron/bridge/training/utils/config_utils.py (`to_yaml`: `yaml.safe_dump` of
`to_dict`, every dataclass a mapping with its `_target_` class path) and megatron/bridge/training/config.py
(ConfigContainer: `model` a GPTModelProvider, i.e. Megatron Core's TransformerConfig fields plus seq_length and
vocab_size; `train` global_batch_size, micro_batch_size, train_iters; `ddp` and `optimizer` Megatron Core's
DistributedDataParallelConfig and OptimizerConfig; `dataset` seq_length; `mixed_precision` and `comm_overlap`
applied over the model at start-up, runtime_config_update). Functions and dtypes are written by
megatron/bridge/utils/yaml_utils.py as `{_target_: torch.nn.functional.silu, _call_: false}`.

Those field names are Megatron-LM's argument destinations, as in Megatron's own `--yaml-cfg` file, so the sections
are flattened (later ones over earlier, as Bridge applies them) and read by planner.frameworks.megatron.yaml_cfg's
key-to-flag table; the activation and the tied embedding, which Bridge states as fields rather than flags, are
translated here. The GPU count is not in the file (torchrun's): --nodes/--gpus, else the cluster's.
"""

from __future__ import annotations

import shlex

from planner.errors import UserError
from planner.frameworks.megatron import yaml_cfg

# ConfigContainer sections that set what parplan prices, in the order Bridge applies them
SECTIONS = ("model", "train", "ddp", "optimizer", "dataset", "mixed_precision", "comm_overlap")
HANDLED = {"activation_func", "gated_linear_unit", "share_embeddings_and_output_weights", "_target_", "_call_"}


def is_bridge(data) -> bool:
    """A ConfigContainer dump: its `model` is a Megatron-Bridge model provider (by `_target_`)."""
    model = data.get("model") if isinstance(data, dict) else None
    return isinstance(model, dict) and str(model.get("_target_", "")).startswith("megatron.bridge.")


def _target(value) -> str:
    return str(value.get("_target_", "")) if isinstance(value, dict) else str(value or "")


def _flat(data: dict, where: str) -> dict:
    flat: dict = {}
    for section in SECTIONS:
        part = data.get(section)
        if part is None or isinstance(part, str):  # mixed_precision may be a recipe name ("bf16_mixed")
            if isinstance(part, str) and section == "mixed_precision":
                flat.update(_precision_name(part))
            continue
        if not isinstance(part, dict):
            raise UserError(f"{where}: {section} must be a mapping (a Megatron-Bridge ConfigContainer section)")
        flat.update(part)
    return flat


def _precision_name(name: str) -> dict:
    """A mixed_precision recipe name (megatron/bridge/training/mixed_precision.py: bf16_mixed, fp16_mixed,
    bf16_with_fp8_*_mixed, ...): its dtype switch, and FP8 when it names it."""
    lowered = name.lower()
    out = {"bf16": lowered.startswith("bf16"), "fp16": lowered.startswith("fp16")}
    if "fp8" in lowered:
        out["fp8"] = "hybrid"
    return out


def _extra_flags(flat: dict) -> list:
    """The flags Bridge states as fields: SwiGLU (gated_linear_unit with silu), untied embeddings."""
    out = []
    act = _target(flat.get("activation_func")).rsplit(".", 1)[-1]
    if flat.get("gated_linear_unit") and act == "silu":
        out.append(("--swiglu", None))
    elif act == "squared_relu":
        out.append(("--squared-relu", None))
    if flat.get("share_embeddings_and_output_weights") is False:
        out.append(("--untie-embeddings-and-output-weights", None))
    return out


def arguments(data: dict, where: str) -> str:
    """The Megatron-LM argument text the ConfigContainer stands for (module docstring)."""
    flat = _flat(data, where)
    if flat.get("seq_length") is not None:
        flat.setdefault("max_position_embeddings", flat["seq_length"])
    kept = {k: v for k, v in flat.items() if k not in HANDLED and not (isinstance(v, dict) and "_target_" in v)}
    pairs = yaml_cfg.pairs(kept, where) + _extra_flags(flat)
    return " ".join(flag if value is None else f"{flag} {shlex.quote(value)}" for flag, value in pairs) + "\n"
