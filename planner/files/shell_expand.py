"""Expand a shell word the way bash does, from what the script assigned (nothing is ever run).

Parameter expansion: `$X`, `${X}`, `${X:-w}`/`${X-w}` (w itself quoted and expanded), `${X:=w}` (also
assigns), `${X:+w}`, `${#X}`, `${A[@]}`/`${A[*]}`/`${A[i]}`, positional `$1`/`${1:-w}`, `$0`. Arithmetic
`$((...))` on integers (+ - * / % and parentheses). Command substitution only for what locates files:
`pwd` and `dirname X` (the script's folder), and `cat F` / `< F` of a file the script wrote with a
here-document. Anything else (an unassigned variable, `$(scontrol ...)`, `${X/a/b}`, arithmetic over such a
value) stays as written, ONE piece that is never split, and counts as unknown (`sh.unknown`), so a test on it
is not decided; a variable set to it keeps it so (planner.files.shell_unknown). A positional argument the
script was not given is the empty string in a test, as written elsewhere (shell_unknown, MISSING).

Unquoted results are split into fields on blanks (bash's word splitting with the default IFS), quoted
ones are not, `"${A[@]}"` gives one field per item: what argparse finally sees.

Bounded: a word grows to at most MAX_VALUE_CHARS characters; past that a UserError names the line.
"""

from __future__ import annotations

import posixpath
import re

from planner.errors import UserError
from planner.files.shell_arith import evaluate
from planner.files.shell_builtins import cat_substitution
from planner.files.shell_scan import after_backquote, closing, is_arithmetic
from planner.files.shell_tokens import Word, line_at
from planner.files.shell_unknown import (
    ARITH, COMMAND, MISSING, VARIABLE, Mark, argless, first_mark, joined, piece, set_scalar, var_pieces,
)

MAX_VALUE_CHARS = 64 * 1024
MAX_NESTING = 16  # ${A:-${B:-...}} defaults within defaults
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]")
PARAM = re.compile(r"(#?)([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(\[[^\]]*\])?(?:(:?[-=+?])(.*))?$", re.S)
BREAK = object()  # a field boundary that `"${A[@]}"` forces between items


class _TooLong(Exception):
    """A word's expansion passed MAX_VALUE_CHARS (re-raised as a UserError naming the line)."""


def too_long(sh, word) -> UserError:
    return UserError(f"cannot read the script: {sh.line_of(word) or 'a word'}: expands past {MAX_VALUE_CHARS} "
                     "characters (variable expansion is bounded)")


def pieces(sh, word: Word) -> list:
    """(text, splittable) pieces of an expanded word, with BREAK between the items of `"${A[@]}"`."""
    room = [MAX_VALUE_CHARS]
    out: list = []
    try:
        for text, kind in word:
            if kind == "lit":
                out.append((text, False))
            elif kind in ("dq", "heredoc"):
                out.extend(_text(sh, text, room, quoted=True))
            elif kind == "bare":
                out.extend(_text(sh, text, room, quoted=False))
            else:  # heredoc-lit, redir
                out.append((text, False))
    except _TooLong:
        raise too_long(sh, word) from None
    return out


def _grow(room: list, value: str) -> str:
    room[0] -= len(value)
    if room[0] < 0:
        raise _TooLong
    return value


def _text(sh, text: str, room: list, quoted: bool) -> list:
    """Pieces of one segment's text: literal runs unsplittable, expansion results splittable unless quoted."""
    out, lit, i, n = [], [], 0, len(text)
    expanded = False  # `"${A[@]}"` of an empty array is no field at all, `""` is one empty field
    while i < n:
        c = text[i]
        if quoted and c == "\\" and i + 1 < n and text[i + 1] in "$`\\":
            lit.append(text[i + 1])
            i += 2
            continue
        if c not in "$`" or i + 1 >= n and c == "$":
            lit.append(c)
            i += 1
            continue
        end, produced = _one(sh, text, i, room, quoted)
        if end <= i:
            lit.append(c)
            i += 1
            continue
        if lit:
            out.append(("".join(lit), False))
            lit = []
        out.extend(produced)
        expanded, i = True, end
    if lit or (quoted and not out and not expanded):
        out.append(("".join(lit), False))
    return out


