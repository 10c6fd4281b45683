"""Hugging Face config.json -> ModelSpec for the decoder-only families beyond Llama/Mistral/Qwen/DeepSeek/gpt-oss
(planner.files.hf_config calls `family_config` first, then the shared Llama reader, then `family_fields`).

Read from the transformers 5.24 modeling and configuration files of each model_type (InternLM2 and Kimi-K2 from
their Hub repositories' remote code, which transformers does not ship). `family_config` renames keys to the
Llama names the shared reader uses and fills transformers' defaults for absent keys; `family_fields` sets what
differs from Llama (rmsnorm, SwiGLU, rope, no biases):

| model_type | what it maps | known deviations (all under 0.01% of the parameters unless stated) |
|---|---|---|
| kimi_k2 | every key is DeepSeek-V3's (architectures DeepseekV3ForCausalLM): read as deepseek_v3 | none beyond deepseek_v3's |
| internlm2 | Llama with fused wqkv (same matrices); `bias` (wqkv, wo) -> linear_bias | bias=true also counts MLP biases |
| granite | Llama plus embedding/residual/attention/logit multipliers (scalars, no cost) | none |
| granitemoehybrid (Granite 4.0) | when every `layer_types` entry is "attention" (granite-4.0-micro): read as granitemoeshared with experts, else as granite with shared_intermediate_size as its MLP width (GraniteMoeSharedMLP: SwiGLU); with any "mamba" layer refused as a hybrid | position_embedding_type nope changes no cost |
| granitemoe, granitemoeshared | granite's attention; num_local_experts SwiGLU experts intermediate_size wide, num_experts_per_tok per token on every layer; granitemoeshared's shared_intermediate_size as whole expert widths | the router counted as every MoE's (experts x hidden) |
| phi3 | Llama with fused qkv_proj and gate_up_proj (same matrices); sliding_window on every layer | none |
| gemma | head_dim 256, GeGLU (gate, up, down: priced as SwiGLU), tie_word_embeddings default true | none |
| gemma2 | as gemma; layer_types (absent: layers 0, 2, ... windowed, 1, 3, ... full; sliding_window default 4096) | 2 more norms per layer (pre/post feed-forward: 2h) |
| gemma3_text (gemma3: its text_config, the vision tower warned) | as gemma2 with per-head q_norm/k_norm (qk_norm); layer_types, else sliding_window_pattern p (default 6): layer i full when (i + 1) % p == 0 | as gemma2; use_bidirectional_attention (an encoder) refused |
| olmo2, olmoe | q_norm/k_norm over the whole projection (qk_norm); olmoe: num_experts, num_experts_per_tok, intermediate_size (each expert) on every layer | ModelSpec's qk_norm counts 2 x head_dim, OLMo's (heads + kv heads) x head_dim |
| starcoder2 | activation gelu (c_fc, c_proj: not gated), norm layernorm, use_bias -> linear_bias, tied by default, sliding_window on every layer; dropout from attention/residual/embedding_dropout | none |
| dbrx | d_model, n_layers, n_heads, max_seq_len; attn_config.kv_n_heads; ffn_config.ffn_hidden_size, moe_num_experts, moe_top_k (GLU experts on every layer) | LayerNorm without bias read as rmsnorm (same weights; the normalisation's element-wise work differs negligibly); clip_qkv is element-wise |
| phimoe | Mixtral's keys; norm layernorm; sliding_window on every layer | attention biases and lm_head_bias not counted (linear_bias would also count expert biases, 25x more) |
| glm4_moe | DeepSeek-style experts (n_routed_experts, n_shared_experts, first_k_dense_replace, num_nextn_predict_layers) with plain GQA attention (q/k/v/o projections, no MLA); use_qk_norm -> qk_norm | q/k/v biases (attention_bias) as qkv_bias; the router's e_score_correction_bias not counted |
| qwen2_moe | as qwen3_moe (num_experts, decoder_sparse_step, mlp_only_layers) plus one shared expert shared_expert_intermediate_size wide = num_shared_experts of moe_intermediate_size each (refused unless a whole multiple) | the shared expert's sigmoid gate (h per MoE layer) not counted; q/k/v biases as qkv_bias |
| falcon | ffn_hidden_size (absent: 4h), GELU MLP, LayerNorm, `bias`, tied by default; K/V heads: num_kv_heads with new_decoder_architecture, else 1 with multi_query, else all; alibi -> no position parameters | parallel attention and MLP (parallel_attn) priced as sequential: see `FALCON_PARALLEL` |

Not costed, by design: Gemma-2's attention and final logit soft-capping (tanh over scores, inside the fused
attention kernel, and over the logits: element-wise work beside the GEMMs, well under 1% of a step), Gemma's
sqrt(h) embedding scale, query_pre_attn_scalar, GLM's partial rotary factor, rope scaling and router details.
"""

