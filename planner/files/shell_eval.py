"""Evaluate a launch script's statements on what is known, without running anything.

What is evaluated (bash's rules): assignments (`X=1`, `export X=1`, `declare`, `X+=...`, arrays
`A=( ... )` and `A+=( ... )` with each item expanded and split as bash does), `unset`, `exit` (reading
stops), `if`/`elif`/`else`/`fi` and `&&`/`||` lists on `[ ]`, `[[ ]]` and `test` expressions whose
operands are known (=, ==, != with globs, -eq -ne -lt -le -gt -ge, -z, -n, !), `{ ...; }` groups, files
`source`d or `.`-ed (read only from the script's own folder), scripts run through `bash -c "..."`,
`srun ... bash -c '...'` and `sbatch <<EOF` here-documents (their text evaluated in turn, as the child
shell would), and `cat <<EOT > $FILE` here-documents (kept in `sh.files`, e.g. a DeepSpeed config).

What is not: loops, `case`, functions and conditions that depend on the machine (`[ -f x ]`, an
unassigned variable). They are skipped with ONE warning each (none when what is skipped only echoes,
creates folders or exits). Nesting (source, bash -c, here-documents) is at most MAX_DEPTH deep.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from pathlib import Path

from planner.errors import UserError
from planner.files.shell_expand import expand, expand_fields, fields, pieces
from planner.files.shell_tokens import statements, tokens

MAX_DEPTH = 6
MAX_NESTING = 64  # if / { } inside one another (launch scripts nest two or three)
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=(.*)$", re.S)
OPENERS = {"if", "then", "elif", "else", "fi", "for", "while", "until", "select", "case", "do", "done", "esac",
           "{", "}", "!", "function"}
QUIET = {"echo", "printf", "exit", "mkdir", "true", ":", "set", "cd", "clear", "sleep", "unset", "false", "rm",
         "ls", "date", "nvidia-smi", "hostname", "env", "export"}
DECLARE = {"export", "declare", "local", "readonly", "typeset"}
SHELLS = {"bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/env"}


def run(sh, text: str, where: str) -> None:
    """Evaluate `text` (a script, a sourced file, a `bash -c` string) into `sh`."""
    if sh.depth >= MAX_DEPTH:
        sh.warn(f"{where}: nested more than {MAX_DEPTH} deep (source / bash -c); not read")
        return
    saved = sh.text, sh.where
    sh.text, sh.where, sh.depth = text, where, sh.depth + 1
    try:
        nodes, _ = _parse(_split_keywords(statements(tokens(text, sh.budget))), 0, set())
        _exec_list(sh, nodes)
    finally:
        (sh.text, sh.where), sh.depth = saved, sh.depth - 1


# ---- structure ----------------------------------------------------------------------------------

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


def _quiet(nodes: list) -> bool:
    for node in nodes:
        if node[0] == "cmd" and not _quiet_words(node[1]):
            return False
        if node[0] == "group" and not _quiet(node[1]):
            return False
        if node[0] == "if" and not all(_quiet(c) and _quiet(b) for c, b in node[1]) or \
                node[0] == "if" and node[2] and not _quiet(node[2]):
            return False
        if node[0] == "skip" and node[2]:
            return False
    return True


# ---- execution ----------------------------------------------------------------------------------

def _exec_list(sh, nodes: list):
    """Run nodes in order, honouring `&&`/`||`; the status of the last one run (True, False, None = not
    known). Nodes: (kind, a, b, pos, separator after it)."""
    status, op = True, None
    for node in nodes:
        if sh.exited:
            return status
        if op == "&&" and status is not True or op == "||" and status is not False:
            if status is None and not _quiet([node]):
                sh.warn(f"{sh.line(node[3])}: runs only if a command before it succeeds or fails, which parplan "
                        "cannot know; not read")
            op = node[4] if node[4] in ("&&", "||") else None
            continue
        status = _exec(sh, node)
        op = node[4] if node[4] in ("&&", "||") else None
    return status


def _exec(sh, node):
    kind = node[0]
    if kind == "cmd":
        return command(sh, node[1])
    if kind == "group":
        return _exec_list(sh, node[1])
    if kind == "skip":
        if node[2]:
            sh.warn(f"{sh.line(node[3])}: a {node[1]} loop/statement is not evaluated; what it sets is not read")
        return True
    return _exec_if(sh, node)


def _exec_if(sh, node):
    _, branches, other, pos, _ = node
    if sh.every_branch:  # the validators of written files: every branch's commands, in order
        for cond, body in branches:
            _exec_list(sh, cond)
            _exec_list(sh, body)
        _exec_list(sh, other or [])
        return True
    for cond, body in branches:
        before = sh.unknown
        decided = _exec_list(sh, cond)
        if sh.unknown != before or decided is None:
            if not (all(_quiet(b) for _, b in branches) and _quiet(other or [])):
                sh.warn(f"{sh.line(pos)}: an if whose condition parplan cannot decide (it depends on the machine "
                        "or an unset variable); no branch taken")
            return None
        if decided:
            _exec_list(sh, body)
            return True
    if other is not None:
        _exec_list(sh, other)
    return True


def command(sh, words: list):
    """One simple command: assignments, redirections, then what it runs. Returns its status."""
    before = sh.unknown
    words, redirs, heredoc = _redirections(words)
    if words and words[0].plain and words[0].text in DECLARE:
        names = [w for w in words[1:] if not w.text.startswith("-")]
        _assign(sh, names, exported=True, bare_names=True)
        return True
    rest = _assign(sh, words, exported=False)
    if not rest:
        return True
    argv = [f for w in rest for f in expand_fields(sh, w)]
    sh.charge("command", sum(len(a) + 1 for a in argv), rest[0])
    status = _run(sh, argv, redirs, heredoc, rest[0], known=sh.unknown == before)
    return status


def _redirections(words: list) -> tuple[list, list, object]:
    """(the other words, [(operator, target word)], the here-document body word or None)."""
    out, redirs, heredoc, i = [], [], None, 0
    while i < len(words):
        w = words[i]
        if w.kind == "redir":
            op = w.text
            if op.startswith("<<"):
                heredoc = words[i + 1] if i + 1 < len(words) and words[i + 1].kind.startswith("heredoc") else None
                i += 2 if heredoc is not None else 1
                continue
            closed = op.endswith("!")
            redirs.append((op, None if closed or i + 1 >= len(words) else words[i + 1]))
            i += 1 if closed else 2
            continue
        out.append(w)
        i += 1
    return out, redirs, heredoc


def _assign(sh, words: list, exported: bool, bare_names: bool = False) -> list:
    """Consume leading assignments; return the command words that follow them."""
    i = 0
    while i < len(words):
        w = words[i]
        m = ASSIGN.match(w[0][0]) if w[0][1] == "bare" else None
        if not m:
            if bare_names and w.plain and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w.text):
                sh.env[w.text] = sh.scalars.get(w.text, "")
                i += 1
                continue
            break
        name, index, append, first = m.groups()
        value_word = type(w)(((first, "bare"),) + tuple(w[1:]))
        value_word.pos = getattr(w, "pos", None)
        if not value_word.text and i + 1 < len(words) and words[i + 1].plain and words[i + 1].text == "(":
            end = next((j for j in range(i + 2, len(words)) if words[j].plain and words[j].text == ")"), len(words))
            items = [f for x in words[i + 2:end] for f in expand_fields(sh, x)]
            items = (sh.arrays.get(name, []) if append else []) + items
            sh.charge(name, sum(len(x) + 1 for x in items), w)
            sh.arrays[name] = items
            sh.scalars.pop(name, None)
            i = end + 1
            continue
        value = expand(sh, value_word)
        if index is not None:  # A[3]=x: kept as an item only when A is an array already
            i += 1
            continue
        if append and name in sh.arrays:
            sh.arrays[name] = sh.arrays[name] + [value]
        else:
            value = (sh.scalars.get(name, "") if append else "") + value
            sh.charge(name, len(value), w)
            sh.scalars[name] = value
            sh.arrays.pop(name, None)
            if exported or i + 1 < len(words):
                sh.env[name] = value
        i += 1
    return words[i:]


def _run(sh, argv: list[str], redirs: list, heredoc, word, known: bool):
    """What a command does for parplan; its status (True, False, None = not known)."""
    if not argv:
        return True
    name = argv[0]
    if name in ("[", "[[", "test"):
        return _test(argv, name) if known else None
    if name in ("true", ":"):
        return True
    if name == "false":
        return False
    if name == "exit":
        sh.exited = not sh.every_branch
        return True
    if name == "unset":
        for var in argv[1:]:
            sh.scalars.pop(var, None)
            sh.arrays.pop(var, None)
        return True
    if name in ("source", "."):
        return _source(sh, argv[1:], word)
    body = expand(sh, heredoc) if heredoc is not None else None
    if body is not None:
        sh.heredocs.append(body)
        for op, target in redirs:
            if op in (">", ">>", ">|") and target is not None:
                sh.files[expand(sh, target)] = body
    sh.commands.append(argv)
    shell_at = next((k for k, a in enumerate(argv) if posixpath.basename(a) in ("bash", "sh")), None)
    if shell_at is not None and "-c" in argv[shell_at + 1:shell_at + 3]:
        k = argv.index("-c", shell_at)
        if k + 1 < len(argv):
            run(sh, argv[k + 1], "bash -c")
    elif body is not None and name in ("sbatch", "bash", "sh", "srun"):
        for flag, value in sbatch_pairs(argv[1:]) if name == "sbatch" else []:
            sh.sbatch.setdefault(flag, value)
        run(sh, body, f"{name} <<here-document")
    elif name == "sbatch":
        for flag, value in sbatch_pairs(argv[1:]):
            sh.sbatch.setdefault(flag, value)
    return True


def sbatch_pairs(words: list[str]) -> list[tuple[str, str]]:
    """`--key=value`, `--key value`, `-N 2` options of an sbatch command line, up to the script name."""
    out, i = [], 0
    while i < len(words) and words[i].startswith("-"):
        w = words[i]
        if "=" in w:
            out.append(tuple(w.split("=", 1)))
        elif i + 1 < len(words):
            out.append((w, words[i + 1]))
            i += 1
        i += 1
    return [({"-N": "--nodes"}.get(k, k), v) for k, v in out]


def _source(sh, args: list[str], word):
    """Read a sourced file from the script's own folder (never elsewhere); one warning when absent."""
    if not args:
        return True
    name = posixpath.basename(args[0])
    path = Path(sh.script_dir) / name if sh.script_dir and name and "$" not in name and "`" not in name else None
    if path is None or not path.is_file():
        sh.warn(f"{sh.line(getattr(word, 'pos', None))}: sources {args[0][:80]!r}, not found beside the script; "
                "the settings it makes are not read")
        return None
    from planner.files.safe_read import read_text
    saved = sh.positional
    sh.positional = args[1:] or saved
    try:
        run(sh, read_text(path), name)
    except UserError as err:
        raise UserError(f"{name}: {err}") from None
    finally:
        sh.positional = saved
    return True


