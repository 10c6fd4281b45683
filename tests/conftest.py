"""Slow checks against the real tools (their own parsers, run in a subprocess that imports torch) start as soon as
collection ends and run beside the rest of the suite: CI has two cores, and each waits seconds on imports. A test
module opts in with a module-level `BACKGROUND` function: called at once, in the main thread (so the parplan code it
runs, such as exporting launch files, never meets a test's monkeypatch), it returns a function without arguments
that does the slow part (downloads, the subprocess) on a worker thread and returns what the module's fixture needs.
The fixture reads it with `background(request)`, which runs both itself when nothing started them."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import zipfile
from pathlib import Path

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=3, thread_name_prefix="parplan-background")


def pytest_collection_finish(session):
    """Start each selected module's BACKGROUND once, in collection order."""
    started = {}
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
