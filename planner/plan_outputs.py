"""What `plan` writes (--save, --export, --report), all or nothing: every target is checked before
any is written (planner.files.guarded_write), so a refused path leaves the disk as it was. The exporters
and the HTML report (~0.3 s of imports) are imported only when a file is asked for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from planner.files.guarded_write import Target, check_folder, check_target, write_all

if TYPE_CHECKING:
    from costmodels.whole_run import RunSpec
    from planner.exporters import ExportResult


@dataclass(frozen=True)
class PlanOutputs:
    """The paths `plan` was asked to write, and whether it may overwrite."""

    save: Optional[Path]
    export_dir: Optional[Path]
    report: Optional[Path]
    force: bool
    tokens: Optional[float] = None  # plan --tokens: the exported files' step count (planner.exporters.common)

    @property
    def wanted(self) -> bool:
        """Whether any file was asked for (else `write` has nothing to do)."""
        return any(path is not None for path in (self.save, self.export_dir, self.report))

    def precheck(self) -> None:
        """Refuse, before the search, every path that could not be written (the export folder's files
        are checked once rendered: their names depend on the formats)."""
        for path, option in ((self.save, "--save"), (self.report, "--report")):
            if path is not None:
                check_target(Target(Path(path), "", option=option), self.force)
        if self.export_dir is not None:
            check_folder(Path(self.export_dir), "--export", create=True)

    def targets(self, doc: dict, fmt: str, tokens: Optional[float],
                run: Optional[RunSpec] = None) -> tuple[list[Target], dict[str, str], dict[str, str]]:
        """Every file to write, the export formats that refused the plan or under whose stack it does not
        fit, and those written with --force although it does not fit (planner.exporters.export_targets)."""
        targets: list[Target] = []
        refused: dict[str, str] = {}
        forced: dict[str, str] = {}
        if self.save is not None:
            from planner.files.planfile import plan_text

            targets.append(Target(Path(self.save), plan_text(doc), option="--save"))
        if self.export_dir is not None:
            from planner.exporters import export_targets

            files, refused, forced = export_targets(doc, fmt, Path(self.export_dir), "--export", self.force,
                                                    self.tokens)
            targets += files
        if self.report is not None:
            from planner.report.data import build as build_report
            from planner.report.html import render_html

            targets.append(Target(Path(self.report), render_html(build_report(doc, tokens, run)), option="--report"))
        return targets, refused, forced

    def write(self, doc: dict, fmt: str, tokens: Optional[float], run: Optional[RunSpec] = None) -> ExportResult:
        """Check all, then write all; what was written and what refused (`run`: the whole run the report shows)."""
        from planner.exporters import ExportResult

        targets, refused, forced = self.targets(doc, fmt, tokens, run)
        creates = [Path(self.export_dir)] if self.export_dir is not None else []
        return ExportResult(written=write_all(targets, self.force, creates), refused=refused, forced=forced)
