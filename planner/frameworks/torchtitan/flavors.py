"""torchtitan's `[model] name / flavor` -> the parplan preset with the same shapes, so that `parplan check` of a
torchtitan TOML needs no --model for the models torchtitan ships.

Flavors (torchtitan 0.2-0.3 torchtitan/models/*/__init__.py; each preset's sources cite its numbers):
llama3 8B / 70B / 405B (Llama 3.1's 405B), llama4 17bx16e (Scout) / 17bx128e (Maverick), qwen3 32B,
deepseek_v3 16B (torchtitan's own 16B) / 671B. Any other name or flavor still needs --model.
"""

from __future__ import annotations

from typing import Optional

FLAVORS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b", ("llama3", "405B"): "llama3.1-405b",
           ("llama4", "17bx16e"): "llama4-scout", ("llama4", "17bx128e"): "llama4-maverick",
           ("qwen3", "32B"): "qwen3-32b", ("deepseek_v3", "16B"): "deepseek-v3-16b",
           ("deepseek_v3", "671B"): "deepseek-v3"}


def preset_for(cfg: dict) -> Optional[tuple[str, str]]:
    """(preset name, how it was found) for the config's [model] name and flavor, or None."""
    model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    name, flavor = model.get("name"), model.get("flavor")
    preset = FLAVORS.get((name, flavor)) if isinstance(name, str) and isinstance(flavor, str) else None
    if preset is None:
        return None
    return preset, f"model {preset}: the preset of torchtitan's [model] name {name!r} flavor {flavor!r} (--model overrides)"
