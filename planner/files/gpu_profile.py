"""A cluster's `gpu:` as a user writes it: a preset name, a spec file, or an inline profile, which may leave out
its `efficiency:` block.

A profile without an efficiency block would take costmodels.hardware_spec.Efficiency's field defaults (a GEMM
curve reaching 0.75 of peak by a dimension of 256, no per-layer overhead): an inline copy of the h100-sxm preset
without its block priced Llama 3 8B at 68.6% MFU where the preset gives 65.3%, and an H100 PCIe above the SXM part.
Such a profile takes instead the fitted fractions of its tensor-core generation's reference preset (GENERATION_REF:
the GPU each generation's curve was fitted on or first copied to), with the curve's generation recorded
(Efficiency.curve_gen), so that the kernels of its own SM count and peak cap it (costmodels.kernels); a warning
says so. Without a tensor-core generation nothing caps it: the warning says that too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hardware_profiles as hp
from planner.errors import UserError
from planner.files.safe_read import SPEC_SUFFIXES
from planner.files.said import note

GENERATION_REF = {"volta": "v100-sxm3-32gb", "ampere": "a100-80gb", "hopper": "h100-sxm", "blackwell": "b200",
                  "blackwell-ultra": "b300", "cdna3": "mi300x", "cdna4": "mi355x"}


def resolve(gpu: Any, where: str, read_mapping) -> tuple[Any, str]:
    """(the profile data of `gpu` (a preset name, a spec file's path, or a mapping), its efficiency filled from its
    generation when it gives none, and the warning that says so or ''; module docstring). The caller prints the
    warning once the cluster validates, so that a bad file gives one error line. read_mapping:
    planner.files.loading.read_mapping."""
    found = _spec_file(gpu, where)
    if found is not None:
        gpu, where = read_mapping(found), str(found)
    if isinstance(gpu, str):
        try:
            return hp.load_gpu(gpu).model_dump(), ""
        except hp.UnknownPresetError as err:
            raise UserError(f"{where}.gpu: {err}") from None
    if isinstance(gpu, dict) and "efficiency" not in gpu:
        efficiency, why = _generation_efficiency(gpu)
        return {**gpu, "efficiency": efficiency}, why
    return gpu, ""


def _spec_file(gpu: Any, where: str):
    """The GPU spec file `gpu` names, beside the cluster file `where` first (as a cluster file's own relative
    paths are meant), else from the current folder; None when `gpu` names no such file."""
    if not isinstance(gpu, str) or Path(gpu).suffix.lower() not in SPEC_SUFFIXES:
        return None
    beside = Path(where).parent / gpu if not Path(gpu).is_absolute() else None
    return next((p for p in (beside, Path(gpu)) if p is not None and p.is_file()), None)


def _generation_efficiency(gpu: dict) -> tuple[dict, str]:
    name, gen = str(gpu.get("name", "the gpu"))[:60], gpu.get("tensor_core_gen")
    ref = GENERATION_REF.get(gen) if isinstance(gen, str) else None
    if ref is None:
        return {}, (f"gpu {name}: no efficiency block and no tensor_core_gen: Efficiency's generic defaults "
                    "(GEMMs at up to 0.75 of peak, no kernel cap, no host overhead), fitted on nothing: an optimistic "
                    "guess; give tensor_core_gen (the nearest for a generation not listed: ampere for Ada) and "
                    "sm_count, or an efficiency block")
    base = hp.load_gpu(ref).efficiency
    fitted_on = f"NOT FITTED: no efficiency block given; {ref}'s fractions (the {gen} generation's reference profile)"
    return (base.model_copy(update={"curve_gen": base.curve_gen or gen, "fitted_on": fitted_on}).model_dump(),
            f"gpu {name}: no efficiency block: the {gen} generation's fitted fractions ({ref}'s) are used, "
            "capped by this GPU's own kernels; nothing was fitted on this GPU")


MAX_SCALE_OUT_GB_PER_S = 100.0  # an 800 Gb/s NIC per GPU (ConnectX-8), per direction: the fastest shipped


def link_warnings(cluster) -> list[str]:
    """Bandwidths a cluster file more likely mistyped than meant: scale-out above one 800 Gb/s NIC per GPU (a Gb/s
    figure typed into the GB/s field: 400 for a node's 2 x 200 Gb/s NICs is 50x the 6.25 GB/s per GPU it has),
    or above the scale-up rate of a node with more than one GPU (the network would beat the links inside it; equal is
    a PCIe box's honest answer)."""
    out, up, down = [], cluster.scale_up_gb_per_s, cluster.scale_out_gb_per_s
    if down > MAX_SCALE_OUT_GB_PER_S:
        out.append(f"scale_out_gb_per_s {down:g} is GB/s per GPU and per direction, above an 800 Gb/s NIC "
                   f"per GPU ({MAX_SCALE_OUT_GB_PER_S:g}); a node's NIC total in Gb/s is divided by 8 and by its "
                   "GPUs (8 x 400 Gb/s over 8 GPUs: 50)")
    elif cluster.gpus_per_node > 1 and down > up:
        out.append(f"scale_out_gb_per_s {down:g} is above scale_up_gb_per_s {up:g}: the network would "
                   "beat the links inside a node; both are GB/s per GPU and per direction")
    return out + _scale_up_warnings(cluster) + _hbm_warnings(cluster)


# The fastest scale-up per GPU and direction of each generation, GB/s (NVLink 2/3/4/5 datasheets: V100 150, A100 300,
# H100 450, B200/B300 900; AMD Infinity Fabric: MI300X 7 x 64, MI355X 7 x 153.6)
MAX_SCALE_UP_GB_PER_S = {"volta": 150.0, "ampere": 300.0, "hopper": 450.0, "blackwell": 900.0,
                         "blackwell-ultra": 900.0, "cdna3": 448.0, "cdna4": 1075.2}
PCIE_LIKE_GB_PER_S = 64.0  # a PCIe 5.0 x16 link per direction: a node this slow inside has no NVLink
MAX_HBM_GIB = 1024.0  # no GPU has a TiB of HBM: a figure above it is in MiB or MB


def _scale_up_warnings(cluster) -> list[str]:
    """A scale-up rate above the generation's fastest (a bidirectional or per-node figure), and a PCIe-slow one
    still taking NVLink SHARP's all-reduce speed-up (a new-user pass: an H100 PCIe box priced 27% faster so)."""
    gpu, up = cluster.gpu_profile, cluster.scale_up_gb_per_s
    top = MAX_SCALE_UP_GB_PER_S.get(gpu.tensor_core_gen or "")
    out = []
    if top is not None and up > 1.05 * top:
        out.append(f"scale_up_gb_per_s {up:g} is above the {gpu.tensor_core_gen} generation's fastest scale-up "
                   f"({top:g} GB/s per GPU and per direction); a bidirectional figure is twice that, a node's total "
                   "its GPUs times it")
    if (cluster.scale_up_topology == "switch" and cluster.gpus_per_node > 1 and up <= PCIE_LIKE_GB_PER_S
            and gpu.efficiency.nvls_speedup > 1):
        out.append(f"scale_up_gb_per_s {up:g} is a PCIe rate, yet the node is priced as an NVSwitch one with NVLink "
                   "SHARP's all-reduce speed-up; set scale_up_topology: pcie if these GPUs have no NVLink")
    return out


def _hbm_warnings(cluster) -> list[str]:
    hbm = cluster.gpu_profile.hbm_gib
    if hbm > MAX_HBM_GIB:
        return [f"gpu {cluster.gpu_profile.name}: hbm_gib {hbm:g} is above any GPU's memory ({MAX_HBM_GIB:g} GiB); "
                "a figure in MiB is 1024 times the GiB one (24576 MiB = 24 GiB)"]
    return []


def warn(where: str, line: str) -> None:
    """`line` said as a reader's warning (planner.files.said: stderr, and --json's "warnings"); '' says nothing."""
    if line:
        note(where, line)


__all__ = ["GENERATION_REF", "link_warnings", "resolve", "warn"]
