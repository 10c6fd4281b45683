"""Activation memory stored for the backward pass, per layer and per pipeline stage, in bytes.

Notation: s sequence (tokens), b micro-batch, h hidden, a heads, t tp degree, c cp degree,
T = s*b/c tokens on one GPU, u = 1/t with sequence parallelism (else 1), f MLP width,
k top_k, V vocabulary. 16-bit activations (2 bytes), 1-byte dropout masks.

Source: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
MLSys'23, section 4 and Table 2: per layer s*b*h*(34 + 5*a*s/h) without parallelism, split as
attention 11sbh + 5as^2b, MLP 19sbh, LayerNorms 4sbh. Generalised here, term by term:
- GQA: K and V are kv_width wide instead of h (replicated heads when t > kv heads);
- SwiGLU: the activation input is 2f wide (gate and up), its output f wide: 6sbf instead of 4sbf;
- no dropout (Llama-style): the 1-byte masks and the attention-dropout output are not stored;
- flash attention or selective recompute: no s x s term (the softmax statistics, 4 bytes per head
  and token, are left out: under 0.1% of a layer);
- context parallelism: the sequence on one GPU is s/c (attention scores: s/c queries x s keys);
- MoE: each token's hidden state and expert activations are stored top_k times, times the busiest EP rank's
  load factor (costmodels.moe_balance; 1 for balanced routing), or padded to a capacity factor;
- full recompute: only each layer's input (2sbh, /t with SP) is kept;
- pre-norms: Megatron/TE norms keep their 16-bit input (2 bytes per element); Hugging Face's
  LlamaRMSNorm in eager PyTorch (transformers 4.34 models/llama/modeling_llama.py, LlamaRMSNorm.forward:
  `hidden_states.to(torch.float32)` ... `self.weight * hidden_states.to(input_dtype)`) keeps the fp32
  upcast (4, for pow and mul) and the 16-bit normalised tensor the weight multiplies (2): 6
  (`norm_bytes`, from the stack's memory semantics);
- routed experts that weight their activation by the routing probability as a separate multiply
  (Megatron-Core 0.19 TEGroupedMLP.forward, bias_act_func: `activation_func(x) * permuted_probs`
  outside a fused kernel, the path of non-gated activations): the multiply keeps the activation's
  output and fc2 keeps the product, 3 f-wide tensors (`expert_plain_widths`); the fused weighted
  SwiGLU kernel keeps none extra;
- SwiGLU kept as 3 f-wide tensors where the activation is fused (Megatron bias_swiglu, torch.compile):
  the 2f-wide gate|up and the f-wide product; eager `down_proj(act_fn(gate_proj(x)) * up_proj(x))`
  (transformers LlamaMLP.forward) keeps gate, silu(gate), up and the product: 4 (`glu_widths`);
- a clamped SwiGLU (GPT-OSS, ModelSpec.glu_clamp): the eager clamps keep fc1's 2f-wide output beside the
  clamped copy the fused activation keeps: 2 f-wide tensors more (costmodels.glu_clamp);
- sliding-window attention changes nothing here: flash attention keeps Q, K, V, the context and per-row softmax
  statistics whatever the window, and unfused attention keeps every masked score;
- Megatron-Core 0.6's all-gather token dispatcher (`moe_allgather`): see allgather_dispatch_bytes;
- torchtitan's per-op selective policy (torchtitan/models/llama3/infra/parallelize.py, `_save_list`
  and its matmul counter per block): the block input and the outputs of matmuls 1, 3, 5, 7 (wq, wv,
  w1, w2) and of attention (its context) are kept, everything else is recomputed; MoE blocks keep
  no routed-expert activations (grouped matmuls are not on the list) but do keep the all-to-all
  outputs of expert parallelism;
- multi-head latent attention (DeepSeek-V2): Q and K are a*d_qk wide, V and the context a*d_v,
  plus the latents r_q and r_kv (before and after their norms) and the rotary key;
- multi-token prediction (DeepSeek-V3 section 2.2, Megatron-Core MultiTokenPredictionLayer): the
  last stage adds, once per micro-batch its last chunk holds, each module's layer, inputs and head,
  and each module's loss keeps its fp32 softmax through the main loss.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from costmodels.glu_clamp import clamp_saved_widths
from costmodels.model_spec import ModelSpec
from costmodels.params import attention_matrices, kv_local_width

ACT_BYTES = 2
MASK_BYTES = 1
LOGIT_BYTES = 4


@dataclass(frozen=True)
class ActShape:
    """What sizes one GPU's activations: micro-batch shape and the splits that apply to it."""

    seq: int
    mbs: int
    tp: int = 1
    sp: bool = False
    cp: int = 1
    etp: int = 1
    ep: int = 1
    recompute: str = "none"
    flash: bool = True
    selective: str = "attention-core"  # or "per-op" (torchtitan): what recompute=selective keeps
    norm_bytes: float = 2.0  # bytes per hidden element a pre-norm keeps besides its output
    glu_widths: float = 3.0  # f-wide 16-bit tensors a SwiGLU MLP keeps
    expert_plain_widths: float = 2.0  # f-wide tensors a non-gated routed expert keeps
    moe_allgather: bool = False  # Megatron-Core 0.6 MoEAllGatherTokenDispatcher
    gemm_in_bytes: float = 2.0  # bytes per element of a tensor kept only as a GEMM's input (TE FP8: 1)
    modules: tuple[str, ...] = ("core_attn",)  # recompute=selective, attention-core stacks: what is recomputed
    moe_load: float = 1.0  # routed rows of the busiest EP rank over the mean (costmodels.moe_balance)

    @property
    def tokens(self) -> float:
        """T = s*b/c: tokens of one micro-batch on one GPU."""
        return self.seq * self.mbs / self.cp

    @property
    def u(self) -> float:
        """Share of a non-tensor-parallel activation a GPU keeps: 1/t with SP, else 1."""
        return 1.0 / self.tp if self.sp else 1.0


