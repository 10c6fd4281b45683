"""CP-SAT: choose one candidate layout and, for pp > 1, the layers of every stage.

Variables: x_c (candidate c chosen, exactly one); per pipeline degree p, the stage sizes n_{p,i}
(sum = L; multiples of vpp for the chosen candidate) with their dense/MoE split; per p, epigraph
variables for max_i t_i (T), the exposed data-parallel term (D) and the optimizer (O). Every
candidate's constraints are enforced only by its own x_c; the objective Z is the step time in
planner.tables' objective units. All numbers come from the integer tables: no cost logic here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ortools.sat.python import cp_model

from costmodels.model_spec import ModelSpec
from planner.tables import OBJ_PER_TIME, Table, lower_bound, stage_counts



def _upper(a, L: int) -> int:
    return max(0, a.fixed) + max(0, a.dense, a.moe) * L


def _bounds(tables: list[Table], L: int) -> dict[str, int]:
    """Finite domains for the epigraph variables (CP-SAT rejects models that could overflow int64)."""
    q = OBJ_PER_TIME
    tb = max(_upper(a, L) for t in tables for a in t.time) + 1
    rb = max(_upper(a, L) for t in tables for a in t.reduce + t.gather) + 1
    ob = max(_upper(a, L) for t in tables for a in t.optimizer) + 1
    db = q * 3 * rb * 2
    zb = max((q * t.m + q) * tb * (t.layout.pp + 1) + q * (t.const + ob) + db for t in tables)
    return {"T": tb, "E": 3 * rb, "D": db, "O": ob, "Z": zb}


@dataclass(frozen=True)
class Solution:
    """One solved choice."""

    index: int
    table: Table
    stage_layers: list[int]
    objective: int
    optimal: bool
    bound: int


class _Group:
    """Stage-size variables shared by the candidates with the same pipeline degree."""

    def __init__(self, m: cp_model.CpModel, model: ModelSpec, pp: int, ub: dict[str, int]):
        L = self.L = model.num_layers
        self.n = [m.NewIntVar(1, L, f"n{pp}_{i}") for i in range(pp)]
        m.Add(sum(self.n) == L)
        self.dense, self.moe = self._split(m, model, pp)
        self.T = m.NewIntVar(0, ub["T"], f"T{pp}")
        self.D = m.NewIntVar(0, ub["D"], f"D{pp}")
        self.O = m.NewIntVar(0, ub["O"], f"O{pp}")
        self.E = [m.NewIntVar(0, ub["E"], f"E{pp}_{i}") for i in range(pp)]
        self.F = [m.NewIntVar(0, ub["E"], f"F{pp}_{i}") for i in range(pp)]
        self.q: dict[int, list] = {}

    def _split(self, m, model: ModelSpec, pp: int):
        L, k = model.num_layers, (model.first_k_dense_layers if model.is_moe else model.num_layers)
        if k == L:
            return self.n, [0] * pp
        if k == 0:
            return [0] * pp, self.n
        dense, moe, start = [], [], 0
        for i, n in enumerate(self.n):
            end = m.NewIntVar(0, L, f"end{pp}_{i}")
            m.Add(end == start + n)
            cap = m.NewIntVar(0, L, f"cap{pp}_{i}")
            m.AddMinEquality(cap, [end, k])
            d = m.NewIntVar(0, L, f"dense{pp}_{i}")
            m.AddMaxEquality(d, [0, cap - start])
            dense.append(d)
            moe.append(n - d)
            start = end
        return dense, moe

    def multiples(self, m, v: int) -> list:
        """q_i with n_i = v * q_i (created once per v)."""
        if v not in self.q:
            self.q[v] = [m.NewIntVar(1, self.L // v, f"q{len(self.n)}_{v}_{i}") for i in range(len(self.n))]
        return self.q[v]


def _affine(a, d, e):
    return a.fixed + a.dense * d + a.moe * e


def _add_candidate(m, g: _Group, t: Table, x, Z) -> None:
    q = OBJ_PER_TIME
    times = []
    for i in range(t.layout.pp):
        d, e = g.dense[i], g.moe[i]
        ti = _affine(t.time[i], d, e)
        times.append(ti)
        m.Add(_affine(t.memory[i], d, e) <= t.cap).OnlyEnforceIf(x)
        m.Add(g.T >= ti).OnlyEnforceIf(x)
        m.Add(g.O >= _affine(t.optimizer[i], d, e)).OnlyEnforceIf(x)
        r, gg = _affine(t.reduce[i], d, e), _affine(t.gather[i], d, e)
        if t.dp_mode == "zero3":
            m.Add(g.D >= q * (r + gg - t.m * ti)).OnlyEnforceIf(x)
        elif t.dp_mode == "overlap":
            m.Add(g.E[i] >= 3 * r - 2 * ti).OnlyEnforceIf(x)
            m.Add(g.F[i] >= 3 * gg - ti).OnlyEnforceIf(x)
            m.Add(g.D >= q // 3 * (g.E[i] + g.F[i])).OnlyEnforceIf(x)
        else:
            m.Add(g.D >= q * (r + gg)).OnlyEnforceIf(x)
    if t.v > 1:
        for n, qi in zip(g.n, g.multiples(m, t.v)):
            m.Add(n == t.v * qi).OnlyEnforceIf(x)
    obj = (q * t.m - q // t.v) * g.T + q // t.v * sum(times) + q * (t.const + g.O) + g.D
    m.Add(Z >= obj).OnlyEnforceIf(x)


def _add_hint(m, model, tables, xs, groups, Z, hint) -> None:
    idx, stages, value = hint
    for i, x in xs:
        m.AddHint(x, i == idx)
    pp = tables[idx].layout.pp
    if pp > 1:
        for n, size in zip(groups[pp].n, stages):
            m.AddHint(n, size)
    m.AddHint(Z, value)


def solve(model: ModelSpec, tables: list[Table], time_limit_s: float = 10.0, exclude: frozenset = frozenset(),
          workers: int = 2, hint: Optional[tuple[int, list[int], int]] = None) -> Optional[Solution]:
    """The best candidate and split among `tables` (indices in `exclude` skipped); None if none fits.

    `hint` = (index, stage_layers, objective) of a known solution, to start from. Every candidate's
    lower bound (planner.tables.lower_bound) is added as a redundant constraint on Z, which lets
    the solver discard candidates without exploring their splits."""
    m = cp_model.CpModel()
    ub = _bounds(tables, model.num_layers)
    Z = m.NewIntVar(0, ub["Z"], "Z")
    groups: dict[int, _Group] = {}
    xs = []
    for idx, t in enumerate(tables):
        if idx in exclude:
            continue
        x = m.NewBoolVar(f"x{idx}")
        xs.append((idx, x))
        if t.layout.pp == 1:
            value = t.objective(stage_counts(model, [model.num_layers]))
            m.Add(x == 0) if value is None else m.Add(Z >= value).OnlyEnforceIf(x)
            continue
        if t.layout.pp not in groups:
            groups[t.layout.pp] = _Group(m, model, t.layout.pp, ub)
        _add_candidate(m, groups[t.layout.pp], t, x, Z)
    if not xs:
        return None
    m.AddExactlyOne(x for _, x in xs)
    m.Add(Z >= sum((lower_bound(tables[i], model) or 0) * x for i, x in xs))
    if hint is not None and hint[0] not in exclude:
        _add_hint(m, model, tables, xs, groups, Z, hint)
    m.Minimize(Z)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers
    status = solver.Solve(m)
    if status == cp_model.MODEL_INVALID:  # a bug in the model building, never "nothing fits"
        raise RuntimeError(f"CP-SAT rejected the model: {m.Validate()}")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    chosen = next(i for i, x in xs if solver.BooleanValue(x))
    t = tables[chosen]
    stages = [model.num_layers] if t.layout.pp == 1 else [solver.Value(n) for n in groups[t.layout.pp].n]
    exact = t.objective(stage_counts(model, stages))
    return Solution(chosen, t, stages, exact if exact is not None else solver.Value(Z), status == cp_model.OPTIMAL,
                    int(solver.BestObjectiveBound()))
