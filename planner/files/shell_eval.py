"""Evaluate a launch script's statements on what is known, without running anything.

What is evaluated (bash's rules): assignments (`X=1`, `export X=1`, `declare`, `X+=...`, arrays
`A=( ... )` and `A+=( ... )` with each item expanded and split as bash does), `unset`, `exit` (reading
stops), `if`/`elif`/`else`/`fi` and `&&`/`||` lists on `[ ]`, `[[ ]]` and `test` expressions whose
operands are known (=, ==, != with globs, -eq -ne -lt -le -gt -ge, -z, -n, !), `{ ...; }` groups, files
`source`d or `.`-ed (read only from the script's own folder), scripts run through `bash -c "..."`,
`srun ... bash -c '...'` and `sbatch <<EOF` here-documents (their text evaluated in turn, as the child
shell would), and `cat <<EOT > $FILE` here-documents (kept in `sh.files`, e.g. a DeepSpeed config; `$(cat FILE)` reads them
back), `read [-r] [-d ''] NAME <<EOT` and `<<< WORD` (planner.files.shell_builtins).

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
from planner.files.shell_builtins import read_builtin, store_file
from planner.files.shell_expand import expand, expand_fields
from planner.files.shell_parse import parse, quiet
from planner.files.shell_sbatch import option_pairs
from planner.files.shell_tokens import statements, tokens

MAX_DEPTH = 6
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=(.*)$", re.S)
DECLARE = {"export", "declare", "local", "readonly", "typeset"}


def run(sh, text: str, where: str) -> None:
    """Evaluate `text` (a script, a sourced file, a `bash -c` string) into `sh`."""
    if sh.depth >= MAX_DEPTH:
        sh.warn(f"{where}: nested more than {MAX_DEPTH} deep (source / bash -c); not read")
        return
    saved = sh.text, sh.where
    sh.text, sh.where, sh.depth = text, where, sh.depth + 1
    try:
        cut: list = []
        words = tokens(text, sh.budget, cut)
        for comment, begun in cut:
            sh.warn(f"{sh.line(comment)}: a comment ends the command begun on {sh.line(begun)} (bash ends it there, "
                    "a backslash at the comment's end included); the flags after it are not part of it")
        _exec_list(sh, parse(statements(words)))
    finally:
        (sh.text, sh.where), sh.depth = saved, sh.depth - 1


# ---- execution ----------------------------------------------------------------------------------

def _exec_list(sh, nodes: list):
    """Run nodes in order, honouring `&&`/`||`; the status of the last one run (True, False, None = not
    known). Nodes: (kind, a, b, pos, separator after it)."""
    status, op = True, None
    for node in nodes:
        if sh.exited:
            return status
        if op == "&&" and status is not True or op == "||" and status is not False:
            if status is None and not quiet([node]):
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
            if not (all(quiet(b) for _, b in branches) and quiet(other or [])):
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
            if op.startswith("<<") and op != "<<<":
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
    if name == "read":
        return read_builtin(sh, argv[1:], _stdin(sh, body, redirs), word)
    if body is not None:
        sh.heredocs.append(body)
        for op, target in redirs:
            if op in (">", ">>", ">|") and target is not None:
                store_file(sh, expand(sh, target), body, append=op == ">>")
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


def _stdin(sh, body, redirs: list):
    """What a command reads: its here-document's body, else a here-string's word and a newline (bash 5.2
    manual 3.6.7 "Here Strings"), else None (not known)."""
    if body is not None:
        return body
    word = next((target for op, target in redirs if op == "<<<" and target is not None), None)
    return None if word is None else expand(sh, word) + "\n"


def sbatch_pairs(words: list[str]) -> list[tuple[str, str]]:
    """`--key=value`, `--key value`, `-N 2`, `-N2` options of an sbatch command line, up to the script name,
    with sbatch's long names (planner.files.shell_sbatch)."""
    return option_pairs(words, stop_at_script=True)


def _source(sh, args: list[str], word):
    """Read a sourced file from the script's own folder (never elsewhere); one warning when absent."""
    if not args:
        return True
    name = posixpath.basename(args[0])
    path = Path(sh.script_dir) / name if sh.script_dir and name and "$" not in name and "`" not in name else None
    if path is not None and not path.is_file():
        path = _renamed_sibling(path, sh.script_name)
        if path is not None:
            sh.warn(f"{sh.line(getattr(word, 'pos', None))}: sources {name!r}: read {path.name!r} beside the "
                    "script (the same name under the script's prefix)")
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


def _renamed_sibling(path: Path, script: str):
    """A file a flattened collection renamed with its script's prefix: `CONFIG.sh` sourced by
    `mlm_sc21_table1.sh` found as `mlm_sc21_CONFIG.sh` beside it (each prefix of the script's name that
    ends in '_' or '-', longest first). Never the script itself. None when there is none."""
    stem = posixpath.basename(script)
    cuts = [i + 1 for i, c in enumerate(stem) if c in "_-"]
    for cut in sorted(cuts, reverse=True):
        candidate = path.with_name(stem[:cut] + path.name)
        if candidate.is_file() and not _same_file(candidate, script):
            return candidate
    return None


def _same_file(candidate: Path, script: str) -> bool:
    """Whether `candidate` is the script itself: `source ./missing_env.sh` in `c02b_missing_env.sh` names, under
    the script's prefix `c02b_`, the script's own name; that is no renamed sibling (bash would not find the file)."""
    try:
        return candidate.resolve() == Path(script).resolve()
    except (OSError, RuntimeError):
        return candidate.name == posixpath.basename(script)


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


__all__ = ["run", "command", "sbatch_pairs"]
