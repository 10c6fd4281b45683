"""FLOPs and compute time of one transformer layer, one micro-batch, one GPU.

Notation: M tokens of the micro-batch on one GPU (s*b/cp), s sequence, h hidden, q = a*d query
width, kv = g*d key/value width, f MLP width (f_in = f for GELU, 2f for SwiGLU's gate+up),
E experts, k top_k, V vocabulary, t tp degree. A GEMM (M x K) @ (K x N) costs 2*M*K*N FLOPs.

Conventions:
- Model FLOPs (MFU): PaLM / Korthikanti et al. MLSys'23 Appendix A: three passes (backward = 2 x
  forward), attention scores QK^T and PV counted in full (no causal halving), no recompute.
  For GPT: 72*B*L*s*h^2*(1 + s/(6h) + V/(12hL)) per iteration.
- Hardware FLOPs add the recompute forward (selective: attention core; full: the whole layer);
  with full recompute this is Narayanan et al. SC'21 eq. (3): 96*B*s*L*h^2*(1 + s/(6h) + V/(16Lh)).
  Korthikanti's HFU formula for selective recompute uses s/(3h); we count one extra forward of
  the attention core (4Msq), i.e. s*2/(9h): a deviation of the paper's bookkeeping, not of time.
- Time: FLOPs / (peak x GEMM efficiency), the efficiency a saturating curve of the GEMM's
  effective size (fitted, see hardware_spec.Efficiency), capped by what no kernel of that shape can beat
  on the GPU (costmodels.kernels: MAMF ceiling, tile padding, roofline; fused attention by head dim) when the GPU profile names its SM count and tensor-core generation; causal flash attention skips the masked
  half of the scores and its backward does 2.5x the forward's matmuls (FlashAttention-2, Dao 2023);
  element-wise kernels (norms, residual/dropout, activation, RoPE, softmax, cross-entropy) are
  costed from the bytes they move at the fitted fraction of HBM bandwidth; backward moves 2x.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels import moe_compute
from costmodels.activations import ActShape
from costmodels.attention_window import window_flops_ratio, window_time_ratio, windowed_share
from costmodels.glu_clamp import clamp_bytes_per_row, clamp_strided_bytes_per_row
from costmodels.hardware_spec import Efficiency
from costmodels.kernels import KernelSpec, attention_kernel_efficiency, gemm_kernel_efficiency
from costmodels.model_spec import ModelSpec
from costmodels.params import attention_matrices, kv_local_width

ACT_BYTES = 2


@dataclass(frozen=True)
class Device:
    """What compute time depends on: peak FLOP/s, HBM bytes/s and the fitted efficiencies."""

    peak_flops: float
    hbm_bytes_per_s: float
    eff: Efficiency
    kernel: KernelSpec | None = None  # spec-sheet kernel physics capping the fitted curves (None: no cap)


@dataclass(frozen=True)
class Gemm:
    """`count` GEMMs of shape (m x k) @ (k x n), at `rate` times the curve's rate (grouped GEMMs: below 1)."""

    m: float
    k: float
    n: float
    count: float = 1.0
    rate: float = 1.0


def gemm_efficiency(eff: Efficiency, m: float, k: float, n: float) -> float:
    """Achieved fraction of peak for an (m x k) @ (k x n) GEMM.

    d = 3 / (1/m + 1/k + 1/n) (harmonic mean of the three sizes: symmetric, so the two backward
    GEMMs of a layer share the forward's efficiency); eff = gemm_max * d / (d + gemm_half_dim).
    Small local matrices under large tp have small k or n and so a low efficiency.
    """
    d = 3.0 / (1.0 / m + 1.0 / k + 1.0 / n)
    return eff.gemm_max * d / (d + eff.gemm_half_dim)


def device_gemm_efficiency(dev: Device, m: float, k: float, n: float) -> float:
    """The fitted curve's efficiency, capped by what no GEMM kernel of this shape can beat on the GPU
    (costmodels.kernels, bounds only: MAMF ceiling, tile padding, roofline) at the clock the board holds over a
    step (KernelSpec.sustained: H100 at 700 W, 0.93): the step-time fit may price losses the kernel does not
    have, never a kernel faster than the hardware. Without the derate a 70B layer's GEMMs ran at 794 TFLOP/s on
    H100, above the 660-710 one H100 holds at its 700 W limit (benchmarks/data/measured/gpu_sustained_h100.json)."""
    fitted = gemm_efficiency(dev.eff, m, k, n)
    if dev.kernel is None:
        return fitted
    return min(fitted, dev.kernel.sustained * gemm_kernel_efficiency(dev.kernel, m, k, n, typical=False))


