"""DeepSpeed and torchtitan rules on parsed configs (the validators' config half).

Source: benchmarks/data/launch_formats.md, section "DeepSpeed" (train_batch_size == micro * GAS * DP,
strict sections with enums, unknown top-level keys ignored by DeepSpeed so checked here, no "auto",
pipeline with ZeRO < 2, launcher flags with underscores, hostfile `host slots=N` without duplicates)
and section "torchtitan" (dp_replicate*dp_shard*cp*tp*pp == world, (dp_shard*cp*tp) % ep == 0,
global % (local*dp) == 0, seq_len divisible by tp and 2*cp, the 0.2.x loader's strict keys, and
0.3.0's --training.disable_cuda_graphs with PP > 1 or EP > 1: torchtitan/trainer.py refuses CUDA graphs
with the all-to-all token dispatcher).
"""

from __future__ import annotations

import re

from planner.files.shellread import flag_dict, parse_flags, split_at_script

DS_TOP = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "optimizer",
          "scheduler", "gradient_clipping", "zero_optimization", "bf16", "fp16", "activation_checkpointing",
          "pipeline", "steps_per_print", "wall_clock_breakdown", "prescale_gradients", "communication_data_type",
          "flops_profiler", "tensorboard", "wandb", "csv_monitor", "zero_allow_untested_optimizer",
          "sequence_parallel_size"}
DS_ZERO = {"stage", "offload_optimizer", "offload_param", "overlap_comm", "contiguous_gradients", "reduce_bucket_size",
           "allgather_bucket_size", "reduce_scatter", "allgather_partitions", "stage3_prefetch_bucket_size",
           "stage3_param_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance",
           "stage3_gather_16bit_weights_on_model_save", "round_robin_gradients", "sub_group_size"}
DS_PIPE = {"stages", "partition", "seed_layers", "activation_checkpoint_interval", "pipe_partitioned",
           "grad_partitioned"}
DS_AC = {"partition_activations", "contiguous_memory_optimization", "cpu_checkpointing", "number_checkpoints",
         "synchronize_checkpoint_boundary", "profile"}
DS_LAUNCHER = {"--hostfile", "-H", "--include", "--exclude", "--num_nodes", "--num_gpus", "--master_port",
               "--master_addr", "--node_rank", "--launcher", "--launcher_args", "--module", "--no_python",
               "--no_local_rank", "--no_ssh", "--no_ssh_check", "--force_multi", "--save_pid",
               "--enable_each_rank_log", "--autotuning", "--bind_cores_to_rank", "--bind_core_list", "--ssh_port"}


