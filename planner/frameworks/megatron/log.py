"""Megatron-LM (and NeMo running Megatron-LM's trainer) training logs.

Reads what megatron/training/training.py `training_log` prints through `print_rank_last` every
--log-interval iterations (megatron-core 0.19.2):

    [2025-01-01 12:00:00.000000] iteration      100/   10000 | consumed samples:        51200 |
    elapsed time per iteration (ms): 1234.5 | ... | global batch size:   512 | lm loss: 7.123456E+00 |
    loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |

(one line; the time is the mean over the interval) and the argument dump of
megatron/training/arguments.py `_print_args` at start-up:

    ------------------------ arguments ------------------------
      tensor_model_parallel_size ...................... 8
    -------------------- end of arguments ---------------------

Megatron-Bridge (megatron/bridge/training, 0.3.1) prints the same iteration line, and instead of the dump its
ConfigContainer.log_non_default_values summary: the fields of the model, DDP and optimizer configs that differ
from Megatron Core's dataclass defaults (`  name: repr  (Mcore default: repr)`), then the training config's
set values (`  name: repr`):

    ======================================================================
    Configuration Summary (Non-Default Values vs Megatron Core)
    ======================================================================
    [model] Non-default values (vs Mcore TransformerConfig):
      tensor_model_parallel_size: 2  (Mcore default: 1)
    ...
    [train]:
      global_batch_size: 128
    ======================================================================

What the summary leaves out is Megatron Core's default (BRIDGE_DEFAULTS: the degrees, sequence parallelism, the
overlaps, the distributed optimizer and recompute, from megatron/core/model_parallel_config.py, transformer_config.py
and the DDP and optimizer configs); the sequence length and the GPU count are not in it.

A loss is printed only when its average is >= 0 (`if avg >= 0.0`), so a NaN loss shows as a missing
loss and `number of nan iterations` > 0; an inf loss prints as INF. Such lines are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.safetext import visible
from planner.files.logs.common import NUMBER, RunLog, StepSample, finite, log_lines, need_steps, number, split_rank

ITERATION = re.compile(r"\biteration\s+(\d+)/\s*(\d+)\s*\|")
# the " |" every field ends with: a line cut off inside its number (1234.5 read as 1) is no step
ELAPSED = re.compile(r"elapsed time per iteration \(ms\):\s*(" + NUMBER + r")\s*\|")
LOSS = re.compile(r"\|\s*([\w ]*loss):\s*(" + NUMBER + r")(?=\s*\|)")
NAN_ITERS = re.compile(r"number of nan iterations:\s*(\d+)")
BATCH = re.compile(r"global batch size:\s*(\d+)")
DUMP_START = re.compile(r"-{8,} arguments -{8,}")
DUMP_END = re.compile(r"-{8,} end of arguments -{8,}")
ARG = re.compile(r"^\s{2}(\w+) \.*\s?(.*)$")

INT_ARGS = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp", "context_parallel_size": "cp",
            "expert_model_parallel_size": "ep", "expert_tensor_parallel_size": "etp", "micro_batch_size": "mbs",
            "global_batch_size": "global_batch", "seq_length": "seq_length", "num_layers": "num_layers",
            "hidden_size": "hidden_size", "num_attention_heads": "num_attention_heads", "world_size": "world_size",
            "virtual_pipeline_model_parallel_size": "vpp", "num_layers_per_virtual_pipeline_stage": "layers_per_vstage",
            "num_experts": "num_experts", "ffn_hidden_size": "ffn_hidden_size"}
BOOL_ARGS = {"sequence_parallel": "sp", "use_distributed_optimizer": "distributed_optimizer", "fp16": "fp16",
             "bf16": "bf16", "overlap_grad_reduce": "overlap_grad_reduce", "tp_comm_overlap": "tp_comm_overlap",
             "use_flash_attn": "flash_attention", "checkpoint_activations": "checkpoint_activations"}
TEXT_ARGS = {"recompute_granularity": "recompute", "attention_backend": "attention_backend", "fp8": "fp8"}
SUMMARY_START = re.compile(r"Configuration Summary \(Non-Default Values vs Megatron Core\)")
SUMMARY_RULE = re.compile(r"^={40,}\s*$")
SUMMARY_ITEM = re.compile(r"^\s{2}(\w+): (.*?)(?:\s{2}\(Mcore default: .*\))?\s*$")
BRIDGE_NAMES = {"num_moe_experts": "num_experts"}  # Megatron Core's field name -> Megatron-LM's argument
# Megatron Core's defaults of what a Bridge summary omits when unchanged (ModelParallelConfig, TransformerConfig,
# DistributedDataParallelConfig, OptimizerConfig): left unset, parplan's stack defaults would stand in for them
BRIDGE_DEFAULTS = {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "sp": False, "overlap_grad_reduce": False,
                   "tp_comm_overlap": False, "distributed_optimizer": False, "recompute": "none"}


# Megatron-Bridge's rank-0 line beside the iteration line (train_utils.py training_log, print_rank_0), which prints
# on the last rank: a log of rank 0 alone (node 0's, or torchrun --local-ranks-filter 0) has only these
STEP_TIME = re.compile(r"^\s*Step Time : (" + NUMBER + r")s GPU utilization:")


def is_step_line(line: str) -> bool:
    """A `training_log` iteration line, or Megatron-Bridge's rank-0 `Step Time :` line."""
    return ("elapsed time per iteration (ms)" in line and ITERATION.search(line) is not None) or \
        STEP_TIME.search(line) is not None


