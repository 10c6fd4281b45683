"""`parplan check` as the reader tests run it: write a config file, invoke the CLI, and assert that no user input
ever reaches a Python traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()


def write_config(tmp_path: Path, text: str, name: str = "run.sh") -> Path:
    """`text` written to tmp_path / name."""
    path = tmp_path / name
    path.write_text(text)
    return path


def run_check(path: Path, *args: str) -> tuple[int, str]:
    """(exit code, stderr + stdout) of `parplan check PATH ARGS`; fails the test on a traceback."""
    result = runner.invoke(app, ["check", str(path), *args])
    message = result.stderr + result.stdout
    assert "Traceback" not in message, message[-2000:]
    return result.exit_code, message
