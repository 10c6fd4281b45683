"""Wall time of whole `parplan` commands as a user runs them, beside the targets they must meet.

    python benchmarks/cli_speed.py              # median of 3 runs of each command
    python benchmarks/cli_speed.py --runs 1     # one run each (quicker, noisier)
    python benchmarks/cli_speed.py --json

Each command runs in a fresh process (`python -m planner.cli ...`, so start-up and imports count, as
they do for a user) in a scratch folder. Targets are issue 36's ("Fast and clear"), on an idle
2-core machine; a row over its target is marked, and the script exits 1 if any is. Timings belong
here, never in a test's wall-clock assert.

parplan's modules are byte-compiled first (compileall, into their __pycache__), as an installed package
or any second run has them: where PYTHONDONTWRITEBYTECODE is set and no cache exists, every run would
otherwise compile ~80 modules again (about 0.15 s of each plan command on the 2-core machine), a cost no
user pays twice. `--no-compile` measures without.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# (label, arguments after `parplan`, target seconds)
COMMANDS = [
    ("--help", ["--help"], 0.3),
    ("models", ["models"], 0.3),
    ("plan llama3-8b, 1 node", ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1"], 0.8),
    ("README plan llama3-70b, 8 nodes", ["plan", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8",
                                         "--global-batch", "128", "--seq-len", "8192"], 1.5),
    ("plan llama3.1-405b, 2048 nodes", ["plan", "llama3.1-405b", "--cluster", "dgx-h100", "--nodes", "2048",
                                        "--global-batch", "2048", "--seq-len", "8192"], 1.5),
    ("plan mixtral-8x7b, 8 nodes", ["plan", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "8",
                                    "--global-batch", "256", "--seq-len", "4096"], 2.0),
    ("plan llama3-70b --framework torchtitan, 8 nodes", ["plan", "llama3-70b", "--cluster", "dgx-h100",
                                                         "--nodes", "8", "--framework", "torchtitan"], 3.0),
    ("plan qwen3-235b-a22b, 4096 nodes", ["plan", "qwen3-235b-a22b", "--cluster", "dgx-h100",
                                          "--nodes", "4096"], 3.0),
    ("README sweep", ["sweep", "llama3-70b", "--cluster", "dgx-h100,dgx-b200", "--nodes", "8..256",
                      "--tokens", "15e12", "--price-per-gpu-hour", "h100=2.5,b200=4", "--deadline", "90d"], 10.0),
]


PACKAGES = ("planner", "costmodels", "hardware_profiles")


def compile_sources() -> None:
    """Byte-compile the packages the commands import, where this interpreter finds them (module docstring)."""
    paths = [p for name in PACKAGES for p in (importlib.util.find_spec(name).submodule_search_locations or [])]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *paths], check=True, capture_output=True)


def _children_cpu_s() -> float:
    """User + system CPU seconds of this process's finished children (worker processes included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(args: list[str], cwd: str) -> tuple[float, int, str, float]:
    """(seconds, exit code, last stderr line, CPU seconds) of one fresh-process run. On a shared machine
    the CPU seconds move less with the load than the wall time does."""
    start, cpu = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run([sys.executable, "-m", "planner.cli", *args], cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    return seconds, proc.returncode, last, _children_cpu_s() - cpu


def status_of(stdout_args: list[str], cwd: str) -> str:
    """The solver's status for a plan command (from --json), '' for other commands."""
    if not stdout_args or stdout_args[0] != "plan":
        return ""
    proc = subprocess.run([sys.executable, "-m", "planner.cli", *stdout_args, "--json"], cwd=cwd,
                          capture_output=True, text=True)
    try:
        return json.loads(proc.stdout).get("status", "")
    except json.JSONDecodeError:
        return "no JSON"


def measure(runs: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as cwd:
        for label, args, target in COMMANDS:
            times, cpus, codes = [], [], set()
            for _ in range(runs):
                seconds, code, _, cpu = time_command(args, cwd)
                times.append(seconds)
                cpus.append(cpu)
                codes.add(code)
            median = statistics.median(times)
            rows.append({"command": label, "median_s": round(median, 2), "cpu_s": round(statistics.median(cpus), 2),
                         "target_s": target,
                         "exit": sorted(codes), "status": status_of(args, cwd), "over": median > target})
            print(f"  {label}: {median:.2f} s", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| command | median s | CPU s | target s | exit | solver | |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = "over" if r["over"] else "ok"
        lines.append(f"| {r['command']} | {r['median_s']:.2f} | {r['cpu_s']:.2f} | {r['target_s']:g} | "
                     f"{','.join(map(str, r['exit']))} | {r['status']} | {mark} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per command; the median is reported")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="do not byte-compile parplan's modules first")
    args = ap.parse_args()
    if not args.no_compile:
        compile_sources()
    rows = measure(max(1, args.runs))
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 1 if any(r["over"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
