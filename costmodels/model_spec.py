"""ModelSpec: the shape of a decoder-only transformer, dense or mixture-of-experts.

Field names are a contract (docs/design.md section 4). Optional shape fields left out
(`num_kv_heads`, `head_dim`, `ffn_hidden_size`, `moe_ffn_hidden_size`) are filled with their
documented defaults at validation time, so a validated spec always carries explicit numbers.

Multi-head latent attention (`mla`, DeepSeek-V2 section 2.1 eqs. 9-19; DeepSeek-V3 section 2.1.1):
queries come through an optional low-rank projection h -> r_q -> a*(d_nope + d_rope), keys and
values through a shared latent h -> r_kv (+ one d_rope-wide rotary key) -> a*(d_nope + d_v); all a
heads attend (no grouping), each query/key head d_nope + d_rope wide, each value head d_v wide.
"""

from __future__ import annotations

from typing import Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costmodels.errors import Name

# Sane upper bounds: nobody trains beyond these; they keep arithmetic and searches bounded.
MAX_LAYERS = 10_000
MAX_WIDTH = 1_000_000
MAX_VOCAB = 10_000_000
MAX_SEQ = 16_777_216
MAX_EXPERTS = 65_536


class MLASpec(BaseModel):
    """The shapes of multi-head latent attention (Megatron's --multi-latent-attention flags,
    Hugging Face DeepSeek-V2/V3 config keys of the same names)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    q_lora_rank: int = Field(0, ge=0, le=MAX_WIDTH, description="Query latent rank r_q; 0 = queries "
                             "projected directly from the hidden state (DeepSeek-V2-Lite, V3-16B).")
    kv_lora_rank: int = Field(..., ge=1, le=MAX_WIDTH, description="Key/value latent rank r_kv (512 in V2/V3).")
    qk_nope_head_dim: int = Field(..., ge=1, le=MAX_WIDTH, description="Per-head query/key width without "
                                  "rotary position (128 in V2/V3).")
    qk_rope_head_dim: int = Field(..., ge=0, le=MAX_WIDTH, description="Per-head rotary query/key width; the "
                                  "rotary key is one head shared by all (64 in V2/V3).")
    v_head_dim: int = Field(..., ge=1, le=MAX_WIDTH, description="Per-head value width (128 in V2/V3).")

    @model_validator(mode="after")
    def _check_width(self) -> "MLASpec":
        if self.qk_head_dim > MAX_WIDTH:
            raise ValueError(f"qk_nope_head_dim + qk_rope_head_dim = {self.qk_head_dim} must be at most {MAX_WIDTH}")
        return self

    @property
    def qk_head_dim(self) -> int:
        """Width of one query or key head: d_nope + d_rope."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


