"""Read launch flags back out of a shell script or argument file, without running anything.

Used by the validators (planner.exporters.validate) and by `parplan check` on native configs
(planner.native). It understands what launch scripts do in practice (launch_formats.md, Megatron
and SLURM sections): scalar assignments (`X=1`, `export X=1`), arrays (`ARGS=( --a 1 ... )`),
line continuations, comments, `${X}`, `${X:-default}` and `"${ARGS[@]}"`. Anything else (loops,
command substitution) is skipped. Variables the script does not assign stay as written (`$SLURM_NNODES`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Optional

from planner.errors import UserError

SEPARATORS = {";", "&&", "||", "|", "&", ";;"}
KEYWORDS = {"then", "else", "do", "if", "elif", "while", "until", "!", "{", "}", "time"}
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
ARRAY_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}$")


@dataclass
class ShellScript:
    """What a script assigns and which simple commands it runs (words expanded)."""

    scalars: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # exported or command-prefix assignments


class Word(tuple):
    """A shell word as segments (text, expandable): single-quoted text is never expanded."""

    @property
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

    def flush_seg(k):
        if buf:
            segs.append(("".join(buf), k))
            buf.clear()

    def flush_word():
        flush_seg(kind)
        if segs:
            out.append(Word(tuple(segs)))
            segs.clear()

    while i < n:
        c = text[i]
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
                raise UserError(f"cannot read the script: unclosed single quote at offset {i}")
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
                raise UserError(f"cannot read the script: unclosed double quote at offset {i}")
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
            out.append(Word(((tok, "bare"),)))
            i += len(tok)
            continue
        buf.append(c)
        i += 1
    flush_word()
    return out


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
    sh = ShellScript()
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
        word = Word(((first, "bare"),) + tuple(stmt[i][1:]))
        if not word.text and i + 1 < len(stmt) and _is_paren(stmt[i + 1], "("):
            end = next((j for j in range(i + 2, len(stmt)) if _is_paren(stmt[j], ")")), len(stmt))
            items = expand_words(sh, stmt[i + 2:end])
            sh.arrays[name] = (sh.arrays.get(name, []) if append else []) + items
            i = end + 1
            continue
        val = expand(sh, word)
        sh.scalars[name] = (sh.scalars.get(name, "") if append else "") + val
        if exported or i + 1 < len(stmt):
            sh.env[name] = sh.scalars[name]
        i += 1
    return stmt[i:]


def _expand_text(sh: ShellScript, text: str) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        colon = (m.group(2) or "").startswith(":")
        if name in sh.scalars and (sh.scalars[name] or not colon):
            return sh.scalars[name]
        if m.group(2):
            return m.group(3) or ""
        return m.group(0)
    return VAR.sub(sub, text)


def expand(sh: ShellScript, word) -> str:
    """Substitute the variables the script assigned (`${X:-d}` gives d when X is unknown);
    single-quoted and escaped text stays literal."""
    if isinstance(word, str):
        word = Word(((word, "bare"),))
    return "".join(t if k == "lit" else _expand_text(sh, t) for t, k in word)


def expand_words(sh: ShellScript, words: list) -> list[str]:
    """Expand every word; `${ARR[@]}` becomes the array's items."""
    out: list[str] = []
    for w in words:
        m = ARRAY_REF.match(w.text) if len(w) == 1 and w[0][1] != "lit" else None
        if m:
            out.extend(sh.arrays.get(m.group(1), []))
        else:
            out.append(expand(sh, w))
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
    for line in text.splitlines():
        if not line.startswith("#SBATCH"):
            continue
        for flag, value in parse_flags(shlex.split(line[len("#SBATCH"):], comments=True)):
            out[flag] = value if value is not None else ""
    return out
