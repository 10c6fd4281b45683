"""Read launch flags back out of a shell script or argument file, without running anything.

Used by the validators (planner.exporters.check_written) and by `parplan check` on native configs
(planner.files.native). It understands what launch scripts do in practice (launch_formats.md, Megatron
and SLURM sections): scalar assignments (`X=1`, `export X=1`), arrays (`ARGS=( --a 1 ... )`),
line continuations, comments, `${X}`, `${X:-default}` and `"${ARGS[@]}"`. Anything else (loops,
command substitution) is skipped. Variables the script does not assign stay as written (`$SLURM_NNODES`).

Expansion is bounded (a 300-byte script doubling `A=$A$A` forty times would need a terabyte): a value
or an array may hold at most MAX_VALUE_CHARS characters, the whole script's expansions at most
MAX_TOTAL_CHARS; past that, and on an unclosed quote, a UserError names the line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

from planner.errors import UserError

SEPARATORS = {";", "&&", "||", "|", "&", ";;"}
KEYWORDS = {"then", "else", "do", "if", "elif", "while", "until", "!", "{", "}", "time"}
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
ARRAY_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}$")
MAX_VALUE_CHARS = 64 * 1024
MAX_TOTAL_CHARS = 16 * 2**20
MAX_WORDS = 200_000  # a launch script has a few thousand


@dataclass
class ShellScript:
    """What a script assigns and which simple commands it runs (words expanded)."""

    scalars: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # exported or command-prefix assignments
    expanded: int = 0  # characters produced by expansion so far (bounded by MAX_TOTAL_CHARS)
    text: str = ""  # the script, for line numbers in messages

    def line_of(self, word) -> str:
        """'line N' of a word (its offset in the script), '' when unknown."""
        pos = getattr(word, "pos", None)
        return "" if pos is None else f"line {self.text.count(chr(10), 0, pos) + 1}"

    def charge(self, name: str, value_len: int, word) -> None:
        """Count `value_len` expanded characters for `name`; refuse a value or a total past the bounds."""
        self.expanded += value_len
        if value_len > MAX_VALUE_CHARS or self.expanded > MAX_TOTAL_CHARS:
            limit = MAX_VALUE_CHARS if value_len > MAX_VALUE_CHARS else MAX_TOTAL_CHARS
            shown = "".join(c if c.isprintable() else "?" for c in name[:40])
            raise UserError(f"cannot read the script: {self.line_of(word)}: {shown} expands past {limit} characters "
                            "(variable expansion is bounded)")


class Word(tuple):
    """A shell word as segments (text, expandable): single-quoted text is never expanded."""

    @cached_property
    def text(self) -> str:
        return "".join(t for t, _ in self)

    @property
    def plain(self) -> bool:
        """Written without quotes or escapes (so `(`, `)`, keywords and separators count)."""
        return len(self) == 1 and self[0][1] == "bare"


def _tokens(text: str) -> list:
    """Split like bash: quotes, backslashes, comments, newlines and `;&|()` as separators."""
    out: list = []
    segs: list = []
    buf: list[str] = []
    kind = "bare"
    i, n = 0, len(text)
    start = [0]

    def flush_seg(k):
        if buf:
            segs.append(("".join(buf), k))
            buf.clear()

    def flush_word():
        flush_seg(kind)
        if segs:
            out.append(_word(tuple(segs), start[0]))
            segs.clear()
            if len(out) > MAX_WORDS:
                raise UserError(f"cannot read the script: line {_line(text, i)}: more than {MAX_WORDS} words "
                                "(launch scripts are far shorter)")

    while i < n:
        c = text[i]
        if not buf and not segs:
            start[0] = i
        if c == "\\" and i + 1 < n:
            if text[i + 1] != "\n":
                flush_seg(kind)
                segs.append((text[i + 1], "lit"))
            i += 2
            continue
        if c == "'":
            flush_seg(kind)
            j = text.find("'", i + 1)
            if j < 0:
                raise UserError(f"cannot read the script: line {_line(text, i)}: unclosed single quote")
            segs.append((text[i + 1:j], "lit"))
            i = j + 1
            continue
        if c == '"':
            flush_seg(kind)
            j, part = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`\n':
                    part.append("" if text[j + 1] == "\n" else text[j + 1])
                    j += 2
                    continue
                part.append(text[j])
                j += 1
            if j >= n:
                raise UserError(f"cannot read the script: line {_line(text, i)}: unclosed double quote")
            segs.append(("".join(part), "dq"))
            i = j + 1
            continue
        if c == "#" and not buf and not segs:
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in " \t\r":
            flush_word()
            i += 1
            continue
        if c == "$" and text.startswith("$(", i):
            depth, j = 0, i + 1
            while j < n:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            buf.append(text[i:j + 1])
            i = j + 1
            continue
        if c in "\n;&|()":
            flush_word()
            two = text[i:i + 2]
            tok = two if two in ("&&", "||", ";;") else c
            out.append(_word(((tok, "bare"),), i))
            i += len(tok)
            continue
        buf.append(c)
        i += 1
    flush_word()
    return out


def _word(segs: tuple, pos: int) -> Word:
    word = Word(segs)
    word.pos = pos
    return word


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _statements(tokens: list) -> list[list]:
    stmts: list[list] = []
    cur: list = []
    depth = 0
    for tok in tokens:
        if tok.plain and tok.text == "(":
            depth += 1
        elif tok.plain and tok.text == ")":
            depth = max(0, depth - 1)
        if depth == 0 and tok.plain and (tok.text in SEPARATORS or tok.text == "\n"):
            if cur:
                stmts.append(cur)
            cur = []
            continue
        if not (tok.plain and tok.text == "\n"):
            cur.append(tok)
    if cur:
        stmts.append(cur)
    return stmts


def read_script(text: str) -> ShellScript:
    """Parse `text` into assignments and expanded simple commands."""
    sh = ShellScript(text=text)
    for stmt in _statements(_tokens(text)):
        while stmt and stmt[0].plain and stmt[0].text in KEYWORDS:
            stmt = stmt[1:]
        if stmt and stmt[0].plain and stmt[0].text in ("export", "local", "readonly", "declare"):
            stmt = [w for w in stmt[1:] if not w.text.startswith("-")]
            _assignments(sh, stmt, exported=True)
            continue
        rest = _assignments(sh, stmt, exported=False)
        if rest:
            sh.commands.append(expand_words(sh, rest))
    return sh


def _is_paren(word, ch: str) -> bool:
    return word.plain and word.text == ch


def _assignments(sh: ShellScript, stmt: list, exported: bool) -> list:
    """Consume leading assignments; return the command words that follow them."""
    i = 0
    while i < len(stmt):
        m = ASSIGN.match(stmt[i][0][0]) if stmt[i][0][1] == "bare" else None
        if not m:
            break
        name, append, first = m.groups()
        word = _word(((first, "bare"),) + tuple(stmt[i][1:]), getattr(stmt[i], "pos", None))
        if not word.text and i + 1 < len(stmt) and _is_paren(stmt[i + 1], "("):
            end = next((j for j in range(i + 2, len(stmt)) if _is_paren(stmt[j], ")")), len(stmt))
            items = (sh.arrays.get(name, []) if append else []) + expand_words(sh, stmt[i + 2:end])
            sh.charge(name, sum(len(x) + 1 for x in items), stmt[i])
            sh.arrays[name] = items
            i = end + 1
            continue
        val = (sh.scalars.get(name, "") if append else "") + expand(sh, word)
        sh.charge(name, len(val), stmt[i])
        sh.scalars[name] = val
        if exported or i + 1 < len(stmt):
            sh.env[name] = sh.scalars[name]
        i += 1
    return stmt[i:]


def _expand_text(sh: ShellScript, text: str, room: list) -> str:
    """`text` with variables substituted; room[0] counts down the characters a word may still grow by."""
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        colon = (m.group(2) or "").startswith(":")
        if name in sh.scalars and (sh.scalars[name] or not colon):
            value = sh.scalars[name]
        elif m.group(2):
            value = m.group(3) or ""
        else:
            value = m.group(0)
        room[0] -= len(value)
        if room[0] < 0:
            raise _TooLong
        return value
    return VAR.sub(sub, text)


class _TooLong(Exception):
    """A word's expansion passed MAX_VALUE_CHARS (re-raised as a UserError naming the line)."""


