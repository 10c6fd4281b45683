"""`[ ... ]`, `[[ ... ]]` and `test` on known strings (bash(1), CONDITIONAL EXPRESSIONS and the `test` builtin):
=, == and != (globs inside `[[ ]]`), -eq -ne -lt -le -gt -ge on integers, -z, -n, a lone string, `!`, and
`&&` `||` `-a` `-o` between them. Anything else (file tests such as -f, regular expressions) is not decided."""

from __future__ import annotations

import fnmatch
import re


def decide(argv: list[str], name: str):
    """`[ ... ]`, `[[ ... ]]`, `test ...` on known strings: True/False, None when not decidable."""
    args = argv[1:-1] if name in ("[", "[[") and argv[-1] in ("]", "]]") else argv[1:]
    for joiner, combine in (("||", any), ("-o", any), ("&&", all), ("-a", all)):
        if joiner in args[1:-1] and not (joiner in ("-a", "-o") and name == "[["):
            k = args.index(joiner)
            left, right = decide([name] + args[:k] + ["]"], name), decide([name] + args[k + 1:] + ["]"], name)
            return None if left is None or right is None else combine([left, right])
    if args and args[0] == "!":
        inner = decide([name] + args[1:] + ["]"], name)
        return None if inner is None else not inner
    if len(args) == 1:
        return bool(args[0])
    if len(args) == 2:
        return {"-z": not args[1], "-n": bool(args[1])}.get(args[0])
    if len(args) == 3:
        return binary(*args, glob=name == "[[")
    return None


def binary(left: str, op: str, right: str, glob: bool):
    if op in ("=", "=="):
        return fnmatch.fnmatchcase(left, right) if glob else left == right
    if op == "!=":
        return not (fnmatch.fnmatchcase(left, right) if glob else left == right)
    if op in NUMERIC and re.fullmatch(r"-?[0-9]{1,18}", left) and re.fullmatch(r"-?[0-9]{1,18}", right):
        return NUMERIC[op](int(left), int(right))
    return None


NUMERIC = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-le": int.__le__, "-gt": int.__gt__,
           "-ge": int.__ge__}

__all__ = ["binary", "decide"]
