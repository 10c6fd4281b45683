"""The `parplan` command line: a thin Typer layer over costmodels and the planner.

Exit codes (docs/design.md section 5): 0 success / fits, 1 does not fit or nothing fits,
2 bad input (one message naming field and value on stderr; `--debug` shows the traceback),
3 an internal error (a bug in parplan: please report it), 4 the output could not be written (full
disk), 141 the reader of the output went away (a closed pipe; planner.cli_main). The commands live beside this file:
cli_layout (estimate, export, report, check), cli_plan (plan), cli_tools (calibrate, sweep and the
listings), sharing cli_common.
"""

from __future__ import annotations

import sys

import typer

from planner import cli_layout, cli_plan, cli_tools
from planner.cli_main import ParplanGroup

app = typer.Typer(cls=ParplanGroup, add_completion=False, no_args_is_help=True, help=__doc__.split("\n")[0])
COMMANDS = [("estimate", cli_layout.estimate_cmd), ("plan", cli_plan.plan_cmd), ("export", cli_layout.export_cmd),
            ("report", cli_layout.report_cmd), ("check", cli_layout.check_cmd),
            ("calibrate", cli_tools.calibrate_cmd), ("models", cli_tools.models_cmd),
            ("hardware", cli_tools.hardware_cmd), ("schema", cli_tools.schema_cmd), ("sweep", cli_tools.sweep_cmd)]
for _name, _command in COMMANDS:
    app.command(_name)(_command)


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors (anywhere on the line).")
          ) -> None:
    """parplan: plan, estimate and check parallel layouts for training large transformers."""
    # planner.cli_main reads --debug wherever it stands, before Typer parses the line


def _safe_streams() -> None:
    """Never fail on printing: a name with a lone surrogate, or any non-ASCII text under an ASCII
    locale (LC_ALL=C, PYTHONIOENCODING=ascii), is written with backslash escapes instead."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (e.g. replaced by a test)
            pass


def main() -> None:
    """Console-script entry point."""
    _safe_streams()
    app()


if __name__ == "__main__":
    main()
