"""CP-SAT: choose one candidate layout and, for pp > 1, the layers of every stage.

Variables: x_c (candidate c chosen, exactly one); per pipeline degree p, the stage sizes n_{p,i}
(sum = L; at least vpp for the chosen candidate) with their dense/MoE split, and per vpp the largest
virtual chunk c_i >= n_i / v (the uneven chunks' extra bubble, planner.search.tables); per p, epigraph
variables for max_i t_i (T), the exposed data-parallel term (D) and the optimizer (O). Every
candidate's constraints are enforced only by its own x_c; the objective Z is the step time in
planner.search.tables' objective units. All numbers come from the integer tables: no cost logic here.

The dense/MoE mix of each stage (planner.search.cpsat_stages) is exact: with virtual chunks, over each rank's
round-robin chunks. Interleaved dense and MoE layers over chunks need a boundary per chunk, which leaves a
joint model unsettled; such candidates are solved one by one, through a relaxation and cuts (_relax_and_cut).
"""

from __future__ import annotations

import dataclasses
import sys
import time
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from costmodels.model_spec import ModelSpec
from planner.search.cpsat_stages import StageGroup
from planner.search.solve_thread import interruptible_solve
from planner.search.settled import Settled
from planner.search.tables import (OBJ_PER_TIME, Table, capacity_bound, lower_bound, only_split, stage_capacities,
                                   stage_counts)

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

MAX_DOMAIN = 2**62  # CP-SAT integer variables are 64-bit: larger bounds make the model invalid
GROUP_BUDGET_S = 1.0  # joint model of one pipeline degree; beyond this, candidates one by one
BUILD_S = (0.001, 0.00006)  # about what building one candidate's constraints takes: fixed, per stage
# _relax_and_cut: relaxed solves per candidate, and seconds each before the exact model takes over (Llama 4
# Maverick at pp 4-8, vpp 2-8: a few ms relaxed, 30-50 ms exact; a 10-layer toy at pp 2: 64-173 ms relaxed,
# 12-23 ms exact)
RELAX_ROUNDS, RELAX_S = 8, 0.05



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
    vb = max(t.v for t in tables)
    return {"T": tb, "E": 3 * vb * rb, "D": db, "O": ob, "Z": zb}


@dataclass(frozen=True)
class Solution:
    """One solved choice."""

    index: int
    table: Table
    stage_layers: list[int]
    objective: int
    optimal: bool
    bound: int
    models: int = 0  # CP-SAT models solved to find it (0: the bounds settled every group)
    timed_out: bool = False  # the time limit left it unproven (not only objectives beyond 64-bit integers)


def _affine(a, d, e):
    return a.fixed + a.dense * d + a.moe * e


def _add_dp(m, g: StageGroup, t: Table, i: int, r, gg, ti, x) -> None:
    """Stage i's exposed data-parallel time as the epigraph of Table.dp_term: E, F >= each of the
    table's pieces (and >= 0 by domain), 3v D >= q (E + F)."""
    for var, pieces in ((g.E[i], t.reduce_pieces(r, ti)), (g.F[i], t.gather_pieces(gg, ti))):
        for piece in pieces:
            m.Add(var >= piece).OnlyEnforceIf(x)
    m.Add(3 * t.v * g.D >= OBJ_PER_TIME * (g.E[i] + g.F[i])).OnlyEnforceIf(x)


