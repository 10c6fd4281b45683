"""Exporters: turn a saved plan into launch files for Megatron-LM, DeepSpeed, torchrun, torchtitan and SLURM.

Source: benchmarks/data/launch_formats.md (one section per target; each module names its own).
Each format is priced with the stack that runs its files (planner.exporters.pricing), and its header
says so. A format under whose stack the layout does not fit is not written unless `force`: a single
format raises ExportDoesNotFit (exit 1); with fmt="all" it is skipped with its reason, like a refusal,
and ExportDoesNotFit is raised only when no format fits.
`export` checks every target path before writing any, writes atomically (planner.files.guarded_write)
and never overwrites without `force`; names holding terminal control characters are refused
(common.check_names). A target that cannot express the plan raises ExportRefused (a UserError:
exit 2); with fmt="all" such refusals are collected instead, and only an export in which every
target refuses fails.

Each target's module lives in its framework's folder (planner.frameworks.<name>.export*); this package
keeps what they share (`common`, `pricing`) and the validators (`check_written`, `launch_rules`,
`config_rules`). May import: costmodels, hardware_profiles, planner.errors, planner.safetext,
planner.files (readers, writers), planner.frameworks (readers and exporters), planner.search (the split
of a layout without stage_layers).
Never planner.report or the CLI.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.frameworks.deepspeed import export as deepspeed
from planner.frameworks.megatron import export as megatron
from planner.frameworks.megatron import export_slurm as slurm
from planner.frameworks.fsdp import export as torchrun
from planner.frameworks.torchtitan import export as torchtitan
from planner.exporters.common import ExportPlan, ExportRefused, check_names, plan_from_doc
from planner.exporters.pricing import misfit, misfit_brief, priced_for, spec_files
from planner.files.guarded_write import Target, write_all

FORMATS = ("megatron", "deepspeed", "torchrun", "torchtitan", "slurm")
# format -> the module whose render() writes it; looked up at call time, because importing a framework's
# exporter first (planner.frameworks.megatron.export -> planner.exporters.common) runs this package while that
# module is still half-initialized
RENDERERS = {"megatron": megatron, "deepspeed": deepspeed, "torchrun": torchrun, "torchtitan": torchtitan,
             "slurm": slurm}

__all__ = ["FORMATS", "ExportDoesNotFit", "ExportRefused", "ExportResult", "export", "export_targets", "run_export",
           "render_all", "render_formats"]


class ExportDoesNotFit(UserError):
    """The layout does not fit under the stack that runs the requested files: exit 1, not 2."""

    exit_code = 1


@dataclass
class ExportResult:
    """Files written, in order, the formats that refused or were skipped (format -> reason), and the
    formats written with --force although they do not fit (format -> why)."""

    written: list[Path] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    forced: dict[str, str] = field(default_factory=dict)


@dataclass
class Rendered:
    """Rendered files ({name: (text, mode)}) per format, refusals (format, or a file a format left out -> why), and
    the formats that do not fit."""

    files: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    misfit: dict[str, str] = field(default_factory=dict)
    misfit_brief: dict[str, str] = field(default_factory=dict)


def check_format(fmt: Optional[str]) -> Optional[str]:
    """`fmt` when it names a format or "all" (None passes); else UserError naming the choices."""
    if fmt is not None and fmt != "all" and fmt not in FORMATS:
        raise UserError(f"--format {fmt[:40]!r} is not one of {', '.join(FORMATS)}, all")
    return fmt


def _formats(fmt: str) -> tuple[str, ...]:
    return FORMATS if check_format(fmt) == "all" else (fmt,)


def render_formats(plan: ExportPlan, fmt: str) -> Rendered:
    """Every format of `fmt` priced with the stack that runs it and rendered, without touching the disk."""
    out, priced = Rendered(), None
    for name in _formats(fmt):
        try:
            priced = priced_for(name, plan)
            files = {**RENDERERS[name].render(priced), **spec_files(priced)}  # the renderer's refusals name the flag
            refuse_unrunnable(name, priced)  # the layout as the file runs it (torchtitan: ZeRO-1 as ZeRO-2)
            out.files[name] = files
            out.refused.update(getattr(RENDERERS[name], "omitted", lambda _: {})(priced))  # a file left out: why
        except ExportRefused as err:
            if fmt != "all":
                raise
            out.refused[name] = str(err)
            continue
        if not priced.fits:
            out.misfit[name] = misfit(priced)
            out.misfit_brief[name] = misfit_brief(priced)
    if not out.files:
        raise ExportRefused("no format can express this plan: " + "; ".join(out.refused.values()))
    return out


def refuse_unrunnable(fmt: str, plan: ExportPlan) -> None:
    """ExportRefused when the framework that runs `fmt`'s files cannot run the plan's layout (its capability
    table and stage partitioner: planner.search.frameworks.framework_refusals), e.g. a Megatron script of
    ZeRO-2 with pp > 1, which `plan --framework megatron` itself refuses."""
    from planner.exporters.pricing import RUNS
    from planner.search.frameworks import framework_refusals

    why = framework_refusals(RUNS[fmt][0], plan.layout, plan.train, moe=plan.model.is_moe)
    if why:
        raise ExportRefused(f"{fmt}: {RUNS[fmt][0]} cannot run this layout: " + "; ".join(why))


def render_all(plan: ExportPlan, fmt: str) -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
    """({file name: (text, mode)}, {format: refusal}) of every format, fitting or not, without touching the disk."""
    rendered = render_formats(plan, fmt)
    return {k: v for files in rendered.files.values() for k, v in files.items()}, rendered.refused


def _keep(rendered: Rendered, fmt: str, force: bool) -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
    """The files to write and the refusals, after the fit rule: with force every format; else a single
    format that does not fit raises ExportDoesNotFit, and "all" skips the formats that do not fit
    (raising when none is left)."""
    refused = dict(rendered.refused)
    keep = dict(rendered.files)
    if rendered.misfit and not force:
        if fmt != "all":
            raise ExportDoesNotFit("; ".join(rendered.misfit.values()) + "; nothing written (--force writes it anyway)")
        if len(rendered.misfit) == len(keep):
            briefs = ", ".join(dict.fromkeys(rendered.misfit_brief.values()))
            raise ExportDoesNotFit(f"the layout fits under no format's stack ({briefs}); nothing written "
                                   "(--force writes them anyway)")
        for name, why in rendered.misfit.items():
            del keep[name]
            refused[name] = why + " (--force writes it anyway)"
    return {k: v for files in keep.values() for k, v in files.items()}, refused


def export_targets(doc: dict, fmt: str, out_dir: Path, option: str = "--out", force: bool = False,
                   tokens: Optional[float] = None):
    """(the files an export would write (nothing touched yet), the formats that refused or do not fit,
    the formats kept by `force` although they do not fit)."""
    plan = dataclasses.replace(plan_from_doc(doc), tokens=tokens)
    check_names(plan)
    rendered = render_formats(plan, fmt)
    files, refused = _keep(rendered, fmt, force)
    out_dir = Path(out_dir)
    targets = [Target(out_dir / name, text, mode, option) for name, (text, mode) in files.items()]
    return targets, refused, (rendered.misfit if force else {})


def run_export(doc: dict, fmt: str, out_dir: Path, force: bool, option: str = "--out",
               tokens: Optional[float] = None) -> ExportResult:
    """Render, check every target path, then write (planner.files.guarded_write: all or nothing);
    returns what was written, what refused or did not fit, and what was forced although it does not fit.
    `tokens`: the run's token budget (export --tokens), which sets the files' step count."""
    targets, refused, forced = export_targets(doc, fmt, out_dir, option, force, tokens)
    return ExportResult(written=write_all(targets, force, creates=[Path(out_dir)]), refused=refused, forced=forced)


def export(doc: dict, fmt: str, out_dir: Path, force: bool,
           refusals: Optional[dict[str, str]] = None) -> list[Path]:
    """Write the launch files of `fmt` (one of FORMATS, or "all") for the plan document `doc`.

    Returns the written paths. With "all", formats that refuse are skipped and, when `refusals`
    is given, recorded there as {format: reason}."""
    result = run_export(doc, fmt, out_dir, force)
    if refusals is not None:
        refusals.update(result.refused)
    return result.written
