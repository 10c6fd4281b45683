"""The structure of a launch script's statements: `if`/`elif`/`else`/`fi`, `{ ...; }` groups, loops and
`case` (kept as one node to skip), function definitions (dropped), `&&`/`||` separators kept on each node.
Nodes are tuples (kind, a, b, position, separator after it): ("cmd", words, None, ...), ("group", nodes,
None, ...), ("if", [(condition nodes, body nodes)], else nodes or None, ...), ("skip", keyword, whether
the skipped part holds anything parplan would read, ...). Nesting past MAX_NESTING is a UserError.
"""

from __future__ import annotations

import re

from planner.errors import UserError

MAX_NESTING = 64  # if / { } inside one another (launch scripts nest two or three)
OPENERS = {"if", "then", "elif", "else", "fi", "for", "while", "until", "select", "case", "do", "done", "esac",
           "{", "}", "!", "function"}
QUIET = {"echo", "printf", "exit", "mkdir", "true", ":", "set", "cd", "clear", "sleep", "unset", "false", "rm",
         "ls", "date", "nvidia-smi", "hostname", "env", "export"}


def parse(stmts: list) -> list:
    """The nodes of a statement list (shell_tokens.statements)."""
    return _parse(_split_keywords(stmts), 0, set())[0]


def _head(stmt) -> str:
    words = stmt[0]
    return words[0].text if words and words[0].plain and words[0].text in OPENERS else ""


def _split_keywords(stmts: list) -> list:
    """`then X=1` -> `then` + `X=1`; `if [ a ]` -> `if` + `[ a ]` (keywords as statements of their own)."""
    out = []
    for words, sep in stmts:
        while len(words) > 1 and words[0].plain and words[0].text in OPENERS - {"fi", "done", "esac", "}"} \
                and not (words[0].text == "function"):
            out.append(([words[0]], "\n"))
            words = words[1:]
        out.append((words, sep))
    return out


def _parse(stmts: list, i: int, stops: set, depth: int = 0) -> tuple[list, int]:
    """Nodes up to a statement whose keyword is in `stops` (returned index points at it)."""
    if depth > MAX_NESTING:
        words = stmts[min(i, len(stmts) - 1)][0]
        raise UserError(f"cannot read the script: an if or {{ }} group nested more than {MAX_NESTING} deep "
                        f"(near {words[0].text[:20]!r})")
    nodes = []
    while i < len(stmts):
        head = _head(stmts[i])
        if head in stops:
            return nodes, i
        pos = getattr(stmts[i][0][0], "pos", None)
        if head == "if":
            node, i = _parse_if(stmts, i + 1, pos, depth + 1)
        elif head in ("for", "while", "until", "select", "case"):
            end = _end(stmts, i, head)
            node, i = ("skip", head, _skip(stmts, i, head), pos, stmts[end - 1][1]), end
        elif head == "function" or _is_function(stmts[i][0]):
            i = _end_braces(stmts, i)
            continue
        elif head == "{":
            body, i = _parse(stmts, i + 1, {"}"}, depth + 1)
            node = ("group", body, None, pos, stmts[i][1] if i < len(stmts) else "\n")
            i += 1
        elif head in ("}", "fi", "done", "esac", "then", "do", "elif", "else", "!"):
            i += 1  # stray keyword (unbalanced script): nothing to do
            continue
        else:
            node, i = ("cmd", stmts[i][0], None, pos, stmts[i][1]), i + 1
        nodes.append(node)
    return nodes, i


def _parse_if(stmts: list, i: int, pos, depth: int) -> tuple:
    branches, other = [], None
    while True:
        cond, i = _parse(stmts, i, {"then"}, depth)
        body, i = _parse(stmts, i + 1, {"elif", "else", "fi"}, depth)
        branches.append((cond, body))
        head = _head(stmts[i]) if i < len(stmts) else "fi"
        i += 1
        if head == "elif":
            continue
        if head == "else":
            other, i = _parse(stmts, i, {"fi"}, depth)
            i += 1
        sep = stmts[i - 1][1] if 0 < i <= len(stmts) else "\n"
        return ("if", branches, other, pos, sep), i


def _end(stmts: list, i: int, head: str) -> int:
    """Index after the `done`/`esac` closing the loop or case at i."""
    close = "esac" if head == "case" else "done"
    opens = {"case"} if head == "case" else {"for", "while", "until", "select"}
    depth = 0
    while i < len(stmts):
        h = stmts[i][0][0].text if stmts[i][0][0].plain else ""
        depth += (h in opens) - (h == close)
        i += 1
        if depth <= 0:
            break
    return i


def _skip(stmts: list, i: int, head: str) -> bool:
    """Whether the skipped loop/case holds anything parplan would read (not only echo/mkdir/exit)."""
    return any(not _quiet_words(words) for words, _ in stmts[i + 1:_end(stmts, i, head) - 1])


def _is_function(words: list) -> bool:
    return len(words) >= 3 and words[0].plain and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]*", words[0].text) \
        and words[1].plain and words[1].text == "(" and words[2].plain and words[2].text == ")"


def _end_braces(stmts: list, i: int) -> int:
    depth, seen = 0, False
    while i < len(stmts):
        for w in stmts[i][0]:
            if w.plain and w.text in ("{", "}"):
                depth += 1 if w.text == "{" else -1
                seen = True
        i += 1
        if seen and depth <= 0:
            break
    return i


def _quiet_words(words: list) -> bool:
    first = words[0].text if words else ""
    return first in QUIET or first in OPENERS or first.startswith("#")


def quiet(nodes: list) -> bool:
    for node in nodes:
        if node[0] == "cmd" and not _quiet_words(node[1]):
            return False
        if node[0] == "group" and not quiet(node[1]):
            return False
        if node[0] == "if" and not all(quiet(c) and quiet(b) for c, b in node[1]) or \
                node[0] == "if" and node[2] and not quiet(node[2]):
            return False
        if node[0] == "skip" and node[2]:
            return False
    return True
