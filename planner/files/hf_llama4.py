"""Hugging Face Llama 4 configs -> ModelSpec fields (planner.files.hf_config calls it).

A Llama 4 `config.json` (model_type llama4) holds the language model under `text_config` (model_type
llama4_text); only that part is priced, not the vision encoder. transformers models/llama4/modeling_llama4.py:

| text_config | ModelSpec |
|---|---|
| intermediate_size_mlp | ffn_hidden_size (a dense layer's MLP) |
| num_local_experts, num_experts_per_tok, intermediate_size | num_experts, top_k, moe_ffn_hidden_size |
| (Llama4TextMoe.shared_expert, intermediate_size wide) | num_shared_experts = 1 |
| interleave_moe_layer_step n (moe_layers = n-1, 2n-1, ...) | moe_layer_period = n, moe_layer_offset = n - 1 |
| moe_layers (an explicit list) | the same fields when the list is every n-th layer from n - 1; else refused |

Known deviations: Llama4TextL2Norm (use_qk_norm) has no weights, so qk_norm is false; three of four layers
attend within `attention_chunk_size` chunks (8,192 in the published configs), priced as full causal attention,
exact up to that sequence length and an over-estimate beyond it.
"""

from __future__ import annotations

from typing import Any, Callable


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
    _check_moe_layers(config.get("moe_layers"), step, num_layers)
    interleave = {"moe_layer_period": step, "moe_layer_offset": step - 1} if step > 1 else {}
    return dict(ffn_hidden_size=read_int(config, "intermediate_size_mlp"), qk_norm=False,
                num_experts=read_int(config, "num_local_experts"), top_k=read_int(config, "num_experts_per_tok"),
                moe_ffn_hidden_size=read_int(config, "intermediate_size"), num_shared_experts=1, **interleave)


def _check_moe_layers(layers: Any, step: int, num_layers: int) -> None:
    if layers is None:
        return
    if layers != list(range(step - 1, num_layers, step)):
        raise ValueError(f"config.json key 'moe_layers' {str(layers)[:60]}: parplan prices MoE on every "
                         f"interleave_moe_layer_step-th layer ({step}); this list is not that")