def _one(sh, text: str, i: int, room: list, quoted: bool) -> tuple[int, list]:
    """(index after the expansion at text[i], its pieces); end <= i when text[i] starts none."""
    split = not quoted
    if text[i] == "`" or text.startswith("$(", i):
        end = after_backquote(text, i) - 1 if text[i] == "`" else closing(text, i + 1, "(", ")")
        if end > 0 and is_arithmetic(text, i, end):
            return end + 1, [_arith(sh, text[i + 3:end - 1], text[i:end + 1], room, split)]
        if end < 0:
            raise UserError(f"cannot read the script: {sh.line(None)}: unclosed {text[i:i + 2]} "
                            "(bash: bad substitution)")
        inner, written = text[i + 1:end] if text[i] == "`" else text[i + 2:end], text[i:end + 1]
        value = _command(sh, inner)
        return end + 1, [piece(sh, _grow(room, written), COMMAND) if value is None else (_grow(room, value), split)]
    if text.startswith("${", i):
        end = closing(text, i + 1, "{", "}")
        if end < 0:
            raise UserError(f"cannot read the script: {sh.line(None)}: unclosed ${{ (bash: bad substitution)")
        return end + 1, _param(sh, text[i + 2:end], text[i:end + 1], room, quoted)
    m = NAME.match(text, i + 1)
    if m:
        return m.end(), _value(sh, m.group(0), None, text[i:m.end()], room, quoted)
    if i + 1 < len(text) and text[i + 1] in "@*#?$!-":
        return i + 2, [piece(sh, text[i:i + 2])]
    return i, []


def _value(sh, name: str, index, written: str, room: list, quoted: bool) -> list:
    """The pieces `$name` / `${name[index]}` expands to; unknown stays as written."""
    if index in ("@", "*") and name in sh.arrays:
        items = sh.arrays[name]
        if quoted and index == "@":
            out = []
            for k, item in enumerate(items):
                out += ([BREAK] if k else []) + [(_grow(room, item), False)]
            return out
        return [(_grow(room, " ".join(items)), not quoted)]
    value = lookup(sh, name, index)
    if value is None:
        return [piece(sh, _grow(room, written), MISSING if name.isdigit() else VARIABLE, quoted)]
    return var_pieces(sh, name, _grow(room, value), quoted) if index is None else [(_grow(room, value), not quoted)]


def lookup(sh, name: str, index=None):
    """A variable's value (None when the script never set it): scalars, array items, positional args."""
    if name.isdigit():
        k = int(name)
        if k == 0:
            return sh.script_name
        return sh.positional[k - 1] if k <= len(sh.positional) else None
    if name in sh.arrays:
        items = sh.arrays[name]
        k = int(index) if index and index.isdigit() else 0
        return items[k] if k < len(items) else ""
    return sh.scalars.get(name)


def _param(sh, inner: str, written: str, room: list, quoted: bool) -> list:
    m = PARAM.match(inner)
    if not m:
        return [piece(sh, _grow(room, written))]
    count, name, index, op, word = m.groups()
    index = index[1:-1] if index else None
    if count:
        value = lookup(sh, name, index)
        if op or value is None or name in sh.opaque:
            return [piece(sh, _grow(room, written))]
        return [(_grow(room, str(len(sh.arrays.get(name, [])) if index in ("@", "*") else len(value))), False)]
    if not op:
        return _value(sh, name, index, written, room, quoted)
    value = argless(sh, name, lookup(sh, name, index)) if not (index in ("@", "*") and name in sh.arrays) \
        else " ".join(sh.arrays[name])
    is_set = value is not None and (bool(value) or not op.startswith(":"))
    if op.endswith("+"):
        return _word(sh, word, room, quoted) if is_set else []
    if is_set:
        return _value(sh, name, index, written, room, quoted)
    if op.endswith("?"):
        return [piece(sh, _grow(room, written))]
    if sh.nesting >= MAX_NESTING:
        raise UserError(f"cannot read the script: {sh.line(None)}: ${{...:-...}} nested more than {MAX_NESTING} deep")
    sh.nesting += 1
    try:
        produced = _word(sh, word, room, quoted)
    finally:
        sh.nesting -= 1
    if op.endswith("=") and not name.isdigit():
        set_scalar(sh, name, *joined(produced, BREAK), None)
        sh.charge(name, len(sh.scalars[name]), None)
    return produced


