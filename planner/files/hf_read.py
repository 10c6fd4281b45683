"""Checked readers of Hugging Face config.json values (planner.files.hf_config and its family modules).

Every reader names the key (as config.json spells it, `label` for a nested one such as ffn_config.moe_top_k)
and the value it refused; none echoes more than 60 characters of it.
"""

from __future__ import annotations

import math
from typing import Any, Optional


def short(value: Any) -> str:
    """repr(value), cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_int(config: dict, key: str, default: Any = ..., label: Optional[str] = None) -> Any:
    """config[key] as an int; ValueError naming the key when missing (and no default) or not an int."""
    value = config.get(key)
    name = label or key
    if value is None:
        if default is ...:
            raise ValueError(f"config.json is missing required key {name!r}")
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"config.json key {name!r} must be an integer, got {short(value)}")
    return value


def read_bool(config: dict, key: str, default: bool = False, label: Optional[str] = None) -> bool:
    """config[key] as a JSON boolean (absent or null: `default`); a string such as "false" is refused
    (bool("false") would be True)."""
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"config.json key {(label or key)!r} must be true or false, got {short(value)}")
    return value


def read_prob(config: dict, key: str, label: Optional[str] = None) -> bool:
    """config[key] > 0 for a dropout probability (absent or null: false); it must be a number from 0 to 1."""
    value = config.get(key)
    if value is None:
        return False
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 <= value <= 1):
        raise ValueError(f"config.json key {(label or key)!r} must be a number from 0 to 1, got {short(value)}")
    return value > 0


def read_dict(config: dict, key: str) -> dict:
    """config[key] as a JSON object (absent or null: {}); anything else refused naming the key."""
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"config.json key {key!r} must be an object, got {short(value)}")
    return value


def transformers_major(config: dict) -> Optional[int]:
    """The major version of the transformers that wrote the file (its `transformers_version`, e.g. "4.51.0" -> 4);
    None when absent or unreadable."""
    text = config.get("transformers_version")
    head = text.split(".", 1)[0] if isinstance(text, str) else ""
    return int(head) if head.isascii() and head.isdigit() and len(head) < 4 else None


# model_type -> (n_group, topk_group) when the file leaves them out; DeepSeek-V2 restricts only under this topk_method
ROUTER_GROUP_DEFAULTS = {"deepseek_v2": (1, 1), "deepseek_v3": (8, 4), "glm4_moe": (1, 1)}  # kimi_k2: as deepseek_v3
V2_GROUPED = "group_limited_greedy"


def router_groups(config: dict) -> dict:
    """Group-limited routing (ModelSpec.moe_router_num_groups, moe_router_group_topk) from n_group and topk_group, as
    transformers 5.24 routes: DeepseekV2MoEGate limits the groups only with topk_method "group_limited_greedy" (its
    default is "greedy", every expert); DeepseekV3TopkRouter always does (topk_method unused; Kimi K2 is read as
    it), defaults 8 and 4; Glm4MoeTopkRouter always does, defaults 1 and 1."""
    kind = config.get("model_type")
    if kind not in ROUTER_GROUP_DEFAULTS or (kind == "deepseek_v2" and config.get("topk_method", "greedy") != V2_GROUPED):
        return {}
    groups_default, chosen_default = ROUTER_GROUP_DEFAULTS[kind]
    groups = read_int(config, "n_group", groups_default)
    return {"moe_router_num_groups": groups, "moe_router_group_topk": read_int(config, "topk_group", chosen_default)}
