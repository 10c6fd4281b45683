"""The user's files, in and out: guarded reading (`safe_read`: size, depth, duplicate keys, bounded
numbers), spec, preset and plan-file loading (`loading`), Hugging Face config.json (`hf_config`),
native configs read back for `check` (`native`, with `megatron_flags`, `megatron_vocab`,
`megatron_deepspeed`, `read_configs`, `shellread` over the launch-script reader `shell_tokens`,
`shell_expand`, `shell_parse`, `shell_eval`, and DeepSpeed's partitioner mirrored in `ds_partition`), and guarded writing (`guarded_write`,
`planfile`).

May import: costmodels, hardware_profiles, planner.errors, planner.safetext. Nothing else of
planner: every other package reads and writes through this one.
"""
