"""DeepSpeed training logs.

Reads (deepspeed 0.19.8) the logger lines "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] msg"
of deepspeed/utils/timer.py:
- `ThroughputTimer.stop`, every steps_per_print steps:
  "epoch=0/micro_step=80/global_step=10, RunningAvgSamplesPerSec=51.2, CurrSamplesPerSec=52.3,
  MemAllocated=12.5GB, MaxMemAllocated=20.1GB" (samples = the train_batch_size of one step:
  step_s = train_batch_size / CurrSamplesPerSec);
- `SynchronizedWallClockTimer.log` with wall_clock_breakdown, through print_dist ("[Rank 0] ..."):
  "time (ms) | fwd: 123.45 | bwd: 234.56 | bwd_inner: 200.00 | bwd_allreduce: 34.56 | step: 12.34"
  (the global timers of deepspeed/runtime/engine.py EngineTimers, summed over the step's
  micro-batches: step_s = fwd + bwd + step; the `*_microstep` lines are ignored);
- the PipelineEngine's own line, which never stops the ThroughputTimer (deepspeed/runtime/pipe/engine.py
  train_batch, rank 0, every steps_per_print steps): "steps: 10 loss: 2.1234 iter time (s): 1.234 samples/sec:
  207.4" (the mean step over the interval: step_s = iter time);
and deepspeed/runtime/config.py `DeepSpeedConfig.print` ("DeepSpeedEngine configuration:" then
"  train_batch_size ............. 256", one per attribute). The throughput lines win when both kinds
are present (they time the whole step).
"""

from __future__ import annotations

import re
from pathlib import Path

from planner.files.logs.common import NUMBER, RunLog, StepSample, finite, log_lines, need_steps, number, split_rank

THROUGHPUT = re.compile(r"global_step=(\d+), RunningAvgSamplesPerSec=(" + NUMBER + r"), CurrSamplesPerSec=("
                        + NUMBER + ")")
# 0.12 and later name the global timers fwd/bwd/step; 0.9 named them forward/backward/step (FORWARD_GLOBAL_TIMER)
TIMERS = re.compile(r"time \(ms\) \| (?:fwd|forward): (" + NUMBER + r") \| (?:bwd|backward): (" + NUMBER
                    + r") \|.*\| step: (" + NUMBER + ")")
PIPE = re.compile(r"\bsteps: (\d+) loss: (" + NUMBER + r") .*?iter time \(s\): (" + NUMBER + r") samples/sec:")
PROGRESS = re.compile(r"\bstep=(\d+), skipped=(\d+)")
RANK = re.compile(r"\[Rank (\d+)\]")
CONFIG_LINE = re.compile(r"\]\s{3}(\w+) \.* ?(.*)$")
CONFIG_KEYS = {"train_batch_size": "global_batch", "train_micro_batch_size_per_gpu": "mbs",
               "gradient_accumulation_steps": "grad_accum", "zero_optimization_stage": "zero",
               "fp16_enabled": "fp16", "bfloat16_enabled": "bf16", "sequence_parallel_size": "sp_size"}
ZERO_NAMES = {"disabled": 0, "optimizer_states": 1, "gradients": 2, "weights": 3}


def is_step_line(line: str) -> bool:
    """A ThroughputTimer, PipelineEngine or global wall-clock timer line."""
    return any(r.search(line) is not None for r in (THROUGHPUT, PIPE, TIMERS))


def _config_value(raw: str):
    raw = raw.strip()
    if raw in ("True", "False"):
        return raw == "True"
    tail = raw.split(".")[-1]  # ZeroStageEnum.weights
    if tail in ZERO_NAMES:
        return ZERO_NAMES[tail]
    try:
        return int(raw)
    except ValueError:
        return raw


def _rank(line: str):
    prefix, text = split_rank(line)
    m = RANK.search(text)
    return (int(m.group(1)) if m else prefix), text


def read(path: Path) -> RunLog:
    """Throughput (samples/s, turned into seconds by `to_seconds`) and timer lines, and the config dump."""
    log, timers, pipe, progress_step = RunLog(Path(path), "deepspeed"), [], [], 0
    for n, line in log_lines(path):
        rank, text = _rank(line)
        if (m := THROUGHPUT.search(text)):
            rate = number(m.group(3))
            log.steps.append(StepSample(int(m.group(1)), rate, rank, n, not finite(rate) or rate <= 0))
        elif (q := PIPE.search(text)):
            secs, loss = number(q.group(3)), number(q.group(2))
            pipe.append(StepSample(int(q.group(1)), secs, rank, n, not finite(secs) or not finite(loss)))
        elif (t := TIMERS.search(text)):
            ms = sum(number(t.group(i)) for i in (1, 2, 3))
            progress_step += 1
            timers.append(StepSample(progress_step, ms / 1e3, rank, n, not finite(ms)))
        elif (p := PROGRESS.search(text)):
            progress_step = int(p.group(1)) - 1
        elif (c := CONFIG_LINE.search(text)) and c.group(1) in CONFIG_KEYS:
            log.put(CONFIG_KEYS[c.group(1)], _config_value(c.group(2)), n)
    if log.steps:
        log.notes.append("step times from ThroughputTimer samples/s (train_batch_size / CurrSamplesPerSec)")
    elif pipe:
        log.steps, log.settings["timer_seconds"] = pipe, True
        log.notes.append("step times from the PipelineEngine's lines (iter time, the mean over each interval)")
    elif timers:
        log.steps, log.settings["timer_seconds"] = timers, True
        log.notes.append("step times from wall_clock_breakdown timers (fwd + bwd + step)")
    need_steps(log)
    return log


def to_seconds(log: RunLog, global_batch: int) -> None:
    """Samples/s per step into seconds (timer lines are already seconds)."""
    if log.settings.get("timer_seconds"):
        return
    log.steps = [StepSample(s.step, global_batch / s.seconds if s.seconds > 0 else float("inf"), s.rank, s.line,
                            s.bad_loss) for s in log.steps]
