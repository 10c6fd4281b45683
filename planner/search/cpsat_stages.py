"""CP-SAT stage variables of one pipeline degree: the layers of each stage and their dense/MoE mix.

Shared by the candidates with the same pp (planner.search.cpsat). Without virtual chunks a stage's layers are
one contiguous range; with v chunks per rank they are dealt round-robin, chunk j of rank r the (j pp + r)-th
of the model (costmodels.params.rank_layer_ranges), each rank's chunks as costmodels.pipeline.chunk_layers
sizes them. Every count here equals planner.search.tables.stage_counts for the same split
(tests/test_interleaved_moe.py checks every split of small models).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from costmodels.model_spec import ModelSpec, periodic_below

if TYPE_CHECKING:
    from ortools.sat.python import cp_model


class StageGroup:
    """Stage-size variables shared by the candidates with the same pipeline degree."""

    def __init__(self, m: cp_model.CpModel, model: ModelSpec, pp: int, ub: dict[str, int], relaxed: bool = False):
        L = self.L = model.num_layers
        self.model, self.relaxed = model, relaxed
        self.n = [m.NewIntVar(1, L, f"n{pp}_{i}") for i in range(pp)]
        m.Add(sum(self.n) == L)
        self.dense, self.moe = self._split(m, [(i, n) for i, n in enumerate(self.n)], f"{pp}")
        self.T = m.NewIntVar(0, ub["T"], f"T{pp}")
        self.D = m.NewIntVar(0, ub["D"], f"D{pp}")
        self.O = m.NewIntVar(0, ub["O"], f"O{pp}")
        self.E = [m.NewIntVar(0, ub["E"], f"E{pp}_{i}") for i in range(pp)]
        self.F = [m.NewIntVar(0, ub["E"], f"F{pp}_{i}") for i in range(pp)]
        self.q: dict[int, list] = {}
        self.mixes: dict[int, tuple[list, list]] = {1: (self.dense, self.moe)}  # v=1: exact, relaxed or not

    @property
    def uniform(self) -> bool:
        """Every layer of one kind: the dense/MoE split of a stage does not depend on where its layers sit."""
        model = self.model
        return not model.is_moe or (model.first_k_dense_layers == 0 and model.moe_layer_period == 1)

    def mix(self, m, v: int) -> tuple[list, list]:
        """(dense, MoE) layers of each stage with v virtual chunks per rank: chunks dealt round-robin, chunk j of
        rank r the (j * pp + r)-th of the model (costmodels.params.rank_layer_ranges). A dense prefix of k
        layers lies in the model's first k chunks (each chunk holds a layer where the candidate applies:
        n_i >= v), so only those are sized. In a relaxed group, interleaved layers get `_relaxed_mix` instead.
        Created once per v."""
        if self.uniform:
            return self.dense, self.moe
        if v not in self.mixes:
            pp, model = len(self.n), self.model
            if self.relaxed and model.moe_layer_period > 1:
                self.mixes[v] = self._relaxed_mix(m, v)
                return self.mixes[v]
            parts = pp * v if model.moe_layer_period > 1 else min(pp * v, model.first_k_dense_layers)
            order = [(k % pp, self._chunk_size(m, self.n[k % pp], v, k // pp, f"{pp}_{v}_{k % pp}"))
                     for k in range(parts)]
            dense, _ = self._split(m, order, f"{pp}_{v}")
            dense = [sum(dense[k] for k, (r, _) in enumerate(order) if r == i) for i in range(pp)]
            self.mixes[v] = dense, [n - d for n, d in zip(self.n, dense)]
        return self.mixes[v]

    def _relaxed_mix(self, m, v: int) -> tuple[list, list]:
        """A relaxation of the round-robin mix of interleaved layers (period P): any MoE count per stage that
        its chunks allow, a chunk of s layers holding at most (s + P - 1) / P MoE layers and, past a dense
        prefix, at least (s - P + 1) / P, summing to the model's. It holds every exact mix, so an objective
        it cannot reach no split reaches (_one_by_one)."""
        P, model, pp = self.model.moe_layer_period, self.model, len(self.n)
        moe = [m.NewIntVar(0, self.L, f"rx{pp}_{v}_{i}") for i in range(pp)]
        for n, e in zip(self.n, moe):
            m.Add(e <= n)
            m.Add(P * e <= n + v * (P - 1))
            if model.first_k_dense_layers == 0:
                m.Add(P * e >= n - v * (P - 1))
        m.Add(sum(moe) == model.num_moe_layers)
        return [n - e for n, e in zip(self.n, moe)], moe

    def _chunk_size(self, m, n, v: int, j: int, tag: str):
        """Chunk j of a rank of n layers as costmodels.pipeline.chunk_layers sizes it (larger first):
        ceil((n - j) / v), fixed by v s >= n - j and v s <= n - j + v - 1."""
        s = m.NewIntVar(0, self.L, f"s{tag}_{j}")
        m.Add(v * s >= n - j)
        m.Add(v * s <= n - j + v - 1)
        return s

    def _split(self, m, order: list, tag: str):
        """(dense, MoE) layers of each part of `order` ((rank, size) in model order)."""
        model, L = self.model, self.L
        sizes = [n for _, n in order]
        k = model.first_k_dense_layers if model.is_moe else L
        if k == L:
            return sizes, [0] * len(sizes)
        if model.moe_layer_period > 1:  # a dense prefix alone keeps min/max below: a table lookup, tried for
            return self._interleaved(m, sizes, tag)  # DeepSeek-V3 on 1,024 H100, ran into the 15 s limit at an
        # 8.6% gap where min/max proves the optimum in 8 s
        if k == 0:
            return [0] * len(sizes), sizes
        dense, moe, start = [], [], 0
        for i, n in enumerate(sizes):
            end = m.NewIntVar(0, L, f"end{tag}_{i}")
            m.Add(end == start + n)
            cap = m.NewIntVar(0, L, f"cap{tag}_{i}")
            m.AddMinEquality(cap, [end, k])
            d = m.NewIntVar(0, L, f"dense{tag}_{i}")
            m.AddMaxEquality(d, [0, cap - start])
            dense.append(d)
            moe.append(n - d)
            start = end
        return dense, moe

    def _interleaved(self, m, sizes: list, tag: str):
        """(dense, MoE) layers of each part when they interleave (ModelSpec.moe_layer_period P, offset o, dense
        prefix k): the MoE layers below a part boundary b are g(max(b, k)) - g(k), g(b) = ceil((b - o) / P) the
        layers i < b with i % P == o, which two linear constraints fix: P g <= b + P - 1 - o <= P g + P - 1.
        (A table lookup of ModelSpec.moe_layers_in(0, b), an element constraint, is as exact but made each
        pipeline candidate with virtual stages 17x slower to prove: Llama 4 Maverick on 256 H100.)"""
        model, L = self.model, self.L
        P, o, k = model.moe_layer_period, model.moe_layer_offset, model.first_k_dense_layers
        below_k = periodic_below(k, P, o)
        moe_below, start = [0], 0
        for i, n in enumerate(sizes[:-1]):
            end = m.NewIntVar(0, L, f"end{tag}_{i}")
            m.Add(end == start + n)
            past = end
            if k:
                past = m.NewIntVar(k, L, f"past{tag}_{i}")
                m.AddMaxEquality(past, [end, k])
            g = m.NewIntVar(0, L, f"moeb{tag}_{i}")
            m.Add(P * g <= past + P - 1 - o)
            m.Add(P * g >= past - o)
            moe_below.append(g - below_k)
            start = end
        moe_below.append(model.num_moe_layers)
        moe = [moe_below[i + 1] - moe_below[i] for i in range(len(sizes))]
        return [n - e for n, e in zip(sizes, moe)], moe

    def chunks(self, m, v: int) -> list:
        """c_i, the largest virtual chunk of stage i: v * c_i >= n_i, so c_i = ceil(n_i / v) at the
        optimum (its cost is positive). Created once per v."""
        if v not in self.q:
            top = -(-self.L // v)
            self.q[v] = [m.NewIntVar(1, top, f"c{len(self.n)}_{v}_{i}") for i in range(len(self.n))]
        return self.q[v]
