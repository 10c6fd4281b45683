"""Split a shell script into words and statements the way bash's lexer does, for the constructs launch
scripts use (nothing is ever run).

Words keep their quoting as segments (text, kind): `bare` (unquoted: expanded and word-split), `dq`
(double-quoted: expanded, not split), `lit` (single-quoted or backslash-escaped: literal), `redir`
(a redirection operator such as `>`, `2>&1`), `heredoc`/`heredoc-lit` (a here-document's body; `-lit`
when its delimiter was quoted, so nothing in it is expanded). `$(...)`, `$((...))` and backquotes are
kept whole inside their word, for the expander. Separators (`;`, `&&`, `||`, `|`, `&`, newline, `(`, `)`)
are plain words of their own.

Why not bashlex: bashlex 0.18 (the maintained Python bash parser) raises on bash arrays (`A=( ... )`),
on `$((...))` ("arithmetic expansion" NotImplementedError) and on `[[ ... ]]` — 6 of the 9 Megatron-LM
scripts in tests/data/configs use them. See docs/design.md, "Reading launch scripts".
"""

from __future__ import annotations

from functools import cached_property

from planner.errors import UserError
from planner.files.shell_scan import after_backquote, closing

MAX_WORDS = 200_000  # a launch script has a few thousand
SEPARATORS = {";", "&&", "||", "|", "&", ";;", "|&"}


class Word(tuple):
    """A shell word as segments (text, kind)."""

    @cached_property
    def text(self) -> str:
        return "".join(t for t, _ in self)

    @property
    def plain(self) -> bool:
        """Written without quotes or escapes (so `(`, `)`, keywords and separators count)."""
        return len(self) == 1 and self[0][1] == "bare"

    @property
    def kind(self) -> str:
        return self[0][1] if self else "bare"


def make_word(segs: tuple, pos) -> Word:
    word = Word(segs)
    word.pos = pos
    return word


def line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


