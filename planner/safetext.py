"""Text that is safe to show: names and paths come from users' files, so a model named
"\\x1b[2J..." must not clear the terminal and a name like "[/]" must not be read as rich markup.

`visible` escapes every non-printable character the way Python's repr does (\\x1b, \\n, \\u202e);
`terminal_controls` lists the ones a terminal acts on, for the exporters that refuse such names.
"""

from __future__ import annotations

from rich.text import Text


def _escaped(ch: str) -> str:
    return ch.encode("unicode_escape").decode("ascii") if ch != "\\" else ch


def visible(text: object, keep_newlines: bool = False) -> str:
    """`text` with control, format and other non-printable characters written as escapes
    (newlines kept as they are when `keep_newlines`: multi-line error messages)."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or (keep_newlines and c == "\n") else _escaped(c) for c in s)


def clipped(word: str, limit: int = 160) -> str:
    """`word` (a path or name from a user's file) for a message: whole up to `limit` characters; longer, cut in
    the middle ("...") with the file name kept whole where it leaves room. A plain cut at the end once showed a
    missing 'missing.sh' as 'missing.' under a long folder."""
    word = str(word)
    if len(word) <= limit:
        return word
    folder, name = word.rsplit("/", 1) if "/" in word else ("", word)
    if not folder or len(name) > limit - 8:
        return f"{word[:limit // 2]}...{word[len(word) - limit // 2:]}"
    keep = limit - len(name) - 4
    return f"{folder[:keep // 2]}...{folder[len(folder) - (keep - keep // 2):]}/{name}"


def control_chars(text: object) -> list[str]:
    """The escapes of the non-printable characters in `text`, in order, each once."""
    seen: list[str] = []
    for c in str(text):
        if not c.isprintable() and _escaped(c) not in seen:
            seen.append(_escaped(c))
    return seen


BIDI_CONTROLS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _drives_terminal(ch: str) -> bool:
    """C0 controls but tab and newline, DEL, C1 controls (CSI is 0x9b), bidi overrides."""
    code = ord(ch)
    return (code < 0x20 and ch not in "\t\n") or 0x7F <= code <= 0x9F or ch in BIDI_CONTROLS


def terminal_controls(text: object) -> list[str]:
    """The escapes of the characters in `text` that a terminal or editor acts on (escape sequences,
    carriage return, bell, bidi overrides), each once: what files meant to be read must not hold."""
    return control_chars("".join(ch for ch in str(text) if _drives_terminal(ch)))


def plain(text: object, style: str = "") -> Text:
    """A rich Text of `visible(text)`: printed literally, never parsed as markup."""
    return Text(visible(text), style=style)