def _add_candidate(m, g: StageGroup, t: Table, x, Z) -> None:
    q = OBJ_PER_TIME
    times = []
    dense, moe = g.mix(m, t.v)
    for i in range(t.layout.pp):
        d, e = dense[i], moe[i]
        ti = _affine(t.time[i], d, e)
        times.append(ti)
        m.Add(_affine(t.memory[i], d, e) <= t.cap).OnlyEnforceIf(x)
        m.Add(g.T >= ti).OnlyEnforceIf(x)
        m.Add(g.O >= _affine(t.optimizer[i], d, e)).OnlyEnforceIf(x)
        _add_dp(m, g, t, i, _affine(t.reduce[i], d, e), _affine(t.gather[i], d, e), ti, x)
    if t.layout.fixed_stages is not None:  # the framework's partitioner decides the split
        for n, size in zip(g.n, t.layout.fixed_stages):
            m.Add(n == size).OnlyEnforceIf(x)
    chunk = 0
    if t.v > 1:
        cs = g.chunks(m, t.v)
        for n, c in zip(g.n, cs):
            m.Add(n >= t.v).OnlyEnforceIf(x)
            m.Add(t.v * c >= n).OnlyEnforceIf(x)
        chunk = q * t.chunk_layer * sum(cs) - q // t.v * t.chunk_layer * g.L  # Table.chunk_term
    obj = (q * t.m - q // t.v) * g.T + q // t.v * sum(times) + q * (t.const + g.O) + g.D + chunk
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
          workers: int = 2, hint: Optional[tuple[int, list[int], int]] = None,
          settled: Optional[Settled] = None) -> Optional[Solution]:
    """The best candidate and split among `tables` (indices in `exclude` skipped); None if none fits.

    One CP-SAT model per pipeline degree (candidates with the same pp share stage variables),
    solved in the order of their best lower bound, each capped by the best objective found so far
    (a group that cannot beat it is proven so by infeasibility). `hint` = (index, stage_layers,
    objective) of a known feasible solution. The time limit holds for model building too: past it,
    the groups left are skipped and the answer is the best found, not proven optimal. `settled`: what
    earlier solves of the same tables proved (planner.search.settled), read and added to."""
    settled = Settled() if settled is None else settled
    start = time.perf_counter()
    end = start + time_limit_s
    by_pp: dict[int, list[int]] = {}
    for idx, t in enumerate(tables):
        if idx not in exclude:
            by_pp.setdefault(t.layout.pp, []).append(idx)
    bounds = {i: settled.bound(i, lower_bound(tables[i], model)) for ids in by_pp.values() for i in ids}
    usable = {i for i in bounds if bounds[i] is not None}
    huge = {i for i in usable if beyond_64_bits(tables[i], model)}
    usable -= huge  # objectives beyond CP-SAT's 64-bit integers: the caller's first split stands for them
    best = _best_exact(model, tables, by_pp, bounds, usable, settled)  # one split, or settled: no model
    tight: dict[int, float] = {}  # capacity bounds, priced for the groups that need them
    incumbent = hint[2] if hint is not None and hint[0] not in exclude else None
    if best is not None and (incumbent is None or best.objective <= incumbent):
        incumbent = best.objective
    optimal, models, timed_out = not huge, 0, False
    for pp, ids in sorted(by_pp.items(), key=lambda kv: min((bounds[i] for i in kv[1] if bounds[i] is not None),
                                                            default=2**62)):
        ids = [i for i in ids if i in usable]
        if not ids or (incumbent is not None and min(bounds[i] for i in ids) > incumbent):
            continue
        if incumbent is not None and _beyond(model, tables, ids, incumbent, tight):
            continue  # what CP-SAT would prove by infeasibility under Z <= incumbent: no model needed
        left = end - time.perf_counter()
        if left <= 0:
            optimal, timed_out = False, True
            break
        chunked = [i for i in ids if _chunked(model, tables[i])]  # settled one by one (_relax_and_cut)
        plain = [i for i in ids if i not in chunked]
        trimmed = False
        if (_bounds([tables[i] for i in ids], model.num_layers)["Z"] > MAX_DOMAIN or pp in settled.unsettled
                or _build_s(len(plain), pp) > GROUP_BUDGET_S):
            sol, proven = None, not plain  # a joint model would overflow, did not settle before or would take
            # longer to build than its budget to solve: one by one, best bound first, for as long as time allows
        elif plain:
            plain, trimmed = _affordable(plain, bounds, left / 2, pp)
            budget = min(max(left - _build_s(len(plain), pp), 0.05), GROUP_BUDGET_S)
            group_hint = hint if hint is not None and hint[0] in plain else None  # a chunked hint is not in it
            sol, proven = _solve_group(model, tables, plain, bounds, budget, workers, group_hint, incumbent)
            models += 1
            if not proven:
                settled.unsettled.add(pp)
        else:
            sol, proven = None, True
        if not proven:  # a group too large for a joint model, CP-SAT wandered on it, or a busy machine ran out
            # of the group's budget: settle it candidate by candidate with all the time left
            sol, proven, one_each = _one_by_one(model, tables, plain, bounds, end, workers, incumbent, sol, settled)
            models += one_each
        if chunked:
            sol, chunks_proven, one_each = _one_by_one(model, tables, chunked, bounds, end, workers, incumbent, sol,
                                                       settled)
            proven, models = proven and chunks_proven, models + one_each
        optimal = optimal and proven and not trimmed
        timed_out = timed_out or not proven or trimmed
        if sol is not None and (best is None or sol.objective < best.objective):
            best, incumbent = sol, sol.objective
    if best is not None and best.optimal != optimal:  # the group's own flag is not the answer's: a group
        # whose joint model stopped unproven may be settled by _one_by_one without a better solution
        best = Solution(best.index, best.table, best.stage_layers, best.objective, optimal,
                        best.objective if optimal else best.bound)
    return best if best is None else dataclasses.replace(best, models=models, timed_out=timed_out)


