"""Hugging Face config.json -> ModelSpec sliding-window fields (sliding_window, full_attention_interval).

Source: transformers 5.24 configuration classes (read from the PyPI wheel):
- GptOssConfig: sliding_window 128, layer_types default ["sliding_attention" if (i + 1) % 2 else "full_attention"]
  (layers 1, 3, ... windowed, 2, 4, ... full: Megatron's window_attn_skip_freq 2);
- MistralConfig: sliding_window (4096 in Mistral-7B-v0.1, null from v0.2), every layer;
- Qwen2Config / Qwen3Config: sliding_window only with use_sliding_window (else None); when layer_types is
  absent, __post_init__ builds it: "sliding_attention" for layers i >= max_window_layers (default 28), the
  first max_window_layers layers "full_attention" (modeling_qwen2.Qwen2Attention reads layer_types[i]);
- Qwen3MoeConfig: sliding_window only with use_sliding_window; it has no max_window_layers or layer_types, and
  modeling_qwen3_moe gives every attention layer config.sliding_window (one sliding mask for the model), so
  every layer is windowed.
masking_utils.sliding_window_overlay: query q sees keys q - w + 1 .. q (w keys), ModelSpec.sliding_window's meaning.
A pattern that is not "n - 1 windowed layers then a full one, repeated" is refused with a ValueError naming the
keys of the file that gave it (layer_types, or use_sliding_window, sliding_window and max_window_layers):
ModelSpec states the window by that interval.
"""

from __future__ import annotations

from typing import Any

from costmodels.attention_window import full_attention_interval_of

WINDOWED, FULL = "sliding_attention", "full_attention"


def window_fields(config: dict, model_type: str, num_layers: int) -> dict:
    """{sliding_window, full_attention_interval} for the config, or {} where no layer is windowed."""
    window = config.get("sliding_window")
    if model_type in ("qwen2", "qwen3", "qwen3_moe") and not config.get("use_sliding_window"):
        window = None
    if window is None or model_type not in ("mistral", "mixtral", "gpt_oss", "qwen2", "qwen3", "qwen3_moe"):
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
    if model_type == "qwen3_moe":  # Qwen3MoeConfig has no layer_types: every layer uses the window
        return [WINDOWED] * num_layers
    types = config.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers or any(t not in (WINDOWED, FULL) for t in types):
            raise ValueError(f"config.json key 'layer_types' must list {num_layers} of {WINDOWED!r} or {FULL!r}, "
                             f"got {_short(types)}")
        return types
    if model_type == "gpt_oss":
        return [WINDOWED if (i + 1) % 2 else FULL for i in range(num_layers)]
    if model_type in ("qwen2", "qwen3"):
        first = config.get("max_window_layers", 28)
        if not isinstance(first, int) or isinstance(first, bool):
            raise ValueError(f"config.json key 'max_window_layers' must be an integer, got {_short(first)}")
        return [WINDOWED if i >= first else FULL for i in range(num_layers)]
    return [WINDOWED] * num_layers


def _source(config: dict, types: list, window: int) -> str:
    """The keys of the file that gave the per-layer pattern `types`, with their values: layer_types when the
    file has it, else the Qwen2/Qwen3 keys it was derived from (as transformers' __post_init__ derives it)."""
    if "layer_types" in config:
        return f"config.json key 'layer_types' {_short(types)}"
    first = config.get("max_window_layers")
    given = f"max_window_layers={first}" if first is not None else "max_window_layers absent (default 28)"
    full = types.index(WINDOWED)
    return (f"config.json keys use_sliding_window=true, sliding_window={window}, {given}: layers 0-{full - 1} "
            f"attend fully and layers {full}-{len(types) - 1} through the window (as transformers derives "
            "layer_types from them)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
