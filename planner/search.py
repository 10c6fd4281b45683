"""The search: enumerate, bound, prune exactly, then let CP-SAT choose layout and stage split.

1. Enumerate every candidate layout (planner.space).
2. Drop candidates whose memory lower bound exceeds usable HBM (no split can fit them).
3. In order of their step-time lower bound, build integer tables and a balanced first split;
   stop once the next lower bound exceeds the K-th best step found (nothing later can enter the
   top K). This pruning is exact: every dropped candidate is provably worse.
4. CP-SAT (planner.cpsat) picks the best candidate and stage split among the survivors, then the
   next K-1 with the earlier choices excluded.
5. Each winner is re-estimated with costmodels.estimate (the numbers people see).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from costmodels.estimate import Estimate, estimate
from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner import cpsat
from planner.costing import Coster, first_objective
from planner.space import SpaceOptions, enumerate_layouts
from planner.tables import Table, objective_seconds

PRUNE_MARGIN = 1e-3  # relative slack between float bounds and integer objectives


@dataclass
class SearchStats:
    """What the search looked at."""

    layouts_considered: int = 0
    memory_pruned: int = 0
    bound_pruned: int = 0
    tabled: int = 0
    solver_candidates: int = 0
    smallest_memory_bound: Optional[tuple[float, object]] = None  # (bytes, layout)


@dataclass
class SearchResult:
    """Ranked plans with the search's status and statistics."""

    status: str  # optimal | feasible | infeasible
    plans: list[Estimate]
    objectives_s: list[float]
    seconds: float
    stats: SearchStats
    gap: float = 0.0
    tables: list[Table] = field(default_factory=list)


def _candidates(coster: Coster, model, cluster, train, opts, stats: SearchStats):
    usable = cluster.usable_bytes
    kept = []
    for lay in enumerate_layouts(model, cluster, train, opts):
        stats.layouts_considered += 1
        b = coster.bounds(lay)
        if b.memory_bytes > usable:
            stats.memory_pruned += 1
            if stats.smallest_memory_bound is None or b.memory_bytes < stats.smallest_memory_bound[0]:
                stats.smallest_memory_bound = (b.memory_bytes, lay)
            continue
        kept.append((b.step_s, lay))
    kept.sort(key=lambda item: item[0])
    return kept


def _survivors(coster: Coster, model, kept, top: int, stats: SearchStats) -> list[Table]:
    tables: list[Table] = []
    best: list[float] = []  # sorted first-split objectives, seconds
    for i, (lb, lay) in enumerate(kept):
        if len(best) >= top and lb > best[top - 1] * (1 + PRUNE_MARGIN):
            stats.bound_pruned += len(kept) - i
            break
        table = coster.table(lay)
        tables.append(table)
        found = first_objective(model, table)
        if found is not None:
            best = sorted(best + [objective_seconds(found[0])])[: max(top, 1)]
    stats.tabled = len(tables)
    return tables


def search(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, top: int = 1, time_limit_s: float = 10.0,
           opts: SpaceOptions = SpaceOptions(), progress: Callable[[str], None] = lambda _: None) -> SearchResult:
    """Find the `top` fastest layouts that fit, best first."""
    start = time.perf_counter()
    stats = SearchStats()
    coster = Coster(model, cluster, train)
    progress("enumerating layouts")
    kept = _candidates(coster, model, cluster, train, opts, stats)
    progress(f"{stats.layouts_considered} layouts, {len(kept)} pass the memory bound; costing")
    tables = _survivors(coster, model, kept, top, stats)
    stats.solver_candidates = len(tables)
    progress(f"CP-SAT over {len(tables)} candidates")
    solutions, optimal, gap = _solve_top(model, tables, top, time_limit_s, start)
    plans = [_estimate(model, cluster, train, s) for s in solutions]
    status = "infeasible" if not plans else ("optimal" if optimal else "feasible")
    return SearchResult(status, plans, [objective_seconds(s.objective) for s in solutions],
                        time.perf_counter() - start, stats, gap, tables)


def _solve_top(model, tables, top, time_limit_s, start):
    solutions: list[cpsat.Solution] = []
    excluded: set[int] = set()
    optimal, gap = True, 0.0
    for _ in range(top):
        left = max(0.1, time_limit_s - (time.perf_counter() - start))
        sol = cpsat.solve(model, tables, left, frozenset(excluded))
        if sol is None:
            break
        solutions.append(sol)
        excluded.add(sol.index)
        optimal = optimal and sol.optimal
        if not sol.optimal and sol.objective:
            gap = max(gap, (sol.objective - sol.bound) / sol.objective)
    return solutions, optimal, gap


def _estimate(model, cluster, train, sol: cpsat.Solution) -> Estimate:
    lay = sol.table.layout
    layout = lay.model_copy(update={"stage_layers": sol.stage_layers, "num_microbatches": None, "dp": lay.dp})
    return estimate(model, cluster, train, type(lay).model_validate(layout.model_dump()))
