"""Each `plan` search run once per test session, where tests ask for the same problem twice.

`parplan plan` searches (planner.cli_plan.plan_search, once per framework with --framework any) and then
writes, prints and prices what it found. The search reads the problem (model, cluster, train), `top`, the
time limit, --validated-only and the framework, never the terminal width, --json, --save or the
run options (--tokens, --price-per-gpu-hour). Inside `shared_plan_searches()` a search asked before in this
session returns that result again; the rest of the command runs as usual. The README tour's 405B plan and
tests/test_whole_run.py's example are one search (~4 s on the 2-core CI machine), as are the four plans of
mixtral-8x7b on 4 nodes in tests/test_terminal_width.py (~7 s each).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Iterator

import pytest

_RESULTS: dict[tuple, tuple] = {}  # search key -> (result, alternative, reasons), for the whole session


@contextlib.contextmanager
def shared_plan_searches() -> Iterator[dict]:
    """Within the block, planner.cli_plan.plan_search runs once per (problem, top, time limit,
    validated-only, framework) this session; a repeat gets the result with its own copy of the stats
    (plan_any adds the other frameworks' layouts into the winner's stats in place) and of the reasons."""
    import planner.cli_plan as cli_plan

    real = cli_plan.plan_search

    def once(prob, train, top, time_limit, validated_only, fw=None, deadline=None):
        key = (prob.model.model_dump_json(), prob.cluster.model_dump_json(), train.model_dump_json(), top,
               time_limit, validated_only, getattr(fw, "name", None))
        if key not in _RESULTS:
            result, alternative, reasons = real(prob, train, top, time_limit, validated_only, fw, deadline)
            _RESULTS[key] = (dataclasses.replace(result, stats=copy.copy(result.stats)), alternative, list(reasons))
        result, alternative, reasons = _RESULTS[key]
        return dataclasses.replace(result, stats=copy.copy(result.stats)), alternative, list(reasons)

    import planner.plan_pool as plan_pool

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_plan, "plan_search", once)
        # the searches here, not in forked workers (planner.plan_pool calls the search directly): a worker's
        # result would never reach this session's cache; tests/test_search_pool.py covers the pool
        patch.setattr(plan_pool, "cpus", lambda: 1)
        yield _RESULTS
