"""The README's 30-second tour runs as written: every command, in order, in a fresh folder holding only
what a clone holds (README.md and examples/), each exiting 0 and writing the files it says it writes.

The commands are read from the README itself (the first ```bash block under "## 30-second tour"), so
a tour edit that breaks a command fails here. The first command runs as users run it, in a fresh
interpreter (`parplan` as `python -m planner.cli`); the others run in this process through typer's CliRunner
with the fresh copy as the working folder (a subprocess each added ~1 s of start-up and nothing else), and
a search another test asks for too runs once per session (tests/sweep_cache.py, tests/plan_cache.py). Only
those plans go through the plan cache, which runs a search in this process, one framework after another: the
tour's other plans search as users' do, `--framework any` in forked workers (planner.plan_pool; same answers).
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from plan_cache import shared_plan_searches
from sweep_cache import shared_sweep_points
from test_whole_run import EXAMPLE as WHOLE_RUN_EXAMPLE

ROOT = Path(__file__).resolve().parent.parent


def tour_commands(readme: str) -> list[str]:
    """The parplan commands of the tour block: continuation lines joined, comments dropped."""
    section = readme.split("## 30-second tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(words)
    return commands


def test_the_tour_block_is_found_and_holds_every_command():
    commands = tour_commands((ROOT / "README.md").read_text())
    names = [c[1] for c in commands]
    assert all(c[0] == "parplan" for c in commands)
    for name in ("models", "hardware", "estimate", "plan", "export", "sweep", "check", "calibrate", "report"):
        assert name in names, name


@pytest.fixture(scope="module")
def fresh_copy(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("tour")
    shutil.copy(ROOT / "README.md", work / "README.md")
    shutil.copytree(ROOT / "examples", work / "examples")
    return work


def test_every_tour_command_runs_in_order_from_a_fresh_copy(fresh_copy, monkeypatch):
    from typer.testing import CliRunner

    from planner.cli import app

    first, *rest = tour_commands((fresh_copy / "README.md").read_text())
    proc = subprocess.run([sys.executable, "-m", "planner.cli", *first[1:]], cwd=fresh_copy,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"{shlex.join(first)} -> {proc.returncode}: {proc.stderr[-800:]}"
    assert proc.stdout.strip(), shlex.join(first)
    monkeypatch.chdir(fresh_copy)
    runner = CliRunner()
    # the sweep's points are tests/test_sweep.py's example's, the 405B plan is tests/test_whole_run.py's:
    # each searched once per session (tests/sweep_cache.py, tests/plan_cache.py)
    with shared_sweep_points():
        for words in rest:
            shared = words[1:1 + len(WHOLE_RUN_EXAMPLE)] == WHOLE_RUN_EXAMPLE
            with shared_plan_searches() if shared else contextlib.nullcontext():
                result = runner.invoke(app, words[1:])
            assert result.exit_code == 0, f"{shlex.join(words)} -> {result.exit_code}: {result.output[-800:]}"
    for made in ("plan.json", "launch", "ds", "sweep.html", "my-cluster.yaml", "plan.html"):
        assert (fresh_copy / made).exists(), made
