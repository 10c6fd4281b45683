"""Costing candidates for the search: cheap lower bounds, integer tables, a balanced first split.

Everything numeric comes from costmodels (stage_linear, memory, params); this module caches each
primitive (layer times, activations, states, device terms) on the candidate fields its cost function
reads, as planner.search.memo observes them (no hand-written keys), so that tens of thousands of
candidates cost microseconds each, and derives
bounds that never exceed the true optimum (used to prune without losing it):
- memory (device bytes, costmodels.device_memory): the largest stage holds at least the average of
  all stages' persistent states + (1 + fragmentation) x their other states and activations, plus the
  CUDA context and NCCL buffers;
- time: the slowest stage takes at least the average stage time.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass, field
from typing import Iterator, Optional

from costmodels import activations as act
from costmodels.device_memory import device_terms
from costmodels.hardware_spec import ClusterSpec
from planner.search.memo import FieldMemo
from planner.search.space import Candidate, Refused, Refuses, SpaceOptions, enumerate_counted
from costmodels.memory import act_shape, expert_dp, persistent_state_bytes
from costmodels.model_spec import ModelSpec
from costmodels.params import local_layer_params
from costmodels.stage_linear import (LayerCosts, combine_layer_costs, layer_acts, layer_times, layout_coefficients,
                                     state_parts)  # the (weights, grads, optimizer) both sum
from costmodels.step import pp_comm_s, shortest_forward_s
from costmodels.timing import Context, head_time, layer_time, make_context, step_overhead_s
from costmodels.train_spec import TrainSpec
from planner.search.tables import Table, make_table, stage_counts


@dataclass(frozen=True)
class Bounds:
    """Lower bounds of one candidate: peak bytes and step seconds over all its stage splits."""

    memory_bytes: float
    step_s: float


@dataclass
class Coster:
    """Caches per problem (model, cluster, train), each keyed on the candidate fields its cost function
    reads (planner.search.memo: derived by watching the function, never hand-written)."""

    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    _memo: dict = field(default_factory=dict)
    _layouts: dict = field(default_factory=dict)
    _tables: dict = field(default_factory=dict)  # (id(coefficients), id(device terms)) -> (table, them)
    _base: Optional[dict] = None  # the fields of make_context that no layout field changes (_context)

    def __post_init__(self) -> None:
        m, c, t = self.model, self.cluster, self.train
        # the memos reach this Coster through a weak proxy: no reference cycle, so that its caches (hundreds of
        # thousands of objects) are freed by reference counting once the search drops it, not by a collection
        me = weakref.proxy(self)
        self._n_moe = m.num_moe_layers  # a property that counts: read once
        self._kinds = (m.num_layers > self._n_moe, self._n_moe > 0)  # the model has (dense, MoE) layers
        # layer times without the per-micro-batch ZeRO-3 term: exact where it does not run, a floor where it
        # does (the bound's key then leaves out pp, dp and the shard group that only that term reads)
        self.floor_times = FieldMemo(lambda lay: layer_times(me._context(lay, _FloorContext)))
        self.zero3_times = FieldMemo(lambda lay: layer_times(me._context(lay, _SearchContext)))
        # what the bounds read (layers_bound_s): the same, less the layer kind the model lacks (bound_times)
        self.bound_floor, self.bound_zero3 = self.floor_times, self.zero3_times
        if m.is_moe and self._n_moe == m.num_layers:
            self.bound_floor = FieldMemo(lambda lay: moe_only_times(me._context(lay, _FloorContext)))
            self.bound_zero3 = FieldMemo(lambda lay: moe_only_times(me._context(lay, _SearchContext)))
        self.acts = FieldMemo(lambda lay: layer_acts(me._context(lay)))
        self.params = FieldMemo(lambda lay: tuple(local_layer_params(m, moe, lay.tp, lay.ep, lay.etp)
                                                  for moe in (False, True)))
        self.states = FieldMemo(lambda lay: me._states(lay))
        self.device = FieldMemo(lambda lay: device_terms(c, t, lay))
        # the shortest layer forward the interleaved sends hide behind reads the layer's fields only: cached on
        # them, not on every (pp, vpp, dp, micro-batches) of the sends' own key (it was two layer_time calls per
        # sends key: 8 of GPT-OSS-120B's 10 s of costing on 256 B200)
        self.forward_s = FieldMemo(lambda lay: shortest_forward_s(me._context(lay)))
        self.sends_s = FieldMemo(lambda lay: pp_comm_s(me._context(lay), lambda: me.forward_s(lay)))
        self.overhead_s = FieldMemo(lambda lay: step_overhead_s(me._context(lay)))
        self.coefficients = FieldMemo(lambda lay: layout_coefficients(m, c, t, lay, me.layer(lay), me._memo,
                                                                      me.sends_s(lay)))

    def _context(self, lay: Candidate, kind: type = Context) -> Context:
        """costmodels.timing.make_context of the candidate, as a `kind` (Context, _SearchContext or
        _FloorContext). Its devices, links and stack depend on the problem alone: built once (the first call,
        a whole make_context), then only the layout and its activation shape are set (a third of make_context's
        time; tests/test_search_costing.py holds the two equal)."""
        if self._base is None:
            self._base = make_context(self.model, self.cluster, self.train, lay).__dict__
        out = object.__new__(kind)  # the same fields, no re-validation (Context is a frozen dataclass)
        out.__dict__.update(self._base)
        out.__dict__.update(lay=lay, x=act_shape(self.model, self.train, lay))
        return out

    def layouts(self, opts: SpaceOptions, refuses: Optional[Refuses] = None) -> Iterator[Candidate | Refused]:
        """enumerate_counted of this problem (enumerate_layouts where `refuses` is None), kept once a pass has run
        to the end (a re-search of the same space, e.g. the validated alternative, then skips the enumeration)."""
        done = self._layouts.get((opts, refuses))
        if done is not None:
            yield from done
            return
        out = []
        for lay in enumerate_counted(self.model, self.cluster, self.train, opts, refuses):
            out.append(lay)
            yield lay
        self._layouts[(opts, refuses)] = out

    def times(self, lay: Candidate) -> tuple[tuple[float, float], float]:
        """costmodels.stage_linear.layer_times of the candidate (cached)."""
        return self.zero3_times(lay) if lay.zero3_per_microbatch else self.floor_times(lay)

    def bound_times(self, lay: Candidate) -> tuple[tuple[float, float], float]:
        """times(lay) as the bounds read them: with the time of a layer kind the model lacks at 0.0 (its
        coefficient, L - n_moe or n_moe, is 0: the bound is bit for bit the same), so that a model whose layers
        are all MoE (Mixtral, Qwen3) prices no dense layer for each of the thousands of layer shapes it bounds.
        The tables read times(): the dense time there enters Table.chunk_layer."""
        return self.bound_zero3(lay) if lay.zero3_per_microbatch else self.bound_floor(lay)

    def layer(self, lay: Candidate) -> LayerCosts:
        """Per-layer costs for the layout's activation shape (cached)."""
        return combine_layer_costs(self.times(lay), self.acts(lay))

    def _states(self, lay: Candidate) -> tuple[tuple[float, float], tuple[float, float]]:
        """Model-state bytes of one (dense, MoE) layer on one GPU (costmodels.stage_linear.state_bytes), and their
        persistent part (persistent_bytes): both from one evaluation of the (weights, gradients, optimizer) they
        sum, and 0.0 for a layer kind the model lacks (its count in memory_and_budget is 0)."""
        edp = expert_dp(self.cluster, lay)
        parts = [state_parts(p, lay, edp, self.train) if used else None
                 for p, used in zip(self.params(lay), self._kinds)]
        return (tuple(0.0 if w is None else sum(w) for w in parts),
                tuple(0.0 if w is None else persistent_state_bytes(*w, lay) for w in parts))

    def fixed_s(self, lay: Candidate) -> float:
        """Split-independent seconds of every step: pipeline sends and the stack's step overhead."""
        return self.sends_s(lay) + self.overhead_s(lay)

    def memory_bound(self, lay: Candidate) -> float:
        """A lower bound on the peak device bytes of any split of this candidate: the largest stage
        holds at least the average (module docstring)."""
        return self.memory_and_budget(lay)[0]

    def memory_and_budget(self, lay: Candidate) -> tuple[float, int]:
        """(memory_bound, budget) of the candidate, its device terms looked up once (the enumeration asks
        both of every candidate its keep accepts)."""
        L, n_moe = self.model.num_layers, self._n_moe
        act_bytes, _, _, _, working = self.acts(lay)
        states, kept = self.states(lay)
        dev = self.device(lay)
        # in-flight micro-batches shrink with the stage index: the last stage holds the fewest
        inflight = act.inflight_microbatches(lay.schedule, lay.pp - 1, lay.pp, lay.vpp, lay.num_microbatches)
        dense = dev.reserved(states[0] + act_bytes[0] * inflight, kept[0])
        moe = dev.reserved(states[1] + act_bytes[1] * inflight, kept[1])
        return ((L - n_moe) * dense + n_moe * moe) / lay.pp + dev.device(working), dev.device_budget

    def layers_bound_s(self, lay: Candidate, floor: bool = False) -> float:
        """A lower bound on the step seconds of any split from the layers alone: the slowest stage
        takes at least the average; fixed_s (pipeline sends, overhead) comes on top. `floor`: with the
        layer times less their per-micro-batch ZeRO-3 term (floor_times), a looser bound that needs no
        ZeRO-3 collective priced: a layer's time is max(host overhead, the sum of its non-negative parts)
        (costmodels.timing.layer_time), so leaving out a part never raises it."""
        L, n_moe = self.model.num_layers, self._n_moe
        time_s, head_s = self.bound_floor(lay) if floor else self.bound_times(lay)
        total = (L - n_moe) * time_s[0] + n_moe * time_s[1] + head_s
        return (lay.num_microbatches - 1 / lay.vpp) * total / lay.pp + total / lay.vpp

    def bounds(self, lay: Candidate) -> Bounds:
        """Lower bounds on the peak memory and the step time of any split of this candidate."""
        return Bounds(self.memory_bound(lay), self.layers_bound_s(lay) + self.fixed_s(lay))

    def table(self, lay: Candidate) -> Table:
        """The candidate's integer table."""
        if lay.fixed_stages is None:  # tabled once: a cache would only add its bookkeeping
            k = layout_coefficients(self.model, self.cluster, self.train, lay, self.layer(lay), self._memo,
                                    self.sends_s(lay))
            return make_table(lay, k, self.device(lay))
        # a framework's split group: its members share everything but the split, so one integer table serves
        # them all, its layout replaced (make_table reads no field of the layout but keeps it)
        k, dev = self.coefficients(lay), self.device(lay)
        shared = self._tables.get((id(k), id(dev)))
        if shared is None:
            shared = self._tables[(id(k), id(dev))] = (make_table(lay, k, dev), k, dev)  # k, dev: ids stay theirs
        out = copy.copy(shared[0])
        object.__setattr__(out, "layout", lay)
        return out

    def budget(self, lay: Candidate) -> int:
        """The most device bytes a GPU of this candidate may hold: HBM less the margin
        (costmodels.device_memory; bounds and tables count device bytes)."""
        return self.device(lay).device_budget


