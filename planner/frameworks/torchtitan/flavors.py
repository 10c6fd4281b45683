"""torchtitan's `[model] name / flavor` (0.2 TOML) or `--module / --config` (0.3 launch line) -> the parplan preset
with the same shapes, so that `parplan check` needs no --model for the models torchtitan ships.

Flavors (torchtitan 0.2.2 and 0.3.0 torchtitan/models/*/__init__.py; each preset's sources cite its numbers):
llama3 8B / 70B / 405B (Llama 3.1's 405B), llama4 17bx16e (Scout) / 17bx128e (Maverick), qwen3 32B and 30B-A3B
(48 layers, dim 2048, 32 heads, 4 KV heads, head_dim 128, 128 experts of 768, top-8, vocab 151936: the
qwen3-30b-a3b preset) and 235B-A22B (qwen3-235b-a22b; 0.3.0 ships its flavor but no config function),
deepseek_v3 16B (torchtitan's own 16B) / 671B, gpt_oss 120b (36 layers, dim 2880, 64 heads,
8 KV heads, head_dim 64, 128 experts top-4, vocab 201088: gpt-oss-120b). Any other name or flavor needs --model.
0.3 configs: torchtitan 0.3.0 models/<module>/config_registry.py, each function's model_registry(flavor) call
(variants such as llama3_8b_mxfp8 or deepseek_v3_16b_hybridep keep their base's flavor).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.errors import UserError

FLAVORS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b", ("llama3", "405B"): "llama3.1-405b",
           ("llama4", "17bx16e"): "llama4-scout", ("llama4", "17bx128e"): "llama4-maverick",
           ("qwen3", "32B"): "qwen3-32b", ("qwen3", "30B-A3B"): "qwen3-30b-a3b", ("qwen3", "235B-A22B"): "qwen3-235b-a22b",
           ("deepseek_v3", "16B"): "deepseek-v3-16b", ("deepseek_v3", "671B"): "deepseek-v3",
           ("gpt_oss", "120b"): "gpt-oss-120b"}
# torchtitan 0.3.0 config_registry function -> the flavor it builds (only those FLAVORS knows)
CONFIGS_03 = {"llama3_8b": "8B", "llama3_8b_mxfp8": "8B", "llama3_8b_first_85_pct_layers_nvfp4": "8B",
              "llama3_70b": "70B", "llama3_405b": "405B", "qwen3_30b_a3b": "30B-A3B", "qwen3_32b": "32B",
              "deepseek_v3_16b": "16B", "deepseek_v3_16b_hybridep": "16B", "deepseek_v3_16b_minimal_async_ep": "16B",
              "deepseek_v3_671b": "671B", "deepseek_v3_671b_float8": "671B", "gpt_oss_120b": "120b"}
NEED = "(a preset such as llama3-8b, a spec file or a Hugging Face config.json)"


def launch_model(module: str, config: str) -> dict:
    """The [model] table a 0.3 launch line stands for: name = the module, flavor when the config is known,
    and the config function's name (for the message when no preset matches)."""
    table = {"name": module, "config": config}
    if config in CONFIGS_03:
        table["flavor"] = CONFIGS_03[config]
    return table


def preset_for(cfg: dict) -> Optional[tuple[str, str]]:
    """(preset name, how it was found) for the config's [model] name and flavor, or None."""
    model = _model(cfg)
    name, flavor = model.get("name"), model.get("flavor")
    preset = FLAVORS.get((name, flavor)) if isinstance(name, str) and isinstance(flavor, str) else None
    if preset is None:
        return None
    if isinstance(model.get("config"), str):
        return preset, (f"model {preset}: the preset of torchtitan 0.3's --module {name} --config {model['config']} "
                        f"(flavor {flavor!r}; --model overrides)")
    return preset, f"model {preset}: the preset of torchtitan's [model] name {name!r} flavor {flavor!r} (--model overrides)"


def model_for(cfg: dict, model, path: Path, notes: list):
    """--model when given, else the preset the config names (said in `notes`); else a UserError naming what the
    config says of its model."""
    if model:
        return model
    found = preset_for(cfg)
    if found is not None:
        notes.append(found[1])
        return found[0]
    raise UserError(f"{path}: --model is required for a torchtitan config: {_named(cfg)} {NEED}")


def _model(cfg: dict) -> dict:
    return cfg.get("model") if isinstance(cfg.get("model"), dict) else {}


def _named(cfg: dict) -> str:
    """What the config says of its model, for the --model message."""
    model = _model(cfg)
    name, flavor, config = (str(model.get(k))[:60] for k in ("name", "flavor", "config"))
    if model.get("config") is not None:
        return f"--module {name} --config {config} is not a model parplan has as a preset; give --model"
    if model.get("name") is not None or model.get("flavor") is not None:
        return f"[model] name {name!r} flavor {flavor!r} is not a model parplan has as a preset; give --model"
    return "it does not describe the model; give --model"
