"""The body of `parplan calibrate LOG... --model M --cluster C`: read the logs, build the runs, fit
the stack, print each run's error before and after (a table, or JSON) and write the fitted profile
(`--out`, never over an existing file without `--force`), which `--stack-file` then accepts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import yaml
from rich.console import Console
from rich.table import Table

from costmodels.stack import Stack
from planner.calibration import fit as fitting
from planner.calibration.runs import Options, Run, build, layout_keys, same_stack  # noqa: F401 (the CLI uses them)
from planner.calibration.runs import same_framework
from planner.errors import UserError
from planner.files.guarded_write import Target, check_target, write_all
from planner.files.logs import read_log
from planner.safetext import visible

NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
MAX_LOGS = 1000
UNEXPLAINED = 0.25  # a run this far off after the fit is named


@dataclass(frozen=True)
class Request:
    """The command line of one calibration."""

    logs: list[Path]
    options: Options
    params: Optional[list[str]] = None
    out: Optional[Path] = None
    force: bool = False


def distinct_logs(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The logs in the order given, each file once (by device and inode: `a.log ./a.log` or a link to
    it are the same run, which counted twice would weigh double in the fit), and a note per repeat."""
    seen: dict[tuple[int, int], Path] = {}
    kept, notes = [], []
    for path in paths:
        try:
            info = os.stat(path)
            key = (info.st_dev, info.st_ino)
        except OSError:
            key = (-1, len(kept))  # the reader names what is wrong with it
        if key in seen:
            notes.append(f"note: {visible(path)} is the same file as {visible(seen[key])}; counted once")
            continue
        seen[key] = path
        kept.append(path)
    return kept, notes


def load_runs(req: Request, notes: Optional[list[str]] = None) -> list[Run]:
    """One run per distinct log, in the order given (repeats noted in `notes`), all of one framework."""
    if not req.logs:
        raise UserError("give at least one training log")
    if len(req.logs) > MAX_LOGS:
        raise UserError(f"{len(req.logs)} logs: at most {MAX_LOGS} per calibration")
    paths, repeats = distinct_logs(req.logs)
    if notes is not None:
        notes += repeats
    logs = [read_log(path) for path in paths]
    same_framework(logs)
    return [build(log, req.options) for log in logs]


def profile_name(out: Optional[Path], base: Stack) -> str:
    """The fitted stack's name: the --out file's stem when it is a valid name, else BASE-calibrated."""
    stem = out.stem if out is not None else ""
    return stem if NAME_OK.match(stem) else f"{base.name}-calibrated"[:64]


def fitted_stack(fitted: fitting.Fitted, runs: list[Run], out: Optional[Path]) -> Stack:
    """The profile to write: the fitted stack with its rows, how it was fitted and its error."""
    before = fitting.mean_error(runs, fitted.predicted_before_s)
    after = fitting.mean_error(runs, fitted.predicted_after_s)
    names = ", ".join(p.field for p in fitted.params)
    note = (f"parplan calibrate: {names} of stack {fitted.before.name} fitted on {len(runs)} run(s) "
            f"({', '.join(visible(r.name) for r in runs)}): mean |step time error| {before:.1%} -> {after:.1%}; "
            "held-out error not measured (no rows held out), so no regime is validated")
    rows = [f"{visible(r.log.path)}: {r.log.framework}, {r.cluster.num_gpus} x {r.cluster.gpu_profile.name}, "
            f"{_layout_text(r)}, gbs {r.train.global_batch_size}, median {r.measured_s:.4g} s of {r.summary.kept} "
            f"steps" for r in runs]
    return fitted.after.model_copy(update={
        "name": profile_name(out, fitted.before), "family": None, "fitted_on": note, "fit_rows": rows,
        "fit_error": round(min(after, 100.0), 4), "held_out": {}, "fitted_by": "parplan calibrate",
        "fitted_date": datetime.now(timezone.utc).date().isoformat(),
        "description": f"{fitted.before.name} calibrated on the user's runs ({fitted.before.description})"[:500]})


def _layout_text(run: Run) -> str:
    lay = run.layout
    return (f"tp={lay.tp},pp={lay.pp},vpp={lay.vpp},cp={lay.cp},ep={lay.ep},dp={lay.dp},mbs={lay.mbs},"
            f"zero={lay.zero},recompute={lay.recompute},sp={int(lay.sp)}")


def profile_text(stack: Stack) -> str:
    """The YAML of a fitted profile (the fields of `parplan schema Stack`)."""
    head = "# written by parplan calibrate; use it with --stack-file\n"
    return head + yaml.safe_dump(stack.model_dump(mode="json"), sort_keys=False, width=110)


