"""Slow checks against the real tools (their own parsers, run in a subprocess that imports torch) start as soon as
collection ends and run beside the rest of the suite: CI has two cores, and each waits seconds on imports. A test
module opts in with a module-level `BACKGROUND` function: called at once, in the main thread (so the parplan code it
runs, such as exporting launch files, never meets a test's monkeypatch), it returns a function without arguments
that does the slow part (downloads, the subprocess) on a worker thread and returns what the module's fixture needs.
The fixture reads it with `background(request)`, which runs both itself when nothing started them.

The suite runs on every core (pytest-xdist, `-n auto` in pyproject.toml). A worker receives whole test files
(`pytest_xdist_make_scheduler`), so a module's fixtures are built once; the files that share one search through
tests/plan_cache.py and tests/sweep_cache.py go to one worker together. A worker does not know at collection which
files it will run, so there a module's BACKGROUND starts when its fixture first asks (the other worker keeps the
second core busy meanwhile)."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=3, thread_name_prefix="parplan-background")


def pytest_configure(config):
    """Every test starts with no terminal width known, as in a pipe (planner.report.fit.width_known): a COLUMNS
    from the caller's shell, or the 80 that pytest-xdist's workers are given, would wrap the prose that tests read
    line by line. Tests of the width set COLUMNS themselves."""
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


# Files that share a search run once per process (tests/plan_cache.py, tests/sweep_cache.py): one worker runs them all.
SHARED_SEARCHES = ("tests/test_readme_tour.py", "tests/test_sweep.py", "tests/test_terminal_width.py",
                   "tests/test_whole_run.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Whole files to a worker (as `--dist loadfile`), and the files of SHARED_SEARCHES to one worker."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "shared-searches" if path in SHARED_SEARCHES else path
    return ByFile(config, log)


def pytest_collection_finish(session):
    """Start each selected module's BACKGROUND once, in collection order (not in an xdist worker: module docstring)."""
    started = {}
    if os.environ.get("PYTEST_XDIST_WORKER"):
        session.config.parplan_background = started
        return
    for item in session.items:
        module = getattr(item, "module", None)
        start = getattr(module, "BACKGROUND", None)
        if start is not None and module.__name__ not in started:
            started[module.__name__] = _POOL.submit(start())
    session.config.parplan_background = started


def background(request):
    """The result of the requesting module's BACKGROUND: waited for when it started at collection, else run now."""
    started = getattr(request.config, "parplan_background", {})
    future = started.get(request.module.__name__)
    return future.result() if future is not None else request.module.BACKGROUND()()


def unpacked_wheels(wheels: tuple, root: Path) -> dict:
    """pip download (no dependencies, wheels only) of `wheels` into `root`, unpacked into root/site:
    {"site": path} or, when the index refuses them, {"skip": why}."""
    run = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *wheels,
                          "-d", str(root)], capture_output=True, text=True)
    if run.returncode:
        return {"skip": f"{wheels[0]} not downloadable: {run.stderr.strip()[-200:]}"}
    for wheel in root.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(root / "site")
    return {"site": str(root / "site")}
