"""The keys DeepSpeed 0.19.8 accepts inside its pydantic sub-configs, vendored, and the check that refuses others.

DeepSpeed builds these sections as DeepSpeedConfigModel subclasses, whose pydantic config has extra="forbid"
and populate_by_name=True (deepspeed/runtime/config_utils.py): a key that is neither a field nor a field's
alias makes the engine refuse to start; deprecated fields are fields, so their old names are accepted.
DeepSpeedConfigModel.__init__ drops "auto" values before validation (strict=False), nested sections included
(pydantic calls an overridden __init__ for them too), so an unknown key set to "auto" passes. Top-level keys
are read one by one (runtime/config.py DeepSpeedConfig._initialize_params) and unknown ones are ignored:
parplan names a near miss of a section it prices in a note, never refuses. Keys DeepSpeed 0.19.8 removed
(runtime/config.py _REMOVED_TOP_LEVEL_CONFIG_KEYS, _REMOVED_ZERO_CONFIG_KEYS) make 0.19.8 refuse to start but
ran on earlier versions: named in a note (planner.frameworks.deepspeed.sharding refuses MiCS, which cannot be
priced). The table was checked against the installed DeepSpeed 0.19.8's model_fields and aliases.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from planner.errors import UserError, closest

VERSION = "DeepSpeed 0.19.8"

# Field names and aliases (both accepted), from DeepSpeed 0.19.8. Source file and class after each name.
ZERO = frozenset((  # deepspeed/runtime/zero/config.py DeepSpeedZeroConfig
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "use_multi_rank_bucket_allreduce",
    "allgather_partitions", "allgather_bucket_size", "overlap_comm", "compute_grad_norm", "load_from_fp32_weights",
    "elastic_checkpoint", "offload_param", "offload_optimizer", "zenflow", "sub_group_size",
    "cpu_offload_param", "cpu_offload_use_pin_memory", "cpu_offload",  # deprecated -> offload_param/_optimizer
    "prefetch_bucket_size", "stage3_prefetch_bucket_size", "param_persistence_threshold",
    "stage3_param_persistence_threshold", "model_persistence_threshold", "stage3_model_persistence_threshold",
    "max_live_parameters", "stage3_max_live_parameters", "max_reuse_distance", "stage3_max_reuse_distance",
    "gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
    "module_granularity_threshold", "stage3_module_granularity_threshold", "use_all_reduce_for_fetch_params",
    "stage3_use_all_reduce_for_fetch_params", "allgather_sequential", "stage3_allgather_sequential",
    "stage3_gather_fp16_weights_on_model_save",  # deprecated -> gather_16bit_weights_on_model_save
    "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients", "parameter_alignment",
    "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "memory_efficient_linear", "pipeline_loading_checkpoint", "override_module_apply",
    "log_trace_cache_warnings", "enable_sanity_checks", "save_muon_momentum_buffer_in_memory", "leaf_module"))
OFFLOAD_OPTIMIZER = frozenset((  # deepspeed/runtime/zero/offload_config.py DeepSpeedZeroOffloadOptimizerConfig
    "device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read", "pipeline_write", "fast_init", "ratio",
    "super_offload", "cpuadam_cores_perc"))
OFFLOAD_PARAM = frozenset((  # deepspeed/runtime/zero/offload_config.py DeepSpeedZeroOffloadParamConfig
    "device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory"))
ZENFLOW = frozenset((  # deepspeed/runtime/zenflow/zenflow_config.py ZenFlowConfig
    "topk_ratio", "select_strategy", "select_interval", "update_interval", "overlap_step", "offload", "auto_ratio",
    "full_warm_up_rounds", "pt_reserved_cores_perc", "steps_per_epoch"))
LEAF_MODULE = frozenset(("classes", "names", "name_suffixes"))  # zero/leaf_module_config.py
BF16 = frozenset((  # deepspeed/runtime/precision_config.py DeepSpeedBF16Config (also the old "bfloat16")
    "enabled", "immediate_grad_update", "check_grad_overflow", "bf16_master_weights_and_grads",
    "bf16_optimizer_states"))
FP16 = frozenset((  # deepspeed/runtime/precision_config.py DeepSpeedFP16Config
    "enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
    "consecutive_hysteresis", "min_loss_scale", "fp16_master_weights_and_grads"))
TENSOR_PARALLEL = frozenset((  # deepspeed/runtime/tensor_parallel/config.py TPTrainingConfig
    "dtype", "autotp_size", "tp_overlap_comm", "vocab_parallel_lm_head", "vocab_parallel_ce_backend",
    "tensor_parallel", "tp", "injection_policy_tuple", "partition_config", "preset_model", "keep_module_on_host",
    "replace_with_kernel_inject", "kernel_inject"))
TP = frozenset(("tp_size", "tp_grain_size", "mpu", "tp_group"))  # tensor_parallel/config.py TPConfig
HYBRID_ENGINE = frozenset((  # deepspeed/runtime/config.py HybridEngineConfig
    "enabled", "max_out_tokens", "inference_tp_size", "release_inference_cache", "pin_parameters",
    "tp_gather_partition_size", "enable_cuda_graph"))
COMPILE = frozenset((  # deepspeed/compile/config.py CompileConfig
    "deepcompile", "autoep_non_moe", "free_activation", "free_activation_threshold", "offload_activation",
    "offload_activation_pin_memory", "offload_opt_states", "double_buffer", "symmetric_memory", "debug_log",
    "offload_parameters", "sync_before_reduce", "sync_after_reduce", "sync_before_allgather",
    "sync_after_allgather", "keep_int_input_tensors", "keep_all_input_tensors", "passes"))
COMMS_LOGGER = frozenset(("enabled", "prof_all", "prof_ops", "verbose", "debug"))  # deepspeed/comm/config.py
MONITOR = frozenset(("enabled", "output_path", "job_name"))  # deepspeed/monitor/config.py TensorBoard/CSVConfig
WANDB = frozenset(("enabled", "group", "team", "project"))  # deepspeed/monitor/config.py WandbConfig
COMET = frozenset((  # deepspeed/monitor/config.py CometConfig
    "enabled", "samples_log_interval", "project", "workspace", "api_key", "experiment_name", "experiment_key",
    "online", "mode"))

# dotted section -> its accepted keys
SECTIONS = {
    "zero_optimization": ZERO, "zero_optimization.offload_optimizer": OFFLOAD_OPTIMIZER,
    "zero_optimization.offload_param": OFFLOAD_PARAM, "zero_optimization.zenflow": ZENFLOW,
    "zero_optimization.leaf_module": LEAF_MODULE, "bf16": BF16, "bfloat16": BF16, "fp16": FP16,
    "tensor_parallel": TENSOR_PARALLEL, "tensor_parallel.tp": TP, "tensor_parallel.tensor_parallel": TP,
    "hybrid_engine": HYBRID_ENGINE, "compile": COMPILE, "comms_logger": COMMS_LOGGER, "tensorboard": MONITOR,
    "csv_monitor": MONITOR, "wandb": WANDB, "comet": COMET,
}
# removed in 0.19.8 (runtime/config.py): refused there, accepted by earlier versions
REMOVED_TOP = ("nebula", "compression_training", "amp", "quantize_training", "sparse_gradients", "eigenvalue",
               "sparse_attention", "elasticity", "graph_harvesting", "curriculum_learning", "progressive_layer_drop")
REMOVED_ZERO = ("mics_shard_size", "mics_hierarchical_params_gather", "zeropp_loco_param")

# top-level keys parplan prices: an unknown top-level key this close to one is named (DeepSpeed ignores it)
PRICED_TOP = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
              "zero_optimization", "bf16", "fp16", "optimizer", "activation_checkpointing", "pipeline",
              "sequence_parallel_size", "tensor_parallel")
NEAR = 0.85  # difflib ratio from which a key is taken for a misspelling


def _unknown(section: dict, name: str) -> list[str]:
    """Keys of `section` (the dotted `name`) DeepSpeed refuses: not a field or alias, not an "auto" it drops,
    not a removed key (those are named in a note instead)."""
    allowed = SECTIONS[name] | (set(REMOVED_ZERO) if name == "zero_optimization" else set())
    return [k for k, v in section.items() if k not in allowed and v != "auto"]


def _sections(cfg: dict):
    """(dotted name, mapping) of every vendored section the config has, nested ones after their parent."""
    for name in SECTIONS:
        node = cfg
        for part in name.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            yield name, node


def refuse_unknown(cfg: dict, path: Path) -> None:
    """UserError naming the first key DeepSpeed's pydantic sections would refuse, and the closest valid one."""
    for name, section in _sections(cfg):
        for key in _unknown(section, name):
            hint = closest(str(key), SECTIONS[name])
            advice = (f"did you mean {name}.{hint}?" if hint else f"none of the {len(SECTIONS[name])} keys {name} "
                      "takes is close (planner/frameworks/deepspeed/ds_keys.py lists them)")
            raise UserError(f"{path}: {name}.{str(key)[:60]} is not a {VERSION} key: DeepSpeed refuses to start on it "
                            f"(pydantic extra=\"forbid\", runtime/config_utils.py DeepSpeedConfigModel); {advice}")