def mla_latent_width(m: ModelSpec) -> int:
    """MLA's stored low-rank activations per token: each latent (and, with its norm, the norm's
    output: the up projection's input) and the rotary key: 2r_q + 2r_kv + d_rope; 0 without MLA."""
    if m.mla is None:
        return 0
    return (2 if m.qk_norm else 1) * (m.mla.q_lora_rank + m.mla.kv_lora_rank) + m.mla.qk_rope_head_dim


def attention_bytes(m: ModelSpec, x: ActShape) -> float:
    """Attention block: norm input, QKV input, Q, K, V, context, dropout mask, scores (11sbh + 5as^2b).
    MLA adds its latents (mla_latent_width; split like the hidden state: Megatron runs the down
    projections on the sequence-parallel shard) and its context is a*d_v wide."""
    T, h, t, u = x.tokens, m.hidden_size, x.tp, x.u
    mask = MASK_BYTES if m.dropout else 0
    norm_in = x.norm_bytes * T * h * u
    qkv_in = x.gemm_in_bytes * T * h * u
    q_ctx = ACT_BYTES * T * (m.q_width + m.ctx_width) / t + fp8_context_copy_bytes(m, x)
    k_v = 2 * ACT_BYTES * T * kv_local_width(m, t)
    latent = ACT_BYTES * T * mla_latent_width(m) * u
    return norm_in + qkv_in + q_ctx + k_v + latent + mask * T * h * u + score_bytes(m, x)


def fp8_context_copy_bytes(m: ModelSpec, x: ActShape) -> float:
    """Under Transformer Engine FP8 the attention output is kept twice: in bf16 by the fused attention
    (FusedAttnFunc saves q, k, v and out) and as the output projection's FP8 input (te Linear saves its
    quantized input); in bf16 both are one tensor. 0 unless GEMM inputs are stored below 2 bytes."""
    if x.gemm_in_bytes >= ACT_BYTES:
        return 0.0
    return x.gemm_in_bytes * x.tokens * m.ctx_width / x.tp


def score_bytes(m: ModelSpec, x: ActShape) -> float:
    """The s x s terms: softmax output 2as^2b, dropout mask as^2b and output 2as^2b, over t (and c)."""
    if x.flash or x.recompute == "full" or (x.recompute == "selective" and "core_attn" in x.modules):
        return 0.0
    per_score = ACT_BYTES + ((MASK_BYTES + ACT_BYTES) if m.dropout else 0)
    return per_score * m.num_attention_heads / x.tp * x.tokens * x.seq


def _act_widths(m: ModelSpec, width: float, x: ActShape, routed: bool = False) -> float:
    """Stored elements per token inside an MLP of inner width `width`: activation input + output
    (SwiGLU: the stack's `glu_widths`; a non-gated routed expert: `expert_plain_widths`)."""
    if m.activation == "swiglu":
        return (x.glu_widths + clamp_saved_widths(m)) * width
    return (x.expert_plain_widths if routed else 2) * width