def gemm_s(dev: Device, m: float, k: float, n: float, count: float = 1.0) -> float:
    """Seconds for `count` GEMMs of shape (m x k) @ (k x n)."""
    return count * 2.0 * m * k * n / (dev.peak_flops * device_gemm_efficiency(dev, m, k, n))


def _mlp_in(model: ModelSpec, width: float) -> float:
    return (2 if model.activation == "swiglu" else 1) * width


# ---- FLOPs (forward, one micro-batch, one GPU) -------------------------------------------------


def attention_linear_flops(model: ModelSpec, x: ActShape) -> float:
    """QKV and output projections: 2M*h*(q + 2kv)/t + 2M*q*h/t; MLA: 2M * in * out summed over its
    five projections (costmodels.params.attention_matrices)."""
    return sum(2 * x.tokens * k * n for k, n in attention_matrices(model, x.tp, down_share=x.u))


def attention_core_flops(model: ModelSpec, x: ActShape) -> float:
    """Scores QK^T and context PV, counted in full: 2*M*s*(q + ctx)/t = 4*M*s*q/t (model-FLOP
    convention); MLA's query/key heads (d_nope + d_rope) are wider than its value heads (d_v). Sliding
    window: the model's layer-mix average, a windowed layer counting min(w, s) keys per query instead of s
    (costmodels.attention_window). Attention sinks add one logit per head and row: not counted (< 1/d)."""
    share = windowed_share(model)
    keys = 1.0 - share + share * window_flops_ratio(x.seq, model.sliding_window)
    return 2 * x.tokens * x.seq * keys * (model.q_width + model.ctx_width) / x.tp


def mlp_flops(model: ModelSpec, x: ActShape, moe: bool) -> float:
    """Dense MLP 2*M*h*f*mats/t; MoE: router 2*M*h*E + top_k routed + shared experts."""
    M, h = x.tokens, model.hidden_size
    mats = 3 if model.activation == "swiglu" else 2
    if not moe:
        return 2 * M * h * model.ffn_hidden_size * mats / x.tp
    routed = model.top_k * 2 * M * h * model.moe_ffn_hidden_size * mats
    return 2 * M * h * model.num_experts + routed + shared_expert_flops(model, x)


def shared_expert_flops(model: ModelSpec, x: ActShape) -> float:
    """Forward FLOPs of an MoE layer's shared experts: n_s * 2*M*h*f_e*mats/t (0 without them)."""
    mats = 3 if model.activation == "swiglu" else 2
    return model.num_shared_experts * 2 * x.tokens * model.hidden_size * model.moe_ffn_hidden_size * mats / x.tp


def layer_flops(model: ModelSpec, x: ActShape, moe: bool) -> float:
    """Forward FLOPs of one layer, one micro-batch, one GPU (model convention)."""
    return attention_linear_flops(model, x) + attention_core_flops(model, x) + mlp_flops(model, x, moe)


def logits_flops(model: ModelSpec, x: ActShape) -> float:
    """Forward FLOPs of the output layer: 2*M*h*V/t."""
    return 2 * x.tokens * model.hidden_size * model.vocab_size / x.tp


# ---- time (forward, one micro-batch, one GPU) ----------------------------------------------------


def linear_gemms(model: ModelSpec, x: ActShape, moe: bool, grouped: bool = False) -> list[Gemm]:
    """The forward GEMMs of a layer's projections and MLP on one GPU, as (m, k, n, count)."""
    return attention_gemms(model, x) + mlp_gemms(model, x, moe, grouped)


def attention_gemms(model: ModelSpec, x: ActShape) -> list[Gemm]:
    """The forward GEMMs of a layer's attention projections on one GPU (params.attention_matrices' order)."""
    return [Gemm(x.tokens, k, n) for k, n in attention_matrices(model, x.tp, down_share=x.u)]


def mlp_gemms(model: ModelSpec, x: ActShape, moe: bool, grouped: bool = False) -> list[Gemm]:
    """The forward GEMMs of a layer's MLP on one GPU: fc1 and fc2; in an MoE layer the router, the routed experts'
    fc1 and fc2, then the shared experts' (_moe_gemms)."""
    if moe:
        return _moe_gemms(model, x, grouped)
    M, h, f = x.tokens, model.hidden_size, model.ffn_hidden_size / x.tp
    return [Gemm(M, h, _mlp_in(model, f)), Gemm(M, f, h)]


