"""From per-stage micro-batch times to the step time, its breakdown, and model-FLOP throughput.

The breakdown is taken on the slowest (critical) stage, so that its parts add up to `step_s`:
step = m * t_max (compute, recompute, tp, cp, ep, ZeRO-3 per-layer parts) + bubble + p2p + exposed
data-parallel traffic + optimizer step (with offload, the GPU's share plus the host's CPU step) + fitted
per-step overhead + offloaded host<->device copies (costmodels.offload). See costmodels.timing and
costmodels.sharding for the terms.

Data-parallel traffic per step of one stage, before overlap (R reduce, G gather):
- ZeRO 0: R = all-reduce of the gradients (buckets); G = 0.
- ZeRO 1-2 (Megatron distributed optimizer, DeepSpeed ZeRO-1/2): R = reduce-scatter of the
  gradients (+ HSDP replica all-reduce), G = all-gather of the updated 16-bit weights.
- ZeRO-3 with pipelining: as ZeRO 1-2 (one gather and one reduction per step, see sharding).
- ZeRO-3 without pipelining: the per-layer collectives sit in the layer time; R = the last unit's
  reduce-scatter per step plus the first unit's gather (with the embedding/head) per micro-batch.
ZeRO-2 reduce-scatters after every micro-batch (its gradients stay sharded), so R is m reductions,
each behind its own micro-batch's backward.
Exposure: R overlaps the last micro-batch's backward (2/3 of its time), per model chunk under
interleaving (chunked_exposed_s), when gradient reduction is overlapped (Megatron
--overlap-grad-reduce, DeepSpeed overlap_comm, FSDP), else it is exposed;
G overlaps the first forward (1/3) when the stack overlaps the parameter gather
(--overlap-param-gather, ZeRO-3 prefetch), else it is exposed. Both flags are `DpOverlap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from costmodels import comm
from costmodels import offload
from costmodels import compute as cmp
from costmodels import sharding
from costmodels.activations import ActShape
from costmodels.outputs import TimeOut
from costmodels.params import ParamCount, local_layer_params, local_stage_params
from costmodels.pipeline import bubble_s, chunk_excess_layers, p2p_transfers
from costmodels.recompute_time import recompute_flops
from costmodels.timing import (ADAM_BYTES_PER_PARAM, SGD_BYTES_PER_PARAM, Context, MicroTime, layer_time,
                               stage_time, step_overhead_s)


@dataclass(frozen=True)
class DpOverlap:
    """Which data-parallel terms hide behind compute: the reduction (behind `windows` backwards, one per
    reduction), the gather (first forward)."""

    reduce: bool
    gather: bool
    windows: int = 1


def dp_overlap(c: Context) -> DpOverlap:
    """The overlap flags of a context (module docstring)."""
    if c.zero3_per_microbatch:
        return DpOverlap(False, False)
    gather = c.stack.zero3_prefetch > 0 if c.lay.zero >= 3 else c.train.param_gather_overlap
    return DpOverlap(grad_reduce_overlaps(c), gather, reductions(c))


def grad_reduce_overlaps(c: Context) -> bool:
    """TrainSpec.grad_overlap where the stack's framework can overlap this layout's reduction at all (DeepSpeed
    cannot at ZeRO 0 or under a pipeline: Stack.overlap_grad_reduce_zero0 / _pp)."""
    st = c.stack
    return (c.train.grad_overlap and (st.overlap_grad_reduce_zero0 or c.lay.zero > 0)
            and (st.overlap_grad_reduce_pp or c.lay.pp == 1))


def reductions(c: Context) -> int:
    """Gradient reductions per step: ZeRO-2 keeps gradients sharded between micro-batches, so it
    reduce-scatters after every micro-batch's backward (DeepSpeed stage 2, FSDP SHARD_GRAD_OP,
    Megatron-FSDP optim_grads); ZeRO 0-1 accumulate full gradients and reduce once."""
    return c.lay.num_microbatches if c.lay.zero == 2 else 1


def _stage_params(c: Context, stage: int) -> ParamCount:
    lay = c.lay
    return local_stage_params(c.model, lay.stage_layers, stage, lay.tp, lay.ep, lay.etp, c.x.seq, lay.vpp,
                              lay.chunk_layers)


def expert_dp_size(c: Context) -> int:
    """edp = world / (etp * ep * pp)."""
    return c.cluster.num_gpus // (c.lay.etp * c.lay.ep * c.lay.pp)


def _grad_bucket_mparams(c: Context) -> float:
    """Megatron's DDP bucket: max(40M, 1M * dp) parameters; other stacks their configured size."""
    base = c.stack.grad_bucket_mparams
    return max(base, c.lay.dp) if c.stack.framework == "megatron" else base


