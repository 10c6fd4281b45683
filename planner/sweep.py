"""`parplan sweep`: plan every (cluster, node count) point, price the whole run of each, find the
Pareto front of time versus cost and pick the cheapest point that meets the deadline and budget.

- Each point runs the search `plan` runs (planner.search with the --framework's space, top 1, its own
  --time-limit); `run_points` spreads them over worker processes (planner.sweep_pool).
- The whole run of a point (`run_numbers`, costmodels.whole_run): days, GPU-hours and cost with the
  expected failures, restarts and checkpoints, and the goodput.
- The front (`pareto_front`): points no other point beats on both days and cost (GPU-hours without
  prices). The pick (`pick`): among points that fit and meet --deadline and --budget, the fastest of
  those within COST_TIE_REL (1%) of the cheapest.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Optional

from costmodels.estimate import Estimate
from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from costmodels.whole_run import RunSpec, whole_run
from planner.plan_any import merged_stats, merged_status
from planner.search import frameworks as fws
from planner.search import search
from planner.search.explain import layout_text, time_limit_note, why_nothing_fits

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class PointJob:
    """One point to plan (picklable: it crosses into a worker process)."""

    index: int
    cluster_arg: str
    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    framework: Optional[str]
    time_limit_s: float
    any_mode: bool = False  # no --framework and no stack named: each framework's layouts, its own stack (plan's)


@dataclass
class Point:
    """A planned point: the winner's estimate (None when nothing was found) and the run's numbers."""

    index: int
    cluster_arg: str
    cluster: str
    gpu: str
    nodes: int
    gpus: int
    global_batch: int
    status: str  # optimal | feasible (cut short by the time limit) | infeasible
    estimate: Optional[Estimate]
    search_s: float
    cut: list[str] = field(default_factory=list)
    reason: Optional[str] = None
    layouts_considered: int = 0  # the search's work (planner.search.engine.SearchStats), not its clock
    framework: Optional[str] = None  # the framework whose search found the winner (any mode), else the --framework
    run: dict = field(default_factory=dict)  # days, gpu_hours, cost_usd, goodput, ... (run_numbers)

    @property
    def fits(self) -> bool:
        return self.estimate is not None


def plan_point(job: PointJob) -> Point:
    """The search of `plan` on one point: the fastest layout that fits, or why none was found. In any mode
    (no --framework, no stack), as `plan` does: each framework searched over the layouts it runs, priced with
    its own stack, the cheap searches first and each given what is left of the point's time limit
    (planner.search.frameworks.priced_frameworks, _cheap_first). The point is "optimal" only when every
    framework's search finished, as `plan` says (planner.plan_any.merged_status). A single search priced
    every layout as Megatron-Core, so a sweep's H100 rows were ZeRO-2 with pp > 1, which Megatron cannot run
    (and `plan` of the same point picked another layout)."""
    start = time.perf_counter()
    pairs = _cheap_first(fws.priced_frameworks(job.train, False)) if job.any_mode else \
        [(fws.load(job.framework), job.train)]
    found = [(fw, tr, _search(job, fw, tr, start)) for fw, tr in pairs]
    ranked = [(res.plans[0].time.step_s, i) for i, (_, _, res) in enumerate(found) if res.plans]
    fw, train, result = found[min(ranked)[1]] if ranked else _default_search(found, job.train)
    if len(found) > 1:  # the point's status and cuts are every search's (planner.plan_any.merged_status)
        stats = merged_stats([(f.name, res.stats) for f, _, res in found])
        result = dataclasses.replace(result, stats=stats,
                                     status=merged_status(bool(ranked), [res.status for _, _, res in found]))
    best = result.plans[0] if result.plans else None
    reason = None
    if best is None:
        space = fws.space_options(fw, job.model, job.cluster, train)
        reasons = why_nothing_fits(job.model, job.cluster, train, result, opts=space, deadline=start,
                                   keep=fws.keep(fw, train, moe=job.model.is_moe))
        reason = (reasons or ["nothing fits"])[0]
    elif result.stats.cut:
        reason = time_limit_note(result)[0]
    return Point(job.index, job.cluster_arg, job.cluster.name, job.cluster.gpu_profile.name, job.cluster.num_nodes,
                 job.cluster.num_gpus, job.train.global_batch_size, result.status, best,
                 time.perf_counter() - start, list(result.stats.cut), reason,
                 sum(res.stats.layouts_considered for _, _, res in found), fw.name if fw else job.framework)


def _cheap_first(pairs: list) -> list:
    """The frameworks' searches, the smallest space first (planner.plan_pool.COST_ORDER reversed), each given
    what is left of the point's time limit: the large Megatron search is not cut to an equal share."""
    from planner.plan_pool import cheap_first

    return [pairs[i] for i in cheap_first(pairs)]


def _search(job: PointJob, fw, train: TrainSpec, start: float):
    """One search of the point, until the point's deadline (start + its --time-limit)."""
    space = fws.space_options(fw, job.model, job.cluster, train)
    left = max(start + job.time_limit_s - time.perf_counter(), 0.1)
    return search(job.model, job.cluster, train, top=1, time_limit_s=left, opts=space,
                  keep=fws.keep(fw, train, moe=job.model.is_moe), deadline=start + job.time_limit_s)


def _default_search(found: list, train: TrainSpec):
    """When nothing fits anywhere: the search priced with the point's own stack (the default framework's)."""
    return next((f for f in found if f[1].stack_spec.name == train.stack_spec.name), found[0])


RUN_KEYS = ("days", "gpu_hours", "cost_usd", "days_failure_free", "gpu_hours_failure_free",
            "cost_failure_free_usd", "goodput", "energy_kwh", "checkpoint_interval_s")


