"""The outermost layer of `parplan`: what happens before a command runs and after it returns.

- Every command-line mistake Typer finds (a bad value, an unknown option, a missing argument) is ONE
  line on stderr naming the option and the value given, exit 2: never Typer's framed usage box
  (the lines: planner.cli_usage).
- `--debug` is read anywhere on the line (before or after the subcommand, before a `--`).
- Commands are imported when named (planner.cli_registry): `parplan --help` lists them from their
  registered help, and `parplan models` never imports the search (OR-Tools, pandas).
- Output that cannot be written: a closed pipe (`parplan check plan.json | head -1`) exits 141 (as a
  shell reports a process ended by SIGPIPE) silently; a full disk or quota (`> /dev/full`) exits 4
  with one line. Neither is 0, 1 or 2, whose meanings the output would then contradict.
- Any other exception that escapes a command, wherever it is raised (importing the command's module,
  a lazy import or a bug inside it), is one line "internal error (...); rerun with --debug and
  report it", exit 3 (docs/design.md section 5), the line planner.cli_common.user_errors prints for
  the command body; `--debug` adds the traceback. Typer's own exits and errors keep their codes
  (click's Context.main in non-standalone mode returns typer.Exit's code and re-raises the rest).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import traceback
from typing import Any, Optional, Sequence

from typer._click import exceptions as click_exc
from typer.core import TyperGroup
from typer.exceptions import Abort

from planner.cli_registry import COMMANDS, build_command, listing_command
from planner.cli_usage import check_numbers, see_help, suggest, usage_line

OUTPUT_FAILED_EXIT = 4  # stdout could not be written (full disk, quota, file too large)
INTERRUPTED_EXIT = 130  # Ctrl-C, as shells report a process ended by SIGINT
BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE: the reader went away (`| head`)
INTERNAL_ERROR_EXIT = 3  # a bug in parplan (docs/design.md section 5)
OUTPUT_ERRNOS = {errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
DEBUG_FLAG = "--debug"
STATE = {"debug": False, "json": False}  # shared with planner.cli_common (which re-exports it)


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


def hoist_json(args: list[str]) -> list[str]:
    """The arguments with a `--json` written before the command (`parplan --json models`) moved after the command's
    name, where every command takes it; before, Click refused it as an option of the group."""
    end = args.index("--") if "--" in args else len(args)
    first = next((i for i, a in enumerate(args[:end]) if not a.startswith("-")), None)
    if first is None and "--help" in args[:end]:  # `parplan --json --help`: the help, not "No such option"
        return [a for a in args[:end] if a != "--json"] + args[end:]
    if first is None or "--json" not in args[:first]:
        return args
    before = [a for a in args[:first] if a != "--json"]
    return [*before, args[first], "--json", *args[first + 1:]]


def _subcommand(group: Any, args: Sequence[str]) -> Any:
    """The command the line names (the first word not an option), or None."""
    for arg in args:
        if not arg.startswith("-"):
            return group.get_command(None, arg)
    return None


def error_line(text: str, code: int) -> None:
    """`parplan: error: ...` on stderr, plain text (no markup, no wrapping); with --json also json_error."""
    try:
        sys.stderr.write(f"parplan: error: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: started with stderr closed (None)
        pass
    json_error(text, code)


def json_error(text: str, code: int) -> None:
    """`{"error": ..., "exit_code": ...}` on stdout when the line asked for --json, so that a script reading the
    JSON gets an answer for a refused input too (the message itself stays on stderr)."""
    if not STATE.get("json"):
        return
    try:
        sys.stdout.write(json.dumps({"error": text, "exit_code": code}) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass


def internal_error_text(exc: BaseException) -> str:
    """The one line for a bug in parplan: the exception's type and text, lines joined by '; '."""
    text = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return f"internal error ({type(exc).__name__}: {text}); rerun with --debug and report it"


def internal_error(exc: BaseException) -> int:
    """Report an exception no command handled (module docstring): the traceback with --debug, then
    the one line; the exit code INTERNAL_ERROR_EXIT."""
    if STATE["debug"]:
        traceback.print_exception(exc)
    error_line(internal_error_text(exc), INTERNAL_ERROR_EXIT)
    return INTERNAL_ERROR_EXIT


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
    error_line(f"could not write the output: {exc.strerror or exc} (errno {exc.errno})", OUTPUT_FAILED_EXIT)
    return OUTPUT_FAILED_EXIT


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
        argv = hoist_json(argv)
        STATE["json"] = "--json" in argv[:argv.index("--") if "--" in argv else len(argv)]
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        if sys.stdout is None:  # started with stdout closed (`>&-`): no answer can be written; `check` exited 1
            error_line("could not write the output: stdout is closed", OUTPUT_FAILED_EXIT)
            sys.exit(OUTPUT_FAILED_EXIT)
        if sys.stderr is None:  # started with stderr closed: warnings and errors go nowhere, answers still out
            sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives until exit
        sys.exit(self._run(argv, prog_name, complete_var, **extra))

    def _run(self, argv: list[str], prog_name, complete_var, **extra) -> int:
        try:
            check_numbers(_subcommand(self, argv), argv)
            code = super().main(argv, prog_name or "parplan", complete_var, False, **extra)
            sys.stdout.flush()
        except click_exc.NoArgsIsHelpError as exc:
            return self._help(exc)
        except click_exc.UsageError as exc:
            error_line(f"{suggest(usage_line(exc, argv), argv)}{see_help(exc, argv)}", 2)
            return 2
        except Abort:
            error_line("aborted", 1)
            return 1
        except click_exc.ClickException as exc:  # Typer's other errors, with their own codes
            exc.show()
            return exc.exit_code
        except OutputFailed as exc:
            return output_failed(exc.error)
        except KeyboardInterrupt:  # Ctrl-C while a command's module loads, before Click's own handling
            error_line("interrupted", INTERRUPTED_EXIT)
            return INTERRUPTED_EXIT
        except Exception as exc:  # an ImportError of a half-edited module, a bug outside user_errors
            return output_failed(exc) if is_output_error(exc) else internal_error(exc)
        return code if isinstance(code, int) else 0

    @staticmethod
    def _help(exc: Exception) -> int:
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
        return 2


