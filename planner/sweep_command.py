"""`parplan sweep` end to end, below the Typer options in planner/cli.py: read the options, build a
job per (cluster, node count), run them (planner.sweep_pool), price each run, find the front and the
pick, and print / write the results. Returns the exit code: 0 a point meets the constraints, 1 none.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from rich.console import Console

from costmodels.train_spec import TrainSpec
from planner import sweep as sw
from planner import sweep_grid as grid
from planner import trainopts as to
from planner.errors import UserError
from planner.files import loading
from planner.files.guarded_write import Target, check_all, write_all
from planner.plan_any import any_mode as plan_any_mode
from planner.search import frameworks as fws
from planner.report.sweep_html import render_sweep_html
from planner.report.sweep_table import print_sweep
from planner.sweep_pool import run_points

INTERRUPTED_EXIT = 130  # Ctrl-C, as shells report it: the points done were printed and saved


@dataclass(frozen=True)
class SweepArgs:
    """What the user asked for, as given on the command line."""

    model: str
    clusters: str
    nodes: str
    tokens: float
    deadline: Optional[str] = None
    budget: Optional[str] = None
    price: Optional[str] = None
    global_batch: Optional[int] = None
    seq_len: Optional[int] = None
    precision: Optional[str] = None
    time_limit_s: float = 10.0
    jobs: Optional[int] = None
    as_json: bool = False
    report: Optional[Path] = None
    force: bool = False
    opts: to.TrainOptions = to.TrainOptions()


def _model_and_base(arg: str, global_batch: Optional[int], seq_len: Optional[int] = None):
    """The model, and the TrainSpec every point starts from (a plan file's, else the defaults); `seq_len`
    (--seq-len) for the Hugging Face reader's notes on the training length."""
    if loading.is_plan_file(arg):
        prob = loading.load_plan(Path(arg), seq_len)
        return prob.model, prob.train
    return loading.load_model_noted(arg, seq_len)[0], TrainSpec(global_batch_size=global_batch or grid.DEFAULT_BATCH)


def _train(base: TrainSpec, batch: int, args: SweepArgs, cache: dict) -> TrainSpec:
    """The point's TrainSpec: the base with the options over it and `batch` sequences (resolved once per batch)."""
    to.check_choice("precision", args.precision)
    if batch not in cache:
        data = {**base.model_dump(), "stack": base.stack, "global_batch_size": batch}
        data.update({k: v for k, v in (("seq_length", args.seq_len), ("precision", args.precision)) if v is not None})
        cache[batch] = to.apply(loading.validate(TrainSpec, data, "train", from_file=False), args.opts)
    return cache[batch]


def build_jobs(args: SweepArgs):
    """(jobs, model, prices by cluster argument) after every option is checked: nothing runs on bad input."""
    node_counts = grid.parse_nodes(args.nodes)
    model, base = _model_and_base(args.model, args.global_batch, args.seq_len)
    clusters = {arg: [loading.load_cluster(arg, n) for n in node_counts] for arg in grid.parse_clusters(args.clusters)}
    names = {arg: (arg, cs[0].name, cs[0].gpu_profile.name) for arg, cs in clusters.items()}
    prices = grid.parse_prices(args.price, names)
    fixed = args.global_batch or (base.global_batch_size if loading.is_plan_file(args.model) else None)
    cache: dict = {}
    jobs = []
    any_mode = plan_any_mode(fws.load(args.opts.framework), args.opts, base if loading.is_plan_file(args.model) else None)
    for arg, sized in clusters.items():
        for cluster in sized:
            batch = fixed or grid.default_batch(cluster.num_gpus)
            jobs.append(sw.PointJob(len(jobs), arg, model, cluster, _train(base, batch, args, cache),
                                    args.opts.framework, args.time_limit_s, any_mode))
    return jobs, model, prices


def _check_limits(args: SweepArgs, prices: dict) -> tuple[Optional[float], Optional[float]]:
    deadline_s = grid.parse_duration_s(args.deadline)
    budget = grid.parse_money(args.budget)
    if budget is not None and any(p is None for p in prices.values()):
        raise UserError(f"--budget {args.budget}: needs --price-per-gpu-hour (the cost of a GPU-hour) "
                        "to price the runs")
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: expected 1 or more worker processes")
    return deadline_s, budget


def sweep_document(args: SweepArgs, points: list[sw.Point], total: int, prices: dict, deadline_s, budget,
                   interrupted: bool, seconds: float, model_name: str) -> dict:
    """The `sweep --json` document (docs/design.md section 6)."""
    basis = "cost_usd" if all(p is not None for p in prices.values()) else "gpu_hours"
    pairs = [(sw.wall_days(p), sw.cost_of(p, basis)) if p.fits else None for p in points]
    front = sw.pareto_front(pairs)
    picked = sw.pick(points, basis, deadline_s, budget)
    why = None if picked is not None else sw.why_no_pick(points, basis, deadline_s, budget)
    return {"model": model_name, "tokens": args.tokens, "framework": args.opts.framework or "any",
            "deadline_s": deadline_s, "budget_usd": budget, "price_per_gpu_hour": prices, "cost_basis": basis,
            "time_limit_s": args.time_limit_s, "points": [sw.point_json(p, set(front), picked, i)
                                                          for i, p in enumerate(points)],
            "pareto": front, "pick": picked, "no_pick_reason": why,
            "completed": len(points), "total": total, "interrupted": interrupted, "seconds": seconds}


def run_sweep(args: SweepArgs, out: Console, err: Console) -> int:
    """The whole command; the exit code."""
    jobs, model, prices = build_jobs(args)
    deadline_s, budget = _check_limits(args, prices)
    if args.report is not None:
        check_all([Target(args.report, "", option="--report")], args.force)  # refused before any planning
    start = time.perf_counter()
    workers = args.jobs or os.cpu_count() or 1
    points, interrupted = run_points(jobs, workers, err)
    by_index = {j.index: j for j in jobs}
    for p in points:
        if p.fits:
            job = by_index[p.index]
            p.run = sw.run_numbers(p, job.model, job.cluster, job.train, args.tokens, prices[p.cluster_arg])
    doc = sweep_document(args, points, len(jobs), prices, deadline_s, budget, interrupted,
                         time.perf_counter() - start, model.name)
    if interrupted:
        err.print(f"interrupted after {len(points)} of {len(jobs)} points (the finished ones are kept)",
                  highlight=False)
    _show(doc, args, out, err)
    if interrupted:
        return INTERRUPTED_EXIT
    return 0 if doc["pick"] is not None else 1


def _show(doc: dict, args: SweepArgs, out: Console, err: Console) -> None:
    """Write the report (when asked and any point finished), then print the JSON or the table."""
    if args.report is not None and doc["points"]:
        for path in write_all([Target(args.report, render_sweep_html(doc), option="--report")], args.force):
            err.print(f"wrote {path}", highlight=False, soft_wrap=True)
    if args.as_json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print_sweep(doc, out)
