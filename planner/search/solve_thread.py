"""CP-SAT's Solve, interruptible by Ctrl-C (planner.search.cpsat runs every solve through it).

A Ctrl-C reaches Python only between bytecodes, so during a Solve on the main thread it waited for the solve's
time limit (up to --time-limit). The solve runs on a worker thread instead, the main thread waiting on an Event in
short slices; the interrupt stops the search (CpSolver.StopSearch) and is raised where the solve was asked for.
The solver is built with catch_sigint_signal off (its own handler, once removed, left the default action behind,
which killed the process).
"""

from __future__ import annotations

import threading


def interruptible_solve(solver, model) -> int:
    """solver.Solve(model) on a worker thread while this one waits in short slices, so that a Ctrl-C stops the
    search at once (StopSearch) and is raised here: a Ctrl-C reaches Python only between bytecodes, so during a
    Solve on this thread it waited for the solve's time limit (up to --time-limit, a review). The wait is on an
    Event: a KeyboardInterrupt inside Thread.join(timeout) left the thread's state such that the interpreter
    aborted at exit (OR-Tools 9.15, CPython 3.11); for the same reason the worker is always waited for, however
    many interrupts follow. An exception inside Solve is raised here."""
    done, outcome = threading.Event(), {}

    def work() -> None:
        try:
            outcome["status"] = solver.Solve(model)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name="cp-sat", daemon=True)
    try:
        worker.start()
        while not done.wait(0.05):
            pass
    except BaseException:
        _stop(solver, worker, done)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["status"]


def _stop(solver, worker: threading.Thread, done: threading.Event) -> None:
    """Stop the search and wait until the worker has left Solve (a worker never started has nothing to stop),
    through any further Ctrl-C."""
    while True:
        try:
            solver.StopSearch()
            while worker.ident is not None and not done.wait(0.05):
                pass
            return
        except KeyboardInterrupt:
            continue