def removed_note(cfg: dict) -> list[str]:
    """One note naming the keys DeepSpeed 0.19.8 removed (it refuses them; earlier versions ran them)."""
    zero = cfg.get("zero_optimization")
    found = [k for k in REMOVED_TOP if k in cfg]
    found += [f"zero_optimization.{k}" for k in REMOVED_ZERO if isinstance(zero, dict) and k in zero]
    if not found:
        return []
    return [f"{', '.join(found)}: removed in {VERSION}, which refuses to start with such a key (runtime/config.py "
            "_REMOVED_TOP_LEVEL_CONFIG_KEYS, _REMOVED_ZERO_CONFIG_KEYS); read as earlier versions ran it"]


def near_miss_notes(cfg: dict) -> list[str]:
    """A note per unknown top-level key that looks like a misspelt section parplan prices (DeepSpeed ignores
    unknown top-level keys, so the run goes on without that section)."""
    out = []
    for key in cfg:
        if not isinstance(key, str) or key in PRICED_TOP or key in SECTIONS or key in REMOVED_TOP:
            continue
        hint = difflib.get_close_matches(key, PRICED_TOP, n=1, cutoff=NEAR)
        if hint:
            out.append(f"{key[:60]} is no DeepSpeed key (did you mean {hint[0]}?): DeepSpeed ignores it, and so "
                       "does parplan")
    return out
