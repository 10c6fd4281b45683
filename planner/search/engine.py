"""The search: enumerate, bound, prune exactly, then let CP-SAT choose layout and stage split.

1. Enumerate every candidate layout (planner.search.space), keeping those a `keep` predicate accepts
   (e.g. `validated_filter`: only layouts whose accuracy regime is validated).
   Candidates that differ only in a stage split a framework's partitioner fixes form one `Group`:
   their bounds are the same (a bound holds for every split), so they are bounded once.
2. Drop candidates whose device-memory lower bound (states, activations, the allocator's
   fragmentation, CUDA context and NCCL buffers: costmodels.device_memory) exceeds HBM less the
   margin: no split can fit them.
3. In order of a step-time lower bound (the floor, without ZeRO-3's per-micro-batch collectives priced),
   build integer tables and a balanced first split;
   stop once the next lower bound exceeds the K-th best step found (nothing later can enter the
   top K). This pruning is exact: every dropped candidate is provably worse.
4. CP-SAT (planner.search.cpsat) picks the best candidate and stage split among the survivors, then
   the next K-1 with the earlier choices excluded. A pipeline degree none of whose candidates can reach the
   best found (their memory-aware bounds, planner.search.tables.capacity_bound, exceed it) needs no model;
   when every one is so settled (often: pp=1 wins), OR-Tools is never imported (stats.solver_models = 0).
5. Each winner is re-estimated with costmodels.estimate (the numbers people see).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from costmodels.estimate import Estimate, estimate
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import MAX_DEGREE
from costmodels.model_spec import ModelSpec
from costmodels.stack import Stack
from costmodels.train_spec import TrainSpec
from costmodels.uncertainty import band_gpu, sharding_class, uncertainty
from planner.search import cpsat, stage_split
from planner.search.costing import Coster, first_objective
from planner.search.groups import Group, Keep, by_exact_bound, mark_split_free, restrict, split_free, split_groups
from planner.search.memo import FieldMemo, mark_refusals, refusals_of
from planner.search.settled import Settled
from planner.search.space import Candidate, SpaceOptions
from planner.search.tables import Table, lower_bound, objective_seconds

GRACE_S = 0.3  # past the deadline, costing goes on this long while no layout has a split that fits
RESERVE_S = 0.4  # of a caller's deadline, kept for the re-estimates, the reasons and the output
NEAR_MISS = 1.5  # a layout needing up to 1.5x the usable memory counts as a near miss (explanations)
PRUNE_MARGIN = 1e-3  # relative slack between float bounds and integer objectives
FLOOR_ROUNDING = 1e-9  # the time floor may exceed the exact bound by rounding (parts summed in another order)


@dataclass
class SearchStats:
    """What the search looked at."""

    layouts_considered: int = 0
    filtered_out: int = 0  # rejected by the search's `keep` predicate before costing
    memory_pruned: int = 0
    bound_pruned: int = 0
    tabled: int = 0
    solver_candidates: int = 0
    solver_models: int = 0  # CP-SAT models solved; 0 when the bounds alone proved the ranking (OR-Tools not loaded)
    smallest_memory_bound: Optional[tuple[float, object]] = None  # (bytes, layout), over all layouts
    fastest_pruned: Optional[tuple[float, float, object]] = None  # (step bound s, bytes, layout), near misses
    truncated: bool = False  # the time limit stopped enumeration or costing early
    cut: list[str] = field(default_factory=list)  # what the time limit cut short, in order (enumeration, ...)

    def cut_short(self, what: str) -> None:
        """Record that the time limit stopped `what` before it was done."""
        if what not in self.cut:
            self.cut.append(what)


@dataclass
class SearchResult:
    """Ranked plans with the search's status and statistics. status: "optimal", the plans proven the best;
    "infeasible", proven that nothing fits (every layout looked at); "feasible", not proven either way: the
    time limit cut the search, and `plans` holds the best found, or nothing when it was cut before any
    layout that fits was found ("infeasible" there would claim a proof the search does not have; the
    contract, docs/design.md section 6, has no fourth value; `plan` exits 1 on empty plans either way)."""

    status: str  # optimal | feasible | infeasible
    plans: list[Estimate]
    objectives_s: list[float]
    seconds: float
    stats: SearchStats
    gap: Optional[float] = 0.0  # relative optimality gap; None when the time limit cut the enumeration
    tables: list[Table] = field(default_factory=list)
    # the cost caches of this problem, for a later search of the same (model, cluster, train)
    coster: Optional[Coster] = field(default=None, repr=False, compare=False)
    # (time floor, group) of every candidate that passed `keep` and the memory bound, by floor; and that keep:
    # a later search of the same problem with a stricter keep filters them instead of enumerating again
    kept: list = field(default_factory=list, repr=False, compare=False)
    keep: Optional[Callable] = field(default=None, repr=False, compare=False)



def _candidates(coster: Coster, model, cluster, train, opts, stats: SearchStats, deadline: float,
                keep: Optional[Keep] = None) -> list[tuple[float, Group]]:
    kept = []
    # a plain keep where no split is fixed (one candidate per base), else one that records what it reads
    memo = keep if keep is None or opts.stage_splits is None or split_free(keep) else FieldMemo(keep)
    for n, (lay, splits, rejected) in enumerate(split_groups(coster, opts, memo, refusals_of(keep))):
        if n % 256 == 0 and time.perf_counter() > deadline:
            stats.truncated = True
            stats.cut_short("enumeration")
            break
        if lay.dp > MAX_DEGREE:
            continue  # a degree Layout cannot hold (costmodels.layout.MAX_DEGREE): not a layout to offer
        stats.layouts_considered += rejected + len(splits)
        stats.filtered_out += rejected
        if not splits:
            continue
        group, count = Group(lay, splits), len(splits)
        memory, usable = coster.memory_and_budget(lay)
        if stats.smallest_memory_bound is None or memory < stats.smallest_memory_bound[0]:
            stats.smallest_memory_bound = (memory, group.members[0])
        if memory > usable:
            stats.memory_pruned += count
            if memory <= NEAR_MISS * usable:
                _near_miss(coster, lay, memory, group, stats)
            continue
        kept.append((coster.layers_bound_s(lay, floor=True), len(kept), group))
    kept.sort(key=lambda item: item[0])
    return kept


def _near_miss(coster: Coster, lay: Candidate, memory: float, group: Group, stats: SearchStats) -> None:
    """Keep the fastest (by step bound) of the layouts memory pruned as near misses: the exact bound
    only where the floor (Coster.layers_bound_s) may still beat the fastest so far."""
    fastest = stats.fastest_pruned
    if fastest is not None and coster.layers_bound_s(lay, floor=True) > fastest[0] * (1 + FLOOR_ROUNDING):
        return
    step = coster.layers_bound_s(lay)
    if fastest is None or step < fastest[0]:
        step += coster.fixed_s(lay)  # the full bound only where it may be the fastest so far
        if fastest is None or step < fastest[0]:
            stats.fastest_pruned = (step, memory, group.members[0])


def _survivors(coster: Coster, model, kept, top: int, stats: SearchStats,
               deadline: float) -> list[tuple[int, Table, tuple]]:
    """(integer lower bound, table, first split) of every candidate that might enter the top K,
    ordered by bound. Float bounds stop the costing; integer bounds (planner.search.tables.lower_bound,
    which adds the pipeline sends) then drop what the K-th best first split already beats. Candidates come
    in the order of their exact layers' bound, which is priced lazily (planner.search.groups.by_exact_bound)."""
    out: list[tuple[int, Table, tuple]] = []
    best: list[int] = []  # the K smallest first-split objectives
    order = by_exact_bound(coster, kept)
    lb, group = next(order)  # lb: the layers' bound, without the split-free fixed_s
    limit = float("inf")  # past it nothing can enter the top K: the K-th best first split found
    while lb is not None:
        if lb + coster.fixed_s(group.base) > limit:
            stats.bound_pruned += len(group.splits)  # the sends and overhead too: provably slower
            lb, group = order.send(limit)
            continue
        now = time.perf_counter()
        if now > deadline and (best or now > deadline + GRACE_S):
            stats.truncated = True
            stats.cut_short("costing")
            break
        for lay in group.members:
            table = coster.table(lay)
            found = first_objective(model, table)
            # a split the framework fixes: the bound is its objective (tables.lower_bound), found already
            bound = lower_bound(table, model) if lay.fixed_stages is None else (found[0] if found else None)
            if bound is not None:  # None: a single-stage layout that does not fit
                out.append((bound, table, found))
            if found is not None:
                best = sorted(best + [found[0]])[:top]
        if len(best) >= top:
            limit = objective_seconds(best[-1]) * (1 + PRUNE_MARGIN)
        lb, group = order.send(limit)
    if lb is None:  # the rest: past the limit
        stats.bound_pruned += sum(len(g.splits) for g in group)
    stats.tabled = len(out)
    if len(best) >= top:
        kept_out = [item for item in out if item[0] <= best[-1]]
        stats.bound_pruned += len(out) - len(kept_out)
        out = kept_out
    return sorted(out, key=lambda item: item[0])


