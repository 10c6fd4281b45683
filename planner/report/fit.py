"""Tables that fit the terminal: the width to draw at (COLUMNS, else the terminal, else 120 when the output
is a pipe or file), and a table builder that leaves out optional columns, least useful first, until the
table's natural width fits, so that no cell is cut (`recomp…`) and no row wraps. What was left out is said
in the caption: `--json` carries every number."""

from __future__ import annotations

import io
import shutil
from typing import Callable, Iterable

from rich.console import Console
from rich.table import Table

PIPE_COLUMNS = 120  # the width when neither COLUMNS nor a terminal says: wide enough for every table
MIN_COLUMNS = 40


def terminal_columns() -> int:
    """The width to draw at: COLUMNS, else the terminal's, else PIPE_COLUMNS; at least MIN_COLUMNS."""
    return max(MIN_COLUMNS, shutil.get_terminal_size((PIPE_COLUMNS, 24)).columns)


def natural_width(table: Table) -> int:
    """The columns the table takes when nothing is squeezed."""
    console = Console(width=10_000, file=io.StringIO(), color_system=None)
    return console.measure(table).maximum


def fit_table(build: Callable[[frozenset], Table], width: int, optional: Iterable[str]) -> Table:
    """`build(left_out)` with the fewest optional columns left out (in the order given) for the table to
    fit `width`; the caption then names what was left out."""
    left_out: list[str] = []
    table = build(frozenset())
    for name in optional:
        if natural_width(table) <= width:
            break
        left_out.append(name)
        table = build(frozenset(left_out))
    if left_out:
        note = f"not shown at {width} columns: {', '.join(left_out)} (widen the terminal or use --json)"
        table.caption = f"{table.caption}; {note}" if table.caption else note
        table.caption_justify = "left"
    return table


def width_known() -> bool:
    """Whether COLUMNS or a terminal gives the width: then prose wraps at words to it; into a pipe or a file
    (no width known) each sentence stays on one line, for grep."""
    import os
    import sys

    if os.environ.get("COLUMNS", "").strip().isdigit():
        return True
    try:
        return os.isatty(sys.__stdout__.fileno())
    except (AttributeError, OSError, ValueError):
        return False


def prose_soft_wrap() -> bool:
    """rich's soft_wrap for a sentence: off (wrap at words) where the width is known, on (one line) otherwise."""
    return not width_known()
