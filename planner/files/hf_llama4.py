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

Known deviations: Llama4TextL2Norm (use_qk_norm) has no weights, so qk_norm is false; three of four layers
attend within `attention_chunk_size` chunks (8,192 in the published configs), priced as full causal attention,
exact up to that sequence length and an over-estimate beyond it.
"""

from __future__ import annotations

from typing import Any, Callable

from costmodels.model_spec import moe_layer_fields


def text_config(config: dict) -> dict:
    """The language model's config: `text_config` of a llama4 config, the config itself for llama4_text."""
    if config.get("model_type") != "llama4":
        return config
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise ValueError("config.json model_type 'llama4' needs a 'text_config' object (its language model)")
    return {**text, "model_type": "llama4_text"}


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
                moe_ffn_hidden_size=read_int(config, "intermediate_size"), num_shared_experts=1, **interleave)


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