def inner_bytes(m: ModelSpec, width: float, x: ActShape, routed: bool = False) -> float:
    """Bytes per token stored inside an MLP of inner width `width`: every kept tensor in 16 bits but the
    last, the second linear's input, which FP8 training under Transformer Engine keeps quantized
    (x.gemm_in_bytes; te Linear / GroupedLinear save their FP8 input for the weight gradient)."""
    return ACT_BYTES * (_act_widths(m, width, x, routed) - width) + x.gemm_in_bytes * width


def dense_mlp_bytes(m: ModelSpec, x: ActShape) -> float:
    """Dense MLP block: norm input, MLP input, activation input and output, dropout mask (19sbh)."""
    T, h, u = x.tokens, m.hidden_size, x.u
    mask = MASK_BYTES if m.dropout else 0
    inner = T * inner_bytes(m, m.ffn_hidden_size, x) / x.tp
    return (x.norm_bytes + x.gemm_in_bytes) * T * h * u + inner + mask * T * h * u


def moe_mlp_bytes(m: ModelSpec, x: ActShape) -> float:
    """MoE block: norm and router input, fp32 router logits, top_k expert copies, shared experts."""
    T, h, u = x.tokens, m.hidden_size, x.u
    mask = MASK_BYTES if m.dropout else 0
    router = LOGIT_BYTES * T * u * m.num_experts
    tokens_e = routed_tokens(m, x)
    routed = tokens_e * (x.gemm_in_bytes * h + inner_bytes(m, m.moe_ffn_hidden_size, x, routed=True) / x.etp)
    norm_router = (x.norm_bytes + ACT_BYTES) * T * h * u
    return norm_router + router + routed + shared_expert_bytes(m, x) + allgather_dispatch_bytes(m, x) + mask * T * h * u


def routed_tokens(m: ModelSpec, x: ActShape) -> float:
    """Token copies the routed experts of one GPU process: T*k, split over etp only where the tokens are (sequence
    parallel), padded to a capacity factor, else times the busiest EP rank's load factor (x.moe_load,
    costmodels.moe_balance: 1 for a balanced router)."""
    return x.tokens * m.top_k * min(x.u * x.etp, 1.0) * (m.capacity_factor or x.moe_load)


def shared_expert_bytes(m: ModelSpec, x: ActShape) -> float:
    """Shared experts' stored activations (a dense MLP of num_shared_experts x moe_ffn width, over tp)."""
    shared_width = m.num_shared_experts * m.moe_ffn_hidden_size
    return x.tokens * inner_bytes(m, shared_width, x) / x.tp if shared_width else 0.0


def allgather_dispatch_bytes(m: ModelSpec, x: ActShape) -> float:
    """What Megatron-Core 0.6's MoEAllGatherTokenDispatcher (its default moe_token_dispatcher_type)
    keeps beyond the permuted expert input, per MoE layer (megatron/core/transformer/moe/
    token_dispatcher.py, token_permutation / token_unpermutation, megatron-core 0.6.0). torch.gather's
    backward saves its whole input (GatherBackward0 keeps `self`), so:
    - with sequence or expert parallelism the tokens all-gathered over the tp*ep group, G = T*u*tp*ep
      (first torch.gather);
    - the tokens routed to this rank's experts, L = G*k/ep with balanced routing, gathered out of
      them (the second torch.gather, into the expert order);
    - for top_k > 1 the un-permuted expert output that is scaled by the router scores (the mul keeps it
      for the scores' gradient), L tokens.
    Without sp/ep and with top_k = 1 the dispatcher keeps no copy. Zero unless x.moe_allgather."""
    if not x.moe_allgather:
        return 0.0
    gathered = x.sp or x.ep > 1
    G = x.tokens * x.u * x.tp * x.ep
    L = G * m.top_k / x.ep
    copies = (G if gathered else 0.0) + (L if gathered or m.top_k > 1 else 0.0) + (L if m.top_k > 1 else 0.0)
    return ACT_BYTES * copies * m.hidden_size


def layer_input_bytes(m: ModelSpec, x: ActShape) -> float:
    """What full recompute keeps per layer: the layer input, 2sbh (/t with SP)."""
    return ACT_BYTES * x.tokens * m.hidden_size * x.u


