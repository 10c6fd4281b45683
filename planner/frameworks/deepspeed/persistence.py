"""ZeRO-3's persistence thresholds: parameters small enough are never partitioned, so they stay whole on every GPU.

Source: DeepSpeed 0.19.8 deepspeed/runtime/zero/config.py (`stage3_param_persistence_threshold`, alias of
param_persistence_threshold, default 1e5 elements; `stage3_model_persistence_threshold`, default sys.maxsize, the
most elements kept whole in all) and runtime/zero/parameter_offload.py mark_persistent_parameters: walking
named_parameters in module order, a tensor of at most the threshold's elements persists unless the running total
would pass the model threshold; runtime/zero/partition_parameters.py keeps a persistent tensor's partition on the
GPU even under offload_param. ZeRO-3 with every weight whole is ZeRO-2's weights (whole) with sharded gradients
and optimizer states, and no parameter gathers: parplan prices it as ZeRO-2 and says so.

The JSON reader (planner.frameworks.deepspeed.auto.resolve) does not see the model, so `apply` without a
ModelSpec decides on the threshold alone: above UNSIZED_FROM elements a threshold may keep projections whole, and
the weights are priced whole (an upper bound); at or under it only norms, biases, routers and projections that
small stay whole, left unpriced and named. With a ModelSpec (`apply(cfg, path, spec)`) the kept share is
computed from the model's tensors (`tensors`, split as finely as Hugging Face modules are: q, k, v, o apart,
one tensor per expert matrix, which can only overstate what persists) and priced whole from SHARE_PRICED_FROM.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from costmodels.model_spec import ModelSpec
from costmodels.params import attention_matrices
from planner.errors import UserError
from planner.files.config_values import short

DEFAULT = 100_000  # DeepSpeedZeroConfig.param_persistence_threshold default, pp_int(1e5)
UNSIZED_FROM = 2**20  # without the model: a threshold above this may keep attention projections whole
SHARE_PRICED_FROM = 0.01  # with the model: a kept-whole share from 1% of the weights is priced as all whole
KEYS = {"stage3_param_persistence_threshold": "param_persistence_threshold",
        "stage3_model_persistence_threshold": "model_persistence_threshold"}


def _elements(zero: dict, alias: str, path: Path) -> Optional[int]:
    """A threshold (by its alias or field name) as a whole element count >= 0; None when absent or "auto"."""
    for key in (alias, KEYS[alias]):
        value = zero.get(key)
        if value is None or value == "auto":
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not number or value < 0 or value != int(value):
            raise UserError(f"{path}: zero_optimization.{key}={short(value)} must be a whole number of elements >= 0")
        return int(value)
    return None


def _layer(m: ModelSpec, moe: bool) -> list[tuple[int, int]]:
    """(elements, count) of one layer's tensors in module order: norm, attention, norm, MLP or MoE block."""
    h, mats = m.hidden_size, 3 if m.activation == "swiglu" else 2
    norm = [(h, 2 if m.norm == "layernorm" else 1)]
    attn = [(round(i * o), 1) for i, o in attention_matrices(m, 1, fused_qkv=False)]
    if m.linear_bias:
        attn += [(round(o), 1) for _, o in attention_matrices(m, 1, fused_qkv=False)]
    elif m.qkv_bias:  # q, k and v only
        attn += [(round(o), 1) for _, o in attention_matrices(m, 1, fused_qkv=False)[:-1]]
    if m.qk_norm and m.mla is None:
        attn.append((m.head_dim, 2))
    if not moe:
        bias = [(m.ffn_hidden_size, mats - 1), (h, 1)] if m.linear_bias else []
        return norm + attn + norm + [(h * m.ffn_hidden_size, mats)] + bias
    experts = (m.num_experts + m.num_shared_experts) * mats
    return norm + attn + norm + [(h * m.num_experts, 1), (h * m.moe_ffn_hidden_size, experts)]


