"""Training logs read back for `parplan calibrate`: one reader per framework, each following the
framework's own logging code (named in its module docstring), all streaming the file through the
guarded line reader of `common` (regular files, 256 MiB, lines capped).

- `megatron`: Megatron-LM / NeMo on Megatron-LM (`training_log` iteration lines, the argument dump);
- `torchtitan`: torchtitan's MetricsProcessor step lines and the trainer's batch line;
- `deepspeed`: DeepSpeed's ThroughputTimer and wall_clock_breakdown timer lines, the engine's config dump.

`read_log(path)` picks the reader by the lines it finds and returns a `RunLog`; `summarize` skips the
warm-up steps, folds ranks and takes the median step time.

May import: costmodels, hardware_profiles, planner.errors, planner.safetext (as planner.files).
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import UserError
from planner.frameworks.deepspeed import log as deepspeed
from planner.frameworks.megatron import log as megatron
from planner.frameworks.torchtitan import log as torchtitan
from planner.files.logs.common import RunLog, StepSample, Summary, log_lines, split_rank, summarize

READERS = {"megatron": megatron, "torchtitan": torchtitan, "deepspeed": deepspeed}

__all__ = ["RunLog", "StepSample", "Summary", "READERS", "detect", "read_log", "summarize"]


def detect(path: Path) -> str:
    """The framework whose step lines appear first in the log; Megatron's wherever they appear: Megatron-DeepSpeed
    prints DeepSpeed's ThroughputTimer line inside engine.step(), before its own iteration line, and was read as a
    DeepSpeed run (its argument dump, with tp, sequence and world size, unread)."""
    first = None
    for _, line in log_lines(path):
        if READERS["megatron"].is_step_line(split_rank(line)[1]):
            return "megatron"
        if first is None:
            first = next((name for name, reader in READERS.items() if reader.is_step_line(line)), None)
    if first is not None:
        return first
    raise UserError(f"{path}: no training step line of Megatron-LM ('elapsed time per iteration (ms)'), "
                    "torchtitan ('step: N  loss: ...  tps: ...') or DeepSpeed ('CurrSamplesPerSec=' or "
                    "'time (ms) | fwd: ...') found; is it a training log, and not truncated before the first step?")


def read_log(path: Path) -> RunLog:
    """The steps and settings of one training log, by the framework it comes from."""
    return READERS[detect(path)].read(path)