def _mlp_matrix_outputs(m: ModelSpec, x: ActShape, moe: bool) -> list[float]:
    """Output widths of the MLP's plain matmuls (aten.mm) in call order: w1, w3, w2 (SwiGLU) or
    fc1, fc2. MoE blocks: only the shared experts (the router gate is forced to recompute and the
    routed experts run as torch._grouped_mm, neither counted; torchtitan models/moe/moe.py)."""
    width = m.ffn_hidden_size
    if moe:
        width = m.num_shared_experts * m.moe_ffn_hidden_size
        if not width:
            return []
    inner = [width / x.tp] * (2 if m.activation == "swiglu" else 1)
    return inner + [m.hidden_size]


def per_op_layer_bytes(m: ModelSpec, x: ActShape, moe: bool) -> float:
    """torchtitan per-op selective checkpointing (its `_op_sac_save_list` and the policy in
    distributed/activation_checkpoint.py, 2025 releases): kept are the block input, the outputs of
    every second plain matmul of the block counted from the first (q, k, v, o, then the MLP's; MLA:
    its five projections), the attention output, and the outputs of reduce-scatter (tp with
    sequence parallelism: after the output projection and the MLP) and of all-to-all (expert
    parallelism: the dispatched and the combined tokens, k*h each). Everything else is recomputed."""
    T, t, u, h = x.tokens, x.tp, x.u, m.hidden_size
    outputs = [n for _, n in attention_matrices(m, t, fused_qkv=False)] + _mlp_matrix_outputs(m, x, moe)
    kept = h * u + sum(outputs[0::2]) + m.ctx_width / t
    if t > 1 and x.sp:
        kept += 2 * h * u
    if moe and x.ep > 1:
        kept += 2 * m.top_k * h * min(u * x.etp, 1.0)
    return ACT_BYTES * T * kept


def layer_bytes(m: ModelSpec, x: ActShape, moe: bool) -> float:
    """Stored activations of one layer for one micro-batch on one GPU, under `x.recompute`."""
    if x.recompute == "full":
        return layer_input_bytes(m, x)
    if x.recompute == "selective" and x.selective == "per-op":
        return per_op_layer_bytes(m, x, moe)
    mlp = moe_mlp_bytes(m, x) if moe else dense_mlp_bytes(m, x)
    saved = module_recompute_savings(m, x, moe) if x.recompute == "selective" else 0.0
    return attention_bytes(m, x) + mlp - saved


def module_recompute_savings(m: ModelSpec, x: ActShape, moe: bool) -> float:
    """What Megatron-Core's selective recompute of `x.modules` (--recompute-modules; megatron-core 0.16
    transformer_config.py recompute_modules, transformer_layer.py and moe/moe_layer.py) does not keep,
    per layer and micro-batch. core_attn: the s x s scores (score_bytes; nothing with flash attention,
    whose inputs the checkpoint keeps). mlp (dense layers): the whole MLP but its input, the fused
    norm's output and the inner tensors. moe (MoE layers): the MoE block but its input: router logits,
    expert activations, shared experts, dispatcher copies. moe_act: the routed experts' activation
    output (the second linear's input). shared_experts: their inner tensors. layernorm: the output of
    norms not fused into the next linear (Transformer Engine fuses the dense layers' norms: only the
    MoE block's pre-MLP norm and, with MLA, the attention's input norm are separate modules).
    mla_up_proj: with core_attn, the up-projected Q, K and V (both checkpoints keep only the latents);
    alone it saves what the core attention keeps anyway, nothing. Each module's recomputation works
    on one layer at a time: its transient is not counted."""
    T, h, u, mods = x.tokens, m.hidden_size, x.u, x.modules
    saved = 0.0
    if "mlp" in mods and not moe:
        saved += x.gemm_in_bytes * T * h * u + T * inner_bytes(m, m.ffn_hidden_size, x) / x.tp
    if "moe" in mods and moe:
        saved += moe_mlp_bytes(m, x) - (x.norm_bytes + ACT_BYTES) * T * h * u
    else:
        saved += _moe_part_savings(m, x, moe)
    if "layernorm" in mods:
        saved += ACT_BYTES * T * h * u * ((1 if moe else 0) + (1 if m.mla is not None else 0))
    if "mla_up_proj" in mods and "core_attn" in mods and m.mla is not None:
        saved += ACT_BYTES * T * m.q_width / x.tp + 2 * ACT_BYTES * T * kv_local_width(m, x.tp)
    return saved


