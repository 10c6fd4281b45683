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

from planner.cli_main import ParplanGroup
from planner.cli_registry import COMMANDS

# rich_markup_mode=None: plain help text, without importing Rich's markdown and traceback machinery
# (typer.rich_utils, ~0.15 s of the start-up)
HELP = """Find the fastest way to split a transformer's training over your GPUs, and check that a
configuration fits before you launch it.

parplan predicts each GPU's memory and the step time of a parallel layout (tensor, pipeline, data,
context and expert parallelism, ZeRO/FSDP, recompute), searches every layout for the fastest that
fits, and writes launch files for Megatron-LM, DeepSpeed, torchtitan and SLURM. It reads Megatron
launch scripts, DeepSpeed JSON and torchtitan TOML as they are run.

\b
Start with:
  parplan plan llama3-70b --cluster dgx-h100 --nodes 8
  parplan check train.sh --cluster dgx-h100   # exit 0 fits, 1 does not
  parplan sweep llama3-8b --cluster dgx-h100,dgx-b200 --nodes 8..64 \\
    --tokens 1e12
  parplan models; parplan hardware            # the presets"""
app = typer.Typer(cls=ParplanGroup, add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help=HELP)
# (name, module, function, help as `parplan --help` lists it: the start of the docstring, which
# tests/test_cli_startup.py holds it to); each module is imported only when its command runs
for _name, _module, _function, _help in [
        ("estimate", "planner.cli_layout", "estimate_cmd", "Predict per-GPU memory per pipeline stage (and step "
         "time with its held-out error band) of one layout."),
        ("plan", "planner.cli_plan", "plan_cmd", "Search every layout for the fastest that fits; exit 1 when "
         "nothing fits."),
        ("export", "planner.cli_layout", "export_cmd", "Write launch files for a plan, each priced with the "
         "stack that runs it."),
        ("report", "planner.cli_layout", "report_cmd", "Pictures of a plan: memory per stage, the pipeline "
         "timeline, the device mesh, the breakdown, the step time with its held-out error band."),
        ("check", "planner.cli_layout", "check_cmd", "Does this configuration fit in GPU memory? Exit 0 fits, 1 "
         "does not fit, 2 bad input."),
        ("calibrate", "planner.cli_tools", "calibrate_cmd", "Fit the stack's free parameters to your own runs' "
         "step times (warm-up skipped, median of the rest)."),
        ("models", "planner.cli_tools", "models_cmd", "List the model presets (with their sources in --json)."),
        ("hardware", "planner.cli_tools", "hardware_cmd", "List GPU profiles, cluster presets, software stacks "
         "and frameworks."),
        ("schema", "planner.cli_tools", "schema_cmd", "Print the JSON Schema of spec files and of parplan's JSON "
         "output."),
        ("sweep", "planner.cli_tools", "sweep_cmd", "Plan every (cluster, node count) point: days, GPU-hours and "
         "cost of training on --tokens, the Pareto front of time versus cost, and the cheapest point that "
         "meets --deadline and --budget")]:
    COMMANDS[_name] = (_module, _function, _help)


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