def _auto(value, where: str) -> list[str]:
    if value == "auto":
        return [f"{where}=\"auto\": plain DeepSpeed needs numbers (auto is a Hugging Face Trainer convention)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _auto(v, f"{where}.{k}")]
    return []


def deepspeed_problems(cfg: dict, dp: int) -> list[str]:
    out = [p for k, v in cfg.items() for p in _auto(v, k)]
    out += [f"unknown top-level key {k!r} (DeepSpeed ignores it silently)" for k in cfg if k not in DS_TOP]
    tbs, micro = cfg.get("train_batch_size"), cfg.get("train_micro_batch_size_per_gpu")
    gas = cfg.get("gradient_accumulation_steps", 1)
    if not all(isinstance(v, int) and v > 0 for v in (tbs, micro, gas)):
        out.append("train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps must be "
                   "positive whole numbers")
    elif tbs != micro * gas * dp:
        out.append(f"train_batch_size {tbs} != micro {micro} * GAS {gas} * DP {dp}")
    zero = cfg.get("zero_optimization", {})
    out += _section_keys(zero, DS_ZERO, "zero_optimization")
    if zero.get("stage") not in (0, 1, 2, 3):
        out.append(f"zero_optimization.stage {zero.get('stage')!r} must be 0-3")
    for key in ("offload_optimizer", "offload_param"):
        device = zero.get(key, {}).get("device", "none")
        if device not in ("none", "cpu", "nvme"):
            out.append(f"zero_optimization.{key}.device {device!r} must be none, cpu or nvme")
    if zero.get("reduce_bucket_size", 1) <= 0:
        out.append("zero_optimization.reduce_bucket_size must be > 0")
    enabled = [k for k in ("bf16", "fp16") if cfg.get(k, {}).get("enabled")]
    if len(enabled) > 1:
        out.append("bf16.enabled and fp16.enabled are both true")
    pipe = cfg.get("pipeline")
    if pipe is not None:
        out += _section_keys(pipe, DS_PIPE, "pipeline")
        if pipe.get("stages", 1) > 1 and zero.get("stage", 0) >= 2:
            out.append(f"pipeline parallelism needs ZeRO stage < 2 (stage {zero.get('stage')})")
    out += _section_keys(cfg.get("activation_checkpointing", {}), DS_AC, "activation_checkpointing")
    return out


def _section_keys(section: dict, allowed: set, name: str) -> list[str]:
    if not isinstance(section, dict):
        return [f"{name} must be a section"]
    return [f"{name}.{k}: unknown key (DeepSpeed rejects it)" for k in section if k not in allowed]


def hostfile_problems(text: str, nodes: int, gpus: int) -> list[str]:
    out, hosts = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(\S+)\s+slots=(\d+)", line)
        if not m:
            out.append(f"hostfile: bad line {line!r} (expected 'host slots=N')")
            continue
        if m.group(1) in hosts:
            out.append(f"hostfile: {m.group(1)} appears twice")
        hosts.append(m.group(1))
        if int(m.group(2)) != gpus:
            out.append(f"hostfile: {m.group(1)} has slots={m.group(2)}, the plan has {gpus} GPUs per node")
    if len(hosts) != nodes:
        out.append(f"hostfile lists {len(hosts)} hosts, the plan has {nodes} nodes")
    return out


def launcher_problems(argv: list[str], nodes: int, gpus: int) -> list[str]:
    opts, script, args = split_at_script(argv)
    pairs = parse_flags(opts, {"--no_python", "--no_local_rank", "--no_ssh", "--no_ssh_check", "--force_multi",
                               "--save_pid", "--bind_cores_to_rank", "--module"})
    flags = flag_dict(pairs)
    out = [f"deepspeed: unknown flag {f} (the launcher spells flags with underscores)"
           for f, _ in pairs if f not in DS_LAUNCHER]
    if flags.get("--num_nodes") != str(nodes) or flags.get("--num_gpus") != str(gpus):
        out.append(f"deepspeed: --num_nodes/--num_gpus {flags.get('--num_nodes')}/{flags.get('--num_gpus')}, "
                   f"the plan has {nodes}/{gpus}")
    user = flag_dict(parse_flags(args, {"--deepspeed"}))
    if script is None and not argv:
        out.append("deepspeed: no training script")
    if "--deepspeed_config" not in user or "--deepspeed" not in user:
        out.append("deepspeed: the training script is not given --deepspeed --deepspeed_config")
    return out


TT_KEYS = {
    "job": {"config_file", "dump_folder", "description", "print_config", "save_config_file", "custom_config_module"},
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters", "print_after_conversion"},
    "training": {"dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps",
                 "enable_cpu_offload", "dtype", "mixed_precision_param", "mixed_precision_reduce", "gc_freq",
                 "gc_debug", "disable_cuda_graphs"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
                    "tensor_parallel_degree", "disable_loss_parallel", "enable_async_tensor_parallel",
                    "pipeline_parallel_degree", "module_fqns_per_model_part",
                    "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
                    "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
                    "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size",
                    "context_parallel_degree", "expert_parallel_degree", "expert_tensor_parallel_degree",
                    "enable_sequence_parallel"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
    "compile": {"enable", "components", "backend"},  # torchtitan 0.2.2 job_config.py Compile
    "loss": {"num_chunks"},  # 0.3.0 launch lines: ChunkedLossWrapper.Config (components/loss.py)
}
TT_SCHEDULES = {"1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble",
                "DualPipeV"}


def torchtitan_problems(cfg: dict, world: int, where: str, cli_args: list[str] = None) -> list[str]:
    out = [f"{where}: unknown key {s}.{k}" for s, keys in cfg.items() if isinstance(keys, dict)
           for k in keys if s in TT_KEYS and k not in TT_KEYS[s]]
    out += [f"{where}: unknown section [{s}]" for s in cfg if s not in TT_KEYS]
    par, train = cfg.get("parallelism", {}), cfg.get("training", {})
    deg = {k: par.get(f"{k}_degree", 1) for k in ("data_parallel_replicate", "tensor_parallel", "context_parallel",
                                                   "pipeline_parallel", "expert_parallel")}
    rep, tp, cp, pp, ep = deg.values()
    shard = par.get("data_parallel_shard_degree", -1)
    if shard == -1:
        shard = world // (rep * tp * cp * pp)
    if rep * shard * cp * tp * pp != world:
        out.append(f"{where}: dp_replicate*dp_shard*cp*tp*pp = {rep}*{shard}*{cp}*{tp}*{pp} != world {world}")
    if (shard * cp * tp) % ep:
        out.append(f"{where}: (dp_shard*cp*tp) % ep != 0 ({shard}*{cp}*{tp} % {ep})")
    local, gbs, seq = train.get("local_batch_size", 8), train.get("global_batch_size", -1), train.get("seq_len", 2048)
    if gbs != -1 and gbs % (local * rep * shard):
        out.append(f"{where}: global_batch_size {gbs} % (local {local} * dp {rep * shard}) != 0")
    if seq % tp or (cp > 1 and seq % (2 * cp)):
        out.append(f"{where}: seq_len {seq} must be divisible by tp {tp} and 2*cp {2 * cp}")
    chunks = cfg.get("loss", {}).get("num_chunks", 1)
    if seq % chunks:  # ChunkedLossWrapper: "sequence length must be divisible by num_chunks"
        out.append(f"{where}: seq_len {seq} must be divisible by loss.num_chunks {chunks}")
    if pp > 1:
        out += _tt_pipeline(par, local, where)
    ep = par.get("expert_parallel_degree", 1)
    if (pp > 1 or (isinstance(ep, int) and ep > 1)) and cli_args is not None \
            and "--training.disable_cuda_graphs" not in cli_args:
        out.append(f"{where}: PP > 1 or EP > 1 needs --training.disable_cuda_graphs (0.3.0 trainer.py: CUDA graphs "
                   "run neither pipelines nor the all-to-all token dispatcher)")
    mode = cfg.get("activation_checkpoint", {}).get("mode", "selective")
    if mode not in ("none", "selective", "full", "memory_budget", "memory-budget"):
        out.append(f"{where}: activation checkpoint mode {mode!r} is unknown")
    if cli_args is not None and not any(a.startswith("activation-checkpoint:") for a in cli_args):
        out.append(f"{where}: no activation-checkpoint subcommand (0.3.0 defaults to selective)")
    return out


def _tt_pipeline(par: dict, local: int, where: str) -> list[str]:
    out = []
    schedule = par.get("pipeline_parallel_schedule", "1F1B")
    if schedule not in TT_SCHEDULES:
        out.append(f"{where}: pipeline_parallel_schedule {schedule!r} is unknown")
    micro = par.get("pipeline_parallel_microbatch_size", 1)
    if local % micro:
        out.append(f"{where}: local_batch_size {local} % pipeline_parallel_microbatch_size {micro} != 0")
    return out
