"""The commands of `parplan`, imported when named: `parplan --help` lists them from the help they were
registered with here (planner.cli fills COMMANDS), and `parplan models` imports neither the search
(OR-Tools, pandas) nor the modules of the other commands."""

from __future__ import annotations

import importlib
from typing import Any

# name -> (module, function, help as the command list shows it), in the order listed
COMMANDS: dict[str, tuple[str, str, str]] = {}


def build_command(name: str) -> Any:
    """The Typer command `name`, its module imported now."""
    import typer

    module, attr, _ = COMMANDS[name]
    app = typer.Typer(add_completion=False, rich_markup_mode=None)  # plain help, as planner.cli's
    app.command(name)(getattr(importlib.import_module(module), attr))
    from planner.cli_usage import plain_metavars

    return plain_metavars(typer.main.get_command(app))


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
