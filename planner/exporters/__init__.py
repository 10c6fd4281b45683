"""Exporters: turn a saved plan into launch files for Megatron-LM, DeepSpeed, torchrun, torchtitan and SLURM.

Source: benchmarks/data/launch_formats.md (one section per target; each module names its own).
`export` checks every target path before writing any, writes atomically (planner.files.guarded_write)
and never overwrites without `force`; names holding terminal control characters are refused
(common.check_names). A target that cannot express the plan raises ExportRefused (a UserError:
exit 2); with fmt="all" such refusals are collected instead, and only an export in which every
target refuses fails.

May import: costmodels, hardware_profiles, planner.errors, planner.safetext, planner.files (readers,
writers, DeepSpeed's partitioner), planner.search (the split of a layout without stage_layers).
Never planner.report or the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.exporters import deepspeed, megatron, slurm, torchrun, torchtitan
from planner.exporters.common import ExportPlan, ExportRefused, check_names, plan_from_doc
from planner.files.guarded_write import Target, write_all

FORMATS = ("megatron", "deepspeed", "torchrun", "torchtitan", "slurm")
RENDERERS = {"megatron": megatron.render, "deepspeed": deepspeed.render, "torchrun": torchrun.render,
             "torchtitan": torchtitan.render, "slurm": slurm.render}

__all__ = ["FORMATS", "ExportRefused", "ExportResult", "export", "export_targets", "run_export", "render_all"]


@dataclass
class ExportResult:
    """Files written, in order, and the formats that refused (format -> reason)."""

    written: list[Path] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def _formats(fmt: str) -> tuple[str, ...]:
    if fmt == "all":
        return FORMATS
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}, all")
    return (fmt,)


def render_all(plan: ExportPlan, fmt: str) -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
    """({file name: (text, mode)}, {format: refusal}) without touching the disk."""
    files: dict[str, tuple[str, int]] = {}
    refused: dict[str, str] = {}
    for name in _formats(fmt):
        try:
            files.update(RENDERERS[name](plan))
        except ExportRefused as err:
            if fmt != "all":
                raise
            refused[name] = str(err)
    if not files:
        raise ExportRefused("no format can express this plan: " + "; ".join(refused.values()))
    return files, refused


def export_targets(doc: dict, fmt: str, out_dir: Path, option: str = "--out") -> tuple[list[Target], dict[str, str]]:
    """The files an export would write (nothing touched yet) and the formats that refused."""
    plan = plan_from_doc(doc)
    check_names(plan)
    files, refused = render_all(plan, fmt)
    out_dir = Path(out_dir)
    targets = [Target(out_dir / name, text, mode, option) for name, (text, mode) in files.items()]
    return targets, refused


def run_export(doc: dict, fmt: str, out_dir: Path, force: bool, option: str = "--out") -> ExportResult:
    """Render, check every target path, then write (planner.files.guarded_write: all or nothing);
    returns what was written and what refused."""
    targets, refused = export_targets(doc, fmt, out_dir, option)
    return ExportResult(written=write_all(targets, force, creates=[Path(out_dir)]), refused=refused)


def export(doc: dict, fmt: str, out_dir: Path, force: bool,
           refusals: Optional[dict[str, str]] = None) -> list[Path]:
    """Write the launch files of `fmt` (one of FORMATS, or "all") for the plan document `doc`.

    Returns the written paths. With "all", formats that refuse are skipped and, when `refusals`
    is given, recorded there as {format: reason}."""
    result = run_export(doc, fmt, out_dir, force)
    if refusals is not None:
        refusals.update(result.refused)
    return result.written
