"""What every log reader shares: the guarded line stream, the prefixes launchers add to lines
(torchrun's `[rank3]:` / `[default3]:`, srun --label's `3: `, terminal colours), the parsed run
(`RunLog`) and its summary (warm-up skipped, ranks folded, median step time).

Warm-up: the first WARMUP_STEPS step numbers and the first WARMUP_FRACTION of the step lines are
dropped (compilation, allocator growth, NCCL set-up; Megatron's first line also averages over them).
Ranks: when several ranks print the same step, the step took as long as its slowest rank (the max).
"""

from __future__ import annotations

import math
import os
import re
import stat
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from planner.errors import UserError
from planner.safetext import visible

MAX_LOG_BYTES = 256 * 2**20
MAX_LINE_BYTES = 1 * 2**20  # longer lines are cut (a JSON config dump on one line stays whole)
WARMUP_STEPS = 3
WARMUP_FRACTION = 0.1
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# torchrun's `[rankN]:`/`[defaultN]:`, srun's `N: `, OpenMPI --tag-output's `[job,N]<stdout>:`; pdsh's (DeepSpeed's
# multi-node launcher's) `host: ` names no rank (HOST_PREFIX)
RANK_PREFIX = re.compile(r"^\s*(?:\[(?:rank|default)(\d+)\]:|(\d+):\s|\[\d+,(\d+)\]<std(?:out|err)>:)")
HOST_PREFIX = re.compile(r"^[A-Za-z][\w.-]*[\w]: (?=\s|\[|\S+ \.{3,})")
NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|nan|NAN|inf|INF|-inf|-INF)"


@dataclass(frozen=True)
class StepSample:
    """One step line: the step number, its time in seconds, the rank that printed it (None when the
    line does not say), the file line, and whether its loss was NaN/inf (skipped)."""

    step: int
    seconds: float
    rank: Optional[int]
    line: int
    bad_loss: bool = False


@dataclass
class RunLog:
    """A training log as parsed: framework, step samples, the settings it states (layout, batch,
    model shape, switches; names in parplan's vocabulary) with the line each came from, and notes."""

    path: Path
    framework: str
    steps: list[StepSample] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    setting_lines: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def put(self, key: str, value, line: int) -> None:
        """Record a setting and the line it was read from (the first time only)."""
        if key not in self.settings and value is not None:
            self.settings[key] = value
            self.setting_lines[key] = line

    def where(self, key: Optional[str] = None) -> str:
        """'path:line' of a setting (or the path)."""
        line = self.setting_lines.get(key) if key else None
        return f"{visible(self.path)}:{line}" if line else str(visible(self.path))


@dataclass(frozen=True)
class Summary:
    """The step time a run is fitted on: median of the kept steps, and what was dropped."""

    step_s: float
    kept: int
    warmup: int
    bad_loss: int
    ranks: str
    spread: float  # median |step / median - 1| of the kept steps


def _open_log(path: Path):
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise UserError(f"cannot read {str(visible(path))!r}: {err.strerror or err}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UserError(f"{visible(path)}: not a regular file (a directory, FIFO or device); give a training log")
    if info.st_size > MAX_LOG_BYTES:
        os.close(fd)
        raise UserError(f"{visible(path)}: {info.st_size} bytes is over the {MAX_LOG_BYTES // 2**20} MiB limit for "
                        "logs; cut it (e.g. grep the step lines and the argument dump)")
    return os.fdopen(fd, "rb")


def log_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a log, streamed: colours stripped, at most MAX_LOG_BYTES read."""
    total = 0
    with _open_log(path) as fh:
        for number, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES), b""), start=1):
            total += len(raw)
            if total > MAX_LOG_BYTES:
                raise UserError(f"{visible(path)}:{number}: the log grew past {MAX_LOG_BYTES // 2**20} MiB while read")
            if b"\0" in raw:
                raise UserError(f"{visible(path)}:{number}: a NUL byte: not a text log (binary?)")
            yield number, ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip("\r\n")


def split_rank(line: str) -> tuple[Optional[int], str]:
    """(rank, rest) of a line a launcher prefixed with its rank (a pdsh host name before it dropped); (None, line)
    otherwise."""
    host = HOST_PREFIX.match(line)
    line = line[host.end():] if host else line
    m = RANK_PREFIX.match(line)
    if not m:
        return None, line
    return int(m.group(1) or m.group(2) or m.group(3)), line[m.end():]


def number(text: str) -> float:
    """A logged number: thousands separators allowed, NaN and inf kept (float('nan'))."""
    return float(text.replace(",", ""))


def finite(value: float) -> bool:
    return math.isfinite(value)


def need_steps(log: RunLog) -> None:
    """A UserError when the log has no usable step line (empty, truncated, only NaN lines)."""
    if not log.steps:
        raise UserError(f"{visible(log.path)}: no {log.framework} step line with a time; the log is empty or "
                        "truncated before the first logged step")


def warmup_count(samples: list[StepSample]) -> int:
    """How many leading step lines are warm-up (at least one stays)."""
    by_step = sum(1 for s in samples if s.step <= WARMUP_STEPS)
    return min(max(by_step, math.ceil(WARMUP_FRACTION * len(samples))), len(samples) - 1)


def fold_ranks(samples: list[StepSample]) -> tuple[list[StepSample], str]:
    """One sample per step: the slowest rank's when several ranks (or unlabelled copies) print it."""
    ranks = sorted({s.rank for s in samples if s.rank is not None})
    per_step: dict[int, StepSample] = {}
    for s in samples:
        old = per_step.get(s.step)
        if old is None or s.seconds > old.seconds:
            per_step[s.step] = s
    folded = sorted(per_step.values(), key=lambda s: s.step)
    if len(folded) == len(samples):
        return folded, f"rank {ranks[0]}" if len(ranks) == 1 else "one line per step"
    shown = ", ".join(map(str, ranks[:8])) + (" ..." if len(ranks) > 8 else "")
    who = f"ranks {shown}" if ranks else "repeated step lines (ranks not labelled)"
    return folded, f"{who}: the slowest per step (max)"


def summarize(log: RunLog) -> Summary:
    """Median step time after warm-up, NaN/inf-loss lines and rank copies are set aside."""
    need_steps(log)
    good = [s for s in log.steps if not s.bad_loss]
    bad = len(log.steps) - len(good)
    if not good:
        first = log.steps[0].line
        raise UserError(f"{visible(log.path)}:{first}: every step line has a NaN or inf loss; nothing to fit on")
    folded, ranks = fold_ranks(good)
    if len(folded) < 2:
        raise UserError(f"{visible(log.path)}:{folded[0].line}: only one logged step (step {folded[0].step}), "
                        "which is warm-up; the log is truncated or too short (log at least 2 steps)")
    skip = warmup_count(folded)
    kept = [s.seconds for s in folded[skip:]]
    median = statistics.median(kept)
    spread = statistics.median(abs(x / median - 1) for x in kept)
    return Summary(median, len(kept), skip, bad, ranks, spread)