from __future__ import annotations

from typing import Any, Callable

from planner.files.hf_read import read_bool, read_dict, read_int, read_prob, router_groups

FAMILY_TYPES = ("kimi_k2", "internlm2", "granite", "granitemoe", "granitemoeshared", "granitemoehybrid", "phi3", "phimoe", "qwen2_moe", "gemma", "gemma2", "gemma3_text",
                "olmo2", "olmoe", "starcoder2", "dbrx", "glm4_moe", "falcon")
# transformers Gemma3TextConfig's defaults for the shape keys (the 4B text_config gives no heads, the 12B no head_dim)
GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256}
TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text", "starcoder2", "falcon")
DEEPSEEK_KEYS = {"num_experts": "n_routed_experts", "moe_ffn_hidden_size": "moe_intermediate_size",
                 "num_shared_experts": "n_shared_experts", "first_k_dense_layers": "first_k_dense_replace",
                 "mtp_num_layers": "num_nextn_predict_layers", "moe_router_num_groups": "n_group",
                 "moe_router_group_topk": "topk_group"}
# ModelSpec field -> the config.json key, per family, for ModelSpec's own errors (hf_config._validate).
FAMILY_FIELD_KEYS = {
    "glm4_moe": DEEPSEEK_KEYS,
    "phimoe": {"num_experts": "num_local_experts", "moe_ffn_hidden_size": "intermediate_size"},
    "granitemoe": {"num_experts": "num_local_experts", "moe_ffn_hidden_size": "intermediate_size"},
    "granitemoeshared": {"num_experts": "num_local_experts", "moe_ffn_hidden_size": "intermediate_size",
                         "num_shared_experts": "shared_intermediate_size"},
    "olmoe": {"num_experts": "num_experts", "moe_ffn_hidden_size": "intermediate_size"},
    "qwen2_moe": {"num_experts": "num_experts", "moe_ffn_hidden_size": "moe_intermediate_size",
                  "num_shared_experts": "shared_expert_intermediate_size"},
    "dbrx": {"num_layers": "n_layers", "hidden_size": "d_model", "num_attention_heads": "n_heads",
             "num_kv_heads": "attn_config.kv_n_heads", "ffn_hidden_size": "ffn_config.ffn_hidden_size",
             "moe_ffn_hidden_size": "ffn_config.ffn_hidden_size", "num_experts": "ffn_config.moe_num_experts",
             "top_k": "ffn_config.moe_top_k", "seq_length": "max_seq_len"},
    "falcon": {"num_kv_heads": "num_kv_heads", "ffn_hidden_size": "ffn_hidden_size"},
}
FALCON_PARALLEL = (
    "parallel_attn=true (attention and MLP side by side on one norm's output) is priced as sequential attention "
    "then MLP: the same parameters and FLOPs; without full recompute the activation memory is over-estimated by "
    "what parallel layers share (the MLP's input and its norm's input: 4 of the ~28 bytes per token and hidden unit "
    "a layer keeps, 2 with new_decoder_architecture's two norms; falcon-7b at 2,048 tokens, mbs 1: ~1 GiB of a "
    "57 GiB peak), none with full recompute; a runtime fusing the two input GEMMs (transformers does not) would "
    "be somewhat faster than priced")


def family_config(config: dict) -> dict:
    """`config` with its family's keys renamed to the Llama names and transformers' defaults filled where absent
    (a copy; the others returned as they are)."""
    kind = config.get("model_type")
    if kind == "kimi_k2":
        return {**config, "model_type": "deepseek_v3"}
    if kind == "dbrx":
        return _dbrx(config)
    if kind == "falcon":
        return _falcon(config)
    if kind == "granitemoehybrid":
        return _granite_hybrid(config)
    out = dict(config)
    if kind in TIED_BY_DEFAULT and out.get("tie_word_embeddings") is None:
        out["tie_word_embeddings"] = True
    if kind == "gemma3_text":  # Gemma 3's published text_configs leave these out (4B: the heads; 12B: head_dim)
        out = {**GEMMA3_TEXT_DEFAULTS, **out}
    if kind in ("gemma2", "gemma3_text"):
        if "sliding_window" not in out:
            out["sliding_window"] = 4096  # Gemma2Config / Gemma3TextConfig default
        if out.get("layer_types") is None:
            period = 2 if kind == "gemma2" else read_int(config, "sliding_window_pattern", 6)
            if not 1 <= period <= 10_000:
                raise ValueError(f"config.json key 'sliding_window_pattern' must be from 1 to 10000, got {period}")
            layers = read_int(config, "num_hidden_layers")
            out["layer_types"] = ["sliding_attention" if (i + 1) % period else "full_attention"
                                  for i in range(max(0, min(layers, 10_000)))]
    return out


