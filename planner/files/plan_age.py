"""What a plan file saved by an older parplan leaves out: a spec field added since reads as its default, which
may not be what today's preset of the same name says (an MI300X plan saved before `scale_up_topology` prices
the node as a switch; one saved before `curve_gen` prices a B200 with H100 fractions; a DeepSeek-V3 model saved
before `moe_router_num_groups` routes every token over all nodes). Each such field is said,
never silently replaced: the plan keeps the numbers it was saved with unless the user re-plans."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import hardware_profiles as hp
from costmodels.hardware_spec import GPUProfile
from planner.files.said import note


def older_cluster_notes(raw: Any, where: str) -> None:
    """A note per field of the cluster (and its GPU profile and efficiencies) that a plan file's inline cluster
    lacks while today's preset of its name sets it to something other than the default."""
    if not isinstance(raw, dict) or raw.get("name") not in hp.list_clusters():
        return
    preset = hp.load_cluster(raw["name"])
    _missing(raw, preset, where, raw["name"])
    gpu = raw.get("gpu")
    if isinstance(gpu, dict) and isinstance(preset.gpu, GPUProfile) and gpu.get("name") == preset.gpu.name:
        _missing(gpu, preset.gpu, f"{where}.gpu", preset.gpu.name)
        eff = gpu.get("efficiency")
        if isinstance(eff, dict):
            _missing(eff, preset.gpu.efficiency, f"{where}.gpu.efficiency", preset.gpu.name)


def older_model_notes(raw: Any, where: str) -> None:
    """The same for an inline model named as a preset: a DeepSeek-V3 plan saved before moe_router_num_groups reads
    as unrestricted routing where today's preset limits each token to 4 of 8 groups."""
    if isinstance(raw, dict) and raw.get("name") in hp.list_models():
        _missing(raw, hp.load_model(raw["name"]), where, raw["name"])


def _missing(raw: dict, preset: BaseModel, where: str, name: str) -> None:
    """One note per optional field of `preset`'s spec absent from `raw` whose preset value is not the default."""
    for field, info in type(preset).model_fields.items():
        if field in raw or info.is_required():
            continue
        today = getattr(preset, field)
        if today != info.default:
            note(where, f"{field} is not in this plan file (saved by an older parplan): read as "
                        f"{info.default!r}, where today's {name} preset says {today!r}; plan again to use it")