class _SearchContext(Context):
    """A Context whose zero3_per_microbatch is read from the candidate, as one (atomic) read
    (space.Candidate.ATOMIC): the layer time then depends on the ZeRO stage through that flag alone."""

    @property
    def zero3_per_microbatch(self) -> bool:
        """Candidate.zero3_per_microbatch (the same code as Context's)."""
        return self.lay.zero3_per_microbatch


class _FloorContext(Context):
    """A Context that never runs ZeRO-3's per-micro-batch collectives: its layer times are exact where
    the candidate does not run them, a lower bound where it does (Coster.layers_bound_s)."""

    @property
    def zero3_per_microbatch(self) -> bool:
        """False: the layer's time without the ZeRO-3 term."""
        return False


def moe_only_times(c: Context) -> tuple[tuple[float, float], float]:
    """costmodels.stage_linear.layer_times for a model whose layers are all MoE, the dense layer's time left at
    0.0 (no stage holds a dense layer): ((0.0, MoE layer seconds), output layer seconds)."""
    return (0.0, layer_time(c, True).total_s), head_time(c).total_s


def split_unit(num_layers: int, vpp: int) -> int:
    """Granularity of the first split: whole virtual stages (vpp layers, even chunks, no extra bubble)
    when vpp divides the layers, else single layers (uneven chunks, costmodels.pipeline)."""
    return vpp if num_layers % vpp == 0 else 1


