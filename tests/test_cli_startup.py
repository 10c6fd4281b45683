"""Start-up (issue 36): `parplan --help` and `parplan models` do not pay for OR-Tools, pandas, the cost
model's search or Rich's help machinery. Checked by what a fresh interpreter has imported, not by a clock:
each command's module is imported when the command is named (planner.cli_registry.COMMANDS)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("ortools", "pandas", "scipy", "numpy")


def _imported_after(code: str) -> set[str]:
    """The top-level modules (and a few submodules) a fresh interpreter holds after running `code`."""
    probe = (f"import sys\n{code}\nimport json\n"
             "print(json.dumps(sorted(m for m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_importing_the_cli_pulls_no_search_and_no_cost_model():
    modules = _imported_after("import planner.cli")
    assert _heavy(modules) == []
    assert not {m for m in modules if m.startswith(("costmodels.", "planner.search", "planner.report"))}


@pytest.mark.parametrize("argv", [["--help"], ["models", "--json"], ["hardware", "--json"]])
def test_help_and_listings_pull_no_search(argv):
    run = ("from planner.cli import app\ntry:\n    app(" + repr(argv) + ", prog_name='parplan')\n"
           "except SystemExit as e:\n    assert e.code in (0, None), e.code\nimport sys\nsys.stdout.flush()")
    modules = _imported_after(run)
    assert _heavy(modules) == [] and "planner.search.engine" not in modules
    assert "rich.markdown" not in modules and "typer.rich_utils" not in modules


def test_listing_the_models_loads_no_framework_hardware_or_stack_specs():
    """`parplan models` reads model presets only: hardware_profiles imports the framework, GPU, cluster and
    stack specs (costmodels.framework with costmodels.layout, ~40 ms of pydantic classes; hardware_spec ~25 ms)
    where one is loaded, not at import."""
    run = ("from planner.cli import app\ntry:\n    app(['models', '--json'], prog_name='parplan')\n"
           "except SystemExit as e:\n    assert e.code in (0, None), e.code")
    modules = _imported_after(run)
    assert not {"costmodels.framework", "costmodels.layout", "costmodels.hardware_spec"} & modules


def test_the_command_list_is_each_commands_own_help():
    """`parplan --help` lists each command by the words it was registered with, without importing it;
    they must be the start of the command's docstring."""
    import importlib

    from planner.cli_registry import COMMANDS

    for name, (module, attr, listed) in COMMANDS.items():
        doc = " ".join((getattr(importlib.import_module(module), attr).__doc__ or "").split())
        assert doc.startswith(listed.rstrip(".,")), (name, listed, doc[:200])


def test_a_command_runs_after_the_lazy_import():
    from typer.testing import CliRunner

    from planner.cli import app

    result = CliRunner().invoke(app, ["models", "--json"])
    assert result.exit_code == 0 and any(row["name"] == "llama3-8b" for row in json.loads(result.stdout))


def test_presets_read_by_libyaml_equal_the_pure_python_reading():
    """hardware_profiles reads presets with CSafeLoader when present (start-up): same data as safe_load."""
    from importlib import resources

    import yaml

    import hardware_profiles as hp

    for kind in ("models", "gpus", "clusters", "stacks", "frameworks"):
        for name in hp._names(kind):
            text = (resources.files("hardware_profiles") / kind / f"{name}.yaml").read_text()
            assert yaml.load(text, Loader=hp.SAFE_LOADER) == yaml.safe_load(text), (kind, name)  # noqa: S506
