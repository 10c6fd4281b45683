"""Hugging Face config.json -> ModelSpec sliding-window fields (sliding_window, full_attention_interval).

Source: transformers 5.24 configuration classes (read from the PyPI wheel):
- GptOssConfig: sliding_window 128, layer_types default ["sliding_attention" if (i + 1) % 2 else "full_attention"]
  (layers 1, 3, ... windowed, 2, 4, ... full: Megatron's window_attn_skip_freq 2);
- MistralConfig: sliding_window (4096 in Mistral-7B-v0.1, null from v0.2), every layer;
- Qwen2Config / Qwen3Config / Qwen3MoeConfig: sliding_window only with use_sliding_window, on the layers from
  max_window_layers on (layer_types built from them when absent).
masking_utils.sliding_window_overlay: query q sees keys q - w + 1 .. q (w keys), ModelSpec.sliding_window's meaning.
A layer_types list that is not "n - 1 windowed layers then a full one, repeated" is refused with a ValueError
naming it: ModelSpec states the window by that interval.
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
        raise ValueError(f"config.json key 'layer_types' {_short(types)}: parplan reads n - 1 sliding_attention "
                         "layers then one full_attention layer, repeated (or all of one kind)")
    return {} if interval == 1 else {"sliding_window": window, "full_attention_interval": interval}


def _layer_types(config: dict, model_type: str, num_layers: int) -> list:
    types = config.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers or any(t not in (WINDOWED, FULL) for t in types):
            raise ValueError(f"config.json key 'layer_types' must list {num_layers} of {WINDOWED!r} or {FULL!r}, "
                             f"got {_short(types)}")
        return types
    if model_type == "gpt_oss":
        return [WINDOWED if (i + 1) % 2 else FULL for i in range(num_layers)]
    if model_type in ("qwen2", "qwen3", "qwen3_moe"):
        first = config.get("max_window_layers", 28)
        if not isinstance(first, int) or isinstance(first, bool):
            raise ValueError(f"config.json key 'max_window_layers' must be an integer, got {_short(first)}")
        return [WINDOWED if i >= first else FULL for i in range(num_layers)]
    return [WINDOWED] * num_layers


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