def balanced_split(model: ModelSpec, table: Table) -> list[int]:
    """Stage sizes (at least vpp, multiples of split_unit) that equalise stage times, ignoring memory:
    a first split."""
    pp, v, L = table.layout.pp, table.layout.vpp, model.num_layers
    if table.layout.fixed_stages is not None:
        return list(table.layout.fixed_stages)
    if pp == 1:
        return [L]
    u = split_unit(L, v)
    least = v // u  # units per stage: at least one layer per virtual chunk
    per_layer = [max(a.dense if not model.is_moe else a.moe, 1) for a in table.time]
    fixed = [a.fixed for a in table.time]
    target = (sum(fixed) + sum(p * L / pp for p in per_layer)) / pp
    ideal = [max(v, (target - f) / p) for f, p in zip(fixed, per_layer)]
    scale = L / sum(ideal)
    units = [max(least, int(x * scale / u)) for x in ideal]
    order = sorted(range(pp), key=lambda i: (ideal[i] * scale / u) - int(ideal[i] * scale / u), reverse=True)
    i = 0
    while sum(units) != L // u:
        j = order[i % pp]
        if sum(units) < L // u:
            units[j] += 1
        elif units[j] > least:
            units[j] -= 1
        i += 1
    return [n * u for n in units]


def first_objective(model: ModelSpec, table: Table) -> tuple[int, list[int]] | None:
    """Objective of the balanced split, moving layers off overflowing stages if needed."""
    stages = balanced_split(model, table)
    v = table.layout.vpp
    u = split_unit(model.num_layers, v)
    for _ in range(4 * len(stages) * v // u):
        value = table.objective(stage_counts(model, stages, v))
        if value is not None:
            return value, stages
        counts = stage_counts(model, stages, v)
        slack = [table.cap - mem.at(*n) for mem, n in zip(table.memory, counts)]
        worst, best = min(range(len(stages)), key=slack.__getitem__), max(range(len(stages)), key=slack.__getitem__)
        if stages[worst] - u < v or slack[best] <= 0 or table.layout.fixed_stages is not None:
            return None
        stages[worst] -= u
        stages[best] += u
    return None
