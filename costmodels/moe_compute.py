"""The MoE block's own work on one GPU besides its GEMMs' FLOPs: grouped-GEMM efficiency at few tokens per expert,
the routed experts' element-wise bytes, and the token permute / unpermute around the dispatch.

Notation (SI units): M tokens of the micro-batch on one GPU, u = 1/tp under sequence parallelism (else 1), h hidden,
k top_k, E experts, n = ep ranks, f_e expert FFN width, etp expert tensor parallelism, 2 bytes per bf16 element.
P = M u k etp L: (token, expert) rows through this GPU's experts, T = M u: tokens it dispatches; L = x.moe_load, the
busiest EP rank's rows over the mean (costmodels.moe_balance: 1 for a balanced router), so every function here prices
the rank the others wait for.

Sources: Megatron-Core 0.16.1 megatron/core/transformer/moe/token_dispatcher.py (MoEAlltoAllTokenDispatcher:
permute before the all-to-all, sort_chunks_by_idxs after it when a rank holds several experts, the mirror image
before the combine; MoEFlexTokenDispatcher / _DeepepManager: DeepEP's dispatch delivers each token once per rank,
then get_permuted_hidden_states_by_experts permutes the received rows into expert order and
get_restored_hidden_states_by_experts folds them back), moe_utils.permute / unpermute (TE fused moe_permute /
moe_unpermute with --moe-permute-fusion: a gather of whole rows by a row-id map), experts.py TEGroupedMLP (the
activation runs over all routed rows).
Measured (benchmarks/data/measured/gpu_moe_h100.csv, one H100, torch 2.11): grouped GEMMs (torch._grouped_mm, the
CUTLASS SM90 grouped kernel) against one GEMM of all groups' rows; an index_select permute at 2.8-4.0 TB/s counted
read + write, i.e. at the HBM rate parplan prices memory-bound work with.
Known deviations: the busiest rank's excess rows are spread evenly over its local experts (a grouped GEMM with one
hot group runs at the factor of the mean group); routing probabilities (4 bytes per row) are left out of the
permute bytes; the permute backward moves the forward's bytes once (it is the mirrored gather), not twice as the
other element-wise kernels do.
"""

from __future__ import annotations

from costmodels.activations import ActShape
from costmodels.glu_clamp import clamp_bytes_per_row, clamp_strided_bytes_per_row
from costmodels.model_spec import ModelSpec
from costmodels.moe_dispatch import hit_probability

ACT_BYTES = 2

# Per-group fixed cost of a grouped GEMM, in token rows: grouped / one-GEMM rate = tpe / (tpe + c). Least squares
# on the 108 grouped forward, data-gradient and weight-gradient rows of gpu_moe_h100.csv (Qwen3-30B-A3B, GPT-OSS-120B
# and DeepSeek-V3 expert shapes, 128-4096 tokens per expert): c = 105; per kind 80 (forward) - 160 (weight gradient),
# per model 85-145: physical range 80-160 (a 128-row tile's padding and the per-group scheduling of the kernel).
# FP8 (gpu_moe_fp8_h100.csv: torch._scaled_grouped_mm, rowwise scales, forward, same shapes): c = 130, inside the
# range, but noisier (65-285 per model) and with a gap that c does not model: FP8 grouped stays at 0.73-0.87 of
# one FP8 GEMM at 4096 tokens per expert (bf16: 0.89-0.98). Known deviation: FP8 experts priced with the bf16 c.
GROUP_OVERHEAD_TOKENS = 105.0


def routed_rows(model: ModelSpec, x: ActShape) -> float:
    """P = M u k etp L: (token, expert) rows through the busiest EP rank's experts per micro-batch (L = x.moe_load,
    1 for a balanced router)."""
    return x.tokens * x.u * model.top_k * x.etp * x.moe_load


def tokens_per_expert(model: ModelSpec, x: ActShape) -> float:
    """Rows each local expert receives: P ep / E (at least 1)."""
    return max(routed_rows(model, x) * x.ep / model.num_experts, 1.0)


def grouped_gemm_factor(tpe: float) -> float:
    """A grouped GEMM's rate over the rate of one GEMM of all its rows, unitless: tpe / (tpe + c), c =
    GROUP_OVERHEAD_TOKENS (gpu_moe_h100.csv: 0.44-0.87 at 128 tokens per expert, 0.89-0.98 at 4096)."""
    return tpe / (tpe + GROUP_OVERHEAD_TOKENS)