def _test(argv: list[str], name: str):
    """`[ ... ]`, `[[ ... ]]`, `test ...` on known strings: True/False, None when not decidable."""
    args = argv[1:-1] if name in ("[", "[[") and argv[-1] in ("]", "]]") else argv[1:]
    for joiner, combine in (("||", any), ("-o", any), ("&&", all), ("-a", all)):
        if joiner in args[1:-1] and not (joiner in ("-a", "-o") and name == "[["):
            k = args.index(joiner)
            left, right = _test([name] + args[:k] + ["]"], "["), _test([name] + args[k + 1:] + ["]"], "[")
            return None if left is None or right is None else combine([left, right])
    if args and args[0] == "!":
        inner = _test([name] + args[1:] + ["]"], "[")
        return None if inner is None else not inner
    if len(args) == 1:
        return bool(args[0])
    if len(args) == 2:
        return {"-z": not args[1], "-n": bool(args[1])}.get(args[0])
    if len(args) == 3:
        return _binary(*args, glob=name == "[[")
    return None


def _binary(left: str, op: str, right: str, glob: bool):
    if op in ("=", "=="):
        return fnmatch.fnmatchcase(left, right) if glob else left == right
    if op == "!=":
        return not (fnmatch.fnmatchcase(left, right) if glob else left == right)
    numeric = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-le": int.__le__, "-gt": int.__gt__,
               "-ge": int.__ge__}
    if op in numeric and re.fullmatch(r"-?[0-9]{1,18}", left) and re.fullmatch(r"-?[0-9]{1,18}", right):
        return numeric[op](int(left), int(right))
    return None


__all__ = ["run", "command", "sbatch_pairs", "fields", "pieces"]
