"""The sweep's points run in worker processes (concurrent.futures), with a progress bar on stderr;
Ctrl-C keeps the points already done.

Workers ignore SIGINT: the parent alone decides, cancels what has not started, stops the workers it
started (by their process ids) and returns what finished. With one job, points run in this process.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Callable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from planner.sweep import Point, PointJob, plan_point
from planner.workers import ignore_sigint, stop

Done = Callable[[Point], None]


def progress_bar(console: Console) -> Progress:
    """'planning points ━━━━━━━━  5/12  0:00:09  eta 0:00:12' on stderr, when it is a terminal (redirected, a bar
    cannot redraw: it left a blank line in the log)."""
    return Progress(TextColumn("planning points"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.description}"),
                    console=console, transient=True, disable=not console.is_terminal)


def run_points(jobs: Sequence[PointJob], workers: int, console: Console) -> tuple[list[Point], bool]:
    """Every job planned (in job order), or those done when Ctrl-C came: (points, interrupted). The
    workers start (fork) before the progress bar's thread does."""
    done: list[Point] = []
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), initializer=ignore_sigint) \
        if workers > 1 and len(jobs) > 1 else None
    try:
        pending = {pool.submit(plan_point, job) for job in jobs} if pool is not None else set()
        with progress_bar(console) as bar:
            task = bar.add_task("", total=len(jobs))

            def finished(point: Point) -> None:
                done.append(point)
                bar.update(task, advance=1, description=f"last: {point.cluster} x {point.nodes}")

            if pool is None:
                _serial(jobs, finished)
            else:
                _gather(pending, finished)
    except KeyboardInterrupt:
        stop(pool)
        return sorted(done, key=lambda p: p.index), True
    except BaseException:
        stop(pool)
        raise
    if pool is not None:
        pool.shutdown(wait=True)
    return sorted(done, key=lambda p: p.index), False


def _serial(jobs: Sequence[PointJob], finished: Done) -> None:
    for job in jobs:
        finished(plan_point(job))


def _gather(pending: set, finished: Done) -> None:
    while pending:
        ready, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in ready:
            finished(future.result())
