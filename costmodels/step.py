"""From per-stage micro-batch times to the step time, its breakdown, and model-FLOP throughput.

The breakdown is taken on the slowest (critical) stage, so that its parts add up to `step_s`:
step = m * t_max (compute, recompute, tp, cp, ep parts) + bubble + p2p + exposed data-parallel
traffic + optimizer step + fitted per-step overhead. See costmodels.timing for the terms.
"""

from __future__ import annotations

from costmodels import comm
from costmodels import compute as cmp
from costmodels.activations import ActShape
from costmodels.outputs import TimeOut
from costmodels.params import ParamCount, local_stage_params
from costmodels.pipeline import bubble_s, p2p_transfers
from costmodels.timing import ADAM_BYTES_PER_PARAM, SGD_BYTES_PER_PARAM, Context, MicroTime, stage_time


def _stage_params(c: Context, stage: int) -> ParamCount:
    lay = c.lay
    return local_stage_params(c.model, lay.stage_layers, stage, lay.tp, lay.ep, lay.etp, c.x.seq)


def dp_comm_s(c: Context, params: ParamCount) -> tuple[float, float]:
    """(gradient reduction, weight gathering) seconds of one stage per step, before overlap.

    ZeRO 0: all-reduce of the gradients, nothing gathered. ZeRO 1-2: reduce-scatter of gradients,
    all-gather of the updated 16-bit weights. ZeRO-3: per micro-batch, weights gathered in forward
    and backward and gradients reduce-scattered. Dense parameters over dp*cp (stride tp), experts
    over edp (stride etp*ep).
    """
    lay, train = c.lay, c.train
    groups = [(params.dense, lay.dp * lay.cp, lay.tp)]
    if params.expert:
        groups.append((params.expert, expert_dp_size(c), lay.etp * lay.ep))
    reduce = gather = 0.0
    for n_params, size, stride in groups:
        grads = n_params * train.grad_bytes_per_param
        weights = n_params * train.weight_bytes_per_param
        if lay.zero == 0:
            reduce += comm.all_reduce_s(c.links, size, stride, grads)
        elif lay.zero < 3:
            reduce += comm.reduce_scatter_s(c.links, size, stride, grads)
            gather += comm.all_gather_s(c.links, size, stride, weights)
        else:
            reduce += comm.reduce_scatter_s(c.links, size, stride, grads) * lay.num_microbatches
            gather += 2 * comm.all_gather_s(c.links, size, stride, weights) * lay.num_microbatches
    return reduce, gather


def expert_dp_size(c: Context) -> int:
    """edp = world / (etp * ep * pp)."""
    return c.cluster.num_gpus // (c.lay.etp * c.lay.ep * c.lay.pp)


def dp_exposed_s(c: Context, params: ParamCount, micro: MicroTime) -> float:
    """Data-parallel time left on the critical path.

    ZeRO-3 prefetches behind all of the step's compute. With overlap_grad_reduce (Megatron
    --overlap-grad-reduce --overlap-param-gather) the gradient reduction hides behind the last
    micro-batch's backward (2/3 of its time) and the weight gathering behind the first forward
    (1/3); without it (Megatron of 2021, vTrain's runs) both are exposed.
    """
    reduce, gather = dp_comm_s(c, params)
    if c.lay.zero >= 3:
        return max(0.0, reduce + gather - c.lay.num_microbatches * micro.total_s)
    if c.train.overlap_grad_reduce:
        return max(0.0, reduce - micro.total_s * 2 / 3) + max(0.0, gather - micro.total_s / 3)
    return reduce + gather


def optimizer_s(c: Context, params: ParamCount) -> float:
    """Optimizer step over the local shard, memory-bound (28 bytes/param Adam, 20 SGD)."""
    lay = c.lay
    per_param = ADAM_BYTES_PER_PARAM if c.train.optimizer == "adam" else SGD_BYTES_PER_PARAM
    dense = params.dense / (lay.dp * lay.cp if lay.zero >= 1 else 1)
    expert = params.expert / (expert_dp_size(c) if lay.zero >= 1 else 1)
    return cmp.memory_s(c.dev, (dense + expert) * per_param)


def pp_comm_s(c: Context) -> float:
    """Activation and gradient sends between stages on the critical path (1/t each with SP)."""
    lay = c.lay
    if lay.pp <= 1:
        return 0.0
    nbytes = c.x.tokens * c.model.hidden_size * cmp.ACT_BYTES / lay.tp
    crosses = comm.ranks_per_node(lay.pp, lay.tp * lay.cp * lay.dp, c.links.gpus_per_node) < lay.pp
    return p2p_transfers(lay.pp, lay.num_microbatches, lay.vpp) * comm.p2p_s(c.links, crosses, nbytes)


def step_time(c: Context) -> TimeOut:
    """The step time of a resolved layout and its breakdown on the critical stage."""
    lay = c.lay
    micro = [stage_time(c, i) for i in range(lay.pp)]
    totals = [t.total_s for t in micro]
    crit = max(range(lay.pp), key=lambda i: totals[i])
    params = [_stage_params(c, i) for i in range(lay.pp)]
    dp = max(dp_exposed_s(c, params[i], micro[i]) for i in range(lay.pp))
    opt = max(optimizer_s(c, p) for p in params)
    m, t = lay.num_microbatches, micro[crit].scaled(lay.num_microbatches)
    bubble, pp = bubble_s(totals, lay.vpp), pp_comm_s(c)
    overhead = c.dev.eff.step_overhead_s
    step = t.total_s + bubble + pp + dp + opt + overhead
    return TimeOut(step_s=step, compute_s=t.compute_s, recompute_s=t.recompute_s, bubble_s=bubble,
                   tp_comm_s=t.tp_comm_s, cp_comm_s=t.cp_comm_s, ep_comm_s=t.ep_comm_s, pp_comm_s=pp,
                   dp_comm_exposed_s=dp, optimizer_s=opt, overhead_s=overhead)


def model_flops_per_step(c: Context) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one step over all GPUs (no recompute / with recompute)."""
    model, lay = c.model, c.lay
    one = ActShape(seq=c.x.seq, mbs=1, recompute=lay.recompute)
    counts = _layer_counts(model)
    fwd = sum(cmp.layer_flops(model, one, moe) * n for moe, n in counts) + cmp.logits_flops(model, one)
    recompute = sum(cmp.recompute_flops(model, one, moe) * n for moe, n in counts)
    sequences = lay.num_microbatches * lay.mbs * lay.dp
    return 3 * fwd * sequences, (3 * fwd + recompute) * sequences


def _layer_counts(model) -> list[tuple[bool, int]]:
    """[(is MoE, number of such layers)] for the whole model."""
    return [(False, model.num_layers - model.num_moe_layers), (True, model.num_moe_layers)]