def beyond_64_bits(table: Table, model: ModelSpec) -> bool:
    """Whether CP-SAT cannot hold the candidate's objective (beyond its 64-bit integers) and no single split stands
    for it: solve leaves it to the caller's first split."""
    return only_split(table, model) is None and _bounds([table], model.num_layers)["Z"] > MAX_DOMAIN


def _beyond(model: ModelSpec, tables: list[Table], ids: list[int], incumbent: int, tight: dict) -> bool:
    """No candidate of `ids` can reach `incumbent`: each one's memory-aware bound
    (planner.search.tables.capacity_bound; None: no split fits) exceeds it. The cheap test that lets a
    search whose pipeline candidates cannot beat the best single-split ones skip OR-Tools altogether."""
    for i in ids:
        if i not in tight:
            bound = capacity_bound(tables[i], model)
            tight[i] = float("inf") if bound is None else bound
        if tight[i] <= incumbent:
            return False
    return True


def _best_exact(model, tables, by_pp, bounds, usable, settled: Settled) -> Optional[Solution]:
    """The best candidate with one split only (planner.search.tables.only_split), whose lower bound is
    its objective, or settled by an earlier solve (its proven optimum), taken out of by_pp: the models need
    not carry them."""
    exact = []
    for pp, ids in by_pp.items():
        single = {i for i in ids if i in settled.exact or only_split(tables[i], model) is not None}
        by_pp[pp] = [i for i in ids if i not in single]
        exact += [(_settled_value(settled, bounds, i), i) for i in sorted(single) if i in usable]
    if not exact:
        return None
    value, i = min(exact)
    if i in settled.exact:
        return settled.exact[i]
    return Solution(i, tables[i], only_split(tables[i], model), value, True, value)


def _settled_value(settled: Settled, bounds: dict, i: int) -> int:
    return settled.exact[i].objective if i in settled.exact else bounds[i]


def _build_s(count: int, pp: int) -> float:
    """About how long building the model of `count` candidates with `pp` stages takes."""
    return count * (BUILD_S[0] + BUILD_S[1] * pp)


def _affordable(ids: list[int], bounds: dict, left: float, pp: int) -> tuple[list[int], bool]:
    """The candidates (best bound first) whose model can be built in `left` seconds; (ids, trimmed)."""
    most = max(1, int(left / _build_s(1, pp)))
    if len(ids) <= most:
        return ids, False
    return sorted(ids, key=bounds.__getitem__)[:most], True


def _one_by_one(model, tables, ids, bounds, end, workers, incumbent, best, settled: Settled):
    """Each candidate of a group in its own (small, fast) model, best bound first, capped by the best,
    until `end` (a time.perf_counter() value): (best, proven, models solved). What each model proves about
    its candidate goes into `settled`."""
    proven, models = True, 0
    for i in sorted(ids, key=bounds.__getitem__):
        cap = best.objective if best is not None else incumbent
        if cap is not None and bounds[i] > cap:
            break
        left = end - time.perf_counter()
        if left <= 0:
            return best, False, models
        solve_cap = settled.cap(cap)  # up to the top K's ceiling: what it proves serves the next solves
        sol, ok, tried = _screened(model, tables, i, bounds, left, workers, solve_cap)
        settled.record(i, sol, ok, solve_cap)
        models += tried
        proven = proven and ok
        if sol is not None and (best is None or sol.objective < best.objective):
            best = sol
    return best, proven, models


