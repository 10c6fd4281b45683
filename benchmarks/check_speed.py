"""How long `parplan check` takes on each real config of the corpus (tests/data/configs).

    python benchmarks/check_speed.py            # median of 3 per file, in-process and whole command

"in-process" times `check` through Typer's CliRunner in this process (reading, pricing, printing);
"command" times a fresh `python -m planner.cli check ...` (Python start-up and imports included, as a
user or a CI job pays it). The command lines are the corpus test's (tests/test_config_corpus.py).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from planner.cli import app  # noqa: E402
from tests.test_config_corpus import DATA, ROWS  # noqa: E402


def median_s(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    runner = CliRunner()
    print("| file | exit | in-process ms | command s |\n|---|---|---|---|")
    totals = []
    for row in ROWS:
        argv = ["check", str(DATA / row.file), *row.args]
        code = runner.invoke(app, argv).exit_code
        inproc = median_s(lambda: runner.invoke(app, argv))
        command = median_s(lambda: subprocess.run([sys.executable, "-m", "planner.cli", *argv],
                                                  capture_output=True, cwd=ROOT))
        totals.append((inproc, command))
        print(f"| {row.file} | {code} | {inproc * 1e3:.0f} | {command:.2f} |")
    print(f"\nmedian over {len(totals)} files: {statistics.median(t[0] for t in totals) * 1e3:.0f} ms in-process, "
          f"{statistics.median(t[1] for t in totals):.2f} s per command")


if __name__ == "__main__":
    main()