def _moe_part_savings(m: ModelSpec, x: ActShape, moe: bool) -> float:
    """moe_act and shared_experts of module_recompute_savings (MoE layers only)."""
    if not moe:
        return 0.0
    saved = 0.0
    if "moe_act" in x.modules:
        saved += routed_tokens(m, x) * x.gemm_in_bytes * m.moe_ffn_hidden_size / x.etp
    if "shared_experts" in x.modules:
        saved += shared_expert_bytes(m, x)
    return saved


def recompute_working_bytes(m: ModelSpec, x: ActShape, moe: bool) -> float:
    """Full (and per-op selective) recompute rebuilds one layer at a time in backward: that layer's
    full activations exist transiently beside what is kept; what the layer keeps is part of them,
    so it is not counted twice."""
    if x.recompute == "none" or (x.recompute == "selective" and x.selective != "per-op"):
        return 0.0
    return layer_bytes(m, replace(x, recompute="none"), moe) - layer_bytes(m, x, moe)


def embedding_bytes(m: ModelSpec, x: ActShape) -> float:
    """First stage: the embedding dropout mask, sbh/t (Korthikanti section 4.3); zero without dropout."""
    return MASK_BYTES * x.tokens * m.hidden_size / x.tp if m.dropout else 0.0


def head_bytes(m: ModelSpec, x: ActShape) -> float:
    """Last stage, kept per micro-batch: final-norm input and output-layer input, 2sbh/t each (section
    4.3). The logits (Korthikanti's 4sbV/t) live only from the loss into its backward, which follows at
    once on the last stage: costmodels.memory counts them once, as the loss transient."""
    return (x.norm_bytes + ACT_BYTES) * x.tokens * m.hidden_size * x.u


def mtp_bytes(m: ModelSpec, x: ActShape) -> float:
    """Last stage, per micro-batch: the multi-token prediction modules (Megatron-Core
    transformer/multi_token_prediction.py, MultiTokenPredictionLayer._concat_embeddings and
    _postprocess): enorm keeps the next token's embedding, eh_proj its 2h-wide input (both normed
    halves), then one transformer layer of the last layer's kind and a final norm and output layer
    (head_bytes). hnorm reads the main model's last hidden state, which its own head already keeps."""
    if not m.mtp_num_layers:
        return 0.0
    inputs = (x.norm_bytes + 2 * ACT_BYTES) * x.tokens * m.hidden_size * x.u
    layer = layer_bytes(m, x, m.mtp_is_moe)
    return m.mtp_num_layers * (inputs + layer + head_bytes(m, x))


def mtp_loss_bytes(m: ModelSpec, x: ActShape) -> float:
    """What each multi-token prediction loss keeps from its forward, before the main loss, to its
    backward, after it: the fp32 softmax (4 bytes per logit) that Megatron's vocab-parallel and fused
    cross entropy save (tensor_parallel/cross_entropy.py, fusions/fused_cross_entropy.py:
    save_for_backward(exp_logits, ...)); it sits beside the main loss's peak."""
    return m.mtp_num_layers * LOGIT_BYTES * logit_count(m, x)


def logit_count(m: ModelSpec, x: ActShape) -> float:
    """Logits of one micro-batch on one GPU: tokens x vocabulary / tp (vocab-parallel loss)."""
    return x.tokens * m.vocab_size / x.tp


def last_chunk_inflight(schedule: str, num_microbatches: int) -> int:
    """Micro-batches the last rank's last chunk holds at its peak: all m under GPipe; one under 1F1B and
    interleaved 1F1B, whose last chunk runs each micro-batch's backward right after its forward."""
    return num_microbatches if schedule == "gpipe" else 1


def inflight_microbatches(schedule: str, stage: int, pp: int, vpp: int, num_microbatches: int) -> float:
    """Micro-batches whose activations a pipeline rank holds at its peak, in whole-stage units.

    GPipe: all m. 1F1B: min(p - stage, m) (Narayanan SC'21 section 2.2). Interleaved with v chunks
    per rank: Megatron warms up (p - stage - 1)*2 + (v - 1)*p chunks and holds one more, each 1/v of
    the stage; for stage 0 this is Korthikanti's factor (1 + (p-1)/(p*v)) on p micro-batches.
    """
    m = num_microbatches
    if pp == 1:
        return 1.0
    if schedule == "gpipe":
        return float(m)
    if schedule == "interleaved" and vpp > 1:
        chunks = min((pp - stage - 1) * 2 + (vpp - 1) * pp + 1, m * vpp)
        return chunks / vpp
    return float(min(pp - stage, m))
