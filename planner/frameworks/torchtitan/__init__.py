"""torchtitan (FSDP2 + TP/CP/PP in one trainer; 0.2.x TOML job files and the 0.3.x command line).

Readers (for `check`): `config_toml` (the 0.2.x job file: converters, float8, checkpointing),
`config_cli` (0.3.x `--section.key` launch lines), `config_values` (the [parallelism] and [training]
numbers, the stage split and the splits torchtitan can run). Log reader: `log`. Exporter: `export` (job TOML and
launch_torchtitan.sh).

May import: as planner.frameworks says (readers as planner.files, `export*` as planner.exporters).
"""

NAME = "torchtitan"
CAPABILITIES = "torchtitan"  # hardware_profiles/frameworks/torchtitan.yaml
STACKS = ("torchtitan", "torchtitan-eager")  # hardware_profiles/stacks/<name>.yaml; first = default
FORMATS = ("torchtitan",)