def run_numbers(point: Point, model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, tokens: float,
                price: Optional[float]) -> dict:
    """The whole run of a point that fits, as the sweep ranks it: days, GPU-hours and cost with the
    expected failures, restarts and checkpoints (costmodels.whole_run with its cited defaults), beside
    the failure-free numbers and the goodput."""
    run = whole_run(point.estimate, model, cluster, train, RunSpec(tokens=tokens, price_per_gpu_hour=price))
    return {"days": run.days_with_failures, "gpu_hours": run.gpu_hours_with_failures,
            "cost_usd": run.cost_with_failures_usd, "days_failure_free": run.days,
            "gpu_hours_failure_free": run.gpu_hours, "cost_failure_free_usd": run.cost_usd, "goodput": run.goodput,
            "energy_kwh": run.energy_kwh, "checkpoint_interval_s": run.checkpoint_interval_s,
            "source": "costmodels.whole_run (expected failures, restarts, checkpoints)"}


def wall_days(point: Point) -> Optional[float]:
    """The calendar days of a point's run (with the expected failures when they are modelled)."""
    return point.run.get("days") if point.fits else None


def cost_of(point: Point, basis: str) -> Optional[float]:
    """The point's cost in the sweep's basis: cost_usd, or gpu_hours without prices."""
    return point.run.get(basis) if point.fits else None


def pareto_front(pairs: list[Optional[tuple[float, float]]]) -> list[int]:
    """Indices of the (time, cost) pairs no other pair beats on both (equal on one and better on the
    other counts as beating); None entries (infeasible points) are never on it. Sorted by time."""
    live = sorted((p, i) for i, p in enumerate(pairs) if p is not None)
    front, best_cost = [], float("inf")
    for (t, c), i in live:
        if c < best_cost:
            front.append(i)
            best_cost = c
    return front


def meets(point: Point, basis: str, deadline_s: Optional[float], budget_usd: Optional[float]) -> bool:
    """The point fits, ends by the deadline and costs at most the budget (each when given)."""
    if not point.fits:
        return False
    if deadline_s is not None and wall_days(point) * SECONDS_PER_DAY > deadline_s:
        return False
    return budget_usd is None or (point.run.get("cost_usd") is not None and point.run["cost_usd"] <= budget_usd)


COST_TIE_REL = 0.01  # costs within 1% of the cheapest count as equal: the step-time band is several times that


def pick(points: list[Point], basis: str, deadline_s: Optional[float], budget_usd: Optional[float]) -> Optional[int]:
    """The position (in `points`) of the cheapest point that meets deadline and budget, the fastest of those
    within COST_TIE_REL of the cheapest (a workflow pass: 0.1% cheaper picked a run twice as long, a difference
    far inside the time model's error); None when none does."""
    ok = [(cost_of(p, basis), wall_days(p), i) for i, p in enumerate(points) if meets(p, basis, deadline_s, budget_usd)]
    if not ok:
        return None
    cheapest = min(cost for cost, _, _ in ok)
    return min((days, cost, i) for cost, days, i in ok if cost <= cheapest * (1 + COST_TIE_REL))[2]


def why_no_pick(points: list[Point], basis: str, deadline_s: Optional[float], budget_usd: Optional[float]) -> str:
    """One sentence: why no point meets the constraints (the closest misses named)."""
    fitting = [p for p in points if p.fits]
    if not points:
        return "no point finished"
    if not fitting:
        return f"no point of {len(points)} has a layout that fits"
    parts = []
    if deadline_s is not None:
        fastest = min(fitting, key=wall_days)
        parts.append(f"the fastest point ({label(fastest)}) takes {wall_days(fastest):.1f} days, "
                     f"deadline {deadline_s / SECONDS_PER_DAY:.1f} days")
    if budget_usd is not None:
        cheapest = min(fitting, key=lambda p: p.run["cost_usd"])
        parts.append(f"the cheapest ({label(cheapest)}) costs ${cheapest.run['cost_usd']:,.0f}, "
                     f"budget ${budget_usd:,.0f}")
    if deadline_s is not None and budget_usd is not None:
        parts.append("and no point meets both")
    return "; ".join(parts)


def label(point: Point) -> str:
    """'dgx-h100 x 32 nodes'."""
    return f"{point.cluster} x {point.nodes} nodes"


def point_json(point: Point, front: set[int], picked: Optional[int], position: int) -> dict:
    """One point of `sweep --json` (docs/design.md section 6)."""
    est = point.estimate
    u = est.uncertainty if est is not None else None
    return {"cluster": point.cluster, "cluster_arg": point.cluster_arg, "gpu": point.gpu, "nodes": point.nodes,
            "gpus": point.gpus, "global_batch": point.global_batch, "status": point.status, "fits": point.fits,
            "cut_short": point.cut, "reason": point.reason, "search_s": point.search_s,
            "layouts_considered": point.layouts_considered, "framework": point.framework,
            "layout": layout_text(est.layout) if est else None,
            "step_s": est.time.step_s if est else None,
            "step_rel_error_p50": u.rel_error_p50 if u is not None else None,
            "validated": u.validated if u is not None else None,
            "mfu": est.throughput.mfu if est else None,
            "tokens_per_s": est.throughput.tokens_per_s if est else None,
            "tokens_per_s_per_gpu": est.throughput.tokens_per_s / point.gpus if est else None,
            **{k: point.run.get(k) for k in RUN_KEYS}, "run_model": point.run.get("source"),
            "pareto": position in front, "picked": position == picked,
            "estimate": est.model_dump(mode="json") if est else None}
