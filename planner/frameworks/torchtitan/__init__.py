"""torchtitan (FSDP2 + TP/CP/PP in one trainer; 0.2.x TOML job files and the 0.3.x command line).

Readers (for `check`): `config_toml` (the 0.2.x job file: converters, float8, checkpointing),
`config_cli` (0.3.x `--section.key` launch lines), `config_launch` (0.1/0.2 launchers: torchrun/run_train.sh
with `--job.config_file`, the TOML then the line's overrides), `config_values` (the [parallelism] and [training]
numbers, the stage split and the splits torchtitan can run), `config_old` and `config_old_pp` (job files of
the releases before 0.1.0, [training] batch_size / tensor_parallel_degree, [experimental]
pipeline_parallel_degree ..., moved to their 0.1/0.2 keys), `config_keys` (one warning per key torchtitan
does not define, against `known_keys`, which `known_keys_build` generates from torchtitan's own config code).
Log reader: `log`. Exporter: `export` (job TOML and launch_torchtitan.sh).

May import: as planner.frameworks says (readers as planner.files, `export*` as planner.exporters).
"""

NAME = "torchtitan"
CAPABILITIES = "torchtitan"  # hardware_profiles/frameworks/torchtitan.yaml
STACKS = ("torchtitan", "torchtitan-eager")  # hardware_profiles/stacks/<name>.yaml; first = default
FORMATS = ("torchtitan",)
