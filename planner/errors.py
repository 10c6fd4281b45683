"""One error path for user mistakes: a UserError carries a message that names field, value and rule."""

from __future__ import annotations

from pydantic import ValidationError


MAX_LINES = 12  # a message of a million lines (one per bad list item) helps nobody


class UserError(Exception):
    """Bad input from the user: the CLI prints the message and exits 2, never a traceback."""


def _loc(loc: tuple) -> str:
    return ".".join(_part(p) for p in loc if not isinstance(p, str) or not p.startswith("function-"))


def _part(part) -> str:
    """A location part as a message shows it: printable, at most 40 characters (it may be a key of a
    file that is no spec at all, e.g. a line of /etc/shadow)."""
    text = "".join(c if c.isprintable() else "?" for c in str(part))
    return text if len(text) <= 40 else text[:37] + "..."


def describe_validation_error(err: ValidationError, where: str) -> str:
    """Turn a Pydantic error into short lines: `where.field: problem (got value)`. Unknown keys are
    named once (the first, and how many more), never with their values."""
    lines, extra = [], []
    for e in err.errors(include_url=False):
        loc = _loc(e.get("loc", ()))
        field = f"{where}.{loc}" if loc else where
        if e.get("type") == "extra_forbidden":
            extra.append(_extra(where, e.get("loc", ())))
            continue
        if _other_branch(e):
            continue
        msg = e.get("msg", "invalid").removeprefix("Value error, ")
        got = e.get("input")
        shown = "" if isinstance(got, dict) or e.get("type") == "missing" else f" (got {_short(got)})"
        lines.append(f"{field}: {msg}{shown}")
    if extra:
        more = f" (and {len(extra) - 1} more unknown keys)" if len(extra) > 1 else ""
        lines.append(f"{extra[0]}: Extra inputs are not permitted{more}")
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"(and {len(lines) - MAX_LINES} more problems)"]
    return "\n".join(lines)


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
