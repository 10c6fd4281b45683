"""The user's files, in and out: guarded reading (`safe_read`: size, depth, duplicate keys, bounded
numbers), spec, preset and plan-file loading (`loading`), Hugging Face config.json (`hf_config`),
native configs read back for `check` (`native`, which dispatches to each framework's readers in
planner.frameworks; `shellread` over the generic launch-script reader `shell_tokens`, `shell_expand`,
`shell_parse`, `shell_eval`; `config_values`, the checks every config reader shares; `parplan_launch`,
the launch scripts parplan writes), training logs (`logs`, dispatching to each framework's `log`), and
guarded writing (`guarded_write`, `planfile`). The old paths of the moved readers (`megatron_*`, `ds_*`,
`titan_*`, `read_configs`, `logs.<framework>`) stay importable for one release.

May import: costmodels, hardware_profiles, planner.errors, planner.safetext, and the readers of
planner.frameworks (which sit at this level). Nothing else of planner: every other package reads and
writes through this one.
"""