def routed_activation_bytes(model: ModelSpec, x: ActShape) -> float:
    """Forward bytes of the experts' fused bias-activation: read f_in, write f per routed row (f_in = 2 f_e / etp
    for SwiGLU), plus the shared experts' over the M tokens at width n_s f_e / tp; with a clamped SwiGLU the eager
    clamps' bytes on both (costmodels.glu_clamp)."""
    return expert_activation_bytes(model, x) + shared_activation_bytes(model, x)


def _activation_bytes_per_row(model: ModelSpec, width: float) -> float:
    """Bytes one row's fused bias-activation moves at MLP width `width`: read f_in, write f, and a clamped SwiGLU's
    eager clamps."""
    glu = 2 if model.activation == "swiglu" else 1
    return ACT_BYTES * (glu + 1) * width + clamp_bytes_per_row(model, width)


def expert_activation_bytes(model: ModelSpec, x: ActShape) -> float:
    """Forward bytes of the routed experts' activation alone: P rows at width f_e / etp (the part Megatron's
    --recompute-modules moe_act re-runs)."""
    return routed_rows(model, x) * _activation_bytes_per_row(model, model.moe_ffn_hidden_size / x.etp)


def shared_activation_bytes(model: ModelSpec, x: ActShape) -> float:
    """Forward bytes of the shared experts' activation: M tokens at width n_s f_e / tp (0 without shared experts)."""
    if not model.num_shared_experts:
        return 0.0
    return x.tokens * _activation_bytes_per_row(model, model.num_shared_experts * model.moe_ffn_hidden_size / x.tp)


def expert_strided_bytes(model: ModelSpec, x: ActShape) -> float:
    """Forward-equivalent bytes of the routed experts' clamp passes over chunk views (costmodels.glu_clamp; priced at
    costmodels.strided's rate): P rows at width f_e / etp; 0 without glu_clamp."""
    return routed_rows(model, x) * clamp_strided_bytes_per_row(model, model.moe_ffn_hidden_size / x.etp)


def shared_strided_bytes(model: ModelSpec, x: ActShape) -> float:
    """The same for the shared experts: M tokens at width n_s f_e / tp (0 without shared experts or glu_clamp)."""
    if not model.num_shared_experts:
        return 0.0
    return x.tokens * clamp_strided_bytes_per_row(model, model.num_shared_experts * model.moe_ffn_hidden_size / x.tp)


# Megatron-Core's unfused permute (moe_utils.permute / unpermute without --moe-permute-fusion), in units of the routed
# rows' bytes R = P h 2, measured on one H100 (benchmarks/data/measured/gpu_unpermute_h100.json) and inside
# megatron-core's MoELayer on an H200 (gpu_moe_mcore_h200.json): forward, the index_select gather (2 R) and the
# probability multiply (2 R) at the HBM rate, and the scatter_add unpermute, which moves 7.5 R at the HBM rate
# (H100 0.35 ms for R = 0.134 GB, H200 0.25: 7.4-7.6 R, an atomic read-modify-write per 16-bit element); backward,
# the gather and the probabilities' gradient (4 R) at the HBM rate, and the permute's index_add, atomic, at
# costmodels.strided.atomic_bytes_per_s (R at 0.23-0.26 TB/s on both GPUs).
UNFUSED_FWD_BYTES_PER_ROW_BYTE = 11.5  # index_select 2 + probability multiply 2 + scatter_add 7.5 (range 10-13)
UNFUSED_BWD_BYTES_PER_ROW_BYTE = 4.0  # gather 2 + the probabilities' gradient 2
UNFUSED_ATOMIC_BYTES_PER_ROW_BYTE = 1.0  # the index_add's rows, at the atomic rate
# The probability multiply and its gradient, 2 R each way: only the all-to-all dispatcher's unpermute weights the
# rows (megatron-core 0.19.2 token_dispatcher.py MoEAlltoAllTokenDispatcher.combine_preprocess passes probs); the
# all-gather and DeepEP paths hand the probabilities to the experts, whose activation applies them
# (MoEAllGatherTokenDispatcher.dispatch_postprocess, _DeepepManager.get_permuted_hidden_states_by_experts).
UNFUSED_PROB_BYTES_PER_ROW_BYTE = 2.0


