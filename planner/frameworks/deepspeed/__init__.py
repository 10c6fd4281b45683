"""DeepSpeed (its engine's JSON config, as the Hugging Face Trainer fills it, and its launcher).

Readers (for `check`): `auto` (the Trainer's "auto" values), `partition` (PipelineModule's stage
partitioner, mirrored; the search's DeepSpeed splits use it too), `config_json` (the JSON's keys:
batch rule, ZeRO stage, offload, precision, what is read but not priced), and what DeepSpeed itself does with
the keys, run by `auto.resolve`: `ds_keys` (DeepSpeed 0.19.8's pydantic section keys, vendored: unknown ones
refused), `legacy` (deprecated offload switches, Apex AMP), `sharding` (MiCS, ZeRO++ hpZ, AutoTP: refused),
`persistence` (ZeRO-3's persistence threshold). Log reader: `log`. Exporter: `export` (ds_config.json and
launch_deepspeed.sh).

May import: as planner.frameworks says (readers as planner.files, `export*` as planner.exporters).
"""

NAME = "deepspeed"
CAPABILITIES = "deepspeed"  # hardware_profiles/frameworks/deepspeed.yaml
STACKS = ("deepspeed",)  # hardware_profiles/stacks/<name>.yaml; first = default
FORMATS = ("deepspeed",)
