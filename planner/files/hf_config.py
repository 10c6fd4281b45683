"""Hugging Face `config.json` -> ModelSpec, for decoder-only transformers.

Supported `model_type`: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, gpt_oss,
llama4 / llama4_text (planner.files.hf_llama4), and the families of planner.files.hf_families (kimi_k2,
internlm2, granite, phi3, phimoe, qwen2_moe, gemma, gemma2, gemma3_text, olmo2, olmoe, starcoder2, dbrx,
glm4_moe, falcon). Others are refused, saying whether the architecture is one parplan cannot represent
(planner.files.hf_notes.refusal). Mapping:

| config.json | ModelSpec |
|---|---|
| num_hidden_layers, hidden_size, num_attention_heads, vocab_size | same meaning |
| num_key_value_heads (absent: = heads), head_dim (absent/null: hidden/heads) | num_kv_heads, head_dim |
| intermediate_size | ffn_hidden_size (dense MLP width) |
| tie_word_embeddings (absent: false, the default of these config classes) | tied_embeddings |
| attention_bias / mlp_bias (llama, qwen3, qwen3_moe) | linear_bias (true if either is true) |
| attention_dropout > 0 | dropout |
| mixtral: num_local_experts, num_experts_per_tok, intermediate_size | num_experts, top_k, moe_ffn_hidden_size |
| qwen3_moe: num_experts, num_experts_per_tok, moe_intermediate_size | num_experts, top_k, moe_ffn_hidden_size |
| qwen3_moe: mlp_only_layers = [0, 1, ..., k-1] | first_k_dense_layers = k |
| qwen3_moe: decoder_sparse_step = n (MoE where (i + 1) % n == 0) | moe_layer_period = n, moe_layer_offset = n - 1 |
| deepseek_v2/v3: n_routed_experts, num_experts_per_tok, moe_intermediate_size, n_shared_experts, first_k_dense_replace | num_experts, top_k, moe_ffn_hidden_size, num_shared_experts, first_k_dense_layers |
| deepseek_v2/v3: q_lora_rank (null: 0), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim | mla (its latent norms: qk_norm true) |
| deepseek_v3: num_nextn_predict_layers (absent: 0) | mtp_num_layers |
| deepseek_v3 (absent: 8, 4), glm4_moe (absent: 1, 1), deepseek_v2 only with topk_method group_limited_greedy: n_group, topk_group | moe_router_num_groups, moe_router_group_topk |
| gpt_oss: num_local_experts, num_experts_per_tok, intermediate_size, attention_bias, swiglu_limit (absent: 7.0) | num_experts, top_k, moe_ffn_hidden_size, linear_bias, glu_clamp; attention_sinks true (its `sinks`) |
| sliding_window with layer_types (mistral, mixtral, gpt_oss; qwen2/3 with use_sliding_window and max_window_layers; qwen2_moe/qwen3_moe with use_sliding_window: by the file's transformers_version) | sliding_window, full_attention_interval (planner.files.hf_window) |
| max_position_embeddings | seq_length = min(it, 4096) unless `seq_length` is given (absent: 4096) |

Fixed for all of these architectures: norm rmsnorm, activation swiglu (their MLP is always gated,
three matrices; `hidden_act` only names the gate function), position_embedding rope; qk_norm true
for qwen3 and qwen3_moe.

Known deviations (parameter counts are otherwise exact):
- qwen2 (and qwen2_moe) have biases on the Q, K and V projections only (no output-projection or MLP
  biases): qkv_bias=true with linear_bias=false, which Megatron writes as --add-qkv-bias.
- A llama config with attention_bias but not mlp_bias (or the reverse) maps to linear_bias=true,
  overcounting the missing biases by a similarly negligible amount.
- qwen3_moe layouts that ModelSpec cannot express are refused with a ValueError: mlp_only_layers that
  are not a leading block of layers.
- RoPE scaling (YaRN included) and router details (norm_topk_prob, aux-loss coefficients) do not change
  parameter counts or the cost model and are ignored. gpt_oss's quick-GELU gate (swiglu_alpha) and +1 on
  the linear half are priced as SwiGLU (same matrices, same element-wise bytes).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import ValidationError

from costmodels.model_spec import MAX_LAYERS, ModelSpec
from planner.files.hf_families import FAMILY_TYPES, family_config, family_fields, family_keys
from planner.files.hf_llama4 import TEXT_TOWERS, llama4_fields, text_config, wrapped_tower
from planner.files.hf_notes import hf_name, located, refusal
from planner.files.hf_read import read_bool as _bool, read_int as _int, read_prob, router_groups, short as _short
from planner.files.hf_window import window_fields

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
                         "gpt_oss", "llama4", "llama4_text", "gemma3", *FAMILY_TYPES)
TOWER_TYPES = tuple(t for t in SUPPORTED_MODEL_TYPES if t not in TEXT_TOWERS)  # a wrapper's language model may be
DEEPSEEK = ("deepseek_v2", "deepseek_v3")
DEFAULT_MAX_SEQ = 4096


# ModelSpec field -> the config.json key it comes from, so that errors speak config.json's names.
FIELD_KEYS = {"num_layers": "num_hidden_layers", "num_kv_heads": "num_key_value_heads",
              "ffn_hidden_size": "intermediate_size", "seq_length": "max_position_embeddings",
              "tied_embeddings": "tie_word_embeddings", "top_k": "num_experts_per_tok",
              "first_k_dense_layers": "mlp_only_layers"}
MOE_FIELD_KEYS = {"mixtral": {"num_experts": "num_local_experts", "moe_ffn_hidden_size": "intermediate_size"},
                  "gpt_oss": {"num_experts": "num_local_experts", "moe_ffn_hidden_size": "intermediate_size",
                              "glu_clamp": "swiglu_limit", "sliding_window": "sliding_window"},
                  "qwen3_moe": {"num_experts": "num_experts", "moe_ffn_hidden_size": "moe_intermediate_size"},
                  **{t: {"num_experts": "n_routed_experts", "moe_ffn_hidden_size": "moe_intermediate_size",
                         "num_shared_experts": "n_shared_experts", "first_k_dense_layers": "first_k_dense_replace",
                         "mtp_num_layers": "num_nextn_predict_layers", "moe_router_num_groups": "n_group",
                         "moe_router_group_topk": "topk_group"}
                     for t in DEEPSEEK}}


HF_REQUIRED_KEYS = ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                    "vocab_size")
HF_ONLY_KEYS = {"num_hidden_layers", "intermediate_size", "num_key_value_heads", "max_position_embeddings",
                "architectures", "torch_dtype", "rms_norm_eps", "rope_theta"}


def hf_hint(data: Any, where: str) -> Optional[str]:
    """The one-line message for a mapping that is a Hugging Face config without its model_type (or an
    empty config.json), naming the Hugging Face keys it needs, not parplan's; None for anything else."""
    if not isinstance(data, dict) or "model_type" in data:
        return None
    if data and not HF_ONLY_KEYS & set(map(str, data)):
        return None
    if not data and not str(where).endswith("config.json"):
        return None
    missing = [k for k in HF_REQUIRED_KEYS if k not in data]
    return (f"{where}: a Hugging Face config.json needs {', '.join(missing)} (model_type one of "
            f"{', '.join(SUPPORTED_MODEL_TYPES[:9])} and {len(SUPPORTED_MODEL_TYPES) - 9} more: docs/models.md)")


