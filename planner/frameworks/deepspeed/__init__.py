"""DeepSpeed (its engine's JSON config, as the Hugging Face Trainer fills it, and its launcher).

Readers (for `check`): `auto` (the Trainer's "auto" values), `partition` (PipelineModule's stage
partitioner, mirrored; the search's DeepSpeed splits use it too), `config_json` (the JSON's keys:
batch rule, ZeRO stage, offload, precision, what is read but not priced). Log reader: `log`. Exporter: `export` (ds_config.json and
launch_deepspeed.sh).

May import: as planner.frameworks says (readers as planner.files, `export*` as planner.exporters).
"""

NAME = "deepspeed"
CAPABILITIES = "deepspeed"  # hardware_profiles/frameworks/deepspeed.yaml
STACKS = ("deepspeed",)  # hardware_profiles/stacks/<name>.yaml; first = default
FORMATS = ("deepspeed",)
