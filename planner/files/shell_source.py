"""`source` and `.` in a launch script: the file is read only from the script's own folder, or under the
script's prefix when a flattened collection renamed it (planner.files.shell_eval evaluates its text)."""

from __future__ import annotations

import posixpath
from pathlib import Path

from planner.errors import UserError
from planner.safetext import clipped


def source(sh, args: list[str], word, run):
    """`source FILE ARGS` / `. FILE`: read FILE from the script's own folder (never elsewhere) with
    run(sh, text, name) (planner.files.shell_eval.run); one warning when absent."""
    if not args:
        return True
    name = posixpath.basename(args[0])
    path = Path(sh.script_dir) / name if sh.script_dir and name and "$" not in name and "`" not in name else None
    if path is not None and not path.is_file():
        path = _renamed_sibling(path, sh.script_name)
        if path is not None:
            sh.warn(f"{sh.line(getattr(word, 'pos', None))}: sources {name!r}: read {path.name!r} beside the "
                    "script (the same name under the script's prefix)")
    if path is None or not path.is_file():
        sh.warn(f"{sh.line(getattr(word, 'pos', None))}: sources {clipped(args[0])!r}, not found beside the script; "
                "the settings it makes are not read")
        return None
    from planner.files.safe_read import read_text
    saved = sh.positional
    sh.positional = args[1:] or saved
    try:
        run(sh, read_text(path), name)
    except UserError as err:
        raise UserError(f"{name}: {err}") from None
    finally:
        sh.positional = saved
    return True


def _renamed_sibling(path: Path, script: str):
    """A file a flattened collection renamed with its script's prefix: `CONFIG.sh` sourced by
    `mlm_sc21_table1.sh` found as `mlm_sc21_CONFIG.sh` beside it (each prefix of the script's name that
    ends in '_' or '-', longest first). Never the script itself. None when there is none."""
    stem = posixpath.basename(script)
    cuts = [i + 1 for i, c in enumerate(stem) if c in "_-"]
    for cut in sorted(cuts, reverse=True):
        candidate = path.with_name(stem[:cut] + path.name)
        if candidate.is_file() and not _same_file(candidate, script):
            return candidate
    return None


def _same_file(candidate: Path, script: str) -> bool:
    """Whether `candidate` is the script itself: `source ./missing_env.sh` in `c02b_missing_env.sh` names, under
    the script's prefix `c02b_`, the script's own name; that is no renamed sibling (bash would not find the file)."""
    try:
        return candidate.resolve() == Path(script).resolve()
    except (OSError, RuntimeError):
        return candidate.name == posixpath.basename(script)


__all__ = ["source"]
