"""One error path for user mistakes: a UserError carries a message that names field, value and rule."""

from __future__ import annotations

from pydantic import ValidationError


class UserError(Exception):
    """Bad input from the user: the CLI prints the message and exits 2, never a traceback."""


def _loc(loc: tuple) -> str:
    return ".".join(str(p) for p in loc if not isinstance(p, str) or not p.startswith("function-"))


def describe_validation_error(err: ValidationError, where: str) -> str:
    """Turn a Pydantic error into short lines: `where.field: problem (got value)`."""
    lines = []
    for e in err.errors(include_url=False):
        loc = _loc(e.get("loc", ()))
        field = f"{where}.{loc}" if loc else where
        msg = e.get("msg", "invalid").removeprefix("Value error, ")
        got = e.get("input")
        shown = "" if isinstance(got, dict) or e.get("type") == "missing" else f" (got {_short(got)})"
        lines.append(f"{field}: {msg}{shown}")
    return "\n".join(lines)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
