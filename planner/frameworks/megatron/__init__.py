"""Megatron-LM / Megatron-Core (and NeMo and Megatron-DeepSpeed, which run its arguments).

Readers (for `check`): `flags` (pretrain_gpt.py arguments to specs, over planner.files.shellread),
`flag_table` (every known flag and its verdict), `names` (flag spellings), `stages` (uneven stages),
`train` (training flags), `vocab` (padded vocabulary), `deepspeed_dialect` (Megatron-DeepSpeed and 2021
flags), `ds_json` (the DeepSpeed JSON it names), `known_flags` and `mcore_flags` (the flags Megatron accepts;
unknown ones warned or refused), `nemo_hydra` (NeMo launchers, refused by name), `world` (node counts),
`tp_split` and `runnable` (launches Megatron refuses at start-up). Log reader: `log`. Exporters: `export` (launch_megatron.sh), `export_slurm` (the sbatch wrapper).

May import: as planner.frameworks says (readers as planner.files, `export*` as planner.exporters).
"""

NAME = "megatron"
CAPABILITIES = "megatron"  # hardware_profiles/frameworks/megatron.yaml
STACKS = ("megatron-core", "megatron-2021", "nemo")  # hardware_profiles/stacks/<name>.yaml; first = default
FORMATS = ("megatron", "slurm")
