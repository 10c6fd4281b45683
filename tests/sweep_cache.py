"""Each sweep point searched once per test session.

`parplan sweep` plans every point in worker processes (planner.sweep_pool.run_points) and then prices
the runs, finds the front and the pick, and prints and writes them (planner.sweep_command.run_sweep). A
point's search reads only its job: model, cluster, train, framework and time limit, not the tokens,
prices, deadline or output options. The README's sweep and the issue's 70B example in tests/test_sweep.py
search the same 12 points (~18 s on the 2-core CI machine): inside `shared_sweep_points()` a point whose
job was planned before in this session is a copy of that point; the others are planned as usual.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Iterator

import pytest

_POINTS: dict[tuple, object] = {}  # job key -> planner.sweep.Point, for the whole session


def _key(job) -> tuple:
    """Everything planner.sweep.plan_point reads of a job, but its index and cluster argument."""
    return (job.model.model_dump_json(), job.cluster.model_dump_json(), job.train.model_dump_json(), job.framework,
            job.time_limit_s)


@contextlib.contextmanager
def shared_sweep_points() -> Iterator[dict]:
    """Within the block, `sweep` plans only the points this session has not planned (in its workers, as
    usual) and reuses copies of the others (run_sweep fills in each point's run numbers)."""
    import planner.sweep_command as sweep_command

    real = sweep_command.run_points

    def run_points(jobs, workers, console):
        missing = [job for job in jobs if _key(job) not in _POINTS]
        if missing:
            points, interrupted = real(missing, workers, console)
            if interrupted:
                return points, True
            by_index = {p.index: p for p in points}
            _POINTS.update((_key(job), copy.deepcopy(by_index[job.index])) for job in missing)
        return [dataclasses.replace(copy.deepcopy(_POINTS[_key(job)]), index=job.index, cluster_arg=job.cluster_arg)
                for job in jobs], False

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep_command, "run_points", run_points)
        yield _POINTS
