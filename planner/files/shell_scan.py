"""Where a quoted string, a substitution or a `${...}` ends, as bash's parser finds it (nothing is run): inside
`$( )` and `${ }` quotes quote and backslashes escape; inside "...", a backslash escapes $ ` " \\ and newline
(bash(1), QUOTING), and `$( )`, `${ }` and backquotes nest with quotes of their own; inside `$( )` a `#` that
starts a word starts a comment. Used by planner.files.shell_tokens and shell_expand."""

from __future__ import annotations

from planner.errors import UserError

MAX_NESTING = 100  # quotes and substitutions within one another (a launch script nests two or three)


def closing(text: str, i: int, open_: str, close: str, depth: int = 0) -> int:
    """Index of the `close` matching the `open_` at text[i], -1 if none, skipping what bash's parser skips:
    backslash escapes, '...' and "..." strings (inside which `\\"` does not close and `$( )`, `${ }`, backquotes
    nest), backquotes, and (inside `$( )`) comments. `$((` and `$( (` close alike: by counting parentheses."""
    if depth > MAX_NESTING:
        raise UserError(f"cannot read the script: quotes and substitutions nested more than {MAX_NESTING} deep")
    count, j, n = 0, i, len(text)
    while 0 <= j < n:
        c = text[j]
        if c == "\\":
            j += 2
        elif c == "'":
            k = text.find("'", j + 1)
            j = k + 1 if k >= 0 else -1
        elif c == '"':
            j = after_double(text, j, depth + 1)
        elif c == "`":
            j = after_backquote(text, j)
        elif c == "#" and open_ == "(" and j > i and text[j - 1] in " \t\n;&|":
            k = text.find("\n", j)
            j = n if k < 0 else k
        else:
            count += (c == open_) - (c == close)
            if count == 0:
                return j
            j += 1
    return -1


def after_double(text: str, i: int, depth: int = 0) -> int:
    """Index after the `"` closing the double-quoted string opened at text[i], -1 if none (bash: inside "...",
    a backslash escapes $ ` " \\ and newline; `$( )`, `${ }` and backquotes nest, quotes of their own inside)."""
    j, n = i + 1, len(text)
    while 0 <= j < n:
        c = text[j]
        if c == '"':
            return j + 1
        if c == "\\":
            j += 2
        elif c == "`":
            j = after_backquote(text, j)
        elif c == "$" and text[j + 1:j + 2] in ("(", "{"):
            k = closing(text, j + 1, text[j + 1], ")" if text[j + 1] == "(" else "}", depth + 1)
            j = k + 1 if k >= 0 else -1
        else:
            j += 1
    return -1


def after_backquote(text: str, i: int) -> int:
    """Index after the backquote closing the one at text[i] (a backslash escapes the next character), -1 if none."""
    j, n = i + 1, len(text)
    while j < n:
        if text[j] == "\\":
            j += 2
        elif text[j] == "`":
            return j + 1
        else:
            j += 1
    return -1


def is_arithmetic(text: str, i: int, end: int) -> bool:
    """Whether the `$((` at text[i], whose `$(` closes at text[end], is arithmetic: the inner `(` closes just
    before the outer one (`$((2+3))`), not earlier (`$((cd x; pwd) | wc -l)` is a command substitution)."""
    return text.startswith("$((", i) and closing(text, i + 2, "(", ")") == end - 1


__all__ = ["after_backquote", "after_double", "closing", "is_arithmetic"]
