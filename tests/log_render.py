"""Training logs rendered in each framework's real format, for the calibrate tests.

Megatron-LM: megatron/training/arguments.py `_print_args` (the argument dump, sorted, dots to 48
characters) and megatron/training/training.py `training_log` (megatron-core 0.19.2). torchtitan:
torchtitan/components/metrics.py `MetricsProcessor.log` with its ANSI colours and the "[titan] ..."
logger format, torchtitan/trainer.py's start-up lines (torchtitan 0.3.0). DeepSpeed 0.19.8:
deepspeed/runtime/config.py `DeepSpeedConfig.print`, deepspeed/utils/timer.py `ThroughputTimer.stop`
and `SynchronizedWallClockTimer.log` (through print_dist: "[Rank 0] ...").
"""

from __future__ import annotations

import numpy as np

TS = "2025-06-01 12:00:00.000000"


def _megatron_args(args: dict) -> list[str]:
    lines = ["  {} {} {}".format(k, "." * (48 - len(k)), v) for k, v in args.items()]
    return (["------------------------ arguments ------------------------"] + sorted(lines, key=str.lower)
            + ["-------------------- end of arguments ---------------------"])


def _megatron_step(it: int, iters: int, gbs: int, ms: float, loss, nan: int = 0) -> str:
    s = f" [{TS}] iteration {it:8d}/{iters:8d} | consumed samples: {it * gbs:12d} |"
    s += f" elapsed time per iteration (ms): {ms:.1f} | learning rate: {1.5e-4:.6E} | global batch size: {gbs:5d} |"
    if loss is not None:
        s += f" lm loss: {loss:.6E} |"
    s += f" loss scale: {65536.0:.1f} | grad norm: {1.234:.3f} |"
    s += f" number of skipped iterations: {0:3d} | number of nan iterations: {nan:3d} |"
    return s


def megatron_log(*, tp, pp, dp, mbs, gbs, layers, hidden, heads, seq, step_ms, iters=20, seed=0, nan_at=(),
                 inf_at=(), rank_prefix=None, warmup_factor=3.0, extra_args=None) -> str:
    """A Megatron-LM log of a run whose steady step takes `step_ms`: argument dump, a slow first
    iteration, 2% noise, NaN (missing loss, nan iterations 1) or INF loss at the given iterations."""
    rng = np.random.default_rng(seed)
    args = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp, "context_parallel_size": 1,
            "expert_tensor_parallel_size": tp,  # validate_args sets it to tp for every model (megatron-core 0.19.2)
            "data_parallel_size": dp, "world_size": tp * pp * dp, "micro_batch_size": mbs, "global_batch_size": gbs,
            "num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads, "seq_length": seq,
            "max_position_embeddings": seq, "fp16": True, "bf16": False, "sequence_parallel": False,
            "use_distributed_optimizer": False, "recompute_granularity": "full", "recompute_method": "uniform",
            "overlap_grad_reduce": False, "tp_comm_overlap": False, "use_flash_attn": False,
            "virtual_pipeline_model_parallel_size": None, "train_iters": iters, "log_interval": 1,
            "lr": 0.00015, **(extra_args or {})}
    lines = ["using world size: {}, data-parallel size: {}".format(tp * pp * dp, dp)] + _megatron_args(args)
    for it in range(1, iters + 1):
        ms = step_ms * (warmup_factor if it == 1 else 1.0) * (1 + rng.normal(0, 0.02))
        loss = None if it in nan_at else float("inf") if it in inf_at else 10.0 - 0.1 * it
        line = _megatron_step(it, iters, gbs, ms, loss, nan=1 if it in nan_at else 0)
        lines.append(line if rank_prefix is None else rank_prefix + line)
    return "\n".join(lines) + "\n"


RED, GREEN, ORANGE, TURQ, BLUE, CYAN, MAGENTA, RESET = (
    "\033[31m", "\033[32m", "\033[38;2;180;60;0m", "\033[38;2;54;234;195m", "\033[34m", "\033[36m", "\033[35m",
    "\033[39m")


