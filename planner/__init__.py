"""parplan's planner: everything above the pure cost models, grouped by the flow a request takes.

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
