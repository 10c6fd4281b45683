"""What the two process pools (plan --framework any: planner.plan_pool; sweep: planner.sweep_pool) share:
workers that leave Ctrl-C to the parent, and a parent that ends them by process id."""

from __future__ import annotations

import signal


def ignore_sigint() -> None:
    """A worker's initializer: Ctrl-C is the parent's to handle (it ends the workers: stop), so no worker
    prints a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop(pool) -> None:
    """Cancel what has not started and end the workers `pool` started, each by its process id (None: nothing)."""
    if pool is None:
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)
