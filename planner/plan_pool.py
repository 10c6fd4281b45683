"""`plan --framework any` searches each framework's layouts with its own stack: four independent searches
(planner.search.frameworks.priced_frameworks). With two or more CPUs free they run in forked worker
processes, each exactly as it runs alone: when no search is cut by the time limit the answers are the serial
ones, in the serial order; only the wall time changes (on 2 cores, Mixtral 8x7B on 8 nodes about halves). A
pool that cannot start falls back to running them here, one after the other.

The time limit is the whole plan's: the small searches (FSDP, DeepSpeed) run first with an equal share, and the
large ones (torchtitan, Megatron) take what is left when they start. Equal fixed shares cut Megatron's search of
DeepSeek-V3 on 2,048 H800 at 30 s of a 60 s limit, with nothing found, while the small searches had ended in
seconds (a new-user pass).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any, Callable, Optional, Sequence

from planner.workers import ignore_sigint, stop

# the frameworks' usual share of the work, largest first (submitted in the reverse order: cheap_first)
COST_ORDER = ("megatron", "torchtitan", "deepspeed", "fsdp")

Found = tuple  # (framework caps, train, SearchResult, validated alternative, reasons)


def cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def search_one(prob, tr, top: int, time_limit: float, validated_only: bool, fw, deadline: Optional[float],
               stop_at: Optional[float] = None):
    """One framework's (result, alternative, reasons), as planner.api.search_with_reasons gives them, less
    what only a later search of the same problem reads (its cost caches, kept candidates, tables): what a
    worker sends back. `stop_at` (a time.perf_counter() value, one clock for every process on Linux): the
    search takes at most what is left until then when it starts."""
    from planner.api import search_with_reasons
    from planner.search.engine import without_cycle_collector

    if stop_at is not None:
        time_limit = _left(time_limit, stop_at)
    with without_cycle_collector():  # for the whole task, and resumed only once the caches are gone (below)
        result, alternative, reasons = search_with_reasons(prob, tr, top, time_limit, validated_only, fw, deadline)
        sent = dataclasses.replace(result, coster=None, kept=[], keep=None, tables=[])
        # the search's caches (a Coster holds no reference cycle) are freed here by reference counting: resumed
        # after the search alone, the collector's first pass walked them all (0.1 s of qwen3's Megatron worker)
        del result
    return sent, alternative, reasons


def search_frameworks(prob, pairs: Sequence[tuple[Any, Any]], top: int, time_limit: float, validated_only: bool,
                      deadline: Optional[float], serial: Callable, waiting: Callable = contextlib.nullcontext,
                      workers: Optional[int] = None) -> list[Found]:
    """(fw, train, result, alternative, reasons) per (fw, train) of `pairs`, in their order; run cheap first, all
    ending by `time_limit` from now (the module's note), all of them the shared `deadline`. `serial(fw, tr, share)`
    runs one search here (with the CLI's spinner);
    `waiting()`: a context to wait for the workers in (a spinner: started once they are forked, as a thread
    must not be copied into a child mid-write); `workers`: processes to use (default: the CPUs this process
    may use, at most 4), 1 runs everything here."""
    stop_at = time.perf_counter() + time_limit
    workers = min(len(pairs), 4, cpus() if workers is None else workers)
    order = cheap_first(pairs)
    if workers > 1:  # side by side: the small ones take `workers` equal shares, the last `workers` what is left
        caps = {i: time_limit if k >= len(order) - workers else time_limit * workers / len(pairs)
                for k, i in enumerate(order)}
        found = _in_pool(prob, pairs, top, caps, validated_only, deadline, workers, waiting, stop_at)
        if found is not None:
            return found
    done = {}
    for k, i in enumerate(order):  # each an equal share of what is left: the last takes all of it
        fw, tr = pairs[i]
        done[i] = (fw, tr, *serial(fw, tr, _left(time_limit, stop_at) / (len(order) - k)))
    return [done[i] for i in range(len(pairs))]


def cheap_first(pairs: Sequence[tuple[Any, Any]]) -> list[int]:
    """Indices of `pairs` with the smallest usual search first (COST_ORDER reversed)."""
    return sorted(range(len(pairs)), key=lambda i: -_rank(pairs[i][0]))


def _left(cap: float, stop_at: float) -> float:
    """A search's time limit: `cap`, at most what is left until `stop_at`, at least 0.1 s."""
    return max(min(cap, stop_at - time.perf_counter()), 0.1)


def _in_pool(prob, pairs, top, caps, validated_only, deadline, workers, waiting, stop_at) -> Optional[list[Found]]:
    """The searches in forked workers, submitted cheap first, each capped by caps[i] and stop_at; None when no
    pool could start (then the caller runs them here)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:  # no fork on this platform (ValueError), or no process to be had (OSError): run them here
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                                   initializer=ignore_sigint)
        futures = {i: pool.submit(search_one, prob, pairs[i][1], top, caps[i], validated_only, pairs[i][0],
                                  deadline, stop_at) for i in cheap_first(pairs)}  # the first submit forks them all
    except (OSError, ValueError, BrokenProcessPool):
        return None
    try:
        with waiting():
            found = [(fw, tr, *futures[i].result()) for i, (fw, tr) in enumerate(pairs)]
    except BrokenProcessPool:  # a worker died (killed, out of memory): the searches run here instead
        stop(pool)
        return None
    except BaseException:  # Ctrl-C, or an error a search raised: end the workers before it propagates
        stop(pool)
        raise
    pool.shutdown(wait=True)
    return found


def _rank(fw) -> int:
    name = getattr(fw, "name", "")
    return COST_ORDER.index(name) if name in COST_ORDER else len(COST_ORDER)