def result_json(runs: list[Run], fitted: fitting.Fitted, profile: Stack, out: Optional[Path]) -> dict:
    """What --json prints."""
    rows = []
    for r, b, a in zip(runs, fitted.predicted_before_s, fitted.predicted_after_s):
        s = r.summary
        rows.append({"run": r.name, "path": str(r.log.path), "framework": r.log.framework, "measured_s": r.measured_s,
                     "predicted_before_s": b, "predicted_after_s": a, "error_before": b / r.measured_s - 1,
                     "error_after": a / r.measured_s - 1, "steps_kept": s.kept, "warmup_skipped": s.warmup,
                     "bad_loss_lines": s.bad_loss, "ranks": s.ranks, "spread": s.spread, "layout": _layout_text(r),
                     "gpus": r.cluster.num_gpus, "notes": r.log.notes})
    params = {p.field: {"before": fitting.current(fitted.before, p, runs[0]),
                        "after": fitting.current(fitted.after, p, runs[0]), "lo": p.lo, "hi": p.hi}
              for p in fitted.params}
    return {"stack_base": fitted.before.name, "stack": profile.name, "runs": rows, "parameters": params,
            "at_bound": fitting.at_bound(fitted),
            "mean_error_before": fitting.mean_error(runs, fitted.predicted_before_s),
            "mean_error_after": fitting.mean_error(runs, fitted.predicted_after_s),
            "out": None if out is None else str(out)}


def run_table(data: dict) -> Table:
    """Each run: measured, predicted before and after, error before -> after."""
    table = Table(title=f"Calibration of stack {data['stack_base']} on {len(data['runs'])} run(s)")
    for col in ("run", "framework", "GPUs", "measured s", "predicted before", "predicted after", "error before -> after"):
        table.add_column(col, justify="left" if col in ("run", "framework") else "right", overflow="fold")
    for r in data["runs"]:
        table.add_row(visible(r["run"]), r["framework"], str(r["gpus"]), f"{r['measured_s']:.4g}",
                      f"{r['predicted_before_s']:.4g}", f"{r['predicted_after_s']:.4g}",
                      f"{r['error_before']:+.1%} -> {r['error_after']:+.1%}")
    table.add_row("mean |error|", "", "", "", "", "", f"{data['mean_error_before']:.1%} -> {data['mean_error_after']:.1%}")
    return table


def param_table(data: dict) -> Table:
    """Each fitted parameter before -> after, with its bounds."""
    table = Table(title="Fitted parameters")
    for col in ("parameter", "before", "after", "bounds"):
        table.add_column(col)
    for name, p in data["parameters"].items():
        mark = " (at a bound)" if name in data["at_bound"] else ""
        table.add_row(name, f"{p['before']:.4g}", f"{p['after']:.4g}{mark}", f"{p['lo']:g} .. {p['hi']:g}")
    return table


def show(data: dict, console: Console, note: Console) -> None:
    """The tables, the notes of each log, and where the profile went."""
    said = [n for r in data["runs"] for n in r["notes"] if n.startswith(("assumed:", "skipped:"))]
    for line in data.get("notes", []) + said:
        note.print(line, highlight=False, markup=False)
    console.print(run_table(data))
    console.print(param_table(data))
    for r in data["runs"]:
        note.print(f"{visible(r['run'])}: median of {r['steps_kept']} steps after {r['warmup_skipped']} warm-up; "
                   f"{r['ranks']}" + (f"; {r['bad_loss_lines']} NaN/inf-loss line(s) skipped" if r["bad_loss_lines"]
                                      else ""), highlight=False, markup=False)
    for r in data["runs"]:
        if abs(r["error_after"]) > UNEXPLAINED:
            note.print(f"warning: {visible(r['run'])} is still {r['error_after']:+.0%} off after the fit: the time "
                       "model does not explain it with these parameters; check its layout (--layout), batch and "
                       "sequence, or fit it apart", highlight=False, markup=False)
    if data["out"]:
        console.print(f"wrote {visible(data['out'])} (use it with --stack-file)", highlight=False, markup=False)


def calibrate(req: Request) -> dict:
    """Read, fit, write: the JSON result (the caller prints it or the tables)."""
    if req.out is not None:
        check_target(Target(req.out, "", option="--out"), req.force)  # refuse before the fit, not after
    notes: list[str] = []
    runs = load_runs(req, notes)
    base = same_stack(runs)
    fitted = fitting.fit(runs, base, fitting.choose(len(runs), req.params))
    profile = fitted_stack(fitted, runs, req.out)
    if req.out is not None:
        write_all([Target(req.out, profile_text(profile), option="--out")], req.force)
    return {**result_json(runs, fitted, profile, req.out), "notes": notes}
