"""Tensor-, context-parallel and ZeRO-3 communication of one layer and micro-batch, and what of it stays exposed.

Split from costmodels.timing (which calls these per layer; `Context` is its resolved layout). Notation: M tokens per
micro-batch per GPU (c.x.tokens), h hidden, kappa the stack's overlap_slowdown (costmodels.overlap), extra = 1 under
full recompute (the forward runs again), else 0. Sources per function; the algorithms are listed in
costmodels.timing's module docstring (tp, cp, ZeRO-3 without pipelining).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from costmodels import comm
from costmodels import compute as cmp
from costmodels import sharding
from costmodels.layout import Layout
from costmodels.memory import expert_dp
from costmodels.overlap import exposed_s
from costmodels.params import kv_local_width, local_layer_params
from costmodels.stack import Stack
from costmodels.train_spec import TrainSpec

if TYPE_CHECKING:
    from costmodels.timing import Context


def _tp_gather_bytes(c: Context) -> float:
    """Bytes per element of a sequence-parallel all-gather: 1 when it moves FP8 (Stack.fp8_tp_gather with
    sequence parallelism), else 2; the reduce-scatters always move 2."""
    fp8 = c.train.precision == "fp8" and c.lay.sp and c.train.fp8_recipe in c.stack.fp8_tp_gather
    return 1.0 if fp8 else cmp.ACT_BYTES


def _tp_bytes(c: Context) -> float:
    """Bytes per activation element of a tensor-parallel all-reduce: the mean of its all-gather and
    reduce-scatter halves (2, or 1.5 with FP8 gathers)."""
    return (_tp_gather_bytes(c) + cmp.ACT_BYTES) / 2


def tp_s(c: Context, lin_s: float, extra: int) -> float:
    """Exposed tensor-parallel seconds of one layer and micro-batch: 2 all-reduces (SP: 2 all-gathers and
    2 reduce-scatters) in each of forward, backward and a recomputed forward. Under TP overlap the
    collectives the stack can overlap run beside the same passes' linear GEMMs; the rest stay exposed
    (_tp_unfused_s)."""
    tp_pass = 2 * comm.all_reduce_s(c.links, c.lay.tp, 1, c.x.tokens * c.model.hidden_size * _tp_bytes(c))
    total = tp_pass * (2 + extra)
    if not tp_overlap_applies(c.train, c.lay):
        return total
    unfused = _tp_unfused_s(c, tp_pass, extra)
    return exposed_s(lin_s * (3 + extra), total - unfused, c.kappa) + unfused


def tp_overlap_applies(train: TrainSpec, lay: Layout) -> bool:
    """Whether TP communication overlap runs: asked for (TrainSpec.tp_overlap) and sequence parallelism
    on. Both implementations overlap only all-gathers and reduce-scatters: Megatron-LM refuses
    --tp-comm-overlap without --sequence-parallel (megatron/training/arguments.py, "Tensor parallel
    communication/GEMM overlap can happen only when sequence parallelism is enabled"), and PyTorch's
    micro-pipeline pass matches only all_gather_into_tensor and reduce_scatter_tensor
    (torch/_inductor/fx_passes/micro_pipeline_tp.py), so sp = 0's all-reduces stay exposed."""
    return train.tp_overlap and lay.sp and lay.tp > 1


def _tp_unfused_s(c: Context, tp_pass_s: float, extra: int) -> float:
    """Seconds of the TP collectives that the stack's overlap leaves exposed (Stack.tp_overlap_impl).

    userbuffers (Transformer Engine): none. micro-pipeline (PyTorch async TP,
    torch/_inductor/fx_passes/micro_pipeline_tp.py) fuses an all-gather only with the matmuls that
    consume it and a reduce-scatter only with the one matmul that produces it, so
    - the backward reduce-scatter of the attention input gradient stays exposed, and the MLP's under
      SwiGLU: each gradient is a sum of several matmuls (wq, wk, wv, separate in torchtitan's models;
      w1, w3), which _find_producer_matmul does not match (a GELU MLP's one fc1 matmul fuses);
    - all-gathers stay exposed in every pass when an FP8 cast sits between gather and matmul, i.e. when
      the gather moves 16-bit data (rowwise recipe; tensorwise casts before the gather: Stack.fp8_tp_gather).
    A pass's time splits into its gather and reduce-scatter halves by their bytes (1 or 2 per element)."""
    if c.stack.tp_overlap_impl == "userbuffers":
        return 0.0
    gather_bytes = _tp_gather_bytes(c)
    gather_pass_s = tp_pass_s * gather_bytes / (gather_bytes + cmp.ACT_BYTES)
    reduce_pass_s = tp_pass_s - gather_pass_s
    gathers_fuse = c.train.precision != "fp8" or gather_bytes < cmp.ACT_BYTES
    summed = (2 if c.model.activation == "swiglu" else 1) / 2  # of the pass's 2 reduce-scatters
    return reduce_pass_s * summed + (0.0 if gathers_fuse else gather_pass_s * (2 + extra))


def zero3_layer_s(c: Context, moe: bool, fwd_s: float, bwd_s: float) -> float:
    """Exposed ZeRO-3 time of one layer and micro-batch (costmodels.sharding)."""
    lay, st, train = c.lay, c.stack, c.train
    p = local_layer_params(c.model, moe, lay.tp, lay.ep, lay.etp)
    edp = expert_dp(c.cluster, lay)
    fetches, reductions = _zero3_calls(c, moe)
    ag = sharding.gather_s(c.links, lay, p, edp, train.weight_bytes_per_param, st.zero3_bucket_mparams, fetches)
    rs = sharding.reduce_s(c.links, lay, p, edp, train.grad_reduce_bytes_per_param, _zero3_reduce_bucket(st), True)
    back = (ag if st.reshard_after_forward else 0.0) + rs
    host = (fetches * (2 if st.reshard_after_forward else 1) + reductions) * st.zero3_call_overhead_s
    if not sharding.prefetch_runs(st.zero3_prefetch, p.total, st.zero3_max_live_mparams):
        return ag + back + host
    return exposed_s(fwd_s, ag, c.kappa) + exposed_s(bwd_s, back, c.kappa) + host


def _zero3_reduce_bucket(st: Stack) -> float | None:
    """Gradient buckets of ZeRO-3: the stack's reduce bucket where it buckets (DeepSpeed
    reduce_bucket_size), else one reduction per unit (FSDP)."""
    return st.grad_bucket_mparams if st.zero3_bucket_mparams else None


def _zero3_calls(c: Context, moe: bool) -> tuple[int, int]:
    """(fetches, reductions) of one layer and micro-batch: DeepSpeed's packed fetches
    (costmodels.sharding.fetch_calls) and its reduce buckets; one of each per FSDP unit."""
    lay, st = c.lay, c.stack
    fetches = sharding.fetch_calls(sharding.layer_matrices(c.model, moe, lay.tp, lay.ep, lay.etp),
                                   st.zero3_bucket_mparams, st.zero3_persistence_threshold_mparams)
    total = local_layer_params(c.model, moe, lay.tp, lay.ep, lay.etp).total
    return fetches, sharding.buckets(total, _zero3_reduce_bucket(st))


def cp_s(c: Context, core_s: float, bwd_core_s: float, extra: int) -> float:
    """Exposed context-parallel time of one layer and micro-batch, forward + backward (+ the forward
    again under full recompute, `extra` = 1), by algorithm (module docstring)."""
    if c.lay.cp <= 1:
        return 0.0
    if c.lay.cp_comm == "p2p":
        fwd = _cp_exchange_s(c)
        return exposed_s(core_s, fwd, c.kappa) + exposed_s(bwd_core_s, 2 * fwd, c.kappa)
    if c.lay.cp_comm == "a2a":
        return (2 + extra) * _cp_all_to_all_s(c)
    gather = comm.all_gather_s(c.links, c.lay.cp, c.lay.tp, c.lay.cp * _kv_chunk_bytes(c))
    return (2 + extra) * gather + gather  # the reduce-scatter of dK, dV costs what the gather costs


def _kv_chunk_bytes(c: Context) -> float:
    """Local K and V of one micro-batch on one rank, bytes (KV heads replicated when fewer than tp)."""
    return c.x.tokens * 2 * kv_local_width(c.model, c.lay.tp) * cmp.ACT_BYTES


def _cp_exchange_s(c: Context) -> float:
    """Forward ring exchange of K and V chunks over the cp group (stride tp)."""
    cp = c.lay.cp
    crosses = comm.ranks_per_node(cp, c.lay.tp, c.links.gpus_per_node) < cp
    return (cp - 1) * comm.p2p_s(c.links, crosses, _kv_chunk_bytes(c))


def _cp_all_to_all_s(c: Context) -> float:
    """One pass of Ulysses: all-to-all of the local Q, K, V (tokens/cp x (q + 2 kv)/tp) before
    attention and of the output (tokens/cp x q/tp) after it, over the cp group (stride tp)."""
    q, ctx = c.model.q_width / c.lay.tp, c.model.ctx_width / c.lay.tp
    qkv = c.x.tokens * q * cmp.ACT_BYTES + _kv_chunk_bytes(c)
    out = c.x.tokens * ctx * cmp.ACT_BYTES
    return sum(comm.all_to_all_s(c.links, c.lay.cp, c.lay.tp, b) for b in (qkv, out))
