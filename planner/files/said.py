"""The warning lines readers say while they read (a setting read but not priced, a command-line override, a
cluster file's likely slip): each goes to stderr at once, before any error it explains, and to every
`heard_notes` block open around the read, so that `--json` documents carry them under "warnings"."""

from __future__ import annotations

import sys
from contextlib import contextmanager

_LISTENERS: list[list[str]] = []  # heard_notes blocks open now, innermost last


def note(where: str, message: str) -> None:
    """One warning line on stderr: something read and not priced, or a command-line override (also kept for
    every heard_notes block around the call, for --json)."""
    print(f"parplan: warning: {where}: {message}", file=sys.stderr)
    for heard in _LISTENERS:
        heard.append(f"{where}: {message}")


@contextmanager
def heard_notes():
    """The `note` lines said while the block runs, as 'where: message' (they still reach stderr): check --json
    puts them under "warnings", where a script reading the document finds them."""
    heard: list[str] = []
    _LISTENERS.append(heard)
    try:
        yield heard
    finally:
        _LISTENERS.remove(heard)


__all__ = ["heard_notes", "note"]