def _value(text: str):
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        return text


def _setting(log: RunLog, name: str, raw: str, line: int) -> None:
    value = _value(raw)
    if name in INT_ARGS and isinstance(value, int) and not isinstance(value, bool):
        log.put(INT_ARGS[name], value, line)
    elif name in BOOL_ARGS and isinstance(value, bool):
        log.put(BOOL_ARGS[name], value, line)
    elif name == "recompute_granularity" and value is None:  # stated: no recompute (not "not stated")
        log.put("recompute", "none", line)
    elif name in TEXT_ARGS and value is not None:
        log.put(TEXT_ARGS[name], str(value), line)


def _repr_value(text: str) -> str:
    """A value as Bridge's summary prints it (Python repr) in the argument dump's form: quotes dropped."""
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _step(line: str, number_: int) -> Optional[StepSample]:
    rank, text = split_rank(line)
    it, ms = ITERATION.search(text), ELAPSED.search(text)
    if not it or not ms:
        return None
    seconds = number(ms.group(1)) / 1e3
    losses = [number(v) for _, v in LOSS.findall(text)]
    nan = NAN_ITERS.search(text)
    bad = any(not finite(v) for v in losses) or bool(nan and int(nan.group(1)) > 0) or not finite(seconds)
    return StepSample(int(it.group(1)), seconds, rank, number_, bad)


def _ramp_up(log: RunLog, batches: list) -> None:
    """Keep the step lines at the run's global batch (the dump's, else the last line's): under
    --rampup-batch-size each line prints the batch of its step (megatron-core num_microbatches_calculator), and a
    ramp from 64 to 512 sequences was fitted as 512 at the 64-sequence step time, 8x short (a log-format pass)."""
    known = [(s, b) for s, b in zip(log.steps, batches) if b is not None]
    if not known:
        return
    target = log.settings.get("global_batch") or known[-1][1]
    log.put("global_batch", target, known[-1][0].line)
    if len({b for _, b in known}) == 1:
        return
    kept = [s for s, b in zip(log.steps, batches) if b in (None, target)]
    if not kept:
        raise UserError(f"{visible(log.path)}: every step line is at a smaller global batch than the run's {target} "
                        f"({min(b for _, b in known)}..{max(b for _, b in known)}: a batch ramp-up the log ends "
                        "inside); calibrate on a log that reaches the full batch")
    skipped = len(log.steps) - len(kept)
    log.steps[:] = kept
    log.notes.append(f"skipped: {visible(log.path)}: {skipped} step line(s) at a smaller global batch than the "
                     f"run's {target} (batch ramp-up); only lines at {target} are fitted")


def _new_run(log: RunLog, batches: list) -> int:
    """Forget what an earlier run in the same file stated and logged (a restart appended to one log, perhaps with
    another layout: its first dump's layout and every run's step lines were fitted together, a log-format pass);
    the number of step lines dropped."""
    dropped = len(log.steps)
    log.steps.clear()
    batches.clear()
    log.settings.clear()
    log.setting_lines.clear()
    return dropped


def read(path: Path) -> RunLog:
    """Iteration lines and the argument dump (or Megatron-Bridge's configuration summary) of one Megatron log."""
    log, in_dump, summary = RunLog(Path(path), "megatron"), False, None  # summary: [its line, rules seen]
    batches: list = []  # each step line's global batch (None: not printed)
    earlier = 0  # step lines of earlier runs in the same file
    rank0: list = []  # Megatron-Bridge's `Step Time :` lines, used when the log has no iteration line
    for n, line in log_lines(path):
        _, text = split_rank(line)
        if (DUMP_START.search(text) or SUMMARY_START.search(text)) and (log.steps or rank0):
            earlier += _new_run(log, batches) + len(rank0)
            rank0.clear()
            summary = None
        if DUMP_START.search(text):
            in_dump = True
        elif DUMP_END.search(text):
            in_dump = False
        elif in_dump and (m := ARG.match(text)):
            _setting(log, m.group(1), m.group(2), n)
        elif SUMMARY_START.search(text):
            summary = [n, 0]
        elif summary and summary[1] < 2 and SUMMARY_RULE.match(text):
            summary[1] += 1  # the rule under the title, then the one that ends the summary
        elif summary and summary[1] == 1 and (m := SUMMARY_ITEM.match(text)):
            _setting(log, BRIDGE_NAMES.get(m.group(1), m.group(1)), _repr_value(m.group(2)), n)
        elif (t := STEP_TIME.search(text)):
            seconds = number(t.group(1))
            rank0.append(StepSample(len(rank0) + 1, seconds, None, n, not finite(seconds)))
        elif is_step_line(text):
            sample = _step(line, n)
            if sample is not None:
                log.steps.append(sample)
                batches.append(int(b.group(1)) if (b := BATCH.search(text)) else None)
    if not log.steps and rank0:
        log.steps.extend(rank0)
        log.notes.append("step times from Megatron-Bridge's rank-0 'Step Time' lines (its iteration lines print on "
                         "the last rank, which this log does not hold); steps numbered by their order")
    _ramp_up(log, batches)
    if earlier:
        log.notes.append(f"skipped: {visible(log.path)}: {earlier} step line(s) of an earlier run in the same file "
                         "(before its last argument dump); only the last run is fitted")
    if summary:
        for key, value in BRIDGE_DEFAULTS.items():
            log.put(key, value, summary[0])
    need_steps(log)
    return log
