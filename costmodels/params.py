"""Exact parameter counts: whole model, per layer, and per GPU under tp/ep/etp/pp.

Notation: h hidden, a query heads, g kv heads, d head_dim, f dense MLP width, f_e expert width,
E routed experts, S shared experts, V vocabulary, s sequence, L layers, t tp degree; MLA: r_q, r_kv
latent ranks, d_nope, d_rope, d_v head widths, d_qk = d_nope + d_rope.

Source: Narayanan et al. SC'21 eq. (2), P = 12Lh^2(1 + 13/(12h) + (V+s)/(12Lh)), for GPT with
MHA, GELU, biases, LayerNorm and tied, learned embeddings. This module generalises it term by term
(GQA projections, SwiGLU's three matrices, RMSNorm, untied output layer, MoE experts and router)
and adds the final norm (2h, left out of eq. 2; a 1e-5 relative difference).
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels.model_spec import ModelSpec
from costmodels.pipeline import rank_chunks


@dataclass(frozen=True)
class ParamCount:
    """Parameters split by how they are replicated: `dense` over dp*cp, `expert` over the expert grid."""

    dense: int = 0
    expert: int = 0

    @property
    def total(self) -> int:
        """Dense plus expert parameters."""
        return self.dense + self.expert

    def __add__(self, other: "ParamCount") -> "ParamCount":
        return ParamCount(self.dense + other.dense, self.expert + other.expert)


def norm_params(m: ModelSpec, width: int) -> int:
    """One norm over `width` features: weight (+ bias for LayerNorm)."""
    return width * (2 if m.norm == "layernorm" else 1)


def kv_local_width(m: ModelSpec, tp: int) -> float:
    """Width of the keys (or values) one tp rank holds: kv_width/t, or one head when tp > kv heads
    (Megatron replicates K/V heads then)."""
    return m.kv_width / tp if m.num_kv_heads >= tp else m.head_dim


def attention_matrices(m: ModelSpec, tp: int = 1, fused_qkv: bool = True,
                       down_share: float = 1.0) -> list[tuple[float, float]]:
    """(input, output) widths of the attention projections on one tp rank, in execution order.

    MHA/GQA: fused QKV h -> q + 2kv, then the output projection q -> h (Megatron); or, not
    `fused_qkv`, q, k, v and o apart (Hugging Face, torchtitan). K/V heads are replicated when
    tp > kv heads (Megatron). MLA (DeepSeek-V2 eqs. 9-19): query down h -> r_q and up
    r_q -> a*d_qk/t (or h -> a*d_qk/t when r_q = 0), key/value down h -> r_kv + d_rope and up
    r_kv -> a*(d_nope + d_v)/t, output a*d_v/t -> h. The down projections are whole on every tp
    rank (Megatron-Core multi_latent_attention.py builds them 'duplicated'; torchtitan's
    deepseek_v3 parallelize leaves wq_a/wkv_a NoParallel); `down_share` scales their output width
    for the share of tokens a rank runs them on (1/t under Megatron's sequence parallelism).
    """
    h, t = m.hidden_size, tp
    if m.mla is not None:
        a, ml = m.num_attention_heads, m.mla
        q = [(h, ml.q_lora_rank * down_share), (ml.q_lora_rank, a * ml.qk_head_dim / t)] if ml.q_lora_rank \
            else [(h, a * ml.qk_head_dim / t)]
        kv = [(h, (ml.kv_lora_rank + ml.qk_rope_head_dim) * down_share),
              (ml.kv_lora_rank, a * (ml.qk_nope_head_dim + ml.v_head_dim) / t)]
        return q + kv + [(m.ctx_width / t, h)]
    q, kv = m.q_width / t, kv_local_width(m, t)
    if fused_qkv:
        return [(h, q + 2 * kv), (q, h)]
    return [(h, q), (h, kv), (h, kv), (q, h)]


def mla_up_matrices(m: ModelSpec, tp: int = 1) -> list[tuple[float, float]]:
    """MLA's up projections among attention_matrices(m, tp): the query's (with a query latent) and the key/value's,
    (input, output) widths on one tp rank; [] without MLA (what Megatron's --recompute-modules mla_up_proj re-runs)."""
    if m.mla is None:
        return []
    mats = attention_matrices(m, tp)
    return [mats[1], mats[3]] if m.mla.q_lora_rank else [mats[2]]


def _attention_extras(m: ModelSpec, tp: int) -> float:
    """Attention parameters beside the matrices on one tp rank: biases (output-projection bias
    replicated; with qkv_bias alone, the q, k and v biases), QK-norm, or with MLA the latent norms that qk_norm
    stands for (whole on every rank), and attention sinks, one logit per query head, split with the heads
    (Megatron-Core's softmax_type learnable: a num_attention_heads-long parameter, tensor-parallel by head)."""
    mats = attention_matrices(m, tp)
    biases = (sum(n for _, n in mats[:-1]) + m.hidden_size) if m.linear_bias else 0
    biases += sum(n for _, n in mats[:-1]) if m.qkv_bias and not m.linear_bias else 0  # q, k, v only
    biases += m.num_attention_heads / tp if m.attention_sinks else 0
    if m.mla is not None:
        latent = norm_params(m, m.mla.q_lora_rank) + norm_params(m, m.mla.kv_lora_rank)
        return biases + (latent if m.qk_norm else 0)
    return biases + (2 * m.head_dim if m.qk_norm else 0)


def attention_params(m: ModelSpec) -> int:
    """Q, K, V and output projections with optional biases and QK-norm (4h^2 + 4h for GPT, eq. 2);
    MLA: its five projections and two latent norms (DeepSeek-V2 section 2.1.2)."""
    return round(sum(k * n for k, n in attention_matrices(m)) + _attention_extras(m, 1))


def mlp_params(m: ModelSpec, width: int) -> int:
    """One MLP of inner width `width`: GELU 2hf (+ f + h biases) = 8h^2 + 5h for f = 4h; SwiGLU 3hf."""
    mats = 3 if m.activation == "swiglu" else 2
    biases = ((mats - 1) * width + m.hidden_size) if m.linear_bias else 0
    return mats * m.hidden_size * width + biases


def moe_mlp_params(m: ModelSpec) -> ParamCount:
    """An MoE block: router (h*E, no bias) + shared experts (dense) and E routed experts (expert)."""
    shared = m.num_shared_experts * mlp_params(m, m.moe_ffn_hidden_size)
    router = m.hidden_size * m.num_experts
    return ParamCount(dense=router + shared, expert=m.num_experts * mlp_params(m, m.moe_ffn_hidden_size))


def layer_params(m: ModelSpec, index: int) -> ParamCount:
    """All parameters of layer `index`: attention, two norms, dense or MoE MLP."""
    base = attention_params(m) + 2 * norm_params(m, m.hidden_size)
    if m.is_moe_layer(index):
        return ParamCount(dense=base) + moe_mlp_params(m)
    return ParamCount(dense=base + mlp_params(m, m.ffn_hidden_size))


def embedding_params(m: ModelSpec, seq_length: int | None = None) -> int:
    """Input embedding V*h, plus a learned position table s*h."""
    pos = (seq_length or m.seq_length) * m.hidden_size if m.position_embedding == "learned" else 0
    return m.vocab_size * m.hidden_size + pos


def head_params(m: ModelSpec) -> int:
    """Final norm plus the output layer (V*h, none when tied to the embedding)."""
    out = 0 if m.tied_embeddings else m.vocab_size * m.hidden_size
    return norm_params(m, m.hidden_size) + out


def _mtp_extras(m: ModelSpec, tp: int) -> int:
    """One multi-token prediction module beside its transformer layer: enorm, hnorm and the final norm,
    and eh_proj, 2h -> h without bias, column-split over tp (Megatron-Core
    transformer/multi_token_prediction.py, MultiTokenPredictionLayer)."""
    return 3 * norm_params(m, m.hidden_size) + 2 * m.hidden_size * m.hidden_size // tp


def mtp_params(m: ModelSpec) -> ParamCount:
    """Multi-token prediction modules (DeepSeek-V3 section 2.2): each one layer of the last layer's
    kind plus _mtp_extras; the embedding and output layer are the main model's (shared)."""
    one = layer_params(m, m.num_layers - 1) + ParamCount(dense=_mtp_extras(m, 1))
    return _scaled(one, m.mtp_num_layers)


def total_params(m: ModelSpec) -> int:
    """Every parameter of the model, counted once (multi-token prediction modules included)."""
    layers = sum(layer_params(m, i).total for i in range(m.num_layers))
    return embedding_params(m) + layers + head_params(m) + mtp_params(m).total


def active_params(m: ModelSpec) -> int:
    """Parameters touched by one token: routed experts count top_k of num_experts."""
    if not m.is_moe:
        return total_params(m)
    routed_one = mlp_params(m, m.moe_ffn_hidden_size)
    moe_layers = m.num_moe_layers + (m.mtp_num_layers if m.mtp_is_moe else 0)
    idle = (m.num_experts - m.top_k) * routed_one * moe_layers
    return total_params(m) - idle


# ---- per GPU ---------------------------------------------------------------------------------


def local_attention_params(m: ModelSpec, tp: int) -> int:
    """Attention parameters on one tp rank. K/V heads are replicated when tp > kv heads (Megatron);
    MLA's down projections and latent norms are whole on every rank."""
    return round(sum(k * n for k, n in attention_matrices(m, tp)) + _attention_extras(m, tp))


def local_mlp_params(m: ModelSpec, width: int, tp: int) -> int:
    """MLP parameters on one rank of a tp-way split (column/row parallel; the output bias replicated)."""
    mats = 3 if m.activation == "swiglu" else 2
    local = width // tp
    biases = ((mats - 1) * local + m.hidden_size) if m.linear_bias else 0
    return mats * m.hidden_size * local + biases


def local_layer_params(m: ModelSpec, moe: bool, tp: int, ep: int, etp: int) -> ParamCount:
    """Parameters of one layer (MoE MLP when `moe`) held by one GPU: dense part split by tp, experts by ep*etp."""
    base = local_attention_params(m, tp) + 2 * norm_params(m, m.hidden_size)
    if not moe:
        return ParamCount(dense=base + local_mlp_params(m, m.ffn_hidden_size, tp))
    shared = m.num_shared_experts * local_mlp_params(m, m.moe_ffn_hidden_size, tp)
    router = m.hidden_size * m.num_experts
    experts = (m.num_experts // ep) * local_mlp_params(m, m.moe_ffn_hidden_size, etp)
    return ParamCount(dense=base + shared + router, expert=experts)


def stage_layer_indices(stage_layers: list[int], stage: int) -> range:
    """Global indices of the layers on pipeline rank `stage` without virtual stages (one contiguous range)."""
    start = sum(stage_layers[:stage])
    return range(start, start + stage_layers[stage])


def _chunk_spans(stage_layers: list[int], vpp: int, chunks: list[int] | None = None):
    """(rank, first layer, layers) of every virtual chunk in model order: chunk j of rank r is the model's
    (j * pp + r)-th (megatron-core pipeline_parallel_layer_layout.py; torchtitan's "loop" stage placement),
    each rank's chunks as costmodels.pipeline.rank_chunks sizes them (`chunks`, Layout.chunk_layers, else
    larger chunks first)."""
    sizes = rank_chunks(stage_layers, vpp, chunks) if vpp > 1 else [[n] for n in stage_layers]
    start = 0
    for v in range(vpp):
        for r, rank_sizes in enumerate(sizes):
            yield r, start, rank_sizes[v]
            start += rank_sizes[v]


def rank_layer_ranges(stage_layers: list[int], stage: int, vpp: int = 1,
                      chunks: list[int] | None = None) -> list[range]:
    """Global indices of the layers on pipeline rank `stage`, one range per virtual chunk (_chunk_spans)."""
    if vpp == 1:
        return [stage_layer_indices(stage_layers, stage)]
    return [range(start, start + n) for r, start, n in _chunk_spans(stage_layers, vpp, chunks) if r == stage]


def stage_layer_mix(m: ModelSpec, stage_layers: list[int], stage: int, vpp: int = 1,
                    chunks: list[int] | None = None) -> tuple[int, int]:
    """(MoE layers, dense layers) on pipeline rank `stage` with `vpp` virtual chunks (rank_layer_ranges)."""
    if not m.is_moe:
        return 0, stage_layers[stage]
    ranges = rank_layer_ranges(stage_layers, stage, vpp, chunks)
    n_moe = sum(m.moe_layers_in(idx.start, idx.stop) for idx in ranges)
    return n_moe, stage_layers[stage] - n_moe


def rank_moe_layers(m: ModelSpec, stage_layers: list[int], vpp: int = 1) -> list[int]:
    """MoE layers on every pipeline rank at once (stage_layer_mix of each rank, chunks as chunk_layers sizes
    them), in one walk over the model's chunks, which a dense prefix alone ends at the prefix: what a search
    pricing many splits calls."""
    pp = len(stage_layers)
    if not m.is_moe:
        return [0] * pp
    k, moe, dense = m.first_k_dense_layers, [0] * pp, [0] * pp
    for r, start, n in _chunk_spans(stage_layers, vpp):
        if m.moe_layer_period > 1:
            moe[r] += m.moe_layers_in(start, start + n)
        elif start >= k:  # a dense prefix alone: every layer from here on is MoE
            break
        else:
            dense[r] += min(start + n, k) - start
    return moe if m.moe_layer_period > 1 else [n - d for n, d in zip(stage_layers, dense)]


def _scaled(count: ParamCount, n: int) -> ParamCount:
    return ParamCount(count.dense * n, count.expert * n)


def local_stage_params(m: ModelSpec, stage_layers: list[int], stage: int, tp: int, ep: int, etp: int,
                       seq_length: int, vpp: int = 1, chunks: list[int] | None = None) -> ParamCount:
    """Parameters held by one GPU of pipeline rank `stage`.

    The first rank adds the embedding (vocabulary split by tp; a learned position table is
    replicated), the last rank the final norm, the output layer and any multi-token prediction
    modules. With tied embeddings and pp > 1 the last rank keeps its own copy of the embedding for
    the output layer, as Megatron does. With `vpp` virtual chunks the rank's layers are its round-robin chunks
    (rank_layer_ranges; `chunks`: Layout.chunk_layers).
    """
    n_moe, n_dense = stage_layer_mix(m, stage_layers, stage, vpp, chunks)
    count = ParamCount()
    if n_dense:
        count = count + _scaled(local_layer_params(m, False, tp, ep, etp), n_dense)
    if n_moe:
        count = count + _scaled(local_layer_params(m, True, tp, ep, etp), n_moe)
    vocab_local = -(-m.vocab_size // tp) * m.hidden_size  # Megatron pads the vocabulary to a multiple of tp
    embedding = ParamCount(dense=vocab_local + embedding_params(m, seq_length) - m.vocab_size * m.hidden_size)
    last = len(stage_layers) - 1
    if stage == 0:
        count = count + embedding
    if stage == last:
        output = vocab_local if (not m.tied_embeddings or last > 0) else 0
        count = count + ParamCount(dense=norm_params(m, m.hidden_size) + output) + local_mtp_params(m, tp, ep, etp)
        if m.mtp_num_layers and last > 0 and not m.tied_embeddings:  # the MTP stage's own embedding copy
            count = count + embedding
    return count


def local_mtp_params(m: ModelSpec, tp: int, ep: int, etp: int) -> ParamCount:
    """Multi-token prediction modules on one GPU of the last pipeline rank, where Megatron-Core builds
    them (mtp_on_this_rank: the last stage). The modules embed the next tokens, so that rank also builds
    an embedding (models/gpt/gpt_model.py: `if self.pre_process or self.mtp_process`), a copy of the
    first rank's kept in sync like tied embeddings; with tied embeddings it is the output layer's copy
    (local_stage_params adds it)."""
    one = local_layer_params(m, m.mtp_is_moe, tp, ep, etp) + ParamCount(dense=_mtp_extras(m, tp))
    return _scaled(one, m.mtp_num_layers)
