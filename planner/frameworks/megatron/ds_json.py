"""The DeepSpeed JSON a Megatron-DeepSpeed launch names (`--deepspeed_config FILE`): found, read, and met with
the flags that say the same things.

Where it is looked for: the script's own here-document (`cat <<EOT > $config_json`), else a file on disk,
relative to the script's folder, then to the current directory (by the name as written, then by its base
name; an absolute name is looked for by its base name only, as `source` is: nothing outside those two folders
is read). Read through planner.files.safe_read (a regular file, size-capped, strict JSON); its ZeRO stage,
precision, micro batch, gradient accumulation and offload are read by the DeepSpeed JSON reader's own functions
(planner.frameworks.deepspeed.config_json: ds_zero, ds_precision, ds_batch, ds_offload).

When the flags and the JSON disagree, the JSON wins: DeepSpeed's engine takes the ZeRO stage, precision and
batch from the config it is given (deepspeed 0.19.8 runtime/config.py DeepSpeedConfig, runtime/engine.py),
and Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, not on PyPI) could not be read here to say otherwise.
Each disagreement is one warning naming both values and saying so.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Callable, Optional

from planner.errors import UserError
from planner.files.safe_read import parse_json, read_text
from planner.files.shell_builtins import written_file
from planner.frameworks.deepspeed import config_json as dsc

FLAGS = ("--deepspeed_config", "--deepspeed-config")
BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
WHY = "the JSON's is priced: DeepSpeed's engine reads it; Megatron-DeepSpeed's source was not at hand to check"


def name(a) -> Optional[str]:
    return next((a.str(flag) for flag in FLAGS if a.str(flag)), None)


def candidates(given: str, script_dir: Optional[str]) -> list[Path]:
    """Where a config named `given` is looked for, in order (see the module docstring)."""
    base = posixpath.basename(given)
    names = ([given] if not posixpath.isabs(given) else []) + ([base] if base != given else [])
    folders = ([Path(script_dir)] if script_dir else []) + [Path.cwd()]
    return [folder / n for folder in folders for n in names if n and "$" not in n and "`" not in n]


def find(a) -> tuple[Optional[dict], Optional[str]]:
    """(the config, where it was read: None for the script's here-document) or (None, None) when absent.
    Cached on `a` (the flags reader and the dialect both ask)."""
    if not hasattr(a, "_ds_json"):
        a._ds_json = _find(a)
    return a._ds_json


def _find(a) -> tuple[Optional[dict], Optional[str]]:
    given = name(a)
    if not given:
        return None, None
    body = written_file(a.shell, given) if a.shell else None
    if body is not None:
        return _object(body, f"--deepspeed_config {given[:60]}: its here-document"), None
    for path in candidates(given, a.shell.script_dir if a.shell else None):
        if path.is_file():
            return _object(read_text(path), str(path)), str(path)
    return None, None


def _object(text: str, where: str) -> dict:
    cfg = parse_json(text, where)
    if not isinstance(cfg, dict):
        raise UserError(f"{where}: not a JSON object (a DeepSpeed config is one)")
    return cfg


def precision(a) -> Optional[str]:
    """bf16 or fp16 when the config enables one; None otherwise (no config, or neither section on)."""
    cfg, where = find(a)
    if cfg is None:
        return None
    found = dsc.ds_precision(cfg, Path(where or name(a)))
    return found if found in ("bf16", "fp16") else None


def flag_precision(a) -> Optional[str]:
    return "bf16" if a.has("--bf16") else "fp16" if a.has("--fp16") else None


def merge(a, layout: dict, train: dict, warn: Callable[[str], None], world: Optional[int]) -> None:
    """The config's ZeRO stage, precision, batch and offload over what the flags gave (layout, train), with one
    warning per disagreement. The stage is set by the caller's rule (BF16_Optimizer); here only read."""
    cfg, where = find(a)
    if cfg is None:
        return
    path = Path(where or name(a))
    if where:
        warn(f"--deepspeed_config {name(a)[:60]}: read {where} (ZeRO stage, precision, batch and offload)")
    mine = precision(a)
    if mine and flag_precision(a) and mine != flag_precision(a):
        warn(f"--{flag_precision(a)} and {path.name} {mine}.enabled disagree: {mine} is priced ({WHY})")
    if mine:
        train["precision"] = mine
    _batch(a, cfg, path, layout, train, warn, world)
    train.update(dsc.ds_offload(cfg, path, stage(a)))


def stage(a) -> Optional[int]:
    """zero_optimization.stage of the config (None when it gives none), warning-free."""
    cfg, where = find(a)
    if cfg is None or "stage" not in (cfg.get("zero_optimization") or {}):
        return None
    return dsc.ds_zero(cfg, Path(where or name(a)), 1)


def stage_conflict(a, chosen: int) -> Optional[str]:
    """One line when --zero-stage and the config's stage disagree (the config's is `chosen`)."""
    if not a.has("--zero-stage") or stage(a) is None or a.int("--zero-stage", 0, minimum=0) == stage(a):
        return None
    return (f"--zero-stage {a.int('--zero-stage', 0, minimum=0)} and {posixpath.basename(name(a))} "
            f"zero_optimization.stage={chosen} disagree: {chosen} is priced ({WHY})")


def _batch(a, cfg: dict, path: Path, layout: dict, train: dict, warn, world: Optional[int]) -> None:
    """micro, gradient accumulation and global batch from any two of the config's batch keys (ds_batch's rule,
    on the data-parallel size the layout gives `world`), each compared with its flag."""
    if not any(cfg.get(key) is not None for key in BATCH_KEYS):
        return
    dp = world // (layout.get("tp", 1) * layout.get("cp", 1) * layout.get("pp", 1)) if world else None
    if not dp:
        micro, total = cfg.get("train_micro_batch_size_per_gpu"), cfg.get("train_batch_size")
        gas = None
    else:
        micro, gas, total = dsc.ds_batch(cfg, path, dp)
    for flag, value, key in (("--micro-batch-size", micro, "train_micro_batch_size_per_gpu"),
                             ("--global-batch-size", total, "train_batch_size")):
        given = a.int(flag)
        if isinstance(value, int) and given is not None and given != value:
            warn(f"{flag} {given} and {path.name} {key}={value} disagree: {value} is priced ({WHY})")
    if isinstance(micro, int):
        layout["mbs"] = micro
    if isinstance(total, int):
        train["global_batch_size"] = total
    if gas:
        layout["num_microbatches"] = gas