def _dropout(config: dict) -> bool:
    """attention_dropout > 0; it must be a probability (a number from 0 to 1)."""
    return read_prob(config, "attention_dropout")


def _moe_layers(config: dict, num_layers: int, kind: str = "qwen3_moe") -> dict:
    """qwen3_moe, qwen2_moe: which layers are MoE (Qwen3MoeDecoderLayer, Qwen2MoeDecoderLayer: not in
    mlp_only_layers and (i + 1) % decoder_sparse_step == 0): first_k_dense_layers, and moe_layer_period/offset
    for a step above 1. Refuses mlp_only_layers that are not a leading block."""
    step = _int(config, "decoder_sparse_step", 1)
    if step < 1 or step > num_layers:
        raise ValueError(f"{kind} decoder_sparse_step={step} must be from 1 to num_hidden_layers={num_layers}")
    interleave = {"moe_layer_period": step, "moe_layer_offset": step - 1} if step > 1 else {}
    return {"first_k_dense_layers": _first_dense_layers(config, num_layers, kind), **interleave}


def _first_dense_layers(config: dict, num_layers: int, kind: str) -> int:
    """qwen3_moe, qwen2_moe: number of leading dense layers (mlp_only_layers = [0, ..., k-1])."""
    dense = config.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in dense):
        raise ValueError(f"{kind} mlp_only_layers must be a list of layer indices, got {_short(dense)}")
    if sorted(set(dense)) != list(range(len(dense))):
        raise ValueError(
            f"{kind} mlp_only_layers={_short(dense)} is not supported: only a leading block [0, 1, ..., k-1] of "
            f"dense layers can be expressed (first_k_dense_layers)"
        )
    if len(dense) >= num_layers:
        raise ValueError(f"{kind} mlp_only_layers covers all {num_layers} layers; use a dense model_type")
    return len(dense)