def linear_s(model: ModelSpec, x: ActShape, dev: Device, moe: bool, grouped: bool = False) -> float:
    """Forward seconds of a layer's GEMMs (projections and MLP), each at its own efficiency."""
    return sum(gemm_s(dev, g.m, g.k, g.n, g.count) / g.rate for g in linear_gemms(model, x, moe, grouped))


def fp8_cast_elements(model: ModelSpec, x: ActShape, moe: bool, grouped: bool = False) -> tuple[float, float]:
    """(forward, backward) elements one layer quantizes to FP8 per micro-batch: each GEMM's input
    (m x k) and weight (k x n) in forward, its output gradient (m x n) in backward (the input of both
    backward GEMMs: torchao float8_linear.py and Transformer Engine cast all three operands, as in
    Micikevicius et al. 2022, "FP8 Formats for Deep Learning", where activations, weights and gradients
    enter the GEMMs in FP8). The row-parallel projections' output gradients are m x h whatever tp is, so
    the casts shrink more slowly with tp than the GEMMs do. Known deviation: an MoE router's GEMM is
    counted like the others (linear_s also runs it at the FP8 rate), though frameworks keep it in bf16."""
    gemms = linear_gemms(model, x, moe, grouped)
    fwd = sum(g.count * (g.m * g.k + g.k * g.n) for g in gemms)
    return fwd, sum(g.count * g.m * g.n for g in gemms)


def _moe_gemms(model: ModelSpec, x: ActShape, grouped: bool) -> list[Gemm]:
    """Router, routed experts (M*u*k*etp*ep/E tokens per local expert, times the busiest EP rank's load factor
    x.moe_load: costmodels.moe_compute.tokens_per_expert) and shared experts.

    Each GPU dispatches its sequence-parallel shard, M*u tokens (u = 1/tp with SP): Megatron-Core's
    MoE layer takes the [s/tp, b, h] hidden states and its expert groups (ETP x EP x EDP) are carved
    from TP x CP x DP (megatron/core/transformer/moe/token_dispatcher.py, parallel_state's decoupled
    expert groups), so with etp < tp the tp ranks act as further expert-parallel ranks; an etp group
    gathers its members' tokens (x etp). etp = tp gives M*k as before.

    One GEMM per local expert, each at its own (small) size's efficiency; or, `grouped`, one
    grouped GEMM over all local experts (TransformerEngine grouped GEMM, Megatron --moe-grouped-gemm,
    torch._grouped_mm in torchtitan), which runs at the efficiency of their combined token count times the
    grouped kernel's per-group cost (costmodels.moe_compute.grouped_gemm_factor, measured on H100)."""
    M, h = x.tokens, model.hidden_size
    fe = model.moe_ffn_hidden_size / x.etp
    per_expert = moe_compute.tokens_per_expert(model, x)
    local_experts = model.num_experts / x.ep
    rows, count = (per_expert * local_experts, 1.0) if grouped else (per_expert, local_experts)
    rate = moe_compute.grouped_gemm_factor(per_expert) if grouped else 1.0
    gemms = [Gemm(M, h, model.num_experts), Gemm(rows, h, _mlp_in(model, fe), count, rate),
             Gemm(rows, fe, h, count, rate)]
    return gemms + shared_expert_gemms(model, x)


def shared_expert_gemms(model: ModelSpec, x: ActShape) -> list[Gemm]:
    """The shared experts' fc1 and fc2 over the M tokens at width n_s f_e / tp ([] without shared experts)."""
    if not model.num_shared_experts:
        return []
    M, h, fs = x.tokens, model.hidden_size, model.num_shared_experts * model.moe_ffn_hidden_size / x.tp
    return [Gemm(M, h, _mlp_in(model, fs)), Gemm(M, fs, h)]


def flash_efficiency(eff: Efficiency, seq: float) -> float:
    """Achieved fraction of peak of fused attention over `seq` keys: attn_max * s / (s + attn_half_seq)."""
    return eff.attn_max * seq / (seq + eff.attn_half_seq)