class _Lexer:
    """One pass over the text; `words` is the result."""

    def __init__(self, text: str, budget: list, notes: list):
        self.text, self.i, self.words = text, 0, []
        self.notes = notes  # (comment offset, offset of the command it ends): see comment_ends_command
        self.parens = 0  # `(` open (an array's items may hold comments)
        self.segs: list = []
        self.buf: list[str] = []
        self.start = 0
        self.heredocs: list = []  # (delimiter, quoted, index of its `<<` word) waiting for the end of the line
        self.budget = budget  # [words left], shared by nested scripts

    def fail(self, what: str, at: int):
        raise UserError(f"cannot read the script: line {line_at(self.text, at)}: {what}")

    def flush_seg(self, kind="bare"):
        if self.buf:
            self.segs.append(("".join(self.buf), kind))
            self.buf.clear()

    def emit(self, segs: tuple, pos: int):
        self.words.append(make_word(segs, pos))
        self.budget[0] -= 1
        if self.budget[0] < 0:
            self.fail(f"more than {MAX_WORDS} words (launch scripts are far shorter)", pos)

    def flush_word(self):
        self.flush_seg()
        if self.segs:
            self.emit(tuple(self.segs), self.start)
            self.segs = []

    def run(self) -> list:
        text, n = self.text, len(self.text)
        while self.i < n:
            c = text[self.i]
            if not self.buf and not self.segs:
                self.start = self.i
            if c == "\\" and self.i + 1 < n:
                if text[self.i + 1] != "\n":
                    self.flush_seg()
                    self.segs.append((text[self.i + 1], "lit"))
                self.i += 2
            elif c == "'":
                self.single_quote()
            elif c == '"':
                self.double_quote()
            elif c == "#" and not self.buf and not self.segs:
                self.comment_ends_command()
                j = text.find("\n", self.i)
                self.i = n if j < 0 else j
            elif c in " \t\r":
                self.flush_word()
                self.i += 1
            elif c == "$" and text.startswith("$(", self.i) or c == "`":
                self.substitution(c)
            elif c == "$" and text.startswith("${", self.i):
                self.braced()
            elif c in "<>" or (c == "&" and text.startswith("&>", self.i)):
                self.redirection()
            elif c in "\n;&|()":
                self.separator(c)
            else:
                self.buf.append(c)
                self.i += 1
        self.flush_word()
        if self.heredocs:
            self.read_heredocs()
        return self.words

    def comment_ends_command(self):
        """Note a comment on a continuation line of a command (`cmd \\` then `  # --flag \\`): bash ends the
        command at that line, a backslash inside the comment included, so the lines after it are not part of it.
        Noted when the comment ends in a backslash or the next line starts with '-' (flags were meant)."""
        text, i = self.text, self.i
        start = text.rfind("\n", 0, i) + 1
        last = self.words[-1] if self.words else None
        if text[start:i].strip() or start < 2 or text[start - 2] != "\\" or self.parens > 0 or last is None \
                or last.plain and (last.text in SEPARATORS or last.text == "\n"):
            return
        end = text.find("\n", i)
        rest = text[end + 1:].lstrip(" \t") if end >= 0 else ""
        if text[i:end if end >= 0 else len(text)].rstrip().endswith("\\") or rest.startswith("-"):
            ends = [k for k, w in enumerate(self.words) if w.plain and (w.text in SEPARATORS or w.text == "\n")]
            self.notes.append((i, self.words[ends[-1] + 1 if ends else 0].pos))

    def single_quote(self):
        self.flush_seg()
        j = self.text.find("'", self.i + 1)
        if j < 0:
            self.fail("unclosed single quote", self.i)
        self.segs.append((self.text[self.i + 1:j], "lit"))
        self.i = j + 1

    def double_quote(self):
        self.flush_seg()
        text, n = self.text, len(self.text)
        j, part = self.i + 1, []
        while j < n and text[j] != '"':
            if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`\n':
                part.append("" if text[j + 1] == "\n" else ("\\" + text[j + 1] if text[j + 1] in "$`" else text[j + 1]))
                j += 2
                continue
            if text.startswith("$(", j) or text.startswith("${", j) or text[j] == "`":
                end = (after_backquote(text, j) - 1 if text[j] == "`" else
                       closing(text, j + 1, "(", ")") if text[j + 1] == "(" else closing(text, j + 1, "{", "}"))
                if end < 0:  # bash: "bad substitution" / unexpected EOF
                    self.fail(f"unclosed {text[j:j + 2] if text[j] == '$' else '`'} inside double quotes", j)
                part.append(text[j:end + 1])
                j = end + 1
                continue
            part.append(text[j])
            j += 1
        if j >= n:
            self.fail("unclosed double quote", self.i)
        self.segs.append(("".join(part), "dq"))
        self.i = j + 1

    def substitution(self, c: str):
        text = self.text
        end = closing(text, self.i + 1, "(", ")") if c == "$" else after_backquote(text, self.i) - 1
        if end < 0:
            self.fail("unclosed $( or `", self.i)
        self.buf.append(text[self.i:end + 1])
        self.i = end + 1

    def braced(self):
        """`${...}` kept whole, quotes inside included (`${X:-"a b"}` is one word)."""
        end = closing(self.text, self.i + 1, "{", "}")
        if end < 0:
            self.fail("unclosed ${", self.i)
        self.buf.append(self.text[self.i:end + 1])
        self.i = end + 1

    def redirection(self):
        text = self.text
        fd = "".join(self.buf) if self.buf and not self.segs and "".join(self.buf).isdigit() else ""
        if fd:
            self.buf.clear()
        else:
            self.flush_word()
        self.start = self.i
        j = self.i
        while j < len(text) and text[j] in "<>&|-" and j - self.i < 3:
            j += 1
        op = text[self.i:j]
        if op.startswith("<<") and not op.startswith("<<<"):
            op = "<<-" if op.startswith("<<-") else "<<"
            self.i += len(op)
            self.heredoc_start()
            self.emit(((op, "redir"),), self.start)
            return
        if op.endswith("&") and j < len(text) and (text[j].isdigit() or text[j] == "-"):
            while j < len(text) and (text[j].isdigit() or text[j] == "-"):
                j += 1
            op = text[self.i:j] + "!"  # `2>&1`: closed, no target word
        self.i = j
        self.emit(((fd + op, "redir"),), self.start)

    def heredoc_start(self):
        text, n = self.text, len(self.text)
        while self.i < n and text[self.i] in " \t":
            self.i += 1
        j, delim, quoted = self.i, [], False
        while j < n and text[j] not in " \t\n;&|<>()":
            if text[j] in "'\"":
                k = text.find(text[j], j + 1)
                if k < 0:
                    self.fail("unclosed quote in a here-document delimiter", j)
                delim.append(text[j + 1:k])
                quoted, j = True, k + 1
                continue
            if text[j] == "\\":
                quoted = True
                j += 1
                continue
            delim.append(text[j])
            j += 1
        if not delim:
            self.fail("here-document without a delimiter", self.i)
        self.heredocs.append(("".join(delim), quoted, len(self.words)))
        self.i = j

    def separator(self, c: str):
        self.flush_word()
        two = self.text[self.i:self.i + 2]
        tok = two if two in ("&&", "||", ";;", "|&") else c
        if tok == "\n" and self.heredocs:
            self.i += 1
            self.read_heredocs()
            self.emit((("\n", "bare"),), self.i - 1)
            return
        self.parens += (tok == "(") - (tok == ")" and self.parens > 0)
        self.emit(((tok, "bare"),), self.i)
        self.i += len(tok)

    def read_heredocs(self):
        """Bodies of the here-documents opened on the line just ended, placed after their `<<` word."""
        text, n = self.text, len(self.text)
        for offset, (delim, quoted, index) in enumerate(self.heredocs):
            index += offset
            strip = self.words[index].text == "<<-"
            lines, pos = [], self.i
            while True:
                if self.i >= n:
                    self.fail(f"here-document ended by {delim[:40]!r} never ends", pos)
                j = text.find("\n", self.i)
                j = n if j < 0 else j
                line = text[self.i:j]
                self.i = min(j + 1, n)
                if (line.lstrip("\t") if strip else line) == delim:
                    break
                lines.append(line.lstrip("\t") if strip else line)
            body = "\n".join(lines) + ("\n" if lines else "")
            self.words.insert(index + 1, make_word(((body, "heredoc-lit" if quoted else "heredoc"),), pos))
        self.heredocs = []


def tokens(text: str, budget: list = None, notes: list = None) -> list:
    """The words of `text` (see the module docstring); `budget` = [words left] shared across nested scripts;
    `notes` receives (offset of a comment, offset of the command it ends) per comment that cuts a continued
    command (_Lexer.comment_ends_command)."""
    return _Lexer(text, budget if budget is not None else [MAX_WORDS], notes if notes is not None else []).run()


def statements(words: list) -> list[tuple[list, str]]:
    """(words, separator after them) per simple command; newlines inside `( ... )` (array values) ignored."""
    stmts: list = []
    cur: list = []
    depth = 0
    for tok in words:
        if tok.plain and tok.text == "(":
            depth += 1
        elif tok.plain and tok.text == ")":
            depth = max(0, depth - 1)
        if depth == 0 and tok.plain and (tok.text in SEPARATORS or tok.text == "\n"):
            if cur:
                stmts.append((cur, tok.text))
            cur = []
            continue
        if not (tok.plain and tok.text == "\n"):
            cur.append(tok)
    if cur:
        stmts.append((cur, "\n"))
    return stmts