def _chunked(model: ModelSpec, t: Table) -> bool:
    """Interleaved dense and MoE layers over virtual chunks: the stage mix needs a boundary per chunk, which
    leaves a joint model of many such candidates unsettled in its budget; they are settled one by one."""
    return model.is_moe and model.moe_layer_period > 1 and t.layout.vpp > 1 and t.layout.pp > 1


def _screened(model, tables, i, bounds, left, workers, cap):
    """_solve_group of candidate i alone: (solution, proven, models solved); chunked candidates through
    _relax_and_cut (their exact model took 30-50 ms to prove on Llama 4 Maverick on 256 H100, against 4 ms
    for stages without chunks)."""
    if _chunked(model, tables[i]):
        return _relax_and_cut(model, tables, i, bounds, left, workers, cap)
    sol, ok = _solve_group(model, tables, [i], bounds, left, workers, None, cap)
    return sol, ok, 1


def _relax_and_cut(model, tables, i, bounds, left, workers, cap):
    """Candidate i exactly, through its relaxation first (StageGroup._relaxed_mix, which holds every exact stage mix,
    so its Z bounds the exact objective of the same split from below): solve it, price the split it picks
    exactly, forbid that split and solve again under Z below the best exact objective so far, until nothing is
    left (proven). Most candidates settle in one or two relaxed solves of a few ms; past RELAX_ROUNDS solves or
    a solve of RELAX_S, the exact model finishes the candidate under the best objective found. Returns
    (solution, proven, models solved)."""
    end = time.perf_counter() + left
    built = _build(model, tables, [i], bounds, cap, relaxed=True)
    t, best, solves = tables[i], None, 0
    n = built.groups[t.layout.pp].n if built.groups else []
    for solves in range(1, RELAX_ROUNDS + 1):
        found, proven = _run(built, model, tables, min(RELAX_S, end - time.perf_counter()), workers)
        if found is None and proven:
            return best, True, solves
        if found is None or not found.optimal:
            break
        exact = t.objective(stage_counts(model, found.stages, t.layout.vpp))
        if exact is not None and (best is None or exact < best.objective):
            best = Solution(i, t, found.stages, exact, True, exact)
            if exact <= found.bound:  # the relaxation's optimum is this split's exact objective
                return best, True, solves
            built.m.Add(built.Z <= exact - 1)
        built.m.AddForbiddenAssignments(n, [found.stages])
    limit = end - time.perf_counter()
    if limit <= 0:
        return best, False, solves
    if best is not None:
        cap = best.objective - 1 if cap is None else min(cap, best.objective - 1)
    sol, ok = _solve_group(model, tables, [i], bounds, limit, workers, None, cap)
    return (sol if sol is not None else best), ok, solves + 1


def _cp_model():
    """ortools.sat.python.cp_model, imported without pandas where it can be: the module imports pandas (and
    pyarrow, ~0.25 s) for its *_series helpers alone, which parplan never calls; its top level only names
    pd.Index and pd.Series (in type aliases). So a stand-in pandas holding two empty classes serves the import
    and is taken out of sys.modules at once (a later `import pandas` gets the real one); where the stand-in does
    not serve (another OR-Tools version), the import is simply retried with the real pandas."""
    loaded = sys.modules.get("ortools.sat.python.cp_model")
    if loaded is not None or "pandas" in sys.modules:
        from ortools.sat.python import cp_model

        return cp_model
    stand_in = types.ModuleType("pandas", "parplan's stand-in for OR-Tools' import (planner.search.cpsat)")
    stand_in.Index = type("Index", (), {})
    stand_in.Series = type("Series", (), {})
    sys.modules["pandas"] = stand_in
    try:
        from ortools.sat.python import cp_model
    except Exception:  # the stand-in lacks what this OR-Tools version reads: import it as it is
        sys.modules.pop("ortools.sat.python.cp_model", None)
        sys.modules.pop("pandas", None)
        from ortools.sat.python import cp_model
    finally:
        if sys.modules.get("pandas") is stand_in:
            del sys.modules["pandas"]
    return cp_model