def fused_pair_bytes(model: ModelSpec, x: ActShape) -> float:
    """Forward bytes of the permute before the all-to-all and the unpermute after the combine, fused (the part of
    permute_bytes' alltoall count the unfused path replaces): 2 (T + T k) h 2."""
    tokens = x.tokens * x.u
    return 2 * (tokens + tokens * model.top_k) * model.hidden_size * ACT_BYTES


def unfused_permute_bytes(model: ModelSpec, x: ActShape, dispatcher: str = "alltoall") -> tuple[float, float, float]:
    """(forward HBM bytes, backward HBM bytes, backward atomic bytes) of the permute and unpermute unfused, in units
    of the constants above over R, the bytes of the rows the rank permutes:
    alltoall: R = T k h 2, the dispatching rank's T tokens before the all-to-all (what was measured);
    allgather and deepep: R = P h 2, the rows bound for the local experts, permuted after the gather or the
    dispatch, without the probability multiply (UNFUSED_PROB_BYTES_PER_ROW_BYTE); the all-gather's unpermute
    also zero-fills the g T gathered rows it scatters into (g = tp x ep), and so does the permute's backward
    (torch.zeros of restore_shape; its index_add target): g T h 2 each way."""
    h = model.hidden_size * ACT_BYTES
    if dispatcher == "alltoall":
        rows = x.tokens * x.u * model.top_k * h
        return (UNFUSED_FWD_BYTES_PER_ROW_BYTE * rows, UNFUSED_BWD_BYTES_PER_ROW_BYTE * rows,
                UNFUSED_ATOMIC_BYTES_PER_ROW_BYTE * rows)
    rows = routed_rows(model, x) * h
    zeros = x.tp * x.ep * x.tokens * x.u * h if dispatcher == "allgather" else 0.0
    return ((UNFUSED_FWD_BYTES_PER_ROW_BYTE - UNFUSED_PROB_BYTES_PER_ROW_BYTE) * rows + zeros,
            (UNFUSED_BWD_BYTES_PER_ROW_BYTE - UNFUSED_PROB_BYTES_PER_ROW_BYTE) * rows + zeros,
            UNFUSED_ATOMIC_BYTES_PER_ROW_BYTE * rows)


def received_tokens(model: ModelSpec, x: ActShape, dispatcher: str) -> float:
    """Rows a rank's dispatch delivers before the permute into expert order: DeepEP one per (token, rank),
    n T hit(E / n) L with hit the probability that a token reaches a rank (costmodels.moe_dispatch.hit_probability, 1 - q
    without group-limited routing); all-to-all one per (token, expert): P. L = x.moe_load: the busiest rank receives L
    times the mean."""
    if dispatcher == "deepep" and x.ep > 1 and model.num_experts >= model.top_k:
        hit = hit_probability(model.num_experts, model.num_experts / x.ep, model.top_k, model.moe_router_num_groups,
                              model.routed_groups)
        return x.ep * x.tokens * x.u * x.etp * hit * x.moe_load
    return routed_rows(model, x)


def permute_bytes(model: ModelSpec, x: ActShape, dispatcher: str) -> float:
    """Forward bytes of the permutes and unpermutes of one MoE layer, h-wide bf16 rows read + written.

    allgather: gather the P local rows out of the g T gathered tokens (g = tp x ep), and scatter them back into g T
    restored rows before the reduce-scatter: 2 (2 P + g T) h 2.
    deepep: permute R received rows into P expert-ordered rows and unpermute back: 2 (R + P) h 2.
    alltoall: permute T tokens into T k rows before the dispatch and back after the combine: 2 (T + T k) h 2; with
    several local experts (E / ep > 1) also the chunk sort of the P received rows, both ways: 2 (2 P) h 2."""
    h, P = model.hidden_size, routed_rows(model, x)
    if dispatcher == "allgather":
        rows = 2 * P + x.tp * x.ep * x.tokens * x.u
    elif dispatcher == "deepep" and x.ep > 1:
        rows = received_tokens(model, x, dispatcher) + P
    else:
        T = x.tokens * x.u
        rows = T + T * model.top_k
        if x.ep > 1 and model.num_experts > x.ep:
            rows += 2 * P
    return 2 * rows * h * ACT_BYTES
