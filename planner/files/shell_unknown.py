"""Values parplan cannot evaluate, kept whole and traced to where they were set (nothing is ever run).

An expansion parplan cannot evaluate (a command substitution that runs a program, arithmetic over such a value,
a variable the script never sets, a positional argument it was not given) stays as written and becomes ONE
piece marked with a Mark: bash would split its output, but the output is not known, so splitting the written
text (`$(nvidia-smi --query-gpu=name | wc -l)` into `--query-gpu=name`, `|`, ...) would invent words. A variable
assigned such a value keeps, beside its text in `sh.scalars`, the spans of it that are unknown (`sh.opaque`):
expanding it later gives the known parts (split as usual) and each unknown span whole.

A positional argument the script was not given (`$2` when run without arguments, parplan's reading, as for
`${2:-default}`) is marked MISSING: inside a test (`[ "$X" == "" ]`, `[ -z "$X" ]`) it is the empty string,
so the defaults a script sets for absent arguments are followed; elsewhere it stays as written (`$2`), so a
flag given it still says which argument it needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

MISSING = "argument"  # a positional argument the script was not given
COMMAND = "command"  # a command substitution (a program's output)
ARITH = "arithmetic"  # `$((...))` over a value parplan cannot evaluate, or an operator it does not evaluate
VARIABLE = "variable"  # a variable the script never sets
UNKNOWN = "unknown"  # any other expansion parplan does not evaluate (`${X/a/b}`, `$@`)


@dataclass(frozen=True)
class Mark:
    """The `split` flag of a piece parplan could not evaluate: false, so the piece is never split."""

    kind: str  # MISSING, COMMAND, ARITH, VARIABLE or UNKNOWN
    written: str  # the expansion as written: `$(nvidia-smi ...)`, `$((16 / n))`, `$2`
    name: str = ""  # the variable that was set to it (empty until assigned)
    line: str = ""  # where that variable was set
    cause: Optional["Mark"] = None  # what made an arithmetic expansion unknown

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Opaque:
    """The unknown spans of a variable's value: (start, end, Mark)."""

    spans: tuple

    @property
    def missing_only(self) -> bool:
        return all(mark.kind == MISSING for _, _, mark in self.spans)


def piece(sh, written: str, kind: str = UNKNOWN, quoted: bool = False, cause: Optional[Mark] = None) -> tuple:
    """The piece of an expansion parplan cannot evaluate; in a test a missing argument is the empty string."""
    if kind == MISSING and sh.testing:
        sh.args_used += 1
        return "", not quoted
    sh.unknown += 1
    return written, Mark(kind, written, cause=cause)


def first_mark(produced: list) -> Optional[Mark]:
    return next((p[1] for p in produced if isinstance(p, tuple) and isinstance(p[1], Mark)), None)


def var_pieces(sh, name: str, value: str, quoted: bool) -> list:
    """The pieces of a variable's value: known parts splittable unless quoted, unknown spans whole."""
    opaque = sh.opaque.get(name)
    if opaque is None:
        return [(value, not quoted)]
    out, at = [], 0
    for start, end, mark in opaque.spans:
        if start > at:
            out.append((value[at:start], not quoted))
        if mark.kind == MISSING and sh.testing:
            sh.args_used += 1
            out.append(("", not quoted))
        else:
            sh.unknown += 1
            out.append((value[start:end], mark))
        at = end
    if at < len(value) or not out:
        out.append((value[at:], not quoted))
    return out


def argless(sh, name: str, value: Optional[str]) -> Optional[str]:
    """A variable's value as `${X:-...}` tests it: a value made only of missing arguments is the empty string."""
    opaque = sh.opaque.get(name)
    if value is None or opaque is None or not opaque.missing_only:
        return value
    kept, at = [], 0
    for start, end, _ in opaque.spans:
        kept.append(value[at:start])
        at = end
    return "".join(kept) + value[at:]