def search(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, top: int = 1, time_limit_s: float = 10.0,
           opts: SpaceOptions = SpaceOptions(), progress: Callable[[str], None] = lambda _: None,
           keep: Optional[Keep] = None, deadline: Optional[float] = None,
           coster: Optional[Coster] = None, among: Optional[list] = None) -> SearchResult:
    """Find the `top` fastest layouts that fit, best first, within about `time_limit_s` seconds (and
    before `deadline`, a time.perf_counter() value, less RESERVE_S for what the caller does after):
    when the limit stops the search early, the best found is returned with status "feasible" and
    stats.cut says what was cut. `keep`: only candidates it accepts are costed (the others count in
    stats.filtered_out). `coster`: the cost caches of an earlier search of the same problem (used only
    when its model, cluster and train equal these). `among`: that search's SearchResult.kept, when every
    candidate `keep` accepts is one its keep accepted (a stricter keep, same space): only those are
    filtered, not the whole space enumerated and bounded again."""
    with without_cycle_collector():
        return _search(model, cluster, train, top, time_limit_s, opts, progress, keep, deadline, coster, among)


@contextlib.contextmanager
def without_cycle_collector() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block, and resumed after (where it was on): the search
    allocates millions of short-lived acyclic objects (candidates, keys, tuples), which reference counting
    frees at once, while each collection the allocations trigger walks the young objects, and the rarer full
    ones every object (a sixth of qwen3's 4,096-node Megatron search). What few cycles the search
    leaves (a Coster and its memos' closures) are collected once it is back on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            _age_young_objects()
            gc.enable()


def _age_young_objects() -> None:
    """Move every object the collector tracks into its oldest generation, without walking them (gc.freeze splices
    the generations' lists into the permanent one and zeroes the young count; gc.unfreeze splices that into the
    oldest): else the first collection after a search walks all it allocated and kept (the caches a result
    holds: 0.1 s for qwen3's Megatron search). They are collected with the oldest generation, as anything long
    kept. Skipped where the process froze objects itself (unfreeze would undo that)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def _search(model, cluster, train, top, time_limit_s, opts, progress, keep, deadline, coster, among) -> SearchResult:
    start = time.perf_counter()
    deadline = _end(start, time_limit_s, deadline)
    stats = SearchStats()
    fresh = coster is None or (coster.model, coster.cluster, coster.train) != (model, cluster, train)
    if fresh:
        coster = Coster(model, cluster, train)
    if among is not None and not fresh:
        kept = restrict(among, keep, stats)
    else:
        progress("enumerating layouts")
        kept = _candidates(coster, model, cluster, train, opts, stats, deadline, keep)
    progress(f"{stats.layouts_considered} layouts, {len(kept)} pass the memory bound; costing")
    survivors = _survivors(coster, model, kept, top, stats, deadline)
    progress(f"CP-SAT over up to {len(survivors)} candidates")
    solutions, optimal, gap, used, timed_out = _solve_all(model, survivors, top, deadline, start)
    stats.solver_candidates = used
    stats.solver_models = sum(s.models for s in solutions)
    if timed_out:
        stats.cut_short("solver")
    solutions = _in_time(solutions, deadline + RESERVE_S / 2, stats)
    solutions = [_simplest_split(model, s) for s in solutions]
    plans = [_estimate(model, cluster, train, s) for s in solutions]
    solutions, plans = _safest_of_ties(solutions, plans)
    status = "infeasible" if not plans else ("optimal" if optimal and not stats.truncated else "feasible")
    if not plans and (stats.truncated or timed_out):
        status = "feasible"  # nothing found in time: not a proof that nothing fits
    if stats.truncated:
        gap = None  # layouts never looked at: no bound on what they could reach
    return SearchResult(status, plans, [objective_seconds(s.objective) for s in solutions],
                        time.perf_counter() - start, stats, gap, [t for _, t, _ in survivors], coster, kept, keep)


def _simplest_split(model: ModelSpec, sol: cpsat.Solution) -> cpsat.Solution:
    """The solution with, of the stage splits exactly as fast as its own, the one the frameworks state most simply
    (planner.search.stage_split.simplest_equal): CP-SAT's parallel workers return any of several equal splits, so
    two identical `plan` runs printed different splits (a workflow pass). Exact ties only: the reported step is
    the proven optimum, as the brute-force cross-check holds it (tests/test_planner.py); `estimate` of the layout
    prefers the simplest split within stage_split.TIE_REL (0.1%), so it may print another split within that. A
    framework's own partitioner's split (fixed_stages) and pp = 1 stand."""
    lay = sol.table.layout
    if lay.pp == 1 or lay.fixed_stages is not None:
        return sol
    stages = stage_split.simplest_equal(model, sol.table, sol.objective, sol.stage_layers, rel=0.0)
    return sol if stages == sol.stage_layers else dataclasses.replace(sol, stage_layers=stages)


def _safest_of_ties(solutions: list, plans: list) -> tuple[list, list]:
    """Solutions of the same objective (the same step time to the solver's resolution) ordered by their peak
    memory, smallest first: of two layouts equally fast, the one with more headroom wins (a new-user pass: ZeRO-1
    with 5 GiB to spare won over ZeRO-2 with 19 GiB at the same step time). The order is otherwise the solver's."""
    order = sorted(range(len(plans)), key=lambda i: (solutions[i].objective, plans[i].memory.peak_bytes))
    return [solutions[i] for i in order], [plans[i] for i in order]


def _end(start: float, time_limit_s: float, deadline: Optional[float]) -> float:
    """When the search must stop: after time_limit_s, and RESERVE_S before the caller's deadline
    (but never before a tenth of the time left, so that a search always gets a little)."""
    end = start + time_limit_s
    if deadline is None:
        return end
    left = deadline - start
    return min(end, start + max(left - RESERVE_S, 0.1 * left))


def _in_time(solutions: list, until: float, stats: SearchStats) -> list:
    """The solutions worth re-estimating: the winner always, the runners-up while time remains
    (a 10,000-stage estimate takes seconds)."""
    if len(solutions) <= 1 or time.perf_counter() < until:
        return solutions
    stats.cut_short("runners-up")
    return solutions[:1]


def _solve_all(model, survivors, top, deadline, start):
    """CP-SAT over every survivor (each could still enter the top K), K times with exclusions."""
    tables = [t for _, t, _ in survivors]
    if not tables:
        return [], True, 0.0, 0, False
    firsts = sorted((f[0], i, f[1]) for i, (_, _, f) in enumerate(survivors) if f is not None)
    solutions, optimal, gap, timed_out = _solve_top(model, tables, top, deadline, firsts)
    return solutions, optimal, gap, len(tables), timed_out


def _solve_top(model, tables, top, deadline, firsts):
    """(solutions, all proven optimal, largest relative gap, whether the time limit stopped a solve). A solve
    stopped by its time limit can end a hair before the deadline (CP-SAT counts its own time): checking the clock
    after the solves instead left a winner "feasible" with no time-limit note (a CI run under load)."""
    solutions: list[cpsat.Solution] = []
    excluded: set[int] = set()
    optimal, gap, timed_out = True, 0.0, False
    settled = Settled()  # what each solve proves about single candidates, for the next (planner.search.settled)
    if top > 1 and len(firsts) >= top:
        settled.ceiling, settled.top = firsts[top - 1][0], top  # the K-th best first split: K feasible objectives
    for _ in range(top):
        left = deadline - time.perf_counter()
        hint = next(((i, stages, value) for value, i, stages in firsts if i not in excluded), None)
        sol = (cpsat.solve(model, tables, left, frozenset(excluded), hint=hint, settled=settled) if left > 0
               else None)
        timed_out = timed_out or _stopped_by_time(model, tables, sol, hint, deadline)
        if sol is None and hint is not None:  # out of time, or objectives too large for CP-SAT: a split
            sol = _from_first_split(model, tables, hint)  # that fits is known, the best balanced one
        if sol is None:
            break
        solutions.append(sol)
        excluded.add(sol.index)
        optimal = optimal and sol.optimal
        if not sol.optimal and sol.objective:
            gap = max(gap, (sol.objective - sol.bound) / sol.objective)
    return solutions, optimal, gap, timed_out


def _stopped_by_time(model, tables, sol, hint, deadline: float) -> bool:
    """Whether the time limit stopped a solve: its own flag; else (nothing found) the clock, or a known split that
    CP-SAT could hold (under Z <= the hint's own objective it finds at least that one, unless time ran out)."""
    if sol is not None:
        return sol.timed_out
    return time.perf_counter() >= deadline or (hint is not None and not cpsat.beyond_64_bits(tables[hint[0]], model))


def _from_first_split(model, tables, hint) -> cpsat.Solution:
    index, stages, value = hint
    bound = lower_bound(tables[index], model) or 0
    return cpsat.Solution(index, tables[index], stages, value, False, min(bound, value))


def _estimate(model, cluster, train, sol: cpsat.Solution) -> Estimate:
    return estimate(model, cluster, train, sol.table.layout.to_layout(sol.stage_layers))


def validated_filter(stack: Stack, num_gpus: int, gpu: Optional[str] = None, moe: bool = False,
                     seq_len: Optional[int] = None) -> Keep:
    """A `keep` predicate: the candidate's regime (stack x sharding x scale x GPU generation x dense/MoE,
    costmodels.uncertainty) is validated. The regime depends on the sharding class alone here, so it
    is cached by it."""
    cache: dict[str, bool] = {}

    def keep(lay: Candidate) -> bool:
        key = sharding_class(lay)
        if key not in cache:
            cache[key] = uncertainty(stack, lay, num_gpus, gpu, moe, seq_len).validated
        return cache[key]

    return mark_split_free(keep)


def best_validated(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, result: SearchResult,
                   time_limit_s: float, opts: SpaceOptions = SpaceOptions(),
                   keep: Optional[Keep] = None, deadline: Optional[float] = None) -> Optional[Estimate]:
    """The fastest layout that fits in a validated regime: the first validated one among the ranked
    plans (they are the fastest of all), else the winner of a search restricted to validated regimes
    (and to what `keep` accepts, e.g. a framework's layouts), before `deadline`: when none is left,
    None, with "validated alternative" in result.stats.cut. When `keep` is the keep of `result`'s search,
    the candidates that search kept are filtered rather than the space enumerated again."""
    ranked = next((p for p in result.plans if p.uncertainty is not None and p.uncertainty.validated), None)
    if ranked is not None or not result.plans:
        return ranked
    valid = validated_filter(train.stack_spec, cluster.num_gpus, band_gpu(cluster.gpu_profile), model.is_moe,
                             train.seq_len(model))
    both = valid if keep is None else (lambda cand: keep(cand) and valid(cand))
    if split_free(keep):
        mark_split_free(both)
    mark_refusals(both, refusals_of(keep))  # what keep refuses, both refuse
    if deadline is not None and deadline - time.perf_counter() < 2 * RESERVE_S:
        result.stats.cut_short("validated alternative")
        return None
    # the same problem: its cost caches serve again, and with the same keep, the candidates it kept
    among = result.kept if keep is result.keep and "enumeration" not in result.stats.cut else None
    again = search(model, cluster, train, top=1, time_limit_s=time_limit_s, opts=opts,
                   keep=both if among is None else valid,  # what `among` holds `keep` accepted already
                   deadline=deadline, coster=result.coster, among=among)
    if again.stats.truncated:
        result.stats.cut_short("validated alternative")
    # a validated regime's layout whose own estimate lies beyond the regime's runs (extrapolated: a slow network's
    # exposed communication) is not an alternative the regime validates
    return again.plans[0] if again.plans and again.plans[0].uncertainty.validated else None