def dp_comm_s(c: Context, params: ParamCount) -> tuple[float, float]:
    """(reduce R, gather G) seconds of one stage per step, before overlap (module docstring)."""
    lay, train, edp = c.lay, c.train, expert_dp_size(c)
    if c.zero3_per_microbatch:
        return _zero3_edges_s(c, params), 0.0
    bucket = _grad_bucket_mparams(c)
    reduce = reductions(c) * sharding.reduce_s(c.links, lay, params, edp, train.grad_reduce_bytes_per_param, bucket,
                                               lay.zero >= 1)
    if lay.zero == 0:
        return reduce, 0.0
    gather_bucket = c.stack.zero3_bucket_mparams if lay.zero >= 3 else bucket
    return reduce, sharding.gather_s(c.links, lay, params, edp, train.weight_bytes_per_param, gather_bucket)


def _zero3_edges_s(c: Context, params: ParamCount) -> float:
    """ZeRO-3 without pipelining: what no neighbour hides, the stage's parameters outside the layers
    (embedding, head) with one layer, gathered every micro-batch and reduce-scattered once."""
    lay, train, edp, st = c.lay, c.train, expert_dp_size(c), c.stack
    layer = local_layer_params(c.model, False, lay.tp, lay.ep, lay.etp)
    edge = ParamCount(dense=_extras(c) + layer.dense)
    gather = sharding.gather_s(c.links, lay, edge, edp, train.weight_bytes_per_param, st.zero3_bucket_mparams)
    reduce = sharding.reduce_s(c.links, lay, edge, edp, train.grad_reduce_bytes_per_param, st.zero3_bucket_mparams, True)
    return lay.num_microbatches * gather + reduce


def _extras(c: Context) -> int:
    """Parameters of a pp=1 stage outside its transformer layers: embedding, positions, final norm, head
    (and the multi-token prediction modules' norms and eh_proj: their layers are gathered in their own
    layer time, timing.mtp_time)."""
    m, lay = c.model, c.lay
    if lay.pp != 1:
        return 0
    mtp_layer = local_layer_params(m, m.mtp_is_moe, lay.tp, lay.ep, lay.etp).dense
    return local_stage_params(m, [0], 0, lay.tp, lay.ep, lay.etp, c.x.seq).dense - m.mtp_num_layers * mtp_layer


def dp_exposed_s(c: Context, params: ParamCount, micro: MicroTime) -> float:
    """Data-parallel time left on the critical path: the reduction R behind the backwards, the gather G
    behind the forwards (`chunked_exposed_s`), or R and G whole when the stack does not overlap them."""
    reduce, gather = dp_comm_s(c, params)
    flags, lay = dp_overlap(c), c.lay
    t = micro.total_s
    if flags.windows > 1:  # ZeRO-2: w reductions, each behind its own micro-batch's backward
        r = max(0.0, reduce - flags.windows * t * 2 / 3) if flags.reduce else reduce
    else:
        r = chunked_exposed_s(reduce, lay.vpp, lay.pp, t * 2 / 3) if flags.reduce else reduce
    return r + (chunked_exposed_s(gather, lay.vpp, lay.pp, t / 3) if flags.gather else gather)


