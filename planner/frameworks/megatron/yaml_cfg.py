"""`--yaml-cfg FILE`: Megatron's experimental YAML arguments, read in place of the launch's flags.

Source: megatron-core 0.19.2 megatron/training/arguments.py parse_args (lines 135-139:
`args = load_yaml(args.yaml_cfg)`, so every other command-line argument is dropped) and
megatron/training/yaml_arguments.py: load_yaml (the YAML, opened relative to the process's working directory,
becomes the whole namespace, its `language_model:` and `model_parallel:` mappings nested), validate_yaml
(--num-layers from encoder_num_layers when unset; the virtual pipeline size only from
num_layers_per_virtual_pipeline_stage; ffn_hidden_size 4h, or int(8h/3 / 64) * 64 with activation_func swiglu, as
planner.frameworks.megatron.flags.ffn_width reads --swiglu), core_transformer_config_from_yaml (the layers'
TransformerConfig from language_model and model_parallel: activation_func swiglu, squaredrelu or gelu).

The YAML's keys are argparse destinations (or TransformerConfig fields), read back as the flags planner.frameworks.
megatron.flags reads: a key whose dashed spelling is a Megatron flag becomes it (true switches given, false ones
left out, null values left to the default), and the TransformerConfig names that differ map by RENAMED. The file is
looked for beside the launch script, then in the working directory; not found is exit 2 naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.files.safe_read import first_file, parse_yaml, read_text
from planner.frameworks.megatron import known_flags, mcore_flags
from planner.frameworks.megatron.names import SWITCHES

SECTIONS = ("language_model", "model_parallel")
SWITCH_FLAGS = SWITCHES | mcore_flags.SWITCHES
# validate_yaml sets the virtual pipeline size from num_layers_per_virtual_pipeline_stage; the layers follow
# activation_func and num_query_groups (core_transformer_config_from_yaml), not these
IGNORED = {"virtual_pipeline_model_parallel_size", "swiglu", "group_query_attention", "gated_linear_unit"}
ACTIVATIONS = {"swiglu": [("--swiglu", None)], "squaredrelu": [("--squared-relu", None)], "gelu": []}


def _activation(value) -> list:
    if value not in ACTIVATIONS:
        raise UserError(f"language_model.activation_func {str(value)[:40]!r}: Megatron's YAML path accepts "
                        f"{', '.join(ACTIVATIONS)} (yaml_arguments.py core_transformer_config_from_yaml)")
    return ACTIVATIONS[value]


RENAMED = {  # TransformerConfig field -> the flags that set it
    "num_moe_experts": lambda v: [("--num-experts", str(v))],
    "fp8": lambda v: [("--fp8-format", str(v))],
    "num_query_groups": lambda v: [("--group-query-attention", None), ("--num-query-groups", str(v))],
    "add_bias_linear": lambda v: [] if v else [("--disable-bias-linear", None)],
    "activation_func": _activation,
    "moe_layer_freq": lambda v: [("--moe-layer-freq", f"[{','.join(map(str, v))}]" if isinstance(v, list) else str(v))],
}


def apply(a, script: Optional[Path]) -> None:
    """Replace `a`'s flags by those of the YAML its --yaml-cfg names (module docstring), saying so; nothing without
    --yaml-cfg. `script`: the launch script's path (None: text only, the working directory alone is searched)."""
    if not a.has("--yaml-cfg"):
        return
    name = a.str("--yaml-cfg")
    if not name:
        raise UserError("--yaml-cfg is given without a file")
    found = _find(name, script)
    data = parse_yaml(read_text(found), str(found))
    if not isinstance(data, dict):
        raise UserError(f"--yaml-cfg {name}: {found} is not a YAML mapping of Megatron arguments")
    dropped = sorted({flag for flag, _ in a.pairs if flag != "--yaml-cfg"})
    a.pairs, a.yaml = pairs(data, str(found)), str(found)
    if a.shell is not None:
        a.shell.warn(f"--yaml-cfg {name}: the run's arguments are read from {found}, as Megatron loads them "
                     "(megatron/training/yaml_arguments.py load_yaml)" +
                     (f"; it ignores the command line's other flags ({', '.join(dropped[:6])}"
                      f"{', ...' if len(dropped) > 6 else ''})" if dropped else ""))


def _find(name: str, script: Optional[Path]) -> Path:
    """The YAML beside the script, else in the working directory (Megatron opens it from the latter)."""
    given = Path(name)
    places = [given] if given.is_absolute() else (
        ([Path(script).parent / given] if script is not None else []) + [Path.cwd() / given])
    found = first_file(places, f"--yaml-cfg {name}")
    if found is None:
        raise UserError(f"--yaml-cfg {name}: not found (looked in {', '.join(str(p.parent) for p in places)}); "
                        "Megatron takes every argument from this YAML, so the run cannot be read without it")
    return found


def pairs(data: dict, where: str) -> list:
    """(flag, value) pairs of a Megatron YAML config: its top level, then language_model, then model_parallel."""
    flat = {k: v for k, v in data.items() if k not in SECTIONS}
    for section in SECTIONS:
        part = data.get(section)
        if part is not None and not isinstance(part, dict):
            raise UserError(f"{where}: {section} must be a mapping of arguments")
        flat.update(part or {})
    if flat.get("num_layers") is None and flat.get("encoder_num_layers") is not None:
        flat["num_layers"] = flat["encoder_num_layers"]  # validate_yaml
    out: list = []
    for key, value in flat.items():
        if value is None or not isinstance(key, str) or key in IGNORED:
            continue
        out.extend(RENAMED[key](value) if key in RENAMED else _flag(key, value))
    return out


def _flag(key: str, value) -> list:
    """The flag a YAML key is the destination of, when Megatron has one of that spelling."""
    flag = "--" + key.replace("_", "-")
    if flag not in known_flags.ACCEPTED:
        return []
    if isinstance(value, bool) or flag in SWITCH_FLAGS:
        return [(flag, None)] if value is True and flag in SWITCH_FLAGS else []
    if isinstance(value, (list, tuple)):
        return [(flag, " ".join(map(str, value)))]
    return [] if isinstance(value, dict) else [(flag, str(value))]