def attention_core_s(model: ModelSpec, x: ActShape, dev: Device, causal_skip: bool) -> float:
    """Forward seconds of QK^T and PV per GPU. Fused (flash) attention: causal skips half the scores and
    runs at `flash_efficiency`; a sliding-window layer visits fewer tiles (costmodels.attention_window), and
    the layers are averaged by the model's mix of windowed and full layers. Classic attention: two batched
    (s x d x s) GEMMs on the GEMM curve over every score, window or not (it masks after computing)."""
    full = 2 * x.tokens * x.seq * (model.q_width + model.ctx_width) / x.tp
    if not causal_skip:
        return full / (dev.peak_flops * device_gemm_efficiency(dev, x.seq, model.head_dim, x.seq))
    causal_s = full * 0.5 / (dev.peak_flops * attention_efficiency(model, x, dev))
    share = windowed_share(model)
    if not share:
        return causal_s
    ratio = window_time_ratio(x.seq, model.sliding_window)
    windowed_s = full * 0.5 * ratio / (dev.peak_flops * attention_efficiency(model, x, dev, x.seq * ratio))
    return (1.0 - share) * causal_s + share * windowed_s


def attention_efficiency(model: ModelSpec, x: ActShape, dev: Device, keys: float | None = None) -> float:
    """Fused attention's efficiency: the fitted curve at `keys` (default the sequence), capped by the GPU's
    attention kernel (costmodels.kernels: the generation's ceiling at the model's head dim, the exps' share)."""
    fitted = flash_efficiency(dev.eff, x.seq if keys is None else keys)
    if dev.kernel is None:
        return fitted
    heads = max(model.num_attention_heads / x.tp, 1.0)
    return min(fitted, attention_kernel_efficiency(dev.kernel, x.mbs * heads, x.seq / x.cp, x.seq, model.head_dim,
                                                  typical=False))


def elementwise_bytes(model: ModelSpec, x: ActShape, flash: bool, moe: bool = False) -> float:
    """Bytes moved by a layer's memory-bound kernels in forward (reads + writes).

    Two norms (read + write 2h each), two residual adds with dropout (read x and residual, write,
    1-byte mask: 7h; 6h without dropout), the fused bias-activation (read f_in, write f; in an MoE
    layer over the routed rows and shared experts: costmodels.moe_compute.routed_activation_bytes; a clamped
    SwiGLU's eager clamps: costmodels.glu_clamp), RoPE on
    q and k (read + write), and without flash attention the softmax/dropout over a*s scores per
    token (read 2, write 2, mask 1, dropout output 2 bytes).
    """
    M, h, t, u = x.tokens, model.hidden_size, x.tp, x.u
    residual = 7 if model.dropout else 6
    per_token = (8 + 2 * residual) * h * u
    if not moe:
        per_token += dense_activation_bytes(model, x) / M
    if model.position_embedding == "rope":
        per_token += 2 * ACT_BYTES * (model.q_width / t + kv_local_width(model, t))
    if not flash:
        per_token += 7 * model.num_attention_heads / t * x.seq
    return M * per_token + (moe_compute.routed_activation_bytes(model, x) if moe else 0.0)


def dense_activation_bytes(model: ModelSpec, x: ActShape) -> float:
    """Forward bytes of a dense MLP's fused bias-activation on one GPU: read f_in, write f per token (f = ffn / t),
    plus a clamped SwiGLU's eager clamps (costmodels.glu_clamp)."""
    f = model.ffn_hidden_size / x.tp
    return x.tokens * (ACT_BYTES * (_mlp_in(model, f) + f) + clamp_bytes_per_row(model, f))


def strided_bytes(model: ModelSpec, x: ActShape, moe: bool) -> float:
    """Forward-equivalent bytes of a layer's element-wise passes over chunk views (a clamped SwiGLU's clamps:
    costmodels.glu_clamp), which run at costmodels.strided's issue-bound rate: the dense MLP's M rows at f / t, or
    the routed and shared experts' rows (costmodels.moe_compute); 0 without glu_clamp."""
    if moe:
        return moe_compute.expert_strided_bytes(model, x) + moe_compute.shared_strided_bytes(model, x)
    return x.tokens * clamp_strided_bytes_per_row(model, model.ffn_hidden_size / x.tp)


def cross_entropy_bytes(model: ModelSpec, x: ActShape) -> float:
    """Bytes of the vocabulary-parallel cross-entropy, forward and backward together, 16 per logit:
    read bf16 logits (2), write and re-read fp32 softmax (4 + 4), read it in backward (4), write the
    bf16 gradient (2)."""
    return x.tokens * model.vocab_size / x.tp * 16


def memory_s(dev: Device, nbytes: float) -> float:
    """Seconds to move `nbytes` through HBM at the fitted efficiency."""
    return nbytes / (dev.hbm_bytes_per_s * dev.eff.hbm)