class ModelSpec(BaseModel):
    """A decoder-only transformer. Dense when `num_experts` is 0."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    name: Name = Field("custom", description="Human-readable model name (at most 200 characters).")
    num_layers: int = Field(..., ge=1, le=MAX_LAYERS, description="Transformer layers (L).")
    hidden_size: int = Field(..., ge=1, le=MAX_WIDTH, description="Model width h.")
    num_attention_heads: int = Field(..., ge=1, le=MAX_WIDTH, description="Query heads a.")
    num_kv_heads: Optional[int] = Field(
        None, ge=1, le=MAX_WIDTH, description="Key/value heads (GQA groups); default = query heads (MHA)."
    )
    head_dim: Optional[int] = Field(
        None, ge=1, le=MAX_WIDTH, description="Per-head width; default hidden_size / num_attention_heads."
    )
    ffn_hidden_size: Optional[int] = Field(
        None, ge=1, le=MAX_WIDTH * 8, description="Dense MLP inner width f; default 4 * hidden_size."
    )
    vocab_size: int = Field(..., ge=1, le=MAX_VOCAB, description="Vocabulary size V (after padding).")
    seq_length: int = Field(
        2048, ge=1, le=MAX_SEQ, description="Training sequence length s in tokens (TrainSpec may override)."
    )
    activation: Literal["gelu", "swiglu"] = Field(
        "gelu", description="MLP type: gelu (2 matrices) or swiglu (3 matrices: gate, up, down)."
    )
    norm: Literal["layernorm", "rmsnorm"] = Field(
        "layernorm", description="Normalization: layernorm (weight + bias) or rmsnorm (weight only)."
    )
    tied_embeddings: bool = Field(False, description="Output layer shares the input embedding matrix.")
    position_embedding: Literal["learned", "rope", "none"] = Field(
        "learned", description="learned adds a seq_length x hidden table; rope and none add no parameters."
    )
    linear_bias: bool = Field(True, description="Linear layers (QKV, projection, MLP) carry biases.")
    qkv_bias: bool = Field(False, description="The query, key and value projections carry biases where "
                           "linear_bias is false (Qwen2/2.5; Megatron --add-qkv-bias); implied by linear_bias.")
    qk_norm: bool = Field(False, description="Per-head RMSNorm on queries and keys (Qwen3); 2*head_dim "
                          "params/layer. With mla: the norms of the query and key/value latents (DeepSeek; "
                          "Megatron --qk-layernorm).")
    dropout: bool = Field(
        True, description="Dropout layers active in training (GPT-style); stores 1-byte masks. Llama-style: false."
    )
    num_experts: int = Field(0, ge=0, le=MAX_EXPERTS, description="Routed experts per MoE layer; 0 = dense.")
    top_k: int = Field(0, ge=0, le=MAX_EXPERTS, description="Routed experts per token (MoE only).")
    moe_ffn_hidden_size: Optional[int] = Field(
        None, ge=1, le=MAX_WIDTH * 8, description="Inner width of each routed/shared expert; default ffn_hidden_size."
    )
    num_shared_experts: int = Field(
        0, ge=0, le=MAX_EXPERTS, description="Always-active shared experts per MoE layer, each moe_ffn_hidden_size wide."
    )
    first_k_dense_layers: int = Field(
        0, ge=0, le=MAX_LAYERS, description="Leading layers that use a dense MLP instead of experts (MoE only)."
    )
    moe_layer_period: int = Field(
        1, ge=1, le=MAX_LAYERS, description="Dense and MoE layers interleaved: of the layers after "
        "first_k_dense_layers, layer i (0-based, whole model) has an MoE MLP when i % moe_layer_period == "
        "moe_layer_offset, the others a dense one; 1 = every one. Megatron-Core --moe-layer-freq N: period N, "
        "offset 0; Hugging Face (Jamba expert_layer_period/offset, Llama 4 interleave_moe_layer_step, Qwen2-MoE "
        "decoder_sparse_step) and Megatron-DeepSpeed --expert-interval N: period N, offset N - 1."
    )
    moe_layer_offset: int = Field(
        0, ge=0, le=MAX_LAYERS, description="With moe_layer_period: the index within each period of its MoE "
        "layer (0 to period - 1)."
    )
    capacity_factor: Optional[float] = Field(
        None, ge=0.01, le=1000, description="Expert capacity factor; null = dropless routing."
    )
    moe_router_num_groups: int = Field(
        1, ge=1, le=MAX_EXPERTS, description="Group-limited routing: the routed experts in this many equal groups "
        "of consecutive ids, of which each token may use only moe_router_group_topk (DeepSeek-V2 device-limited, "
        "DeepSeek-V3 node-limited routing; Megatron --moe-router-num-groups, Hugging Face n_group, torchtitan "
        "num_expert_groups); 1 = unrestricted."
    )
    moe_router_group_topk: Optional[int] = Field(
        None, ge=1, le=MAX_EXPERTS, description="Groups each token may route to (Megatron --moe-router-group-topk, "
        "Hugging Face topk_group, torchtitan num_limited_groups); null: every group (unrestricted), whatever "
        "moe_router_num_groups says."
    )
    mtp_num_layers: int = Field(
        0, ge=0, le=16, description="Multi-token prediction modules after the last layer (DeepSeek-V3 section "
        "2.2: 1); each is one more transformer layer of the last layer's kind, fed the last hidden state and "
        "the next token's embedding through two norms and a 2h -> h projection, with its own loss over the "
        "shared output layer. Built on the last pipeline stage (Megatron-Core --mtp-num-layers)."
    )
    sliding_window: int = Field(
        0, ge=0, le=MAX_SEQ, description="Sliding-window attention: keys a windowed layer's query sees, itself "
        "and the w - 1 before it (Hugging Face sliding_window; Megatron --window-size w,0); 0 = no window, every "
        "layer attends causally to the whole sequence. GPT-OSS: 128 (costmodels.attention_window)."
    )
    full_attention_interval: int = Field(
        0, ge=0, le=MAX_LAYERS, description="With sliding_window: every n-th layer (layers n, 2n, ..., counted "
        "from 1, as Megatron's --window-attn-skip-freq n) attends to the whole sequence and the others use the "
        "window; 0 = every layer windowed (Mistral-7B-v0.1), 1 = none; GPT-OSS: 2 (alternating)."
    )
    attention_sinks: bool = Field(
        False, description="A learnable sink logit per head in each softmax's denominator (GPT-OSS; Megatron "
        "--softmax-type learnable): num_attention_heads parameters per layer; no GEMM FLOPs, no activations."
    )
    glu_clamp: Optional[float] = Field(
        None, gt=0, le=1e6, description="SwiGLU clamp limit: fc1's gate half clamped above at +limit, its linear "
        "half to [-limit, limit] (GPT-OSS swiglu_limit 7.0; Megatron --activation-func-clamp-value); null = no "
        "clamp. Priced as the extra element-wise passes Megatron-Core runs outside its fused activation kernel."
    )
    mla: Optional[MLASpec] = Field(
        None, description="Multi-head latent attention shapes (DeepSeek-V2/V3); null = multi-head or "
        "grouped-query attention. With it, num_kv_heads = num_attention_heads and head_dim = "
        "qk_nope_head_dim + qk_rope_head_dim (the query/key head width)."
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        heads, hidden = data.get("num_attention_heads"), data.get("hidden_size")
        _fill_mla(data)
        if data.get("num_kv_heads") is None and isinstance(heads, int):
            data["num_kv_heads"] = heads
        if data.get("head_dim") is None and _ints(heads, hidden) and heads > 0 and hidden > 0:
            if hidden % heads:
                raise ValueError(
                    f"hidden_size={hidden} is not divisible by num_attention_heads={heads}; set head_dim explicitly"
                )
            data["head_dim"] = hidden // heads
        # Copied only when valid: a bad value is reported once, under the field given, never again under a
        # field the user did not write (a dense model's error naming moe_ffn_hidden_size).
        if data.get("ffn_hidden_size") is None and _in_range(hidden, MAX_WIDTH):
            data["ffn_hidden_size"] = 4 * hidden
        if data.get("moe_ffn_hidden_size") is None and _in_range(data.get("ffn_hidden_size"), MAX_WIDTH * 8):
            data["moe_ffn_hidden_size"] = data["ffn_hidden_size"]
        return data

    @model_validator(mode="after")
    def _check_consistency(self) -> "ModelSpec":
        if self.mla is not None:
            _check_mla(self)
        _check_window(self)
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} is not divisible by num_kv_heads={self.num_kv_heads}"
            )
        if self.num_experts:
            if not 1 <= self.top_k <= self.num_experts:
                raise ValueError(f"top_k={self.top_k} must be between 1 and num_experts={self.num_experts}")
            if self.first_k_dense_layers >= self.num_layers:
                raise ValueError(
                    f"first_k_dense_layers={self.first_k_dense_layers} must be below num_layers={self.num_layers}"
                )
            _check_interleave(self)
            _check_groups(self)
        elif self.moe_router_num_groups > 1 or self.moe_router_group_topk is not None:
            raise ValueError(f"moe_router_num_groups={self.moe_router_num_groups}, moe_router_group_topk="
                             f"{self.moe_router_group_topk} need num_experts > 0 (num_experts=0)")
        elif self.top_k or self.num_shared_experts or self.first_k_dense_layers or self.moe_layer_period > 1:
            raise ValueError(
                f"top_k={self.top_k}, num_shared_experts={self.num_shared_experts}, "
                f"first_k_dense_layers={self.first_k_dense_layers}, moe_layer_period={self.moe_layer_period} "
                "need num_experts > 0 (num_experts=0)"
            )
        return self

    # ---- derived ---------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """True when the model has routed experts."""
        return self.num_experts > 0

    @property
    def routed_groups(self) -> int:
        """Expert groups a token may route to: moe_router_group_topk, all moe_router_num_groups when it is null."""
        return self.moe_router_group_topk or self.moe_router_num_groups

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.moe_layers_in(0, self.num_layers)

    def moe_layers_in(self, start: int, stop: int) -> int:
        """MoE layers among the layers start .. stop - 1 (0-based, whole model): those at or after
        first_k_dense_layers whose index i has i % moe_layer_period == moe_layer_offset."""
        if not self.is_moe:
            return 0
        stop = max(0, stop)
        low = min(max(start, self.first_k_dense_layers, 0), stop)
        return periodic_below(stop, self.moe_layer_period, self.moe_layer_offset) - periodic_below(
            low, self.moe_layer_period, self.moe_layer_offset)

    @property
    def mtp_is_moe(self) -> bool:
        """Whether the multi-token prediction layers have MoE MLPs: they are of the last layer's kind."""
        return self.is_moe_layer(self.num_layers - 1)

    @property
    def q_width(self) -> int:
        """Width of all query heads together: heads * head_dim."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_width(self) -> float:
        """Width of all key (or value) heads together: kv_heads * head_dim. With MLA keys and values
        differ in width (a*d_qk, a*d_v): their mean, so that K and V together are 2 * kv_width."""
        if self.mla is not None:
            return self.num_attention_heads * (self.mla.qk_head_dim + self.mla.v_head_dim) / 2
        return self.num_kv_heads * self.head_dim

    @property
    def ctx_width(self) -> int:
        """Width of the attention output (the output projection's input): heads * value head width."""
        return self.num_attention_heads * self.mla.v_head_dim if self.mla is not None else self.q_width

    def is_windowed_layer(self, index: int) -> bool:
        """Whether layer `index` (0-based) uses the sliding window: Megatron-Core's is_layer_window_attention
        (megatron/core/transformer/utils.py, 1-based layer_number % window_attn_skip_freq != 0)."""
        if not self.sliding_window:
            return False
        return not self.full_attention_interval or (index + 1) % self.full_attention_interval != 0

    @property
    def windowed_layers(self) -> int:
        """Layers that attend through the sliding window (0 without one): all but layers n, 2n, ... (1-based)."""
        if not self.sliding_window:
            return 0
        n = self.full_attention_interval
        return self.num_layers - (self.num_layers // n if n else 0)

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer `index` (0-based, whole model) has an MoE MLP."""
        return (self.is_moe and index >= self.first_k_dense_layers
                and index % self.moe_layer_period == self.moe_layer_offset)


def _fill_mla(data: dict) -> None:
    """With MLA, every head has its own key and value, and head_dim is the query/key head width.
    The mla block itself is validated as a field (errors name mla.<key>); only well-formed widths
    fill the defaults here."""
    mla = data.get("mla")
    if isinstance(mla, MLASpec):
        mla = mla.model_dump()
    if not isinstance(mla, dict):
        return
    if data.get("num_kv_heads") is None:
        data["num_kv_heads"] = data.get("num_attention_heads")
    nope, rope = mla.get("qk_nope_head_dim"), mla.get("qk_rope_head_dim")
    if data.get("head_dim") is None and _ints(nope, rope) and 1 <= nope + rope <= MAX_WIDTH:
        data["head_dim"] = nope + rope


def _check_mla(m: "ModelSpec") -> None:
    if m.num_kv_heads != m.num_attention_heads:
        raise ValueError(f"num_kv_heads={m.num_kv_heads} must equal num_attention_heads={m.num_attention_heads} "
                         "with mla (every head has its own key and value)")
    if m.head_dim != m.mla.qk_head_dim:
        raise ValueError(f"head_dim={m.head_dim} must equal mla qk_nope_head_dim + qk_rope_head_dim = "
                         f"{m.mla.qk_head_dim}")


def periodic_below(stop: int, period: int, offset: int) -> int:
    """How many i in 0 .. stop - 1 have i % period == offset (stop >= 0, 0 <= offset < period)."""
    return (stop - offset + period - 1) // period


def moe_layer_fields(is_moe: Sequence[bool]) -> Optional[dict]:
    """first_k_dense_layers, moe_layer_period and moe_layer_offset that give a per-layer list (True = MoE MLP)
    by ModelSpec.is_moe_layer's rule, the shortest period first; None when no dense prefix plus period does
    (or no layer is MoE). The inverse readers use (Megatron --moe-layer-freq lists, Hugging Face moe_layers)."""
    if True not in is_moe:
        return None
    first = list(is_moe).index(True)
    for period in range(1, len(is_moe) - first + 1):
        offset = first % period
        if all(bool(v) == (i >= first and i % period == offset) for i, v in enumerate(is_moe)):
            return {"first_k_dense_layers": 0 if first == offset else first, "moe_layer_period": period,
                    "moe_layer_offset": offset}
    return None


def _check_interleave(m: "ModelSpec") -> None:
    if m.moe_layer_offset >= m.moe_layer_period:
        raise ValueError(f"moe_layer_offset={m.moe_layer_offset} must be below moe_layer_period="
                         f"{m.moe_layer_period}")
    if not m.num_moe_layers:
        raise ValueError(f"moe_layer_period={m.moe_layer_period}, moe_layer_offset={m.moe_layer_offset} and "
                         f"first_k_dense_layers={m.first_k_dense_layers} leave no MoE layer among "
                         f"num_layers={m.num_layers}")


def _check_groups(m: "ModelSpec") -> None:
    """Group-limited routing that means something: equal groups (Megatron-Core's TransformerConfig refuses
    num_moe_experts not divisible by moe_router_num_groups), at most all groups per token, and no more experts per
    token than the groups it may use hold (beyond them torch.topk would pick masked experts; Megatron does not
    check it)."""
    groups, chosen = m.moe_router_num_groups, m.routed_groups
    if m.num_experts % groups:
        raise ValueError(f"moe_router_num_groups={groups} must divide num_experts={m.num_experts}")
    if chosen > groups:
        raise ValueError(f"moe_router_group_topk={chosen} must be at most moe_router_num_groups={groups}")
    if m.top_k > chosen * m.num_experts // groups:
        raise ValueError(f"top_k={m.top_k} must be at most the {chosen * m.num_experts // groups} experts of the "
                         f"moe_router_group_topk={chosen} groups a token may use")


def _check_window(m: "ModelSpec") -> None:
    if m.full_attention_interval and not m.sliding_window:
        raise ValueError(f"full_attention_interval={m.full_attention_interval} needs sliding_window > 0 "
                         "(it says which layers skip the window)")
    if m.glu_clamp is not None and m.activation != "swiglu":
        raise ValueError(f"glu_clamp={m.glu_clamp} needs activation swiglu (it clamps a gated MLP's fc1 output; "
                         f"activation={m.activation})")


def _ints(*values) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _in_range(value, top: int) -> bool:
    """An int (not a bool) from 1 to `top`: a width its Field accepts."""
    return _ints(value) and 1 <= value <= top
