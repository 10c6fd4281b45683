"""One error path for user mistakes: a UserError carries a message that names field, value and rule."""

from __future__ import annotations

import difflib
from typing import Optional

from pydantic import ValidationError


MAX_NAMED = 4  # further problems named by field after the first (a million bad list items help nobody)


class UserError(Exception):
    """Bad input from the user: the CLI prints the message and exits 2, never a traceback."""


class OutputNotWritten(UserError):
    """A file the command was asked to write could not be written (full disk, quota, I/O error) after every check
    on its path passed: one line, exit 4, as for stdout (README: 4 the output could not be written)."""

    exit_code = 4


UNION_TAGS = ("GPUProfile", "Stack", "ModelSpec", "ClusterSpec", "TrainSpec", "Layout", "str")  # a union's branch


def _loc(loc: tuple) -> str:
    """A location as a message shows it: validator wrappers and a union's branch names (`gpu.GPUProfile.hbm_gib`)
    left out."""
    return ".".join(_part(p) for p in loc if not isinstance(p, str)
                    or not (p.startswith("function-") or p in UNION_TAGS))


def _part(part) -> str:
    """A location part as a message shows it: printable, at most 40 characters (it may be a key of a
    file that is no spec at all, e.g. a line of /etc/shadow)."""
    text = "".join(c if c.isprintable() else "?" for c in str(part))
    return text if len(text) <= 40 else text[:37] + "..."


def describe_validation_error(err: ValidationError, where: str) -> str:
    """A Pydantic error as ONE line: the first problem as `where.field: problem (got value)`, then how many
    more and their fields; missing fields are named together. Unknown keys are named once (the first,
    and how many more), never with their values."""
    problems, missing, extra = [], [], []
    for e in err.errors(include_url=False):
        loc = _loc(e.get("loc", ()))
        field = f"{where}.{loc}" if loc else where
        if e.get("type") == "extra_forbidden":
            extra.append(_extra(where, e.get("loc", ())))
        elif e.get("type") == "missing":
            missing.append(loc or where)
        elif not _other_branch(e):
            msg = e.get("msg", "invalid").removeprefix("Value error, ")
            got = e.get("input")
            shown = "" if isinstance(got, dict) else f" (got {_short(got)})"
            problems.append((field, f"{field}: {msg}{shown}"))
    typos = _typos(extra, missing, where)
    problems = [(key, text) for key, text, _ in typos] + problems
    paired = {key for key, _, _ in typos} | {field for _, _, field in typos}
    extra = [key for key in extra if key not in paired]
    missing = [m for m in missing if m.rsplit(".", 1)[-1] not in paired]
    if missing:
        problems.append((f"{where}.{missing[0]}", f"{where}: missing required field(s) {', '.join(missing)}"))
    if extra:
        more = f" (and {len(extra) - 1} more unknown keys)" if len(extra) > 1 else ""
        problems.append((extra[0], f"{extra[0]}: Extra inputs are not permitted{more}"))
    return _one_line(problems)


def closest(key: str, known) -> Optional[str]:
    """The valid name most like `key` (difflib ratio at least 0.6), or None when none is close."""
    found = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def _typos(extra: list[str], missing: list[str], where: str) -> list[tuple[str, str, str]]:
    """(key, message, the field) of each unknown key that resembles a missing field: named first, with the field it
    likely meant (a new-user pass: `scale_out_gbps` was reported as a missing scale_out_gb_per_s and one more
    problem)."""
    out = []
    for key in extra:
        field = closest(key.rsplit(".", 1)[-1], [m.rsplit(".", 1)[-1] for m in missing])
        if field:
            out.append((key, f"{key}: unknown key; did you mean {field}? (required, and missing)", field))
    return out


def _one_line(problems: list[tuple[str, str]]) -> str:
    """The first problem's text, then '(and N more: field, field, ...)'."""
    if not problems:
        return "invalid input"
    first, rest = problems[0][1], [field for field, _ in problems[1:]]
    if not rest:
        return first
    named = ", ".join(rest[:MAX_NAMED]) + (", ..." if len(rest) > MAX_NAMED else "")
    return f"{first} (and {len(rest)} more: {named})"


def _extra(where: str, loc: tuple) -> str:
    """An unknown key's location; a key with spaces or ':' is a line of some other file, not shown."""
    key = str(loc[-1]) if loc else ""
    if any(c.isspace() or c == ":" for c in key):
        return f"{where}.{_loc(loc[:-1])}: a key with spaces or ':'".replace(".:", ":")
    return f"{where}.{_loc(loc)}"


def _other_branch(error: dict) -> bool:
    """The `str` branch of a `str | Spec` union failing on a mapping: noise beside the Spec branch's errors."""
    loc = error.get("loc", ())
    return error.get("type") == "string_type" and bool(loc) and loc[-1] == "str" and isinstance(error.get("input"), dict)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