def _dbrx(config: dict) -> dict:
    """DbrxConfig's keys (attribute_map d_model, n_heads, n_layers, max_seq_len; the nested attn_config and
    ffn_config) as Llama's; DbrxAttentionConfig's default kv_n_heads 1."""
    attn, ffn = read_dict(config, "attn_config"), read_dict(config, "ffn_config")
    width = read_int(ffn, "ffn_hidden_size", label="ffn_config.ffn_hidden_size")
    dropout = any(read_prob(c, k, f"{n}{k}") for c, k, n in ((attn, "attn_pdrop", "attn_config."),
                                                            (config, "resid_pdrop", ""), (config, "emb_pdrop", "")))
    return {**config, "num_hidden_layers": read_int(config, "n_layers"), "hidden_size": read_int(config, "d_model"),
            "num_attention_heads": read_int(config, "n_heads"),
            "num_key_value_heads": read_int(attn, "kv_n_heads", 1, label="attn_config.kv_n_heads"),
            "intermediate_size": width, "max_position_embeddings": read_int(config, "max_seq_len", 2048),
            "num_local_experts": read_int(ffn, "moe_num_experts", label="ffn_config.moe_num_experts"),
            "num_experts_per_tok": read_int(ffn, "moe_top_k", label="ffn_config.moe_top_k"),
            "attention_dropout": 0.1 if dropout else 0.0, "head_dim": None}


def _falcon(config: dict) -> dict:
    """FalconConfig's keys as Llama's: K/V heads by FalconAttention's rule, ffn_hidden_size (absent: 4h)."""
    heads = read_int(config, "num_attention_heads")
    if read_bool(config, "new_decoder_architecture"):
        kv = read_int(config, "num_kv_heads", heads)
    else:
        kv = 1 if read_bool(config, "multi_query", True) else heads
    hidden = read_int(config, "hidden_size")
    dropout = read_prob(config, "attention_dropout") or read_prob(config, "hidden_dropout")
    return {**config, "num_key_value_heads": kv, "head_dim": None,
            "intermediate_size": read_int(config, "ffn_hidden_size", 4 * hidden),
            "max_position_embeddings": read_int(config, "max_position_embeddings", 2048),
            "tie_word_embeddings": read_bool(config, "tie_word_embeddings", True),
            "attention_dropout": 0.1 if dropout else 0.0}


def _granite_hybrid(config: dict) -> dict:
    """A Granite 4.0 (granitemoehybrid) config whose layers are all attention, as the family it then is: its MLP is
    GraniteMoeSharedMLP (SwiGLU, shared_intermediate_size wide) beside num_local_experts experts, none in the
    dense models. A config with Mamba layers is refused as the hybrid it is."""
    kinds = config.get("layer_types")
    if kinds is None:
        kinds = config.get("layers_block_type")
    if not isinstance(kinds, list) or any(k != "attention" for k in kinds):
        mamba = sum(k == "mamba" for k in kinds) if isinstance(kinds, list) else "unknown"
        raise ValueError(f"config.json model_type 'granitemoehybrid' with layer_types other than 'attention' ({mamba} "
                         "mamba layers) is a state-space or hybrid model (Mamba layers have no counterpart in a "
                         "transformer layer's cost), which parplan's cost model cannot represent; to price a "
                         "decoder-only approximation, write it as a ModelSpec file (`parplan schema ModelSpec`)")
    if read_int(config, "num_local_experts", 0) > 0:
        return {**config, "model_type": "granitemoeshared"}
    return {**config, "model_type": "granite", "intermediate_size": read_int(config, "shared_intermediate_size")}


def family_fields(config: dict, kind: str, num_layers: int, moe_layers: Callable[..., dict]) -> dict:
    """ModelSpec fields of a FAMILY_TYPES config (after family_config) beyond the shared Llama ones;
    `moe_layers(config, num_layers, kind)`: hf_config's reader of decoder_sparse_step and mlp_only_layers."""
    if kind in ("internlm2",):
        return {"linear_bias": read_bool(config, "bias")}
    if kind in ("granite",):
        return {"linear_bias": read_bool(config, "attention_bias") or read_bool(config, "mlp_bias")}
    if kind in ("gemma", "gemma2", "olmo2"):
        return {"linear_bias": read_bool(config, "attention_bias"), "qk_norm": kind == "olmo2"}
    if kind == "gemma3_text":
        if read_bool(config, "use_bidirectional_attention"):
            raise ValueError("config.json key 'use_bidirectional_attention' is true: an encoder (every token sees "
                             "every other), which parplan's decoder-only cost model does not represent")
        return {"linear_bias": read_bool(config, "attention_bias"), "qk_norm": True}
    if kind == "olmoe":
        return {"linear_bias": read_bool(config, "attention_bias"), "qk_norm": True,
                **_experts(config, "num_experts", read_int(config, "intermediate_size"))}
    if kind == "starcoder2":
        dropout = any(read_prob(config, k) for k in ("attention_dropout", "residual_dropout", "embedding_dropout"))
        return {"activation": "gelu", "norm": "layernorm", "linear_bias": read_bool(config, "use_bias", True),
                "dropout": dropout}
    if kind == "dbrx":
        return _experts(config, "num_local_experts", read_int(config, "intermediate_size"))
    if kind == "phimoe":
        return {"norm": "layernorm", **_experts(config, "num_local_experts", read_int(config, "intermediate_size"))}
    if kind in ("granitemoe", "granitemoeshared"):
        return _granite_moe(config, kind)
    if kind == "glm4_moe":
        return {**_glm4_moe(config), "qkv_bias": read_bool(config, "attention_bias")}
    if kind == "qwen2_moe":
        return _qwen2_moe(config, num_layers, moe_layers)
    if kind == "falcon":
        return {"activation": "gelu", "norm": "layernorm", "linear_bias": read_bool(config, "bias"),
                "position_embedding": "none" if read_bool(config, "alibi") else "rope"}
    return {}


