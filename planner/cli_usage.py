"""Command-line mistakes as ONE line naming the option and the value given (planner.cli_main prints
it): Typer's errors reworded, and numbers read as parplan reads them (ASCII digits only: Python's int()
and float() also read '٨' and '２'; a whole number without '.0')."""

from __future__ import annotations

import difflib
import math
import re
from typing import Any, Optional, Sequence

from typer._click import exceptions as click_exc

from planner.cli_registry import COMMANDS
from planner.safetext import visible


def given_value(args: Sequence[str], opts: Sequence[str]) -> Optional[str]:
    """The last value given to an option spelled as any of `opts` (`--nodes 0`, `--nodes=0`, `-j0`)."""
    found = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        for opt in opts:
            if arg == opt and i + 1 < len(args):
                found = args[i + 1]
            elif opt.startswith("--") and arg.startswith(opt + "="):
                found = arg[len(opt) + 1:]
            elif len(opt) == 2 and arg.startswith(opt) and len(arg) > 2 and not arg.startswith("--"):
                found = arg[2:]
    return found


_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(nan|inf|infinity)",
                    re.ASCII | re.IGNORECASE)


def number_problem(kind: type, value: str) -> Optional[str]:
    """Why `value` is no `kind` (int or float) as parplan reads numbers: ASCII digits only (Python's
    int() and float() also read '٨' and '２'), a whole number without '.0', at most 18 digits."""
    if kind is int and not _INT.fullmatch(value):
        return "expected a whole number in ASCII digits, e.g. 64"
    if kind is int and len(value.lstrip("+-")) > 18:
        return "expected at most 18 digits"
    if kind is float and not _FLOAT.fullmatch(value):
        return "expected a number in ASCII digits, e.g. 2.5 or 15e12"
    return None


def check_numbers(command: Any, args: Sequence[str]) -> None:
    """Every int or float option of `command` given on the line reads as one (`number_problem`);
    a BadParameter naming the option and the value otherwise."""
    for param in getattr(command, "params", []):
        kind = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        opts = list(getattr(param, "opts", None) or [])
        if kind not in (int, float) or not opts or not opts[0].startswith("-"):
            continue
        value = given_value(args, opts)
        problem = None if value is None else number_problem(kind, value)
        if problem:
            raise click_exc.BadParameter(problem, param=param)


def _shown(value: str) -> str:
    text = visible(value)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _not_finite(value: str) -> bool:
    try:
        return not math.isfinite(float(value))
    except ValueError:
        return False


def _one_line(text: str) -> str:
    return " ".join(visible(text).split()).rstrip(".")


def bad_parameter_line(exc: Any, args: Sequence[str]) -> str:
    """'--nodes '0': Input should be greater than or equal to 1' (the option, the value, the rule)."""
    param = getattr(exc, "param", None)
    opts = list(getattr(param, "opts", None) or []) + list(getattr(param, "secondary_opts", None) or [])
    name = max(opts, key=len) if opts else (getattr(param, "name", None) or "argument").upper()
    value = given_value(args, opts) if opts else None
    rule = _one_line(exc.message)
    if value is None:
        return f"{name}: {rule}"
    if _not_finite(value):
        digits = value.lstrip("+-")
        rule = (f"a number of {len(digits):,} digits, beyond any this option takes" if digits.isascii()
                and digits.isdigit() else "must be a finite number")
    return f"{name} {_shown(value)}: {rule}"


def usage_line(exc: Exception, args: Sequence[str]) -> str:
    """One line for any mistake Typer finds on the command line."""
    if isinstance(exc, click_exc.MissingParameter):
        return _one_line(exc.format_message())
    if isinstance(exc, click_exc.BadParameter):
        return bad_parameter_line(exc, args)
    text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    return _one_line(text)


def _command_of(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", "") or ""
    parts = path.split()
    return f" {parts[-1]}" if len(parts) > 1 else ""


def see_help(exc: Exception, args: Sequence[str] = ()) -> str:
    named = next((a for a in args if not a.startswith("-")), "")
    name = _command_of(exc) or (f" {named}" if named in COMMANDS else "")
    return f" (see parplan{name} --help)"


def suggest(line: str, args: Sequence[str]) -> str:
    """'No such command 'esimate'' with the closest command names."""
    named = next((a for a in args if not a.startswith("-")), "")
    if not line.startswith("No such command") or named in COMMANDS:
        return line
    close = difflib.get_close_matches(named, list(COMMANDS), n=2, cutoff=0.6)
    return f"{line}; did you mean {' or '.join(close)}?" if close else f"{line} (commands: {', '.join(COMMANDS)})"


METAVARS = {"--cluster": "CLUSTER", "--layout": "tp=8,pp=4,...", "--save": "PLAN.json", "--report": "FILE.html",
            "--export": "DIR", "--out": "DIR", "--stack-file": "PROFILE.yaml", "--model": "MODEL",
            "--price-per-gpu-hour": "USD", "--budget": "USD", "--deadline": "TIME"}


def metavar_for(param: Any) -> Optional[str]:
    """What `--help` shows after an option that takes a value, as users write it ('--nodes N', '--cluster
    CLUSTER', '--save PLAN.json') instead of Typer's type names ('<int range>', '<str>', '<path>'); None
    for a flag, which takes no value."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    opts = [o for o in getattr(param, "opts", None) or [] if o.startswith("--")]
    if not opts:  # an argument: MODEL, CONFIG, LOGS (Typer adds '...' where it takes several)
        return (getattr(param, "name", None) or "value").upper()
    if opts[0] in METAVARS:
        return METAVARS[opts[0]]
    kind = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if kind in (int, float):
        return "N"
    if getattr(getattr(param, "type_descriptor", None), "is_path", False):
        return "PATH"
    return opts[0].lstrip("-").replace("-", "_").upper()


def plain_metavars(command: Any) -> Any:
    """`command` with every value-taking parameter's metavar set by `metavar_for` (where none was given)."""
    for param in getattr(command, "params", []):
        if getattr(param, "metavar", None) is None and (shown := metavar_for(param)) is not None:
            param.metavar = shown
            if not getattr(param, "opts", None) or not param.opts[0].startswith("-"):
                param.display_type_rich = lambda ctx: ""  # 'MODEL', not 'MODEL <str>'
    return command