def joined(produced: list, join_break) -> tuple[str, tuple]:
    """(the pieces as one string, the unknown spans in it)."""
    text, spans, at = [], [], 0
    for p in produced:
        chunk = " " if p is join_break else p[0]
        if p is not join_break and isinstance(p[1], Mark):
            spans.append((at, at + len(chunk), p[1]))
        text.append(chunk)
        at += len(chunk)
    return "".join(text), tuple(spans)


def set_scalar(sh, name: str, value: str, spans: tuple, word, shift: int = 0) -> None:
    """Assign `value` to `name`, keeping its unknown spans (shifted by `shift`: an appended value) named after
    the variable and the line, unless an earlier variable already named them (`B=$A` keeps A's)."""
    line = sh.line_of(word) or sh.line(None)
    named = tuple((s + shift, e + shift, m if m.name else replace(m, name=name, line=line)) for s, e, m in spans)
    kept = sh.opaque[name].spans if shift and name in sh.opaque else ()
    sh.scalars[name] = value
    if kept + named:
        sh.opaque[name] = Opaque(kept + named)
    else:
        sh.opaque.pop(name, None)


def forget(sh, name: str) -> None:
    sh.opaque.pop(name, None)


def explain(mark: Mark) -> str:
    """`batch_size (set on line 3 to $((16 / ${num_gpus}))): a value parplan cannot evaluate (it depends on
    num_gpus, set on line 2 from what $(nvidia-smi ...) prints, and parplan runs no command)`."""
    chain, seen = [], mark
    while seen is not None and len(chain) < 16:
        chain.append(seen)
        seen = seen.cause
    head = f"{mark.name} (set on {mark.line} to {_short(mark.written)})" if mark.name else _short(mark.written)
    via = [m for m in chain[1:] if m.name]
    where = f"it depends on {via[-1].name}, set on {via[-1].line} " if via else "it is "
    return f"{head}: a value parplan cannot evaluate ({where}{_why(chain[-1], bool(via))})"


def _why(root: Mark, via: bool) -> str:
    written = _short(root.written)
    if root.kind == MISSING:
        return f"{'to ' if via else ''}the script's argument {written}, and parplan reads the script as run " \
               "without arguments"
    if root.kind == COMMAND:
        return f"{'from ' if via else ''}what {written} prints, and parplan runs no command"
    if root.kind == VARIABLE:
        return f"{'from ' if via else ''}{written}, which the script does not set"
    if root.kind == ARITH:
        return f"{'to ' if via else ''}arithmetic parplan does not evaluate"
    return f"{'to ' if via else ''}{written}, an expansion parplan does not evaluate"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def flag_value_notes(sh, argv: list[str], produced: list, where: str) -> None:
    """Warn where a flag's whole value is arithmetic parplan could not evaluate (a number it may need)."""
    marks = {p[0]: p[1] for p in produced if isinstance(p, tuple) and isinstance(p[1], Mark)}
    for flag, value in zip(argv, argv[1:]):
        mark = marks.get(value)
        if mark is None or not flag.startswith("-") or mark.kind != ARITH:
            continue
        sh.warn(f"{where}: {flag} {explain(mark)}; where parplan reads this flag, write the number in the script")


def origin(sh, value: Optional[str]) -> Optional[str]:
    """Why `value` (a flag's whole value) is one parplan could not evaluate, naming the variable and the line that
    set it (explain); None when it is no such value. For a flag reader's error: `--micro-batch-size {origin}`."""
    if not value:
        return None
    for name, opaque in sh.opaque.items():
        text = sh.scalars.get(name, "")
        for start, end, mark in opaque.spans:
            if text[start:end] == value:
                return explain(mark)
    if re.fullmatch(r"\$(?:[1-9]|\{[0-9]+\})", value):
        return explain(Mark(MISSING, value))
    return None


__all__ = ["ARITH", "COMMAND", "MISSING", "UNKNOWN", "VARIABLE", "Mark", "Opaque", "argless", "explain",
           "first_mark", "flag_value_notes", "forget", "joined", "origin", "piece", "set_scalar", "var_pieces"]