def _deepseek(config: dict) -> dict:
    """DeepSeek-V2/V3 (transformers DeepseekV3Config): multi-head latent attention and its experts.
    Layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0 (modeling_deepseek.py;
    the published models use 1); the shared experts are one MLP n_shared_experts x moe_intermediate_size wide."""
    freq = _int(config, "moe_layer_freq", 1)
    if freq < 1:
        raise ValueError(f"config.json key 'moe_layer_freq' must be at least 1, got {freq}")
    mla = dict(q_lora_rank=_int(config, "q_lora_rank", 0), kv_lora_rank=_int(config, "kv_lora_rank"),
               qk_nope_head_dim=_int(config, "qk_nope_head_dim"), qk_rope_head_dim=_int(config, "qk_rope_head_dim"),
               v_head_dim=_int(config, "v_head_dim"))
    return dict(num_kv_heads=None, head_dim=None, qk_norm=True, mla=mla,
                num_experts=_int(config, "n_routed_experts"), top_k=_int(config, "num_experts_per_tok"),
                moe_ffn_hidden_size=_int(config, "moe_intermediate_size"),
                num_shared_experts=_int(config, "n_shared_experts", 0),
                first_k_dense_layers=_int(config, "first_k_dense_replace", 0), moe_layer_period=freq,
                mtp_num_layers=_int(config, "num_nextn_predict_layers", 0), **router_groups(config))


