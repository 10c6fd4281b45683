"""Refit every number parplan ships from its data, in dependency order, so none goes stale.

    python -m benchmarks.refit                 # every step
    python -m benchmarks.refit --from stacks   # resume at a step
    python -m benchmarks.refit --only accuracy --only docs
    python benchmarks/refit.py --list

Steps (each a script that also runs on its own; a step that fails stops the run and names itself):
1. nccl      benchmarks/calibrate_nccl.py --write: collective efficiencies of every GPU profile and the
             cluster presets' latencies (tests/test_profiles_reproducible.py checks each profile).
2. kernels   benchmarks/calibrate_kernels.py --write when that script exists (the measured H100 kernel
             fit); skipped, and said so, where it does not.
3. stacks    benchmarks/calibrate.py --write: GPU compute curves and stack parameters on the fitting
             rows of benchmarks/splits.py (the slow step: ~5-15 minutes on 2 cores).
4. memory    benchmarks/calibrate_memory.py, then benchmarks/memory_accuracy.py --write.
5. accuracy  benchmarks/loro.py --no-cache (leave-one-regime-out refits, ~1 minute), then
             benchmarks/accuracy.py --write: docs/accuracy.md's time sections and every stack's held_out
             bands; benchmarks/band_loo.py --check (stops the run when the bands' nominal level,
             uncertainty_table.STEP_LEVEL, is no longer the one leave-one-group-out coverage calibrates);
             benchmarks/fit_verdicts.py --write (the fit-verdict section).
6. examples  docs/examples/*.json re-planned with `parplan plan ... --save --force` (tests/test_examples_current.py).
7. docs      benchmarks/accuracy.py --write again, so docs/accuracy.md quotes the profiles as finally written.
Never run: `accuracy.py --final` (the frozen test split is reported by hand, not refitted on).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _py(*args: str) -> list[str]:
    return [sys.executable, *args]


def example_commands() -> list[list[str]]:
    """`parplan plan` of every docs/examples file, with the values the file records."""
    out = []
    for path in sorted((ROOT / "docs" / "examples").glob("*.json")):
        d = json.loads(path.read_text())
        t = d["train"]
        cmd = _py("-m", "planner.cli", "plan", d["model"]["name"], "--cluster", d["cluster"]["name"], "--nodes",
                  str(d["cluster"]["num_nodes"]), "--global-batch", str(t["global_batch_size"]), "--seq-len",
                  str(t.get("seq_length") or d["model"]["seq_length"]), "--save", str(path.relative_to(ROOT)), "--force")
        out.append(cmd)
    return out


def _kernels() -> list[list[str]]:
    script = BENCH / "calibrate_kernels.py"
    return [_py(str(script), "--write")] if script.exists() else []


STEPS = {
    "nccl": lambda: [_py(str(BENCH / "calibrate_nccl.py"), "--write")],
    "kernels": _kernels,
    "stacks": lambda: [_py(str(BENCH / "calibrate.py"), "--write")],
    "memory": lambda: [_py(str(BENCH / "calibrate_memory.py")), _py(str(BENCH / "memory_accuracy.py"), "--write")],
    "accuracy": lambda: [_py(str(BENCH / "loro.py"), "--no-cache"), _py(str(BENCH / "accuracy.py"), "--write"),
                         _py(str(BENCH / "band_loo.py"), "--check"), _py(str(BENCH / "fit_verdicts.py"), "--write")],
    "examples": example_commands,
    "docs": lambda: [_py(str(BENCH / "accuracy.py"), "--write")],
}


def selected(start: str | None, only: list[str] | None) -> list[str]:
    """The step names to run, in order."""
    names = list(STEPS)
    if only:
        return [n for n in names if n in only]
    return names[names.index(start):] if start else names


def run(names: list[str]) -> int:
    """Run the steps; 0, or the exit status of the first command that failed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    for name in names:
        cmds = STEPS[name]()
        if not cmds:
            print(f"refit: {name}: skipped (no script for it on this branch)", file=sys.stderr)
            continue
        t0 = time.monotonic()
        for cmd in cmds:
            print(f"refit: {name}: {' '.join(Path(c).name if c.endswith('.py') else c for c in cmd[1:])}", file=sys.stderr)
            done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
            if done.returncode:
                print(f"refit: step {name} failed (exit {done.returncode}): {' '.join(cmd[1:])}", file=sys.stderr)
                return done.returncode
        print(f"refit: {name} done in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="start", choices=list(STEPS), help="start at this step")
    parser.add_argument("--only", action="append", choices=list(STEPS), help="run only this step (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the commands and exit")
    args = parser.parse_args(argv)
    names = selected(args.start, args.only)
    if args.list:
        for name in names:
            for cmd in STEPS[name]() or [["(skipped: no script)"]]:
                print(f"{name}: {' '.join(cmd[1:]) if len(cmd) > 1 else cmd[0]}")
        return 0
    return run(names)


if __name__ == "__main__":
    sys.exit(main())
