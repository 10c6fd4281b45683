"""The cost of a pipeline stage as an affine function of its layer counts, for the planner.

Given every layout choice except the stage split, memory and time of stage i are affine in
(n_dense_i, n_moe_i), its dense and MoE layer counts:
    value_i = fixed_i + per_dense * n_dense_i + per_moe * n_moe_i.
This module extracts those coefficients from the same primitives memory.py and timing.py use,
so that the planner can search stage splits without re-evaluating the cost model; tests check
that the coefficients reproduce memory_by_stage and step_time. Stages differ only in their
in-flight micro-batches (activations) and in the embedding (first) and output layer (last).
The per-layer primitives depend on the activation shape alone; `LayerCosts` holds them so a
caller can reuse them across layouts that share a shape.

The step time from stage values (used by step.step_time, stated here for the planner):
    step = (m - 1/v) * max_i t_i + sum_i t_i / v + a * sum_i (ceil(n_i/v) - n_i/v)
           + pp_comm + max_i dp_i + max_i opt_i + overhead
    dp_i = [max(0, R_i - w*2t_i/3) or R_i] + [max(0, G_i - t_i/3) or G_i]   (w: ZeRO-2 reduces every
                                                                             micro-batch, w = m; else 1)
    (a: the slowest layer kind's per-layer time; the term is the uneven virtual chunks' extra bubble,
    costmodels.pipeline, and 0 when v divides every stage)
with the overlapped form where costmodels.step.dp_overlap says so (ZeRO-3 without pipelining
books its per-layer collectives in t_i and its edges, constant, in R_i).
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels import activations as act
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.memory import (expert_dp, fp8_weight_cache, grad_cast_bytes, grad_cast_cap_bytes, loss_transient_bytes,
                               memory_train, memory_zero, optimizer_temp_bytes,
                               paired_forward_bytes, persistent_state_bytes, zero3_buffer_bytes, zero_state_bytes)
from costmodels.model_spec import ModelSpec
from costmodels.params import ParamCount, local_layer_params, local_stage_params
from costmodels.step import DpOverlap, dp_comm_s, dp_overlap, optimizer_s, pp_comm_s
from costmodels.timing import Context, head_time, layer_time, make_context, step_overhead_s
from costmodels.train_spec import TrainSpec


@dataclass(frozen=True)
class Affine:
    """fixed + per_dense * n_dense + per_moe * n_moe."""

    fixed: float
    per_dense: float
    per_moe: float

    def at(self, n_dense: int, n_moe: int) -> float:
        """Value for a stage with these layer counts."""
        return self.fixed + self.per_dense * n_dense + self.per_moe * n_moe


@dataclass(frozen=True)
class StageCoefficients:
    """Affine costs of one pipeline rank (per GPU)."""

    time_s: Affine  # one micro-batch, forward + backward
    memory_bytes: Affine  # peak total
    persistent_bytes: Affine  # the part of it allocated once (memory.persistent_state_bytes)
    dp_reduce_s: Affine  # data-parallel gradient reduction per step, before overlap
    dp_gather_s: Affine  # data-parallel weight gathering per step, before overlap
    optimizer_s: Affine


@dataclass(frozen=True)
class LayoutCoefficients:
    """Everything the planner needs about one layout choice, stage split left open."""

    stages: list[StageCoefficients]
    pp_comm_s: float
    overhead_s: float
    num_microbatches: int
    vpp: int
    zero: int
    overlap: DpOverlap


@dataclass(frozen=True)
class LayerCosts:
    """Per-layer primitives that depend only on the activation shape (and model, cluster, train)."""

    time_s: tuple[float, float]  # (dense, MoE) layer, one micro-batch fwd + bwd
    act_bytes: tuple[float, float]  # (dense, MoE) stored activations, one micro-batch
    head_time_s: float
    head_act_bytes: float
    mtp_act_bytes: float  # multi-token prediction modules (with the head: once per micro-batch the last chunk holds)
    embedding_act_bytes: float
    working_bytes: float


def layer_costs(c: Context) -> LayerCosts:
    """The shape-dependent primitives of a context; stored activations scaled as memory.stage_memory
    scales them (TrainSpec.activation_scale: 2 in fp32/tf32 training)."""
    return combine_layer_costs(layer_times(c), layer_acts(c))


def layer_times(c: Context) -> tuple[tuple[float, float], float]:
    """((dense, MoE) layer seconds, output layer seconds), one micro-batch forward + backward."""
    m = c.model
    return (layer_time(c, False).total_s, layer_time(c, True).total_s if m.is_moe else 0.0), head_time(c).total_s


def layer_acts(c: Context) -> tuple[float, ...]:
    """The activation fields of LayerCosts, in its order after head_time_s (act_bytes first): they
    depend on the activation shape and, for the working bytes, on the all-to-all overlap (ep > 1;
    memory.paired_forward_bytes), not on ZeRO, the pipeline or the cp algorithm, so a caller may cache
    them apart from the times."""
    m, x, k = c.model, c.x, c.train.activation_scale
    return ((k * act.layer_bytes(m, x, False), k * act.layer_bytes(m, x, True) if m.is_moe else 0.0),
            k * act.head_bytes(m, x), k * act.mtp_bytes(m, x), k * act.embedding_bytes(m, x),
            k * (act.recompute_working_bytes(m, x, m.is_moe) + paired_forward_bytes(m, x, c.train, c.lay)))


def combine_layer_costs(times: tuple, acts: tuple) -> LayerCosts:
    """LayerCosts from layer_times and layer_acts."""
    (time_s, head_s), (act_bytes, head_act, mtp_act, emb_act, working) = times, acts
    return LayerCosts(time_s, act_bytes, head_s, head_act, mtp_act, emb_act, working)


def state_bytes(params: ParamCount, lay: Layout, edp: int, train: TrainSpec) -> float:
    """Weights + gradients + optimizer bytes of `params` on one GPU under the layout's ZeRO stage."""
    return sum(state_parts(params, lay, edp, train))