def _solve_group(model, tables, ids, bounds, time_limit_s, workers, hint, incumbent):
    """(solution or None, proven) for the candidates `ids`, which share one pipeline degree. OR-Tools is
    imported here (_cp_model), when a model is first built, never at import."""
    built = _build(model, tables, ids, bounds, incumbent)
    if hint is not None:
        _add_hint(built.m, model, tables, built.xs, built.groups, built.Z, hint)
    found, proven = _run(built, model, tables, time_limit_s, workers)
    return (None if found is None else _solution(model, tables, found)), proven


@dataclass
class _Built:
    """A CP-SAT model of some candidates: the model, its objective variable, (index, chosen) pairs, stage groups."""

    m: object
    Z: object
    xs: list
    groups: dict


def _build(model, tables, ids, bounds, incumbent, relaxed: bool = False) -> _Built:
    """The CP-SAT model of candidates `ids` (one pipeline degree), capped at `incumbent`; `relaxed`: stages of
    interleaved layers with virtual chunks take StageGroup._relaxed_mix."""
    cp_model = _cp_model()
    m = cp_model.CpModel()
    ub = _bounds([tables[i] for i in ids], model.num_layers)
    Z = m.NewIntVar(0, ub["Z"], "Z")
    groups: dict[int, StageGroup] = {}
    xs = []
    for idx in ids:
        t = tables[idx]
        x = m.NewBoolVar(f"x{idx}")
        xs.append((idx, x))
        if t.layout.pp == 1:
            m.Add(Z >= bounds[idx]).OnlyEnforceIf(x)  # one split: the bound is the objective
            continue
        caps = stage_capacities(t, model.num_layers)
        if caps is None:  # no split can fit: decided here instead of by search
            m.Add(x == 0)
            continue
        if t.layout.pp not in groups:
            groups[t.layout.pp] = StageGroup(m, model, t.layout.pp, ub, relaxed)
        g = groups[t.layout.pp]
        for n, cap in zip(g.n, caps):
            m.Add(n <= cap).OnlyEnforceIf(x)
        _add_candidate(m, g, t, x, Z)
    m.AddExactlyOne(x for _, x in xs)
    m.Add(Z >= sum(bounds[i] * x for i, x in xs))
    if incumbent is not None:  # only what beats (or ties) the best so far; tight domains also keep
        m.Add(Z <= incumbent)  # propagation over the big integers fast
    m.Minimize(Z)
    return _Built(m, Z, xs, groups)


@dataclass(frozen=True)
class _Found:
    """What one CP-SAT solve of a built model found: the candidate, its split, Z and the proven bound."""

    index: int
    stages: list[int]
    z: int
    bound: int
    optimal: bool


def _run(built: _Built, model, tables, time_limit_s, workers) -> tuple[Optional[_Found], bool]:
    """Solve a built model: (what it found or None, proven: optimal, or nothing under its cap)."""
    cp_model = _cp_model()
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit_s, 0.001)
    solver.parameters.num_workers = workers
    # CP-SAT's own SIGINT handler, once removed after a solve, leaves the default action, which kills the
    # process: a Ctrl-C later in a sweep lost every point done and its JSON (a contract pass). Python keeps it.
    solver.parameters.catch_sigint_signal = False
    status = interruptible_solve(solver, built.m)
    if status == cp_model.MODEL_INVALID:  # a bug in the model building, never "nothing fits"
        raise RuntimeError(f"CP-SAT rejected the model: {built.m.Validate()}")
    if status == cp_model.INFEASIBLE:
        return None, True
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False
    chosen = next(i for i, x in built.xs if solver.BooleanValue(x))
    pp = tables[chosen].layout.pp
    stages = [model.num_layers] if pp == 1 else [solver.Value(n) for n in built.groups[pp].n]
    found = _Found(chosen, stages, solver.Value(built.Z), int(solver.BestObjectiveBound()),
                   status == cp_model.OPTIMAL)
    return found, found.optimal


def _solution(model, tables, found: _Found) -> Solution:
    """The Solution of what a solve found, priced with its split's exact objective (planner.search.tables)."""
    t = tables[found.index]
    exact = t.objective(stage_counts(model, found.stages, t.layout.vpp))
    return Solution(found.index, t, found.stages, exact if exact is not None else found.z, found.optimal,
                    found.bound)