def model_from_hf_config(config: dict, name: str = "hf-model", seq_length: Optional[int] = None) -> ModelSpec:
    """Map a Hugging Face config.json dict (any SUPPORTED_MODEL_TYPES) to a ModelSpec.

    `seq_length` overrides the default min(max_position_embeddings, 4096). Raises ValueError for an
    unsupported or missing `model_type` (hf_notes.refusal: why, and what to do), a missing required key
    (named), or a non-integer size. What the file sets that is priced otherwise: hf_notes.hf_warnings.
    """
    if not isinstance(config, dict):
        raise ValueError(f"config must be a JSON object (dict), got {type(config).__name__}")
    tower = wrapped_tower(config)  # a vision-language wrapper around a mapped language model: that model
    if config.get("model_type") not in SUPPORTED_MODEL_TYPES and (tower is None or tower["model_type"] not in
                                                                   TOWER_TYPES):
        raise ValueError(refusal(config, SUPPORTED_MODEL_TYPES))
    config = text_config(config)  # llama4, gemma3, other wrappers: the language model (planner.files.hf_llama4)
    config = family_config(config)  # other families' keys and defaults as Llama's (planner.files.hf_families)
    model_type = config.get("model_type")

    heads = _int(config, "num_attention_heads")
    num_layers = _int(config, "num_hidden_layers")
    if not 1 <= num_layers <= MAX_LAYERS:  # before the window and MoE readers build anything per layer
        raise ValueError(f"config.json key 'num_hidden_layers' must be 1 to {MAX_LAYERS}, got {num_layers}")
    ffn = _int(config, "intermediate_size")
    if seq_length is None:
        seq_length = min(_int(config, "max_position_embeddings", DEFAULT_MAX_SEQ), DEFAULT_MAX_SEQ)

    spec: dict[str, Any] = dict(
        name=name,
        num_layers=num_layers,
        hidden_size=_int(config, "hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=_int(config, "num_key_value_heads", heads),
        head_dim=_int(config, "head_dim", None),
        ffn_hidden_size=ffn,
        vocab_size=_int(config, "vocab_size"),
        seq_length=seq_length,
        activation="swiglu",
        norm="rmsnorm",
        position_embedding="rope",
        tied_embeddings=_bool(config, "tie_word_embeddings"),
        linear_bias=False,
        qk_norm=model_type in ("qwen3", "qwen3_moe"),
        qkv_bias=model_type == "qwen2",
        dropout=_dropout(config),
    )
    if model_type in ("llama", "qwen3", "qwen3_moe"):
        spec["linear_bias"] = _bool(config, "attention_bias") or _bool(config, "mlp_bias")
    if model_type == "llama4_text":
        spec.update(llama4_fields(config, num_layers, _int), linear_bias=_bool(config, "attention_bias"))
    if model_type in DEEPSEEK:
        spec.update(_deepseek(config), linear_bias=_bool(config, "attention_bias"))

    if model_type == "gpt_oss":
        spec.update(linear_bias=_bool(config, "attention_bias"), attention_sinks=True, glu_clamp=_limit(config))
    if model_type in ("mixtral", "gpt_oss"):
        experts = _int(config, "num_local_experts")
        if experts < 1:
            raise ValueError(f"config.json key 'num_local_experts' must be at least 1 for {model_type}, got {experts}")
        spec.update(num_experts=experts, top_k=_int(config, "num_experts_per_tok"), moe_ffn_hidden_size=ffn)
    elif model_type == "qwen3_moe":
        experts = _int(config, "num_experts")
        if experts:
            spec.update(num_experts=experts, top_k=_int(config, "num_experts_per_tok"),
                        moe_ffn_hidden_size=_int(config, "moe_intermediate_size"),
                        **_moe_layers(config, num_layers))
    if model_type in FAMILY_TYPES:
        spec.update(family_fields(config, model_type, num_layers, _moe_layers))
    spec.update(window_fields(config, model_type, num_layers))
    return _validate(spec, model_type)


def _limit(config: dict) -> float:
    """gpt_oss swiglu_limit (absent: GptOssConfig's 7.0), a positive number."""
    value = config.get("swiglu_limit", 7.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"config.json key 'swiglu_limit' must be a number above 0, got {_short(value)}")
    return float(value)


def _validate(spec: dict, model_type: str) -> ModelSpec:
    """ModelSpec.model_validate(spec), its errors on one line in config.json's key names, each once (mixtral's
    intermediate_size fills two fields: one problem)."""
    try:
        return ModelSpec.model_validate(spec)
    except ValidationError as err:
        keys = {**FIELD_KEYS, **MOE_FIELD_KEYS.get(model_type, {}), **family_keys(model_type)}
        lines = [_describe(e, keys) for e in err.errors(include_url=False)]
        raise ValueError("; ".join(dict.fromkeys(lines))) from None


def _describe(error: dict, keys: dict) -> str:
    msg = _renamed(error.get("msg", "invalid").removeprefix("Value error, "), keys)
    loc = [str(p) for p in error.get("loc", ())]
    if not loc:
        return msg
    name = loc[1] if loc[0] == "mla" and len(loc) > 1 else loc[0]  # MLA's fields carry config.json's names
    return f"config.json key {keys.get(name, name)!r}: {msg} (got {_short(error.get('input'))})"


def _renamed(text: str, keys: dict) -> str:
    """ModelSpec's field names in `text` replaced by config.json's."""
    return re.sub(r"\b(" + "|".join(map(re.escape, keys)) + r")\b", lambda m: keys[m.group(1)], text)


def load_hf_config_file(
    path: Union[str, Path], name: Optional[str] = None, seq_length: Optional[int] = None
) -> ModelSpec:
    """Read a config.json and map it with `model_from_hf_config`.

    The name defaults to hf_notes.hf_name's: the last part of `_name_or_path` if present, else the folder's name
    of a config.json, else the file's stem. Unreadable files, invalid JSON and mapping errors raise ValueError
    naming the path (once).
    """
    path = Path(path)
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read Hugging Face config: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a Hugging Face config.json must be a JSON object")
    if name is None:
        name = hf_name(config, path)
    try:
        return model_from_hf_config(config, name=name, seq_length=seq_length)
    except ValueError as exc:
        raise ValueError(located(path, exc)) from exc
