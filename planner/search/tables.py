"""Integer cost tables: what the CP-SAT model and the brute-force oracle index, never compute.

Scale (one, documented): time in units of TIME_UNIT_S = 0.1 microsecond, rounded to nearest;
memory in units of MEM_UNIT_BYTES = 1 KiB, coefficients rounded up and capacity down (so a
split the tables accept fits the float model too), as whole-device bytes (costmodels.device_memory:
persistent states + the rest times (1 + fragmentation) + CUDA context and NCCL buffers, against
HBM less the margin); the objective in units of
TIME_UNIT_S / OBJ_PER_TIME, with OBJ_PER_TIME = 840 = lcm(1..8) so that (m - 1/v), n_i / v and the
1/3, 2/3 overlap shares are exact integers for v in 1..8 (costmodels.stage_linear gives the step formula);
the exposed data-parallel term, q/(3v) times an integer, is rounded up (Table.dp_term).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodels.device_memory import DeviceTerms
from costmodels.model_spec import ModelSpec
from costmodels.params import rank_moe_layers
from costmodels.stage_linear import Affine, LayoutCoefficients, StageCoefficients
from planner.search.space import Candidate

TIME_UNIT_S = 1e-7
MEM_UNIT_BYTES = 1024
OBJ_PER_TIME = 840


@dataclass(frozen=True)
class IntAffine:
    """fixed + dense * n_dense + moe * n_moe, integers."""

    fixed: int
    dense: int
    moe: int

    def at(self, n_dense: int, n_moe: int) -> int:
        """Value for a stage with these layer counts."""
        return self.fixed + self.dense * n_dense + self.moe * n_moe


def _time(a: Affine) -> IntAffine:
    return IntAffine(*(round(v / TIME_UNIT_S) for v in (a.fixed, a.per_dense, a.per_moe)))


def _memory(s: StageCoefficients, dev: DeviceTerms) -> IntAffine:
    """A stage's device bytes, memory units: DeviceTerms.device of its fixed part, and its reserve
    (linear in the allocated and persistent bytes) per layer."""
    a, p = s.memory_bytes, s.persistent_bytes
    device = (dev.device(a.fixed, p.fixed), dev.reserved(a.per_dense, p.per_dense), dev.reserved(a.per_moe, p.per_moe))
    return IntAffine(*(math.ceil(v / MEM_UNIT_BYTES) for v in device))


@dataclass(frozen=True)
class Table:
    """One candidate layout's integer costs, stage by stage."""

    layout: Candidate
    time: tuple[IntAffine, ...]
    memory: tuple[IntAffine, ...]
    reduce: tuple[IntAffine, ...]
    gather: tuple[IntAffine, ...]
    optimizer: tuple[IntAffine, ...]
    const: int  # p2p + fixed overhead, time units
    cap: int  # HBM less the margin, memory units (memory holds device bytes)
    overlap_reduce: bool  # gradient reduction hidden behind the last backward (2/3 of a micro-batch)
    overlap_gather: bool  # weight gathering hidden behind the first forward (1/3 of a micro-batch)
    reduce_windows: int = 1  # backwards the reduction hides behind (ZeRO-2: every micro-batch's)

    @property
    def m(self) -> int:
        """Micro-batches per step."""
        return self.layout.num_microbatches

    @property
    def v(self) -> int:
        """Virtual stages per rank."""
        return self.layout.vpp

    def dp_term(self, r: int, g: int, t: int) -> int:
        """Exposed data-parallel time of one stage, objective units (costmodels.step.dp_exposed_s):
        ceil(q * (E + F) / 3v) with E, F the reduction's and the gather's exposure times 3v."""
        scaled = max(0, *self.reduce_pieces(r, t)) + max(0, *self.gather_pieces(g, t))
        return -(-OBJ_PER_TIME * scaled // (3 * self.v))

    def reduce_pieces(self, r, t) -> list:
        """3v x the exposed reduction is max(0, *pieces): 3r - 2t and 3vr - 2((v-1)p + 1)t, the first
        and the last virtual chunk (costmodels.step.chunked_exposed_s), v(3r - 2wt) behind w backwards
        (ZeRO-2), or 3vr when nothing overlaps. Linear in r and t: the CP-SAT model adds each piece as
        a constraint on the same integer expressions."""
        v, k = self.v, self.chunk_steps
        if not self.overlap_reduce:
            return [3 * v * r]
        if self.reduce_windows > 1:
            return [v * (3 * r - 2 * self.reduce_windows * t)]
        return [3 * r - 2 * t, 3 * v * r - 2 * k * t]

    def gather_pieces(self, g, t) -> list:
        """3v x the exposed gather is max(0, *pieces): 3g - t and 3vg - ((v-1)p + 1)t, or 3vg."""
        v = self.v
        if not self.overlap_gather:
            return [3 * v * g]
        return [3 * g - t, 3 * v * g - self.chunk_steps * t]

    @property
    def chunk_steps(self) -> int:
        """(v - 1) p + 1: chunk-steps behind the first virtual chunk's share of a collective."""
        return (self.v - 1) * self.layout.pp + 1

    def objective(self, counts: list[tuple[int, int]]) -> int | None:
        """Step time in objective units for per-stage (n_dense, n_moe); None if a stage overflows.
        The largest stage dp_term is the ceiling of the largest exposure (a ceiling never reorders), so one
        division serves all stages (what the tables of a framework's 30k fixed splits spend their time on)."""
        cap = self.cap
        for mem, (d, e) in zip(self.memory, counts):
            if mem.fixed + mem.dense * d + mem.moe * e > cap:
                return None
        t = [a.fixed + a.dense * d + a.moe * e for a, (d, e) in zip(self.time, counts)]
        exposed = self._exposure
        scaled = max(exposed(r.fixed + r.dense * d + r.moe * e, g.fixed + g.dense * d + g.moe * e, ti)
                     for r, g, (d, e), ti in zip(self.reduce, self.gather, counts, t))
        opt = max(o.fixed + o.dense * d + o.moe * e for o, (d, e) in zip(self.optimizer, counts))
        q, v = OBJ_PER_TIME, self.v
        dp = -(-q * scaled // (3 * v))  # = max over stages of dp_term
        chunk = self.chunk_term([d + e for d, e in counts]) if v > 1 else 0
        return (q * self.m - q // v) * max(t) + q // v * sum(t) + q * (self.const + opt) + dp + chunk

    def _exposure(self, r: int, g: int, t: int) -> int:
        """3v x the stage's exposed data-parallel time: max(0, *reduce_pieces) + max(0, *gather_pieces),
        without building the lists (dp_term's numerator)."""
        v, k = self.v, self.chunk_steps
        if not self.overlap_reduce:
            red = 3 * v * r
        elif self.reduce_windows > 1:
            red = v * (3 * r - 2 * self.reduce_windows * t)
        else:
            red = max(3 * r - 2 * t, 3 * v * r - 2 * k * t)
        gat = 3 * v * g if not self.overlap_gather else max(3 * g - t, 3 * v * g - k * t)
        return max(0, red) + max(0, gat)

    @property
    def chunk_layer(self) -> int:
        """Time units of the slowest layer kind: what one excess layer of a virtual chunk costs."""
        return max(self.time[0].dense, self.time[0].moe)

    def chunk_term(self, stage_layers: list[int]) -> int:
        """Extra bubble of virtual chunks that v does not divide, objective units:
        q * a * sum_i ceil(n_i / v) - (q / v) * a * L (costmodels.pipeline; 0 when v divides every n_i)."""
        v = self.v
        if v == 1:
            return 0
        q, a = OBJ_PER_TIME, self.chunk_layer
        return q * a * sum(-(-n // v) for n in stage_layers) - q // v * a * sum(stage_layers)


def _sum_over_stages(affines: tuple[IntAffine, ...], n_dense: int, n_moe: int) -> int:
    """Sum over stages of an affine whose per-layer coefficients are the same on every stage:
    a constant whatever the split (fixed parts plus per-layer costs of all layers)."""
    per = affines[0]
    return sum(a.fixed for a in affines) + per.dense * n_dense + per.moe * n_moe


def lower_bound(table: Table, model: ModelSpec) -> int | None:
    """An objective no split can beat. Per-layer coefficients are the same on every stage, so the
    sums over stages of t_i, R_i, G_i and opt_i are constants; a maximum over stages is at least
    the mean, and the mean of max(0, a_i) is at least max(0, mean a_i) (convexity)."""
    only = only_split(table, model)
    if only is not None:  # one split only: the bound is the objective itself (None: it overflows)
        return table.objective(stage_counts(model, only, table.layout.vpp))
    q, p = OBJ_PER_TIME, table.layout.pp
    counts = (model.num_layers - model.num_moe_layers, model.num_moe_layers)
    t, r, g, o = (_sum_over_stages(a, *counts) for a in (table.time, table.reduce, table.gather, table.optimizer))
    dp = table.dp_term(r, g, t) // p
    return (q * table.m - q // table.v) * -(-t // p) + q // table.v * t + q * (table.const + o // p) + dp


def stage_capacities(t: Table, num_layers: int) -> list[int] | None:
    """The most layers each stage can hold within memory (whatever their dense/MoE mix), or None
    when even the smallest stages overflow or all capacities together hold fewer than the model."""
    v, caps = t.layout.vpp, []
    for mem in t.memory:
        per = min(mem.dense, mem.moe) if mem.moe else mem.dense
        room = t.cap - mem.fixed
        cap = num_layers if per <= 0 else min(num_layers, room // per)
        if room < 0 or cap < v:
            return None
        caps.append(cap)
    return caps if sum(caps) >= num_layers else None


def cheapest_layer(a: IntAffine, model: ModelSpec) -> int:
    """The smaller per-layer coefficient of `a` among the layer kinds the model has (dense, MoE)."""
    L, n_moe = model.num_layers, model.num_moe_layers
    return min(c for c, used in ((a.dense, L > n_moe), (a.moe, n_moe > 0)) if used)


def fit_capacities(t: Table, model: ModelSpec) -> list[int] | None:
    """Like stage_capacities, counting only the layer kinds the model has (a dense model's tables carry an
    unused MoE coefficient that stage_capacities' min lets through): the most layers each stage can hold,
    or None when no split fits (a stage cannot hold vpp layers, or all together hold fewer than the model)."""
    L, v, caps = model.num_layers, t.layout.vpp, []
    for mem in t.memory:
        per, room = cheapest_layer(mem, model), t.cap - mem.fixed
        cap = L if per <= 0 else min(L, room // per)
        if room < 0 or cap < v:
            return None
        caps.append(cap)
    return caps if sum(caps) >= L else None


def slowest_stage_floor(table: Table, model: ModelSpec, caps: list[int]) -> int:
    """A lower bound on max_i t_i (time units) over the splits that fit: the least T such that stages of
    at least vpp and at most caps[i] layers, each within T, can hold all the layers (stage i's time is at
    least fixed_i + a_i n_i, a_i its cheaper layer kind). Where the first stage's in-flight activations
    cap it, the others must take more than the mean: the bound rises above lower_bound's ceil(sum / pp).
    0 when a per-layer time is not positive (no such floor)."""
    L, v = model.num_layers, table.layout.vpp
    per = [cheapest_layer(a, model) for a in table.time]
    if min(per) <= 0:
        return 0

    def holds(limit: int) -> bool:
        room = [min(cap, (limit - a.fixed) // p) for a, p, cap in zip(table.time, per, caps)]
        return min(room) >= v and sum(room) >= L

    lo = max(a.fixed + p * v for a, p in zip(table.time, per)) - 1  # holds(lo) is False
    hi = max(a.fixed + p * cap for a, p, cap in zip(table.time, per, caps))  # holds(hi): sum(caps) >= L
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    return hi


def capacity_bound(table: Table, model: ModelSpec) -> int | None:
    """lower_bound with memory: None when no split fits (fit_capacities), else lower_bound with the
    slowest stage's time at least slowest_stage_floor. Also an objective no split that fits can beat, and
    never below lower_bound. Where one split only exists it is lower_bound (the objective itself)."""
    base = lower_bound(table, model)
    if base is None or only_split(table, model) is not None:
        return base
    caps = fit_capacities(table, model)
    if caps is None:
        return None
    q, p = OBJ_PER_TIME, table.layout.pp
    counts = (model.num_layers - model.num_moe_layers, model.num_moe_layers)
    t = _sum_over_stages(table.time, *counts)
    mean = -(-t // p)
    floor = slowest_stage_floor(table, model, caps)
    return base + (q * table.m - q // table.v) * max(0, floor - mean)


def only_split(table: Table, model: ModelSpec) -> list[int] | None:
    """The stage split when the candidate has one only (pp = 1, or a framework's partitioner fixes it),
    else None (the search chooses)."""
    if table.layout.pp == 1:
        return [model.num_layers]
    fixed = table.layout.fixed_stages
    return list(fixed) if fixed is not None else None


def make_table(layout: Candidate, k: LayoutCoefficients, dev: DeviceTerms) -> Table:
    """Integerize a layout's coefficients; memory as device bytes under `dev`."""
    st = k.stages
    return Table(
        layout=layout,
        time=tuple(_time(s.time_s) for s in st),
        memory=tuple(_memory(s, dev) for s in st),
        reduce=tuple(_time(s.dp_reduce_s) for s in st),
        gather=tuple(_time(s.dp_gather_s) for s in st),
        optimizer=tuple(_time(s.optimizer_s) for s in st),
        const=round((k.pp_comm_s + k.overhead_s) / TIME_UNIT_S),
        cap=dev.device_budget // MEM_UNIT_BYTES,
        overlap_reduce=k.overlap.reduce,
        overlap_gather=k.overlap.gather,
        reduce_windows=k.overlap.windows,
    )


def objective_seconds(value: int) -> float:
    """Objective units to seconds."""
    return value * TIME_UNIT_S / OBJ_PER_TIME


def stage_counts(model: ModelSpec, stage_layers: list[int], vpp: int = 1) -> list[tuple[int, int]]:
    """(n_dense, n_moe) of each stage: the dense prefix and any interleaving, over each rank's round-robin
    virtual chunks when vpp > 1 (costmodels.params.rank_moe_layers; the search calls this per split, so a
    model of one layer kind skips the walk)."""
    if not model.is_moe:
        return [(n, 0) for n in stage_layers]
    if model.first_k_dense_layers == 0 and model.moe_layer_period == 1:
        return [(0, n) for n in stage_layers]
    return [(n - moe, moe) for n, moe in zip(stage_layers, rank_moe_layers(model, stage_layers, vpp))]