def expand(sh: ShellScript, word) -> str:
    """Substitute the variables the script assigned (`${X:-d}` gives d when X is unknown);
    single-quoted and escaped text stays literal. A word grows to at most MAX_VALUE_CHARS."""
    if isinstance(word, str):
        word = Word(((word, "bare"),))
    room = [MAX_VALUE_CHARS]
    try:
        return "".join(t if k == "lit" else _expand_text(sh, t, room) for t, k in word)
    except _TooLong:
        raise UserError(f"cannot read the script: {sh.line_of(word) or 'a word'}: expands past {MAX_VALUE_CHARS} "
                        "characters (variable expansion is bounded)") from None


def expand_words(sh: ShellScript, words: list) -> list[str]:
    """Expand every word; `${ARR[@]}` becomes the array's items."""
    out: list[str] = []
    for w in words:
        m = ARRAY_REF.match(w.text) if len(w) == 1 and w[0][1] != "lit" else None
        if m:
            items = sh.arrays.get(m.group(1), [])
            sh.charge(w.text, sum(len(x) + 1 for x in items), w)
            out.extend(items)
        else:
            value = expand(sh, w)
            sh.charge(w.text[:40], len(value), w)
            out.append(value)
    return out


# ---- launch commands and flags ------------------------------------------------------------------

