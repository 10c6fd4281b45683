"""Plain torch FSDP under torchrun (`--framework fsdp`): a launcher for the user's own train.py.

Exporter: `export` (launch_torchrun.sh, the plan as named arguments and PARPLAN_* variables). Its
launch scripts are read back by planner.files.parplan_launch (shared with the other frameworks' scripts);
it has no log reader of its own (a user's train.py logs what it likes).

May import: as planner.frameworks says (readers as planner.files, `export*` as planner.exporters).
"""

NAME = "fsdp"
CAPABILITIES = "fsdp"  # hardware_profiles/frameworks/fsdp.yaml
STACKS = ("fsdp", "automodel")  # hardware_profiles/stacks/<name>.yaml; first = default
FORMATS = ("torchrun",)
