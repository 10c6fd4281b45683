"""One folder per framework: everything parplan knows of Megatron-LM, DeepSpeed, torchtitan and plain
torch FSDP under torchrun sits in `planner/frameworks/<name>/` (issue 36 part 9), the way torchtitan keeps
one module per parallelism:

- the readers of its native files for `check` (launch flags, JSON/TOML configs, its own defaults),
- the reader of its training logs for `calibrate` (`log`),
- its exporters (`export*`: the files `parplan export` writes),
- in its `__init__`: NAME, the capability table it runs under `--framework` (CAPABILITIES, data in
  hardware_profiles/frameworks/), the software stacks whose fitted efficiencies price it (STACKS, data
  in hardware_profiles/stacks/; the first is its default) and the export formats it writes (FORMATS).

What stays shared: the generic launch-script reader (planner.files.shellread and shell_*), the value
checks every config reader uses (planner.files.config_values), the native dispatcher (planner.files.native),
the guarded log reader (planner.files.logs), the exporters' common code, pricing and validators
(planner.exporters), and the search's `--framework` logic (planner.search.frameworks).

May import: a framework's readers and log reader (every module not named `export*`) may import what
planner.files may (costmodels, hardware_profiles, planner.errors, planner.safetext, planner.files) and each
other's readers; its `export*` modules may also import what planner.exporters may (planner.search,
planner.exporters). tests/test_architecture.py checks both. The old paths (planner.files.megatron_flags,
planner.exporters.megatron, ...) are aliases of these modules kept for one release.
"""
