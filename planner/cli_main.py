"""The outermost layer of `parplan`: what happens before a command runs and after it returns.

- Every command-line mistake Typer finds (a bad value, an unknown option, a missing argument) is ONE
  line on stderr naming the option and the value given, exit 2: never Typer's framed usage box.
- `--debug` is read anywhere on the line (before or after the subcommand, before a `--`).
- Commands are imported when named (`COMMANDS`): `parplan --help` lists them from their one-line
  help here, and `parplan models` never imports the search (OR-Tools, pandas) or the cost model.
- Output that cannot be written: a closed pipe (`parplan check plan.json | head -1`) exits 141 (as a
  shell reports a process ended by SIGPIPE) silently; a full disk or quota (`> /dev/full`) exits 4
  with one line. Neither is 0, 1 or 2, whose meanings the output would then contradict.
"""

from __future__ import annotations

import difflib
import errno
import importlib
import math
import os
import re
import sys
from typing import Any, Optional, Sequence

from typer._click import exceptions as click_exc
from typer.core import TyperGroup
from typer.exceptions import Abort

from planner.safetext import visible

OUTPUT_FAILED_EXIT = 4  # stdout could not be written (full disk, quota, file too large)
BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE: the reader went away (`| head`)
OUTPUT_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
DEBUG_FLAG = "--debug"
STATE = {"debug": False}  # shared with planner.cli_common (which re-exports it)
# name -> (module, function, one-line help as the listing shows it); planner.cli fills it, in order
COMMANDS: dict[str, tuple[str, str, str]] = {}


class OutputFailed(Exception):
    """Raised by a command whose stdout write failed (`is_output_error`), carrying the OSError past
    Typer, which would turn a closed pipe into exit 1."""

    def __init__(self, error: OSError):
        super().__init__(str(error))
        self.error = error


def is_output_error(exc: BaseException) -> bool:
    """An OSError only a write can raise: a closed pipe, a full disk or quota, a file over its size limit."""
    return isinstance(exc, OSError) and exc.errno in OUTPUT_ERRNOS


def split_debug(args: Sequence[str]) -> tuple[list[str], bool]:
    """The arguments without `--debug` (anywhere before a `--`), and whether it was given."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a != DEBUG_FLAG]
    return kept + args[end:], len(kept) < end


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


def _subcommand(group: Any, args: Sequence[str]) -> Any:
    """The command the line names (the first word not an option), or None."""
    for arg in args:
        if not arg.startswith("-"):
            return group.get_command(None, arg)
    return None


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
        rule = "must be a finite number"
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


def error_line(text: str) -> None:
    """`parplan: error: ...` on stderr, plain text (no markup, no wrapping)."""
    try:
        sys.stderr.write(f"parplan: error: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush of what is left cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def output_failed(exc: OSError) -> int:
    """The exit code for output that could not be written (module docstring)."""
    _quiet_stdout()
    if exc.errno == errno.EPIPE:
        return BROKEN_PIPE_EXIT
    error_line(f"could not write the output: {exc.strerror or exc} (errno {exc.errno})")
    return OUTPUT_FAILED_EXIT


def build_command(name: str) -> Any:
    """The Typer command `name`, its module imported now."""
    import typer

    module, attr, _ = COMMANDS[name]
    app = typer.Typer(add_completion=False, rich_markup_mode=None)  # plain help, as planner.cli's
    app.command(name)(getattr(importlib.import_module(module), attr))
    return typer.main.get_command(app)


def listing_command(name: str) -> Any:
    """A stand-in carrying only the name and the one-line help, for the command list of `--help`."""
    return _Listing(name, COMMANDS[name][2])


class _Listing:
    """What Typer's help listing reads of a command: its name, help and panel."""

    hidden = False
    deprecated = False

    def __init__(self, name: str, text: str):
        self.name, self.help, self.short_help = name, text, text

    def get_short_help_str(self, limit: int = 45) -> str:
        return self.short_help


class ParplanGroup(TyperGroup):
    """Typer's group with parplan's error lines and exit codes, its commands imported when named
    (module docstring)."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(dict.fromkeys([*COMMANDS, *super().list_commands(ctx)]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            if self._listing:
                return listing_command(cmd_name)
            self.commands[cmd_name] = build_command(cmd_name)
        return self.commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def main(self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True, **extra: Any) -> Any:
        argv, STATE["debug"] = split_debug(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        sys.exit(self._run(argv, prog_name, complete_var, **extra))

    def _run(self, argv: list[str], prog_name, complete_var, **extra) -> int:
        try:
            check_numbers(_subcommand(self, argv), argv)
            code = super().main(argv, prog_name or "parplan", complete_var, False, **extra)
            sys.stdout.flush()
        except click_exc.NoArgsIsHelpError as exc:
            return self._help(exc)
        except click_exc.UsageError as exc:
            error_line(f"{_suggest(usage_line(exc, argv), argv)}{_see_help(exc, argv)}")
            return 2
        except Abort:
            error_line("aborted")
            return 1
        except OutputFailed as exc:
            return output_failed(exc.error)
        except OSError as exc:
            if not is_output_error(exc):
                raise
            return output_failed(exc)
        return code if isinstance(code, int) else 0

    @staticmethod
    def _help(exc: Exception) -> int:
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
        return 2


def _see_help(exc: Exception, args: Sequence[str] = ()) -> str:
    named = next((a for a in args if not a.startswith("-")), "")
    name = _command_of(exc) or (f" {named}" if named in COMMANDS else "")
    return f" (see parplan{name} --help)"


def _suggest(line: str, args: Sequence[str]) -> str:
    """'No such command 'esimate'' with the closest command names."""
    named = next((a for a in args if not a.startswith("-")), "")
    if not line.startswith("No such command") or named in COMMANDS:
        return line
    close = difflib.get_close_matches(named, list(COMMANDS), n=2, cutoff=0.6)
    return f"{line}; did you mean {' or '.join(close)}?" if close else f"{line} (commands: {', '.join(COMMANDS)})"
