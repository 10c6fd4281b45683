"""Evaluate a launch script's statements on what is known, without running anything.

What is evaluated (bash's rules): assignments (`X=1`, `export X=1`, `declare`, `X+=...`, arrays
`A=( ... )` and `A+=( ... )` with each item expanded and split as bash does), `unset`, `exit` (reading
stops), `if`/`elif`/`else`/`fi` and `&&`/`||` lists on `[ ]`, `[[ ]]` and `test` expressions whose
operands are known (planner.files.shell_cond), `{ ...; }` groups, files `source`d or `.`-ed (read only from
the script's own folder: planner.files.shell_source), scripts run through `bash -c "..."`, `srun ... bash -c
'...'` and `sbatch <<EOF` here-documents (their text evaluated in turn, as the child shell would), and
`cat <<EOT > $FILE` here-documents (kept in `sh.files`, e.g. a DeepSpeed config; `$(cat FILE)` reads them
back), `read [-r] [-d ''] NAME <<EOT` and `<<< WORD` (planner.files.shell_builtins).

The script is read as run without arguments: in a test a positional argument it was not given is the empty
string, so `if [ -z "$TP" ]; then TP=2; fi` after `TP=$1` sets 2; an `exit` in a branch taken only because
arguments are missing (a usage check) does not end the reading (one warning). Values parplan cannot evaluate
stay whole (planner.files.shell_unknown); a flag whose value is arithmetic over one is warned of, naming the
variable and the line that set it.

What is not: loops, `case`, functions and conditions that depend on the machine (`[ -f x ]`, an
unassigned variable, a command's output). They are skipped with ONE warning each (none when what is skipped
only echoes, creates folders or exits). Nesting (source, bash -c, here-documents) is at most MAX_DEPTH deep.
"""

from __future__ import annotations

import posixpath
import re
from functools import partial

from planner.files.shell_builtins import read_builtin, store_file
from planner.files.shell_cond import decide
from planner.files.shell_expand import BREAK, expand, expand_fields, fields, pieces
from planner.files.shell_parse import QUIET, parse, quiet
from planner.files.shell_sbatch import option_pairs, sbatch_options
from planner.files.shell_source import source
from planner.files.shell_tokens import statements, tokens
from planner.files.shell_unknown import flag_value_notes, forget, joined, set_scalar

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
    status, op, by_args = True, None, False
    for node in nodes:
        if sh.exited:
            return status
        if op == "&&" and status is not True or op == "||" and status is not False:
            if status is None and not quiet([node]):
                sh.warn(f"{sh.line(node[3])}: runs only if a command before it succeeds or fails, which parplan "
                        "cannot know; not read")
            op = node[4] if node[4] in ("&&", "||") else None
            continue
        args_before = sh.args_used
        status = _guarded(sh, partial(_exec, sh, node), by_args and op is not None)
        by_args = by_args and op is not None or sh.args_used != args_before
        op = node[4] if node[4] in ("&&", "||") else None
    return status


def _guarded(sh, step, by_args: bool):
    """step(); `by_args`: it runs because the script was given no arguments, so an `exit` in it is the script's
    usage check and does not end the reading (planner.files.shell_unknown, MISSING)."""
    sh.arg_guard += by_args
    try:
        return step()
    finally:
        sh.arg_guard -= by_args


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
    by_args = False
    for cond, body in branches:
        before, args_before = sh.unknown, sh.args_used
        decided = _exec_list(sh, cond)
        by_args = by_args or sh.args_used != args_before
        if sh.unknown != before or decided is None:
            if not (all(quiet(b) for _, b in branches) and quiet(other or [])):
                sh.warn(f"{sh.line(pos)}: an if whose condition parplan cannot decide (it depends on the machine "
                        "or an unset variable); no branch taken")
            return None
        if decided:
            _guarded(sh, partial(_exec_list, sh, body), by_args)
            return True
    if other is not None:
        _guarded(sh, partial(_exec_list, sh, other), by_args)
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
    argv = _arguments(sh, rest)
    sh.charge("command", sum(len(a) + 1 for a in argv), rest[0])
    status = _run(sh, argv, redirs, heredoc, rest[0], known=sh.unknown == before)
    return status


def _arguments(sh, words: list) -> list[str]:
    """A command's words expanded into its arguments. In a test (`[`, `[[`, `test`) a missing positional argument
    is the empty string, and inside `[[ ]]` nothing is split (bash(1): no word splitting there)."""
    testing = words[0].plain and words[0].text in ("[", "[[", "test")
    sh.testing = testing
    try:
        if testing and words[0].text == "[[":
            return [expand(sh, w) for w in words]
        produced = [pieces(sh, w) for w in words]
    finally:
        sh.testing = False
    argv = [f for p in produced for f in fields(p)]
    if argv and not testing and argv[0] not in QUIET:
        flag_value_notes(sh, argv, [x for p in produced for x in p], sh.line_of(words[0]) or sh.line(None))
    return argv


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
            forget(sh, name)
            i = end + 1
            continue
        if index is not None:  # A[3]=x: not kept (nor expanded, which would count its unknowns and arguments)
            i += 1
            continue
        value, spans = joined(pieces(sh, value_word), BREAK)
        if append and name in sh.arrays:
            sh.arrays[name] = sh.arrays[name] + [value]
        else:
            old = sh.scalars.get(name, "") if append else ""
            value = old + value
            sh.charge(name, len(value), w)
            set_scalar(sh, name, value, spans, w, shift=len(old))
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
        return decide(argv, name) if known else None
    if name in ("true", ":"):
        return True
    if name == "false":
        return False
    if name == "exit":
        if sh.arg_guard and not sh.every_branch:
            sh.warn(f"{sh.line_of(word) or sh.line(None)}: the script exits here when run without arguments (a "
                    "usage check); parplan reads on, the arguments unknown")
            return True
        sh.exited = not sh.every_branch
        return True
    if name == "unset":
        for var in argv[1:]:
            sh.scalars.pop(var, None)
            sh.arrays.pop(var, None)
            forget(sh, var)
        return True
    if name in ("source", "."):
        return source(sh, argv[1:], word, run)
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
        if name == "sbatch":  # its options override the body's directives (sbatch(1))
            sh.sbatch.update(sbatch_pairs(argv[1:]))
            _expanded_directives(sh, body)
        run(sh, body, f"{name} <<here-document")
    elif name == "sbatch":
        for flag, value in sbatch_pairs(argv[1:]):
            sh.sbatch.setdefault(flag, value)
    return True


def _expanded_directives(sh, body: str) -> None:
    """The #SBATCH lines of an `sbatch <<EOF` body as sbatch reads them: after the submitting shell expanded an
    unquoted here-document (`#SBATCH --nodes=$NODES` is 16 there); they fill what the raw text left a placeholder
    or did not say, and sbatch's own command-line options still win."""
    for flag, value in sbatch_options(body).items():
        if "$" in sh.sbatch.get(flag, "$"):
            sh.sbatch[flag] = value


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


__all__ = ["run", "command", "sbatch_pairs"]