def tensors(m: ModelSpec) -> list[tuple[int, int]]:
    """(elements, count) of the model's weight tensors in module order (multi-token prediction modules left out)."""
    out = [(m.vocab_size * m.hidden_size, 1)]
    for index in range(m.num_layers):
        out += _layer(m, m.is_moe_layer(index))
    out.append((m.hidden_size, 2 if m.norm == "layernorm" else 1))
    return out + ([] if m.tied_embeddings else [(m.vocab_size * m.hidden_size, 1)])


def kept_whole(groups: list[tuple[int, int]], threshold: int, cap: Optional[int]) -> int:
    """Elements mark_persistent_parameters keeps whole: each tensor of at most `threshold` elements, in order,
    while the total stays within `cap` (None: no cap)."""
    total = 0
    for size, count in groups:
        if size > threshold or size == 0:
            continue
        room = count if cap is None else min(count, max(cap - total, 0) // size)
        total += room * size
    return total


def _whole(cfg: dict, why: str) -> list[str]:
    """Price cfg's ZeRO-3 as ZeRO-2 (weights whole); parameter offload moves nothing persistent."""
    zero = cfg["zero_optimization"]
    zero["stage"] = 2
    notes = [f"{why}; priced as ZeRO-2 (weights whole, gradients and optimizer states sharded)"]
    if isinstance(zero.get("offload_param"), dict) and zero.pop("offload_param").get("device") not in (None, "none"):
        notes.append("offload_param moves no persistent parameter off the GPU (partition_parameters.py keeps their "
                     "partitions on the local device): not priced")
    return notes


def _unsized(cfg: dict, threshold: int, cap: Optional[int]) -> list[str]:
    """The decision without the model."""
    said = f"zero_optimization.stage3_param_persistence_threshold={threshold:g}: parameters of at most that many " \
           "elements stay whole on every GPU (runtime/zero/parameter_offload.py mark_persistent_parameters)"
    if threshold > UNSIZED_FROM and (cap is None or cap > UNSIZED_FROM):
        return _whole(cfg, f"{said}; the JSON alone does not size the model's tensors, so every weight is taken as "
                           "kept whole, an upper bound")
    if threshold > UNSIZED_FROM:
        return [f"{said}, at most {cap:g} elements in all (stage3_model_persistence_threshold); not priced"]
    return [f"{said}: norms, biases, routers and any projection that small; not priced"]


def _sized(cfg: dict, spec: ModelSpec, threshold: int, cap: Optional[int]) -> list[str]:
    """The decision with the model's tensor sizes."""
    groups = tensors(spec)
    total = sum(size * count for size, count in groups)
    kept = kept_whole(groups, threshold, cap)
    said = (f"zero_optimization.stage3_param_persistence_threshold={threshold:g}: parameters of at most that many "
            f"elements stay whole on every GPU, {kept / total:.1%} of the weights ({kept:.3g} of {total:.3g})")
    if kept == total:
        return _whole(cfg, said)
    if kept >= SHARE_PRICED_FROM * total:
        return _whole(cfg, f"{said}, priced as if all were, an upper bound")
    return [f"{said}: not priced"] if threshold > DEFAULT else []


def apply(cfg: dict, path: Path, spec: Optional[ModelSpec] = None) -> list[str]:
    """Read the persistence thresholds of a ZeRO-3 config (cfg is the caller's copy, rewritten to stage 2 when the
    weights are priced whole); the notes saying what was decided. The default threshold, or none, changes nothing."""
    zero, pipe = cfg.get("zero_optimization"), cfg.get("pipeline")
    if not isinstance(zero, dict) or zero.get("stage") != 3:
        return []
    if isinstance(pipe, dict) and pipe.get("stages") not in (None, 1):  # refused by config_json.ds_zero as given
        return []
    threshold = _elements(zero, "stage3_param_persistence_threshold", path)
    cap = _elements(zero, "stage3_model_persistence_threshold", path)
    if threshold is None or (threshold <= DEFAULT and spec is None):
        return []
    return _sized(cfg, spec, threshold, cap) if spec is not None else _unsized(cfg, threshold, cap)
