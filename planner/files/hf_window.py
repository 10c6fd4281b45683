"""Hugging Face config.json -> ModelSpec sliding-window fields (sliding_window, full_attention_interval).

Source: transformers 5.24 configuration classes (read from the PyPI wheel):
- GptOssConfig: sliding_window 128, layer_types default ["sliding_attention" if (i + 1) % 2 else "full_attention"]
  (layers 1, 3, ... windowed, 2, 4, ... full: Megatron's window_attn_skip_freq 2);
- MistralConfig: sliding_window (4096 in Mistral-7B-v0.1, null from v0.2), every layer;
- Qwen2Config / Qwen3Config: sliding_window only with use_sliding_window (else None); when layer_types is
  absent, __post_init__ builds it: "sliding_attention" for layers i >= max_window_layers (default 28), the
  first max_window_layers layers "full_attention" (modeling_qwen2.Qwen2Attention reads layer_types[i]);
- Qwen3MoeConfig: sliding_window only with use_sliding_window; in 5.24 it has no max_window_layers or layer_types,
  and modeling_qwen3_moe gives every attention layer config.sliding_window (one sliding mask for the model), so
  every layer is windowed. transformers 4.51.3 (the version the published Qwen3-MoE files name) windowed only
  layers i >= max_window_layers (Qwen3MoeAttention.__init__), as Qwen2/Qwen3 do;
- Qwen2MoeConfig 5.24: layer_types, absent: "sliding_attention" for even i (i + 1 odd) below max_window_layers;
  4.51.3 windowed layers i >= max_window_layers (Qwen2MoeAttention.forward);
  so for qwen2_moe and qwen3_moe the file's transformers_version decides: below 5, the 4.x rule; 5 or absent, 5.24's;
- Phi3, PhiMoE, Starcoder2 (like Mistral): sliding_window on every layer; Gemma2Config / Gemma3TextConfig:
  layer_types (planner.files.hf_families fills them from the defaults: alternating, sliding_window_pattern).
masking_utils.sliding_window_overlay: query q sees keys q - w + 1 .. q (w keys), ModelSpec.sliding_window's meaning.
A pattern that is not "n - 1 windowed layers then a full one, repeated" is refused with a ValueError naming the
keys of the file that gave it (layer_types, or use_sliding_window, sliding_window and max_window_layers):
ModelSpec states the window by that interval.
"""

from __future__ import annotations

from typing import Any

from costmodels.attention_window import full_attention_interval_of
from planner.files.hf_read import transformers_major

WINDOWED, FULL = "sliding_attention", "full_attention"
EVERY_LAYER = ("mistral", "mixtral", "phi3", "phimoe", "starcoder2")  # one sliding mask for the whole model
QWEN = ("qwen2", "qwen3", "qwen3_moe", "qwen2_moe")  # a window only with use_sliding_window
WINDOW_TYPES = (*EVERY_LAYER, *QWEN, "gpt_oss", "gemma2", "gemma3_text")


def window_fields(config: dict, model_type: str, num_layers: int) -> dict:
    """{sliding_window, full_attention_interval} for the config, or {} where no layer is windowed."""
    window = config.get("sliding_window")
    if model_type in QWEN and not config.get("use_sliding_window"):
        window = None
    if window is None or model_type not in WINDOW_TYPES:
        return {}
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(f"config.json key 'sliding_window' must be a positive integer or null, got {window!r}")
    types = _layer_types(config, model_type, num_layers)
    interval = full_attention_interval_of([t == WINDOWED for t in types])
    if interval is None:
        raise ValueError(f"{_source(config, types, window)}: parplan reads a sliding window only as n - 1 "
                         "sliding_attention layers then one full_attention layer, repeated (or all of one kind)"
                         + ("" if "layer_types" in config else "; set use_sliding_window to false to price every "
                            "layer with full attention (an upper bound on attention time)"))
    return {} if interval == 1 else {"sliding_window": window, "full_attention_interval": interval}


def _layer_types(config: dict, model_type: str, num_layers: int) -> list:
    """Per-layer attention kinds as transformers reads them (module docstring)."""
    old = transformers_major(config) is not None and transformers_major(config) < 5
    if model_type == "qwen3_moe":  # 5.24's Qwen3MoeConfig has no layer_types: every layer uses the window
        return _from_max_window(config, num_layers) if old else [WINDOWED] * num_layers
    types = config.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers or any(t not in (WINDOWED, FULL) for t in types):
            raise ValueError(f"config.json key 'layer_types' must list {num_layers} of {WINDOWED!r} or {FULL!r}, "
                             f"got {_short(types)}")
        return types
    if model_type == "gpt_oss":
        return [WINDOWED if (i + 1) % 2 else FULL for i in range(num_layers)]
    if model_type in ("qwen2", "qwen3") or (model_type == "qwen2_moe" and old):
        return _from_max_window(config, num_layers)
    if model_type == "qwen2_moe":  # Qwen2MoeConfig 5.24's __post_init__
        first = _max_window_layers(config)
        return [WINDOWED if (i + 1) % 2 and i < first else FULL for i in range(num_layers)]
    return [WINDOWED] * num_layers


def _max_window_layers(config: dict) -> int:
    first = config.get("max_window_layers", 28)
    if not isinstance(first, int) or isinstance(first, bool):
        raise ValueError(f"config.json key 'max_window_layers' must be an integer, got {_short(first)}")
    return first


def _from_max_window(config: dict, num_layers: int) -> list:
    """Qwen2/Qwen3 (and transformers 4.x Qwen2-MoE/Qwen3-MoE): layers i >= max_window_layers use the window."""
    first = _max_window_layers(config)
    return [WINDOWED if i >= first else FULL for i in range(num_layers)]


def _source(config: dict, types: list, window: int) -> str:
    """The keys of the file that gave the per-layer pattern `types`, with their values: layer_types when the
    file has it, else the Qwen2/Qwen3 keys it was derived from (as transformers' __post_init__ derives it)."""
    if "layer_types" in config:
        return f"config.json key 'layer_types' {_short(types)}"
    first = config.get("max_window_layers")
    given = f"max_window_layers={first}" if first is not None else "max_window_layers absent (default 28)"
    full = types.index(WINDOWED)
    if types[full:] != [WINDOWED] * (len(types) - full):  # Qwen2MoeConfig 5.24: even layers below max_window_layers
        shown = [i for i, t in enumerate(types) if t == WINDOWED]
        return (f"config.json keys use_sliding_window=true, sliding_window={window}, {given}: layers "
                f"{_short(shown)} use the window, the others attend fully (transformers 5.24's Qwen2MoeConfig "
                "layer_types)")
    return (f"config.json keys use_sliding_window=true, sliding_window={window}, {given}: layers 0-{full - 1} "
            f"attend fully and layers {full}-{len(types) - 1} through the window (as transformers derives "
            "layer_types from them)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