def torchtitan_step(step: int, loss: float, tps: float, rank=None) -> str:
    msg = (f"{RED}step: {step:2}  {GREEN}loss: {loss:8.5f}  {ORANGE}grad_norm: {1.2345:7.4f}  "
           f"{TURQ}memory: {41.23:5.2f}GiB({52.10:.2f}%)  {BLUE}tps: {round(tps):,}  "
           f"{CYAN}tflops: {350.12:,.2f}  {MAGENTA}mfu: {35.40:.2f}%{RESET}")
    line = f"[titan] 2025-06-01 12:00:00,000 - root - INFO - {msg}"
    return line if rank is None else f"[rank{rank}]:{line}"


def torchtitan_log(*, local_batch, global_batch, seq, tps, steps=20, seed=0, params=8_030_261_248,
                   name="llama3 8B", nan_at=(), ranks=(None,), accum=1) -> str:
    """A torchtitan log: start-up lines, then one step line per step (the first three slower)."""
    rng = np.random.default_rng(seed)
    head = [f"[titan] 2025-06-01 12:00:00,000 - root - INFO - Building {name}",
            f"[titan] 2025-06-01 12:00:00,000 - root - INFO - {BLUE}Model {name} {RED}size: {params:,} total "
            f"parameters{RESET}",
            "[titan] 2025-06-01 12:00:00,000 - root - INFO - Trainer is initialized with local batch size "
            f"{local_batch}, global batch size {global_batch}, gradient accumulation steps {accum}, sequence length {seq}, "
            f"total steps {steps} (warmup 2)",
            f"[titan] 2025-06-01 12:00:00,000 - root - INFO - Training starts at step 1"]
    body = []
    for step in range(1, steps + 1):
        for rank in ranks:
            rate = tps * (0.3 if step == 1 else 1.0) * (1 + rng.normal(0, 0.02))
            body.append(torchtitan_step(step, float("nan") if step in nan_at else 8.0 - 0.1 * step, rate, rank))
    return "\n".join(head + body) + "\n"


def deepspeed_log(*, train_batch, mbs, zero, samples_per_s, steps=20, seed=0, print_every=1, timers=False,
                  step_ms=None, dp=1) -> str:
    """A DeepSpeed log of `dp` data-parallel ranks: the engine's config dump (accumulation steps = train batch /
    (micro-batch x dp), as DeepSpeedConfig._batch_assertion holds), then ThroughputTimer lines (or timer lines)."""
    rng = np.random.default_rng(seed)
    pre = "[2025-06-01 12:00:00,000] [INFO] [config.py:1003:print] "
    cfg = {"gradient_accumulation_steps": max(train_batch // (mbs * dp), 1), "train_batch_size": train_batch,
           "train_micro_batch_size_per_gpu": mbs, "zero_optimization_stage": zero, "fp16_enabled": False,
           "steps_per_print": print_every, "wall_clock_breakdown": timers}
    lines = [pre + "DeepSpeedEngine configuration:"]
    lines += [pre + "  {} {} {}".format(k, "." * (29 - len(k)), v) for k, v in sorted(cfg.items())]
    for step in range(1, steps + 1):
        slow = 3.0 if step == 1 else 1.0
        if timers:
            ms = step_ms * slow * (1 + rng.normal(0, 0.02))
            lines.append(f"[Rank 0] time (ms) | fwd_microstep: {ms * 0.3:.2f} | bwd_microstep: {ms * 0.6:.2f} | "
                         f"step_microstep: {ms * 0.1:.2f}")
            lines.append(f"[Rank 0] time (ms) | fwd: {ms * 0.3:.2f} | bwd: {ms * 0.6:.2f} | bwd_inner: {ms * 0.5:.2f}"
                         f" | bwd_allreduce: {ms * 0.1:.2f} | step: {ms * 0.1:.2f}")
        else:
            rate = samples_per_s / slow * (1 + rng.normal(0, 0.02))
            lines.append("[2025-06-01 12:00:00,000] [INFO] [timer.py:264:stop] epoch=0/micro_step={}/global_step={}, "
                         "RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, MemAllocated=12.5GB, MaxMemAllocated=20.1GB"
                         .format(step * cfg["gradient_accumulation_steps"], step, rate, rate))
        if step % print_every == 0:
            lines.append(f"[2025-06-01 12:00:00,000] [INFO] [logging.py:128:log_dist] [Rank 0] step={step}, "
                         "skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]")
    return "\n".join(lines) + "\n"