def _word(sh, text: str, room: list, quoted: bool) -> list:
    """The pieces of the `w` in `${X:-w}`: its own quotes apply; inside "..." it is not split."""
    from planner.files.shell_tokens import tokens
    out: list = []
    for k, word in enumerate(tokens(text, sh.budget) if text.strip() else [Word(((text, "bare"),))]):
        if k:
            out.append((" ", not quoted))
        for seg_text, kind in word:
            if kind == "lit":
                out.append((seg_text, False))
            else:
                out.extend(_text(sh, seg_text, room, quoted or kind == "dq"))
    return out


def _arith(sh, expr: str, written: str, room: list, split: bool) -> tuple:
    """The piece of `$((expr))`: variables substituted, then planner.files.shell_arith; unknown -> as written, its
    Mark's cause the first unknown value it used."""
    produced = _text(sh, expr, [MAX_VALUE_CHARS], True)
    cause = first_mark(produced)

    def variable(m):
        nonlocal cause
        opaque = sh.opaque.get(m.group(0))
        if cause is None and (opaque or m.group(0) not in sh.scalars):
            cause = opaque.spans[0][2] if opaque else Mark(VARIABLE, "$" + m.group(0))
        return "?" if opaque else sh.scalars.get(m.group(0), "?")

    value = evaluate(re.sub(r"[A-Za-z_][A-Za-z0-9_]*", variable, join(produced)))
    if value is None:
        return piece(sh, _grow(room, written), ARITH, cause=cause)
    return _grow(room, str(value)), split


def _command(sh, inner: str):
    """`$(pwd)`, `$(dirname X)`: the script's folder; `$(cat F)`, `$(< F)` of a file the script wrote with a
    here-document: its text (planner.files.shell_builtins); anything else None (nothing is run)."""
    words = inner.split()
    text = cat_substitution(sh, inner)
    if text is not None:
        return text
    if words == ["pwd"] and sh.script_dir is not None:
        return sh.script_dir
    if len(words) == 2 and words[0] == "dirname":
        target = expand(sh, Word(((words[1].strip('"'), "dq"),)))
        if "$" not in target and "`" not in target:
            return posixpath.dirname(target) or "."
    return None


def join(produced: list) -> str:
    """The pieces as one string (an assignment's value: no splitting; array items joined by a blank)."""
    return "".join(" " if p is BREAK else p[0] for p in produced)


def fields(produced: list) -> list[str]:
    """Word splitting: blanks in splittable pieces end a field; a quoted empty piece is an empty field."""
    out, cur = [], None
    for piece in produced:
        if piece is BREAK:
            out.append(cur or "")
            cur = None
            continue
        text, split = piece
        if not split:
            cur = (cur or "") + text
            continue
        for k, chunk in enumerate(re.split(r"[ \t\n]+", text)):
            if k and cur is not None:
                out.append(cur)
                cur = None
            if chunk:
                cur = (cur or "") + chunk
    if cur is not None:
        out.append(cur)
    return out


def expand(sh, word) -> str:
    """One string: the word expanded without splitting (assignment values, here-documents)."""
    if isinstance(word, str):
        word = Word(((word, "bare"),))
    return join(pieces(sh, word))


def expand_fields(sh, word: Word) -> list[str]:
    """The fields a command word becomes."""
    return fields(pieces(sh, word))


__all__ = ["MAX_VALUE_CHARS", "expand", "expand_fields", "fields", "join", "line_at", "lookup", "pieces"]