def chunked_exposed_s(comm_s: float, vpp: int, pp: int, window_s: float) -> float:
    """Seconds of a per-step collective left exposed when each of the v model chunks of a stage issues
    its share comm/v as soon as that chunk is done (reduction) or before it is first needed (gather).

    window_s is one micro-batch's backward (2t/3) or forward (t/3) on the stage, all chunks together.
    In the interleaved 1F1B schedule the chunks' last backwards come p chunk-steps apart (Megatron-Core
    core/pipeline_parallel/schedules.py: backward_step_helper_preprocess enables chunk k's grad sync on
    its last micro-batch; virtual micro-batch i runs chunk (i // p) % v), so chunk j (j = 0 the first
    layers, last to finish) has j*p + 1 chunk-steps of w = window/v after its reduction can start. The
    chunks' collectives share one stream, so the last ends at max over j of the work of chunks 0..j less
    their window: max(0, max_j ((j+1) comm/v - (j p + 1) w)). The term is affine in j, so the maximum
    sits at j = 0 or j = v - 1. The gather mirrors it in the forwards (param_sync_func: chunks 0 and 1
    at the start, chunk k+1 when chunk k starts). v = 1 gives the non-interleaved max(0, comm - window).
    """
    first = (comm_s - window_s) / vpp
    last = comm_s - ((vpp - 1) * pp + 1) * window_s / vpp
    return max(0.0, first, last)


def optimizer_s(c: Context, params: ParamCount) -> float:
    """Optimizer step over the local shard, memory-bound (28 bytes/param Adam, 20 SGD); with optimizer
    offload the GPU steps the rest and the host its share (costmodels.offload.cpu_step_s)."""
    lay = c.lay
    per_param = ADAM_BYTES_PER_PARAM if c.train.optimizer == "adam" else SGD_BYTES_PER_PARAM
    dense = params.dense / (lay.dense_shards if lay.zero >= 1 else 1)
    expert = params.expert / (expert_dp_size(c) if lay.zero >= 1 else 1)
    gpu = cmp.memory_s(c.dev16, (dense + expert) * per_param * (1 - offload.optimizer_share(c.train)))
    return gpu + offload.cpu_step_s(dense + expert, c.cluster, c.train)


def pp_comm_s(c: Context, forward_s: Optional[Callable[[], float]] = None) -> float:
    """Activation and gradient sends between stages on the critical path (1/t each with SP): all
    2(v m + p - 1) of them, or with `Stack.overlap_p2p` under interleaving (Megatron's default
    --overlap-p2p-communication: a chunk's send and the next receive run beside the next chunk's
    compute, core/pipeline_parallel/schedules.py) the 2(p - 1) of the fill and drain, which have no
    compute beside them, plus what of each other send outlasts one layer's forward, the shortest chunk
    step (a lower bound on the compute it hides behind, so that the term does not depend on the split).
    `forward_s`: that forward's seconds when asked (default shortest_forward_s(c); the search passes its
    cached one)."""
    lay = c.lay
    if lay.pp <= 1:
        return 0.0
    nbytes = c.x.tokens * c.model.hidden_size * cmp.ACT_BYTES / lay.tp
    crosses = comm.ranks_per_node(lay.pp, lay.tp * lay.cp * lay.dp, c.links.gpus_per_node) < lay.pp
    send = comm.p2p_s(c.links, crosses, nbytes)
    total = p2p_transfers(lay.pp, lay.num_microbatches, lay.vpp)
    if lay.vpp == 1 or not c.stack.overlap_p2p:
        return total * send
    edges = 2 * (lay.pp - 1)
    shortest = shortest_forward_s(c) if forward_s is None else forward_s()
    return edges * send + (total - edges) * max(0.0, send - shortest)


def layer_kinds(model) -> tuple[bool, ...]:
    """The layer kinds the model has, as layer_time's `moe` flag: dense (False) when some layer is dense, MoE
    (True) when some layer is MoE. A model whose layers are all MoE (Mixtral, Qwen3, GPT-OSS) has no dense
    layer to price."""
    n_moe = model.num_moe_layers
    return tuple(moe for moe, present in ((False, model.num_layers > n_moe), (True, n_moe > 0)) if present)


def _layer_times(c: Context) -> list[MicroTime]:
    """One micro-batch of each layer kind the model has (layer_kinds)."""
    return [layer_time(c, moe) for moe in layer_kinds(c.model)]


def shortest_forward_s(c: Context) -> float:
    """Forward compute of the cheaper layer kind the model has, one micro-batch (a third of its forward +
    backward). Before 2026-11-27 a model whose layers are all MoE took its dense layer here, a layer it does
    not have, whose shorter forward priced more of each interleaved send as exposed."""
    return min(t.compute_s for t in _layer_times(c)) / 3


