"""The two ways a launch script hands itself text through a here-document, read as bash would (nothing is run).

- `read [-r] [-d DELIM] [-a ARRAY] NAME... <<EOF ... EOF` (and `<<< WORD`): bash 5.2 reference manual, section
  4.2 "Bash Builtin Commands", `read`: one line is read (up to the first character of DELIM, newline by default;
  with `-d ''` up to a NUL, which a here-document never holds, so the whole body), split into words on IFS as in
  word splitting, the first word to the first NAME and the rest, with the blanks between them, to the last; IFS
  whitespace at the start and end is dropped. Without -r a backslash escapes the next character and a
  backslash-newline continues the line. The status is 0, or 1 when the end of input came before the delimiter
  (always with `-d ''`), which is why scripts write `read -r -d '' X <<EOF ... EOF || true`. -n N stops after N
  characters, -N N reads exactly N; -p, -t, -u take a value and change nothing here; -e, -s take none.
- `$(cat FILE)` / `$(< FILE)` of a file the script wrote itself with `cat > FILE <<EOF` (planner.files.shell_eval
  keeps those in ShellScript.files, as for a Megatron-DeepSpeed DeepSpeed config): the file's text, trailing
  newlines removed (section 3.5.4 "Command Substitution"). Any other file stays unknown.
"""

from __future__ import annotations

import posixpath
from typing import Optional

from planner.files.shell_tokens import tokens

VALUED = {"d", "a", "n", "N", "p", "t", "u", "i"}  # read's options that take a value (bash 5.2)
SWITCHES = {"r", "e", "s"}
BLANKS = " \t\n"


def read_options(args: list[str]) -> Optional[tuple[dict, list[str]]]:
    """(options, names) of `read`'s arguments, getopt's way (`-rd ''`, `-d,`); None for an unknown option."""
    opts: dict = {}
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        word, k = args[i], 1
        while k < len(word):
            letter = word[k]
            if letter in SWITCHES:
                opts[letter] = True
                k += 1
                continue
            if letter not in VALUED:
                return None
            value = word[k + 1:] if k + 1 < len(word) else (args[i + 1] if i + 1 < len(args) else None)
            if value is None:
                return None
            i += 0 if k + 1 < len(word) else 1
            opts[letter] = value
            break
        i += 1
    return opts, args[i:]


def read_line(text: str, opts: dict) -> tuple[str, bool]:
    """(what `read` takes from `text`, whether it met its delimiter): backslashes applied unless -r."""
    delim = opts.get("d", "\n")[:1] or "\0"
    limit = _count(opts.get("N", opts.get("n")))
    exact = "N" in opts
    out, i, raw = [], 0, opts.get("r", False)
    while i < len(text) and (limit is None or len(out) < limit):
        c = text[i]
        if c == delim and not exact:
            return "".join(out), True
        if c == "\\" and not raw and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out), limit is not None and len(out) >= limit


def _count(value) -> Optional[int]:
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 10 else None


def split_for(line: str, names: int, ifs: Optional[str]) -> list[str]:
    """The values of `names` variables from one line: IFS whitespace stripped at both ends, the line split on it,
    the last name taking the rest. IFS empty (`IFS= read`): no stripping, no splitting."""
    if ifs == "":
        return [line] + [""] * (names - 1)
    parts = line.strip(BLANKS).split(None, names - 1) if names > 1 else [line.strip(BLANKS)]
    if names > 1 and len(parts) == names:
        parts[-1] = parts[-1].strip(BLANKS)
    return parts + [""] * (names - len(parts))


def read_builtin(sh, args: list[str], text: Optional[str], word):
    """`read` with `text` as its input (a here-document body or a here-string): assigns, returns bash's status.
    Without input (the terminal, a pipe) nothing is assigned: the names stay unknown (None status)."""
    parsed = read_options(args)
    if text is None or parsed is None:
        if parsed is None:
            sh.warn(f"{sh.line_of(word) or 'a line'}: read {' '.join(args)[:60]}: an option parplan does not know; "
                    "what it reads is not assigned")
        return None
    opts, names = parsed
    line, met = read_line(text, opts)
    if "a" in opts:
        items = [line] if sh.scalars.get("IFS") == "" else line.split()
        sh.charge(opts["a"], sum(len(x) + 1 for x in items), word)
        sh.arrays[opts["a"]] = items
        sh.scalars.pop(opts["a"], None)
        sh.opaque.pop(opts["a"], None)
        return met
    names = names or ["REPLY"]
    for name, value in zip(names, split_for(line, len(names), sh.scalars.get("IFS"))):
        sh.charge(name, len(value), word)
        sh.scalars[name] = value
        sh.opaque.pop(name, None)
        sh.arrays.pop(name, None)
    return met


def _same_name(a: str, b: str) -> bool:
    return posixpath.normpath(a) == posixpath.normpath(b)


def written_file(sh, name: str) -> Optional[str]:
    """The text the script wrote to `name` with a here-document (`cat > NAME <<EOF`), or None."""
    if name in sh.files:
        return sh.files[name]
    return next((body for key, body in sh.files.items() if _same_name(key, name)), None)


def store_file(sh, name: str, body: str, append: bool) -> None:
    """Keep what `cat > NAME <<EOF` (`>>`: appended) writes, under the name the script first wrote it by."""
    key = next((k for k in sh.files if _same_name(k, name)), name)
    sh.files[key] = (sh.files.get(key, "") if append else "") + body


def cat_substitution(sh, inner: str) -> Optional[str]:
    """`$(cat FILE)` or `$(< FILE)` of a file the script wrote with a here-document: its text without trailing
    newlines; None for any other command (left unknown by planner.files.shell_expand)."""
    from planner.files.shell_expand import expand

    if not sh.files or "|" in inner or ";" in inner or "&" in inner:
        return None
    words = tokens(inner, sh.budget)
    if len(words) == 2 and words[0].kind == "redir" and words[0].text == "<":
        target = words[1]
    elif len(words) == 2 and words[0].plain and words[0].text == "cat" and not words[1].text.startswith("-"):
        target = words[1]
    else:
        return None
    body = written_file(sh, expand(sh, target))
    return None if body is None else body.rstrip("\n")


__all__ = ["cat_substitution", "read_builtin", "store_file", "written_file"]
