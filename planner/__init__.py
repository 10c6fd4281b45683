"""parplan's planner: everything above the pure cost models, grouped by the flow a request takes.

From Python (planner.api; the same objects the CLI prints, imported on first use so that `import planner`
stays light):

    from planner import plan, estimate, check
    best = plan("llama3-70b", "dgx-h100", nodes=8)          # .plans (Estimates, fastest first), .reasons
    e = estimate("llama3-70b", "dgx-h100", "tp=8,pp=4,mbs=1,zero=1,recompute=selective,sp=1", nodes=8)
    v = check("train.sh", cluster="dgx-h100")               # .fits, .estimate, .warnings

- `files`: the user's files in and out (spec, plan and native configs read with guards; writes that
  never clobber).
- `search`: the layout space, CP-SAT over it, the oracle, explanations, framework restrictions.
- `exporters`: launch files for Megatron-LM, DeepSpeed, torchrun, torchtitan and SLURM, and their
  validators.
- `report`: tables, listings and the plan report (terminal and HTML).
- the CLI on top: `cli` (the Typer app; the commands live in `cli_layout`, `cli_plan`, `cli_tools`,
  sharing `cli_common`), `trainopts` and `runopts` (the training and whole-run options, declared once),
  `plan_outputs` (plan's all-or-nothing writes), `schema` (JSON Schema of specs and outputs),
  `calibration` (`parplan calibrate`), `errors`, `safetext`.
- `sweep`, `sweep_grid`, `sweep_pool`, `sweep_command`: `parplan sweep` (the points, their runs, the
  Pareto front and the pick; the options; the worker processes; the command), drawn by
  `report.sweep_table` and `report.sweep_html` from its JSON document.

Imports run one way: costmodels <- hardware_profiles <- errors/safetext <- files <- search <-
exporters <- report <- the CLI modules (tests/test_architecture.py checks it).
"""

__all__ = ["plan", "estimate", "check", "PlanResult", "CheckResult"]


def __getattr__(name: str):
    """`planner.plan`, `planner.estimate`, `planner.check` (and their result classes) from planner.api,
    imported on first use."""
    if name in __all__:
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
