"""Old DeepSpeed spellings read as what replaced them: the deprecated ZeRO offload switches and Apex AMP.

Sources: DeepSpeed 0.19.8 deepspeed/runtime/zero/config.py DeepSpeedZeroConfig: `cpu_offload` (deprecated,
new_param offload_optimizer, new_param_fn -> DeepSpeedZeroOffloadOptimizerConfig(device=cpu) when true),
`cpu_offload_param` (new_param offload_param, device cpu when true), `cpu_offload_use_pin_memory` (deprecated,
set_new_param=False: a warning, nothing set); runtime/config_utils.py _process_deprecated_field asserts that a
deprecated key and its replacement are not both given. Apex AMP: DeepSpeed 0.9.5 runtime/config.py
get_amp_enabled (`amp.enabled`, default false) and runtime/engine.py _do_optimizer_sanity_check ("Amp and ZeRO
are not currently compatible", "Cannot enable both amp with (legacy) fp16 or bfloat16 mode"); 0.19.8 removed
the section (runtime/config.py _REMOVED_TOP_LEVEL_CONFIG_KEYS, named by planner.frameworks.deepspeed.ds_keys).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files.config_values import short, whole

LEGACY_OFFLOAD = {"cpu_offload": ("offload_optimizer", 1), "cpu_offload_param": ("offload_param", 3)}  # new, stage
PIN = "cpu_offload_use_pin_memory"


def _flag(section: dict, key: str, name: str, path: Path) -> Optional[bool]:
    """section[key] as a JSON boolean; None when absent, null or "auto" (DeepSpeedConfigModel drops "auto")."""
    value = section.get(key)
    if value is None or value == "auto":
        return None
    if not isinstance(value, bool):
        raise UserError(f"{path}: {name}={short(value)} must be true or false")
    return value


def _one_offload(zero: dict, old: str, path: Path) -> list[str]:
    """zero_optimization.<old> replaced in place by its new key; the note saying so (none when false)."""
    new, stage_needed = LEGACY_OFFLOAD[old]
    on = _flag(zero, old, f"zero_optimization.{old}", path)
    if new in zero and zero[old] != "auto":
        raise UserError(f"{path}: zero_optimization.{old} and zero_optimization.{new} are both given: DeepSpeed "
                        f"refuses a deprecated key beside its replacement (runtime/config_utils.py "
                        f"_process_deprecated_field); keep {new}")
    zero.pop(old)
    stage = zero.get("stage", 0)
    if on and whole(stage) and stage < stage_needed:
        raise UserError(f"{path}: zero_optimization.{old}=true (DeepSpeed's old name of {new}.device \"cpu\") needs "
                        f"zero_optimization.stage {'3' if stage_needed == 3 else '>= 1'} (got {stage})")
    if not on:
        return []
    zero[new] = {"device": "cpu"}
    return [f"zero_optimization.{old}=true read as {new}.device=\"cpu\", its replacement (deprecated key mapped by "
            "DeepSpeedZeroConfig, runtime/zero/config.py)"]


def offload(cfg: dict, path: Path) -> list[str]:
    """Rewrite cfg's deprecated zero_optimization offload switches as offload_optimizer / offload_param
    (cfg is the caller's copy); one note per key read so."""
    zero = cfg.get("zero_optimization")
    if not isinstance(zero, dict):
        return []
    notes = []
    for old in LEGACY_OFFLOAD:
        if old in zero:
            notes += _one_offload(zero, old, path)
    if PIN in zero:
        _flag(zero, PIN, f"zero_optimization.{PIN}", path)
        zero.pop(PIN)
        notes.append(f"zero_optimization.{PIN}: deprecated, DeepSpeed only warns (set_new_param=False); pinned host "
                     "memory is offload_*.pin_memory, default true")
    return notes


def _enabled(cfg: dict, key: str) -> bool:
    section = cfg.get(key)
    return isinstance(section, dict) and section.get("enabled") is True


def amp_on(cfg: dict, path: Path) -> bool:
    """amp.enabled, strict (a section, a JSON boolean); False without the section."""
    section = cfg.get("amp")
    if section is None:
        return False
    if not isinstance(section, dict):
        raise UserError(f"{path}: amp={short(section)} must be a section (mapping)")
    return bool(_flag(section, "enabled", "amp.enabled", path))


def amp(cfg: dict, path: Path) -> list[str]:
    """Apex AMP (amp.enabled true) read as fp16 mixed precision: cfg's amp section becomes fp16.enabled true.
    Refused, as DeepSpeed refused it, beside ZeRO or an enabled bf16/fp16 section."""
    if not amp_on(cfg, path):
        return []
    other = next((k for k in ("bf16", "fp16") if _enabled(cfg, k)), None)
    if other:
        raise UserError(f"{path}: amp.enabled=true with {other}.enabled=true: DeepSpeed refuses both (\"Cannot "
                        "enable both amp with (legacy) fp16 or bfloat16 mode\", 0.9.5 runtime/engine.py)")
    zero = cfg.get("zero_optimization")
    stage = zero.get("stage", 0) if isinstance(zero, dict) else 0
    if whole(stage) and stage > 0:
        raise UserError(f"{path}: amp.enabled=true with zero_optimization.stage={stage}: DeepSpeed refuses it (\"Amp "
                        "and ZeRO are not currently compatible, please use (legacy) fp16 mode\", 0.9.5 runtime/"
                        "engine.py); use fp16.enabled")
    cfg.pop("amp")
    fp16 = cfg.get("fp16")
    cfg["fp16"] = {**(fp16 if isinstance(fp16, dict) else {}), "enabled": True}
    return ["amp.enabled=true (NVIDIA Apex AMP) priced as fp16 mixed precision: 16 bytes per parameter with Adam "
            "and fp16 activations, as opt_level O1/O2 keep them"]
