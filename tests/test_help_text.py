"""Help written for users (issue 36 part 6): option values are shown as users write them ('--nodes N',
'--cluster CLUSTER', 'MODEL'), never Typer's type names ('<int range>', '<str>', '<bool>'); flags show
no value; the top-level help describes the tool, not its code."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.cli_registry import COMMANDS

runner = CliRunner()
TYPE_NAME = re.compile(r"<(str|int|float|bool|path|int range|float range|[a-z ]+)>")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_type_names_in_help(command):
    text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "100"}).stdout
    assert "Usage:" in text
    assert not TYPE_NAME.search(text), (command, TYPE_NAME.search(text).group(0))


def test_values_and_flags_read_as_written():
    text = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "100"}).stdout
    for shown in ("--nodes N", "-c, --cluster CLUSTER", "--save PLAN.json", "--report FILE.html", "--precision PRECISION"):
        assert shown in text, shown
    assert re.search(r"^  --json\s{2,}Print JSON", text, re.M)  # a flag: no value after it
    assert re.search(r"^  MODEL\s{2,}Model preset", text, re.M)


def test_top_level_help_describes_the_tool():
    text = runner.invoke(app, ["--help"], env={"COLUMNS": "100"}).stdout
    assert "Typer" not in text and "costmodels" not in text
    assert "fits" in text and "GPU" in text and "parplan plan llama3-70b" in text
    assert all(len(line) <= 80 for line in text.splitlines()[:20])