def step_time(c: Context) -> TimeOut:
    """The step time of a resolved layout and its breakdown on the critical stage."""
    lay = c.lay
    micro = [stage_time(c, i) for i in range(lay.pp)]
    totals = [t.total_s for t in micro]
    crit = max(range(lay.pp), key=lambda i: totals[i])
    params = [_stage_params(c, i) for i in range(lay.pp)]
    dp = max(dp_exposed_s(c, params[i], micro[i]) for i in range(lay.pp))
    opt = max(optimizer_s(c, p) for p in params)
    t = micro[crit].scaled(lay.num_microbatches)
    bubble, pp = bubble_s(totals, lay.vpp, chunk_excess_s(c), lay.num_microbatches), pp_comm_s(c)
    overhead = step_overhead_s(c)
    moved = offload_s(c, micro)
    step = t.total_s + bubble + pp + dp + opt + overhead + moved
    return TimeOut(step_s=step, compute_s=t.compute_s, recompute_s=t.recompute_s, bubble_s=bubble,
                   tp_comm_s=t.tp_comm_s, cp_comm_s=t.cp_comm_s, ep_comm_s=t.ep_comm_s, pp_comm_s=pp,
                   dp_comm_exposed_s=dp + t.dp_comm_s, optimizer_s=opt, overhead_s=overhead, offload_s=moved)


def offload_s(c: Context, micro: list[MicroTime]) -> float:
    """ZeRO-Offload/Infinity host<->device copies on the critical path, the largest over stages
    (costmodels.offload); each stage's copies hide behind its own m micro-batches of compute."""
    if c.train.offload_optimizer == "none" and c.train.offload_params == "none":
        return 0.0
    lay = c.lay
    return max(offload.offload_time(offload.owned_params(c.model, c.cluster, lay, i, c.x.seq), c.cluster, c.train,
                                    lay.zero, lay.num_microbatches, micro[i].compute_s * lay.num_microbatches,
                                    grad_reduce_overlaps(c)).total_s for i in range(lay.pp))


def chunk_excess_s(c: Context) -> list[float]:
    """Per rank, seconds its largest virtual chunk adds to the bubble when v does not divide its layers
    (costmodels.pipeline): excess layers times the slowest layer kind's time (MoE when the model has
    MoE layers; an upper bound on a rank holding only dense layers)."""
    lay = c.lay
    if lay.vpp <= 1:
        return [0.0] * lay.pp
    slowest = max(t.total_s for t in _layer_times(c))
    return [slowest * e for e in chunk_excess_layers(lay.stage_layers, lay.vpp, lay.chunk_layers)]


def model_flops_per_step(c: Context) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one step over all GPUs (no recompute / with recompute)."""
    model, lay = c.model, c.lay
    one = ActShape(seq=c.x.seq, mbs=1, recompute=lay.recompute, modules=c.x.modules)
    counts = _layer_counts(model)
    mtp_proj = 2 * one.tokens * 2 * model.hidden_size * model.hidden_size * model.mtp_num_layers
    fwd = (sum(cmp.layer_flops(model, one, moe) * n for moe, n in counts)
           + cmp.logits_flops(model, one) * (1 + model.mtp_num_layers) + mtp_proj)
    recompute = sum(recompute_flops(model, one, moe) * n for moe, n in counts)
    sequences = lay.num_microbatches * lay.mbs * lay.dp
    return 3 * fwd * sequences, (3 * fwd + recompute) * sequences


def _layer_counts(model) -> list[tuple[bool, int]]:
    """[(is MoE, number of such layers)] for the whole model, multi-token prediction layers (of the last
    layer's kind) included, as Megatron's num_floating_point_operations counts them (megatron/training/
    training.py: MTP layers, eh_proj, and one more output layer each)."""
    mtp_moe = model.mtp_num_layers if model.mtp_is_moe else 0
    moe = model.num_moe_layers + mtp_moe
    return [(False, model.num_layers + model.mtp_num_layers - moe), (True, moe)]