def _granite_moe(config: dict, kind: str) -> dict:
    """GraniteMoeMoE: every layer's MLP is num_local_experts SwiGLU experts intermediate_size wide (input_linear
    holds gate and up), num_experts_per_tok per token; granitemoeshared adds one shared MLP
    shared_intermediate_size wide, read as whole expert widths (as qwen2_moe's)."""
    width = read_int(config, "intermediate_size")
    out = {"linear_bias": read_bool(config, "attention_bias"), **_experts(config, "num_local_experts", width)}
    shared = read_int(config, "shared_intermediate_size", 0) if kind == "granitemoeshared" else 0
    if width < 1 or shared < 0 or shared % width:
        raise ValueError(f"config.json keys shared_intermediate_size={shared}, intermediate_size={width}: parplan "
                         "prices a shared MLP as a whole number of expert widths (ModelSpec num_shared_experts x "
                         "moe_ffn_hidden_size); write the model as a ModelSpec file with the closest width")
    return {**out, "num_shared_experts": shared // width}


def _experts(config: dict, key: str, width: int) -> dict:
    experts = read_int(config, key)
    if experts < 1:
        raise ValueError(f"config.json key {key!r} must be at least 1, got {experts}")
    return {"num_experts": experts, "top_k": read_int(config, "num_experts_per_tok"), "moe_ffn_hidden_size": width}


def _glm4_moe(config: dict) -> dict:
    """Glm4MoeDecoderLayer: MoE where layer_idx >= first_k_dense_replace; one shared MLP n_shared_experts x
    moe_intermediate_size wide; Glm4MoeAttention: q/k/v/o projections (GQA), per-head q_norm/k_norm with
    use_qk_norm."""
    return {"qk_norm": read_bool(config, "use_qk_norm"),
            **_experts(config, "n_routed_experts", read_int(config, "moe_intermediate_size")),
            "num_shared_experts": read_int(config, "n_shared_experts", 0),
            "first_k_dense_layers": read_int(config, "first_k_dense_replace", 0),
            "mtp_num_layers": read_int(config, "num_nextn_predict_layers", 0), **router_groups(config)}


def _qwen2_moe(config: dict, num_layers: int, moe_layers: Callable[..., dict]) -> dict:
    """Qwen2MoeSparseMoeBlock: routed experts moe_intermediate_size wide plus one shared expert
    shared_expert_intermediate_size wide, read as S / f_e shared experts of f_e each (the same matrices' sizes,
    FLOPs and bytes)."""
    experts = read_int(config, "num_experts")
    if experts < 1:
        raise ValueError(f"config.json key 'num_experts' must be at least 1 for qwen2_moe, got {experts}")
    width = read_int(config, "moe_intermediate_size")
    shared = read_int(config, "shared_expert_intermediate_size", 0)
    if width < 1 or shared < 0 or shared % width:
        raise ValueError(f"config.json keys shared_expert_intermediate_size={shared}, moe_intermediate_size={width}: "
                         "parplan prices shared experts as a whole number of routed-expert widths (ModelSpec "
                         "num_shared_experts x moe_ffn_hidden_size); write the model as a ModelSpec file (fields: "
                         "`parplan schema ModelSpec`) with the closest width")
    return {"num_experts": experts, "top_k": read_int(config, "num_experts_per_tok"), "moe_ffn_hidden_size": width,
            "num_shared_experts": shared // width, "qkv_bias": True, **moe_layers(config, num_layers, "qwen2_moe")}


def family_keys(kind: Any) -> dict:
    """ModelSpec field -> config.json key for the family's errors ({} for the others)."""
    return FAMILY_FIELD_KEYS.get(kind, {})