def find_launch(sh: ShellScript, launcher: str) -> list[list[str]]:
    """Argument lists following `launcher` (e.g. torchrun, deepspeed) in every command using it."""
    found = []
    for words in sh.commands:
        for i, w in enumerate(words):
            if w.rsplit("/", 1)[-1] == launcher:
                found.append(words[i + 1:])
                break
    return found


def split_at_script(argv: list[str]) -> tuple[list[str], Optional[str], list[str]]:
    """(launcher options, training script, script arguments): the script is the first .py word
    or the module after `-m`."""
    for i, w in enumerate(argv):
        if w.endswith(".py") and not w.startswith("-"):
            return argv[:i], w, argv[i + 1:]
        if w in ("-m", "--module") and i + 1 < len(argv):
            return argv[:i], argv[i + 1], argv[i + 2:]
    return argv, None, []


def parse_flags(words: list[str], switches: set[str] = frozenset()) -> list[tuple[str, Optional[str]]]:
    """`--flag value`, `--flag=value` and bare switches, in order. A word not starting with '-'
    after a flag is its value unless the flag is a known switch."""
    out: list[tuple[str, Optional[str]]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and "=" in w:
            flag, value = w.split("=", 1)
            out.append((flag, value))
        elif w.startswith("-") and not _number(w):
            nxt = words[i + 1] if i + 1 < len(words) else None
            takes = nxt is not None and (not nxt.startswith("-") or _number(nxt)) and w not in switches
            out.append((w, nxt if takes else None))
            i += 1 if takes else 0
        i += 1
    return out


def _number(word: str) -> bool:
    try:
        float(word)
        return True
    except ValueError:
        return False


def flag_dict(pairs: list[tuple[str, Optional[str]]]) -> dict[str, Optional[str]]:
    """Last value wins (argparse's rule)."""
    return {flag: value for flag, value in pairs}


def sbatch_options(text: str) -> dict[str, str]:
    """`#SBATCH --key=value` / `#SBATCH --key value` lines before the first command."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("#SBATCH"):
            continue
        try:
            words = shlex.split(line[len("#SBATCH"):], comments=True)
        except ValueError as err:  # shlex: "No closing quotation", "No escaped character"
            raise UserError(f"cannot read the script: line {number}: #SBATCH options: {str(err).lower()}") from None
        for flag, value in parse_flags(words):
            out[flag] = value if value is not None else ""
    return out
