"""torchtitan training logs.

Reads what torchtitan/components/metrics.py `MetricsProcessor.log` prints every --metrics.log_freq
steps (torchtitan 0.3.0; colours from torchtitan.tools.utils.Color, stripped), through the logger
format "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s":

    step: 10  loss:  7.12345  grad_norm:  1.2345  memory: 41.23GiB(52.10%)  tps: 6,012  tflops: 350.12  mfu: 35.40%

(`tps` = tokens per second per device, averaged over the interval: step_s = global batch x sequence
/ (tps x GPUs); older versions print no grad_norm), and torchtitan/trainer.py's start-up lines
"Trainer is initialized with local batch size 8, global batch size 64, gradient accumulation steps 1,
sequence length 8192, ..." and "Model llama3 8B size: 8,030,261,248 total parameters".
`validate step:` lines (validation) are not training steps.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from planner.files.logs.common import NUMBER, RunLog, StepSample, finite, log_lines, need_steps, number, split_rank

STEP = re.compile(r"(?<!validate )\bstep:\s*(\d+)\s+loss:\s*(" + NUMBER + r")\s+(?:grad_norm:\s*(" + NUMBER
                  + r")\s+)?memory:\s*([\d.]+)GiB\(([\d.]+)%\)\s+tps:\s*([\d,]+)\s+tflops:\s*([\d,.]+)")
BATCH = re.compile(r"local batch size (\d+), global batch size (\d+),(?: gradient accumulation steps (\d+),)? "
                   r"sequence length (\d+)")
PARAMS = re.compile(r"Model (\S+) (\S+) size: ([\d,]+) total parameters")


def is_step_line(line: str) -> bool:
    """A MetricsProcessor training step line."""
    return STEP.search(line) is not None


def _sample(line: str, n: int) -> Optional[tuple[StepSample, float]]:
    """(sample with tps in place of seconds, tps) of a step line."""
    rank, text = split_rank(line)
    m = STEP.search(text)
    if not m:
        return None
    loss, tps = number(m.group(2)), number(m.group(6))
    bad = not finite(loss) or tps <= 0
    return StepSample(int(m.group(1)), tps, rank, n, bad), tps


def _startup(log: RunLog, text: str, n: int) -> None:
    if (b := BATCH.search(text)):
        log.put("local_batch", int(b.group(1)), n)
        log.put("global_batch", int(b.group(2)), n)
        log.put("grad_accum", int(b.group(3)) if b.group(3) else None, n)
        log.put("seq_length", int(b.group(4)), n)
    elif (p := PARAMS.search(text)):
        log.put("model_name", f"{p.group(1)} {p.group(2)}", n)
        log.put("total_params", int(p.group(3).replace(",", "")), n)


def read(path: Path) -> RunLog:
    """Step lines (tokens/s per device, turned into seconds by `to_seconds`) and start-up lines."""
    log = RunLog(Path(path), "torchtitan")
    for n, line in log_lines(path):
        got = _sample(line, n)
        if got is not None:
            log.steps.append(got[0])
            if "mfu: N/A" in line:  # printed only for a quantized (float8 / MX) run (0.3.0 metrics.py log)
                log.put("quantized", True, n)
        else:
            _startup(log, split_rank(line)[1], n)
    need_steps(log)
    return log


def to_seconds(log: RunLog, global_batch: int, seq_length: int, gpus: int) -> None:
    """Turn the per-device tokens/s of each step into the step time: tokens per step / (tps x GPUs)."""
    tokens = global_batch * seq_length
    log.steps = [StepSample(s.step, tokens / (s.seconds * gpus) if s.seconds > 0 else float("inf"), s.rank, s.line,
                            s.bad_loss) for s in log.steps]
