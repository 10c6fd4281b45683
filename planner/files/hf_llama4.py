"""Hugging Face Llama 4 configs -> ModelSpec fields (planner.files.hf_config calls it).

A Llama 4 `config.json` (model_type llama4) holds the language model under `text_config` (model_type
llama4_text); only that part is priced, not the vision encoder. transformers models/llama4/modeling_llama4.py:

| text_config | ModelSpec |
|---|---|
| intermediate_size_mlp | ffn_hidden_size (a dense layer's MLP) |
| num_local_experts, num_experts_per_tok, intermediate_size | num_experts, top_k, moe_ffn_hidden_size |
| (Llama4TextMoe.shared_expert, intermediate_size wide) | num_shared_experts = 1 |
| interleave_moe_layer_step n (moe_layers = n-1, 2n-1, ...) | moe_layer_period = n, moe_layer_offset = n - 1 |
| moe_layers (an explicit list) | first_k_dense_layers and the period that give it (costmodels.model_spec.moe_layer_fields); else refused |
| attention_chunk_size C (absent: 8192; null: none) on the chunked layers | sliding_window = C // 2, full_attention_interval |
| layer_types, else no_rope_layers (1 = rope = chunked), else every no_rope_layer_interval-th (4) layer full | which layers |

Chunked attention (transformers masking_utils chunked_overlay): query i sees the keys of its own C-long chunk up to
itself, i mod C + 1 of them, C/2 on average over a sequence of whole chunks; a sliding window w sees w (ModelSpec).
So a chunked layer is priced as a window of C // 2: the same keys per query on average, and the same fused-kernel
tiles within one tile per query row (costmodels.attention_window.visited_tiles). Exact for sequences up to C/2 (the
window then covers every key, as one chunk does); at s = C, where one chunk is plain causal attention, those
layers' attention-core time is under-estimated by about a quarter (1,584 vs 2,080 128x128 tiles at C = 8192), by
11% at 2C and 5% at 4C, tending to 0; pricing them as full attention, as before, over-estimated them 2x at 2C
and 4x at 4C. Model FLOPs (MFU) count C/2 keys per chunked query, where parplan's causal convention (no
halving, costmodels.attention_window) would count C: MFU reads low by those layers' attention-score FLOPs at
sequences beyond C/2 (Scout at 8,192 tokens: about 7% of its model FLOPs). A layer pattern that is not
"n - 1 chunked layers then a full one" is priced as full attention (an upper bound), with a warning.

Which tie_word_embeddings counts: text_config's. transformers (4.51 get_text_config(decoder=True); 5.24
Llama4ForCausalLM built from text_config) ties the output layer by it and ignores a top-level one, and so does
parplan; a top-level value that differs is warned about (`llama4_warnings`), as are the vision tower, which is
not priced (only the text tower is), and the chunked attention.

Known deviations: Llama4TextL2Norm (use_qk_norm) has no weights, so qk_norm is false.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from costmodels.attention_window import full_attention_interval_of
from costmodels.model_spec import MAX_LAYERS, moe_layer_fields

CHUNK_DEFAULT = 8192  # Llama4TextConfig.attention_chunk_size


# a vision-language model_type whose language model parplan reads from text_config -> that model's model_type
TEXT_TOWERS = {"llama4": "llama4_text", "gemma3": "gemma3_text"}


# where a vision-language wrapper keeps its language model's config: transformers' LLaVA, Mistral 3, Qwen2.5-VL (5.x)
# and most others under text_config; InternVL's remote code under llm_config
TOWER_KEYS = ("text_config", "llm_config")
# wrappers whose language model's keys sit at the top level (transformers 4.x Qwen2-VL, Qwen2.5-VL) -> its model_type
INLINE_TOWERS = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2"}
# a tower's own model_type that names a mapped family's text model (Qwen-VL's multimodal RoPE costs what RoPE does)
TOWER_ALIASES = {"qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2", "qwen3_vl_text": "qwen3"}


def wrapped_tower(config: dict) -> Optional[dict]:
    """The language model's config of a vision-language wrapper (a `vision_config` beside a `text_config` or
    `llm_config` object with its own string model_type), or None: llama4 and gemma3 (TEXT_TOWERS), and any
    model_type parplan maps itself (a mapped family's config is read as it is, whatever else it holds)."""
    from planner.files.hf_config import SUPPORTED_MODEL_TYPES  # noqa: PLC0415 - hf_config imports this module

    kind = config.get("model_type")
    if not isinstance(kind, str) or kind in TEXT_TOWERS or kind in SUPPORTED_MODEL_TYPES:
        return None  # a model_type that is no string is refused by the caller, naming the key
    if "vision_config" not in config:
        return None
    tower = next((config[k] for k in TOWER_KEYS if isinstance(config.get(k), dict)), None)
    if tower is not None and isinstance(tower.get("model_type"), str) and tower["model_type"] in TOWER_ALIASES:
        tower = {**tower, "model_type": TOWER_ALIASES[tower["model_type"]]}
    if tower is None and kind in INLINE_TOWERS and "num_hidden_layers" in config:
        return {**{k: v for k, v in config.items() if k != "vision_config"}, "model_type": INLINE_TOWERS[kind]}
    return tower if tower is not None and isinstance(tower.get("model_type"), str) else None


def text_config(config: dict) -> dict:
    """The language model's config: `text_config` of a llama4 or gemma3 config, the tower of another vision-language
    wrapper (wrapped_tower), else the config itself."""
    kind = config.get("model_type")
    if kind not in TEXT_TOWERS:
        return wrapped_tower(config) or config
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise ValueError(f"config.json model_type {kind!r} needs a 'text_config' object (its language model)")
    return {**text, "model_type": TEXT_TOWERS[kind]}


def vision_warning(config: dict) -> list:
    """A vision tower (Gemma 3's SigLIP, a wrapper's encoder) left unpriced, said (Llama 4's: llama4_warnings)."""
    if config.get("model_type") == "gemma3" and isinstance(config.get("vision_config"), dict):
        return ["vision_config: the vision encoder (SigLIP) and its projector are not priced: only the text tower "
                "(text_config) is, its parameters, optimizer state, activations and time"]
    tower = wrapped_tower(config)
    if tower is None:
        return []
    key = next((k for k in TOWER_KEYS if isinstance(config.get(k), dict)), "the top-level keys")
    return [f"model_type {config.get('model_type')!r} is a vision-language model: only its language model ({key}, "
            f"model_type {tower['model_type']!r}) is priced, its parameters, optimizer state, activations and time; "
            "the vision encoder, its projector and the image tokens are not"]


def llama4_fields(config: dict, num_layers: int, read_int: Callable[..., Any]) -> dict:
    """ModelSpec fields of a llama4_text config beyond the shared Llama ones; `read_int` is hf_config's
    checked integer reader (key, default)."""
    step = read_int(config, "interleave_moe_layer_step", 1)
    if not 1 <= step <= num_layers:
        raise ValueError(f"config.json key 'interleave_moe_layer_step' must be 1 to num_hidden_layers, got {step}")
    layers = config.get("moe_layers")
    if layers is None:
        layers = list(range(step - 1, num_layers, step))
    interleave = _moe_layers(layers, num_layers)
    return dict(ffn_hidden_size=read_int(config, "intermediate_size_mlp"), qk_norm=False,
                num_experts=read_int(config, "num_local_experts"), top_k=read_int(config, "num_experts_per_tok"),
                moe_ffn_hidden_size=read_int(config, "intermediate_size"), num_shared_experts=1, **interleave,
                **chunk_window(config, num_layers, read_int))


def chunk_window(text: dict, num_layers: int, read_int: Callable[..., Any]) -> dict:
    """{sliding_window: C // 2, full_attention_interval} for the chunked layers (module docstring); {} when none is
    chunked or their pattern cannot be stated by an interval (priced as full attention then)."""
    chunk = read_int(text, "attention_chunk_size", None) if "attention_chunk_size" in text else CHUNK_DEFAULT
    if chunk is None:
        return {}
    if chunk < 1:
        raise ValueError(f"config.json key 'attention_chunk_size' must be a positive integer or null, got {chunk}")
    interval = full_attention_interval_of(chunked_layers(text, num_layers, read_int))
    if interval is None or interval == 1:
        return {}
    return {"sliding_window": max(1, chunk // 2), "full_attention_interval": interval}


def chunked_layers(text: dict, num_layers: int, read_int: Callable[..., Any]) -> list:
    """Per layer, whether it attends within chunks: Llama4TextConfig's layer_types ("chunked_attention"), else its
    no_rope_layers (1: a rope layer, chunked), else layer i chunked unless (i + 1) % no_rope_layer_interval == 0."""
    types = text.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers or any(
                t not in ("chunked_attention", "full_attention") for t in types):
            raise ValueError(f"config.json key 'layer_types' must list {num_layers} of 'chunked_attention' or "
                             f"'full_attention', got {str(types)[:60]}")
        return [t == "chunked_attention" for t in types]
    rope = text.get("no_rope_layers")
    if rope:  # an empty list means the default (Llama4TextConfig.__post_init__)
        if not isinstance(rope, list) or len(rope) != num_layers or any(r not in (0, 1) or isinstance(r, bool)
                                                                         for r in rope):
            raise ValueError(f"config.json key 'no_rope_layers' must list {num_layers} of 0 or 1, got "
                             f"{str(rope)[:60]}")
        return [r == 1 for r in rope]
    every = read_int(text, "no_rope_layer_interval", 4)
    if every < 1:
        raise ValueError(f"config.json key 'no_rope_layer_interval' must be at least 1, got {every}")
    return [(i + 1) % every != 0 for i in range(num_layers)]


def llama4_warnings(config: dict, read_int: Callable[..., Any]) -> list:
    """What a llama4 config.json sets that parplan does not price as the checkpoint runs: the vision tower, the
    chunked attention's approximation, a top-level tie_word_embeddings that differs from text_config's."""
    if config.get("model_type") not in ("llama4", "llama4_text"):
        return []
    text = text_config(config)
    lines = []
    vision = config.get("vision_config")
    if config.get("model_type") == "llama4" and isinstance(vision, dict):
        size = _vision_size(vision, text.get("hidden_size"))
        lines.append("vision_config: the vision encoder and its projector" + (f" (about {size / 1e9:.2f}B "
                     "parameters)" if size else "") + " are not priced: only the text tower (text_config) is, its "
                     "parameters, optimizer state, activations and time")
    layers = read_int(text, "num_hidden_layers")
    if not 1 <= layers <= MAX_LAYERS:
        return lines
    chunk = text.get("attention_chunk_size", CHUNK_DEFAULT)
    if isinstance(chunk, int) and not isinstance(chunk, bool) and chunk > 0:
        flags = chunked_layers(text, layers, read_int)
        priced = chunk_window(text, layers, read_int)
        if priced:
            lines.append(f"text_config.attention_chunk_size={chunk}: the {sum(flags)} chunked-attention layers of "
                         f"{layers} are priced as a sliding window of {priced['sliding_window']} (C/2, the mean keys a "
                         f"query sees): exact up to {priced['sliding_window']} tokens, attention time under-estimated "
                         f"by up to a quarter on those layers near {chunk} tokens")
        elif any(flags):
            lines.append(f"text_config.attention_chunk_size={chunk}: its chunked layers do not repeat as n - 1 "
                         "chunked then one full layer; every layer is priced with full attention (an upper bound "
                         f"beyond {chunk} tokens)")
    top, inner = config.get("tie_word_embeddings"), text.get("tie_word_embeddings", False)
    if config.get("model_type") == "llama4" and isinstance(top, bool) and top != bool(inner):
        lines.append(f"tie_word_embeddings={str(top).lower()} at the top level is ignored, as transformers ignores "
                     f"it: text_config's ({str(bool(inner)).lower()}) ties the output layer")
    return lines


def _vision_size(vision: dict, text_hidden: Any) -> Optional[int]:
    """About the vision tower's parameters (its matrices, modeling_llama4.py): encoder layers 4h^2 + 2hf each, the
    pixel-shuffle adapter (h / r^2) x p_in + p_in x p_out and the projector vision_output_dim x the text width;
    None without the encoder's keys. Scout's: 0.81B + 0.04B + 0.02B = 0.87B."""
    def size(v: Any) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**7 else 0
    h, f, n = (size(vision.get(k)) for k in ("hidden_size", "intermediate_size", "num_hidden_layers"))
    if not (h and f and n):
        return None
    ratio = vision.get("pixel_shuffle_ratio")
    ratio = ratio if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0.01 <= ratio <= 1 else 1
    p_in, p_out = size(vision.get("projector_input_dim")), size(vision.get("projector_output_dim"))
    return (n * (4 * h * h + 2 * h * f) + int(h / ratio**2) * p_in + p_in * p_out
            + size(vision.get("vision_output_dim")) * size(text_hidden))


def _moe_layers(layers: Any, num_layers: int) -> dict:
    """The layer-kind fields of the MoE layers' indices (ModelSpec.moe_layer_fields, the one inverse)."""
    if not isinstance(layers, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in layers):
        raise ValueError(f"config.json key 'moe_layers' must list layer indices, got {str(layers)[:60]}")
    wanted = set(layers)
    fields = moe_layer_fields([i in wanted for i in range(num_layers)])
    if fields is None:
        raise ValueError(f"config.json key 'moe_layers' {str(layers)[:60]}: parplan prices dense leading layers "
                         "followed by MoE layers every n-th layer; this list is not that")
    return fields