def persistent_bytes(params: ParamCount, lay: Layout, edp: int, train: TrainSpec) -> float:
    """The part of state_bytes allocated once and kept (memory.persistent_state_bytes)."""
    return persistent_state_bytes(*state_parts(params, lay, edp, train), lay)


def state_parts(params: ParamCount, lay: Layout, edp: int, train: TrainSpec) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes of `params`, dense and expert parts added."""
    zero, mtrain = memory_zero(lay), memory_train(train, lay)
    dense = zero_state_bytes(params.dense, lay.dense_shards, zero, mtrain)
    expert = zero_state_bytes(params.expert, edp, zero, mtrain)
    weights, grads, opt = (d + e for d, e in zip(dense, expert))
    return weights + fp8_weight_cache(train, lay, params), grads, opt


def _transient(c: Context, stage: int, extras: ParamCount, layer_params: tuple, rest: Affine) -> Affine:
    """A bound, affine in the layer counts, on memory.stage_memory's transient max(loss, step - rest, 0), where
    `rest` (affine too) is the stage's activations and gathered buffers and step the optimizer's temporaries:
    max(loss, step_0 - rest_0, 0) + sum_k max(0, step_k - rest_k) n_k, at least the transient at every count
    (each term bounds its part, and a negative per-layer excess only lowers the exact value). A ZeRO-3 gradient
    cast of one sub-group at most (memory.grad_cast_cap_bytes) gives a second bound, the cast a constant; the
    smaller of the two at the even split is used. Exact where the step allocates nothing (the loss alone).
    Adding each layer's step bytes on top of its activations, as before, put the cast beside the activations it
    never meets: plan took pp=32 at 86 s for Llama 3 70B on 32 H100 under DeepSpeed ZeRO-3 while dp=32 fits at
    76 s (a review)."""
    loss = loss_transient_bytes(c.model, c.train, c.lay, stage)
    edp = expert_dp(c.cluster, c.lay)
    pieces = (extras, *layer_params)
    temps = [optimizer_temp_bytes(c.train, c.lay, p, edp) for p in pieces]
    bounds = [_excess(loss, Affine(*temps), rest)]
    cap = grad_cast_cap_bytes(c.train, c.lay)
    if cap is not None:
        uncast = [t - grad_cast_bytes(c.train, c.lay, p, edp) for t, p in zip(temps, pieces)]
        bounds.append(_excess(loss, Affine(uncast[0] + cap, uncast[1], uncast[2]), rest))
    moe = c.model.num_moe_layers
    even = ((c.model.num_layers - moe) / c.lay.pp, moe / c.lay.pp)
    return min(bounds, key=lambda b: b.at(*even))


def _excess(loss: float, step: Affine, rest: Affine) -> Affine:
    """max(loss, step_0 - rest_0, 0) + max(0, step_k - rest_k) per layer kind: _transient's bound."""
    return Affine(max(loss, step.fixed - rest.fixed, 0.0), max(0.0, step.per_dense - rest.per_dense),
                  max(0.0, step.per_moe - rest.per_moe))


def _param_affine(f, extras: ParamCount, dense: ParamCount, moe: ParamCount) -> Affine:
    """A function affine in the parameter count (alpha-beta collectives, optimizer), read off
    evaluations with at least one layer (collectives of zero bytes cost nothing). The expert
    group's per-collective latency is left out (a few microseconds per step on MoE stages)."""
    base = f(extras + dense)
    two = f(extras + dense + dense)
    with_moe = f(extras + dense + moe)
    return Affine(2 * base - two, two - base, f(extras + dense + moe + moe) - with_moe)


def _param_class(c: Context, stage: int, layer_params: tuple[ParamCount, ParamCount]) -> tuple:
    """(states bytes (fixed, dense, MoE), their persistent part (same), dp reduce, dp gather, optimizer)
    of a stage: what depends on its parameters, not on the activation shape."""
    lay, model, train = c.lay, c.model, c.train
    edp = expert_dp(c.cluster, lay)
    extras = local_stage_params(model, [0] * lay.pp, stage, lay.tp, lay.ep, lay.etp, c.x.seq)
    dense, moe = layer_params
    states = tuple(state_bytes(p, lay, edp, train) for p in (extras, dense, moe))
    kept = tuple(persistent_bytes(p, lay, edp, train) for p in (extras, dense, moe))
    return (states, kept,
            _param_affine(lambda p: dp_comm_s(c, p)[0], extras, dense, moe),
            _param_affine(lambda p: dp_comm_s(c, p)[1], extras, dense, moe),
            _param_affine(lambda p: optimizer_s(c, p), extras, dense, moe))


def param_key(lay: Layout, stage_class: int) -> tuple:
    """What _param_class depends on, for callers that memoize it across layouts."""
    return (stage_class, lay.tp, lay.cp, lay.pp, lay.dp, lay.ep, lay.etp, lay.zero, lay.shard_group,
            lay.num_microbatches if lay.zero >= 2 else 0)


def layout_coefficients(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout,
                        costs: LayerCosts | None = None, memo: dict | None = None,
                        sends_s: float | None = None) -> LayoutCoefficients:
    """Coefficients of every stage; `lay` must be resolved (its stage_layers are ignored).
    `costs`, `memo` and `sends_s` (step.pp_comm_s of this layout) let a caller reuse the shape- and
    parameter-dependent parts."""
    c = make_context(model, cluster, train, lay)
    costs = costs or layer_costs(c)
    memo = {} if memo is None else memo
    params = tuple(local_layer_params(model, moe, lay.tp, lay.ep, lay.etp) for moe in (False, True))
    fixed_extra = costs.working_bytes + zero3_buffer_bytes(model, cluster, train, lay)
    stages = []
    for i in range(lay.pp):
        first, last = i == 0, i == lay.pp - 1
        key = param_key(lay, 0 if first else (2 if last else 1)) + ((first, last),)
        if key not in memo:
            memo[key] = _param_class(c, i, params)
        states, kept, reduce, gather, opt = memo[key]
        inflight = act.inflight_microbatches(lay.schedule, i, lay.pp, lay.vpp, lay.num_microbatches)
        act_fixed = costs.embedding_act_bytes if first else 0.0
        held = act.last_chunk_inflight(lay.schedule, lay.num_microbatches)
        last_chunk = (costs.head_act_bytes + costs.mtp_act_bytes) * held if last else 0.0
        extras = local_stage_params(model, [0] * lay.pp, i, lay.tp, lay.ep, lay.etp, c.x.seq)
        rest = Affine(act_fixed * inflight + last_chunk + fixed_extra, costs.act_bytes[0] * inflight,
                      costs.act_bytes[1] * inflight)
        peak = _transient(c, i, extras, params, rest)
        memory = Affine(states[0] + rest.fixed + peak.fixed, states[1] + rest.per_dense + peak.per_dense,
                        states[2] + rest.per_moe + peak.per_moe)
        time = Affine(costs.head_time_s if last else 0.0, *costs.time_s)
        stages.append(StageCoefficients(time, memory, Affine(*kept), reduce, gather, opt))
    sends_s = pp_comm_s(c) if sends_s is None else sends_s
    return LayoutCoefficients(stages, sends_s, step_overhead_s(c), lay.num_microbatches, lay.vpp,
                              lay.zero, dp_overlap(c))
