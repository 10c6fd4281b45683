"""The whole run: how long, how many GPU-hours, how much energy and money to train on a token budget,
and what failures and checkpoints cost (**contract**: RunSpec, WholeRun, whole_run and the helpers).

Notation (SI inside: seconds, bytes, W):
  N   GPUs, n nodes;                          T_s  failure-free compute time of the run, s
  lam failures per GPU-hour;                  M    cluster mean time between failures, s = 3600 / (N lam)
  C   checkpoint bytes (the whole state);     B    checkpoint write rate per node, bytes/s
  d   (delta) time to write one checkpoint, s = C / (n B)
  tau compute time between checkpoints, s;    R    restart time after a failure, s
  G   goodput: the useful fraction of the wall time, T_s / T_w

Sources: Young (1974) "A first order approximation to the optimum checkpoint interval", CACM 17(9):530;
Daly (2006) "A higher order estimate of the optimum checkpoint interval for restart dumps", Future
Generation Computer Systems 22(3):303-312; Llama 3 (Grattafiori et al. 2024, "The Llama 3 Herd of
Models") section 3.3.1 (storage) and section 3.3.4 (reliability).

Deviations: failures are taken as a Poisson process (exponential inter-arrival times: Young's and Daly's
assumption), all interruptions stop the whole job, checkpoints are written synchronously (asynchronous
checkpointing hides most of d), and energy counts the GPUs' board power only.
"""

from __future__ import annotations

import math
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from costmodels.errors import SpecError
from costmodels.estimate import Estimate
from costmodels.hardware_spec import GB, ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec

HOUR_S = 3600.0
DAY_S = 86400.0

# Llama 3 section 3.3.4: "During a 54-day snapshot period of pre-training, we experienced a total of 466 job
# interruptions ... 419 were unexpected interruptions" on 16,384 H100 GPUs (section 3.3.1). Every unexpected
# interruption (GPU, HBM, network, host, software: 78% hardware) is counted against the GPUs:
# 419 / (54 * 24 h * 16,384 GPUs) = 1.97e-5 per GPU-hour, i.e. a cluster MTBF of 3.09 h at 16,384 GPUs.
LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_GPUS = 419, 54, 16384
DEFAULT_GPU_FAILURE_RATE_PER_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS)

# Llama 3 section 3.3.1: Tectonic "supports a sustainable throughput of 2 TB/s" for the 16,384-GPU (2,048-node)
# cluster's checkpoints: 2,000 GB/s / 2,048 nodes = 0.98 GB/s per node, sustained (the peak was 7 TB/s).
DEFAULT_CHECKPOINT_WRITE_GB_PER_S_PER_NODE = 2000.0 / 2048

# No published restart time (detect, reschedule, reload) for a job of this size is known to us; 10 minutes is
# chosen and checked against Llama 3 section 3.3.4 ("higher than 90% effective training time" with 419
# interruptions in 54 days = 7.8 a day: at most 18.5 minutes lost per interruption, restart and rework together).
DEFAULT_RESTART_S = 600.0
MIN_GOODPUT = 1e-6  # below this the run never finishes: the failure settings are absurd


class RunSpec(BaseModel):
    """The run to plan: its token budget, price and failure assumptions (None = the cited default)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    tokens: float = Field(..., gt=0, le=1e18, description="Tokens to train on (the whole run).")
    price_per_gpu_hour: Optional[float] = Field(
        None, ge=0, le=1e4, description="Price of one GPU-hour, USD; null = no cost reported.")
    gpu_failure_rate_per_hour: Optional[float] = Field(
        None, gt=0, le=1, description="Job-stopping interruptions per GPU-hour; null = Llama 3's 1.97e-5 "
        "(419 unexpected interruptions in 54 days on 16,384 GPUs, section 3.3.4).")
    restart_s: float = Field(
        DEFAULT_RESTART_S, ge=0, le=7 * DAY_S, description="Time from a failure to training again (detect, "
        "reschedule, reload the checkpoint), seconds; default 600, consistent with Llama 3's >90% effective "
        "training time (section 3.3.4).")
    checkpoint_write_gb_per_s_per_node: Optional[float] = Field(
        None, ge=1e-3, le=1e6, description="Checkpoint write rate per node, GB/s; null = the cluster's, else "
        "0.98 (Llama 3 section 3.3.1: 2 TB/s sustained over 2,048 nodes).")


class WholeRun(BaseModel):
    """What the whole run costs (failure-free numbers, then with failures and checkpoints)."""

    model_config = ConfigDict(extra="forbid")

    tokens: float = Field(..., description="Tokens trained on.")
    step_s: float = Field(..., description="Time of one optimizer step, s (the estimate's).")
    steps: int = Field(..., description="Optimizer steps: ceil(tokens / (global batch x sequence length)).")
    days: float = Field(..., description="Failure-free wall-clock days: steps x step_s.")
    gpu_hours: float = Field(..., description="GPUs x failure-free hours.")
    energy_kwh: Optional[float] = Field(..., description="GPUs x board power (tdp_w) x failure-free hours, kWh: "
                                        "an upper bound (full board power, no host, network or cooling); null = "
                                        "the GPU profile gives no tdp_w.")
    cost_usd: Optional[float] = Field(..., description="gpu_hours x price per GPU-hour; null without a price.")
    checkpoint_bytes: int = Field(..., description="Bytes of one checkpoint: parameters x (16-bit weights + "
                                  "optimizer states incl. fp32 master), the model state summed over its shards.")
    checkpoint_write_s: float = Field(..., description="delta: checkpoint_bytes / (nodes x write rate per node).")
    mtbf_s: float = Field(..., description="M: cluster mean time between failures, 1 / (GPUs x rate), s.")
    young_interval_s: float = Field(..., description="Young 1974: sqrt(2 delta M), s of compute between "
                                    "checkpoints.")
    checkpoint_interval_s: float = Field(..., description="Daly 2006 higher-order optimum, s of compute between "
                                         "checkpoints (the interval used).")
    checkpoint_interval_steps: int = Field(..., description="checkpoint_interval_s in whole steps (at least 1).")
    goodput: float = Field(..., description="Useful fraction of the wall time (Daly 2006, exponential failures).")
    days_with_failures: float = Field(..., description="Expected wall-clock days: days / goodput.")
    gpu_hours_with_failures: float = Field(..., description="GPUs x expected wall-clock hours.")
    cost_with_failures_usd: Optional[float] = Field(..., description="gpu_hours_with_failures x price; null "
                                                    "without a price.")
    expected_failures: float = Field(..., description="Expected interruptions: wall time with failures / M.")
    restart_s: float = Field(..., description="R: restart time assumed, s.")
    gpu_failure_rate_per_hour: float = Field(..., description="lam: failures per GPU-hour assumed.")


def mtbf_s(num_gpus: int, failure_rate_per_gpu_hour: float) -> float:
    """Cluster mean time between failures, s: M = 3600 / (N lam), failures independent across GPUs (the
    minimum of N exponential lifetimes). Llama 3 (16,384 GPUs, 1.97e-5 /GPU-hour): M = 11,135 s = 3.09 h."""
    return HOUR_S / (num_gpus * failure_rate_per_gpu_hour)


def young_interval_s(delta_s: float, mtbf: float) -> float:
    """Young (1974): the first-order optimum compute time between checkpoints, tau = sqrt(2 d M), s."""
    return math.sqrt(2 * delta_s * mtbf)


def daly_interval_s(delta_s: float, mtbf: float) -> float:
    """Daly (2006), the higher-order estimate of the optimum compute time between checkpoints, s:
    tau = sqrt(2 d M) [1 + sqrt(d / 2M) / 3 + (d / 2M) / 9] - d for d < 2M, else tau = M."""
    if delta_s >= 2 * mtbf:
        return mtbf
    x = delta_s / (2 * mtbf)
    return math.sqrt(2 * delta_s * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - delta_s


def _log_expm1(x: float) -> float:
    """log(e^x - 1) without overflow for large x (x > 0)."""
    return x + math.log1p(-math.exp(-x)) if x > 30 else math.log(math.expm1(x))


def expected_goodput(tau_s: float, delta_s: float, mtbf: float, restart_s: float) -> float:
    """Useful fraction of the wall time, T_s / T_w, for exponential failures: Daly (2006), the
    expected wall-clock time T_w = M e^(R/M) (e^((tau + d)/M) - 1) T_s / tau (failures may strike while computing,
    checkpointing or restarting), so G = tau / (M e^(R/M) (e^((tau + d)/M) - 1)). To first order,
    1 - G = d / tau + (tau / 2 + R) / M: the checkpoint overhead, half an interval redone and a restart per
    failure. Computed in logarithms (no overflow); 0 < G < 1."""
    log_g = math.log(tau_s / mtbf) - restart_s / mtbf - _log_expm1((tau_s + delta_s) / mtbf)
    return math.exp(log_g)


def checkpoint_bytes(params: int, train: TrainSpec) -> int:
    """Bytes of one checkpoint: P x (w + k), the 16-bit weights plus the optimizer states (fp32 master
    weights and Adam's two moments: ZeRO section 3.1, 2 + 12 = 14 bytes/parameter); gradients are not saved.
    This is the memory model's per-GPU weights and optimizer bytes (costmodels.memory.zero_state_bytes)
    summed over the GPUs that hold distinct shards: every parameter's states once, whatever the layout."""
    return int(params * (train.weight_bytes_per_param + train.optimizer_bytes_per_param))


def checkpoint_write_s(nbytes: int, num_nodes: int, gb_per_s_per_node: float) -> float:
    """delta = C / (n B), s: every node writes its shards in parallel at B (the storage's aggregate rate
    shared out per node, e.g. Llama 3's 2 TB/s over 2,048 nodes)."""
    return nbytes / (num_nodes * gb_per_s_per_node * GB)


def energy_kwh(num_gpus: int, tdp_w: Optional[float], hours: float) -> Optional[float]:
    """GPUs x board power x hours / 1000, kWh: an upper bound at full board power (the datasheet's maximum),
    without host, network or cooling (no PUE); None when the GPU profile gives no tdp_w."""
    return None if tdp_w is None else num_gpus * tdp_w * hours / 1000


def _write_rate(cluster: ClusterSpec, run: RunSpec) -> float:
    """GB/s per node: the run's, else the cluster's, else Llama 3's."""
    for rate in (run.checkpoint_write_gb_per_s_per_node, cluster.checkpoint_write_gb_per_s_per_node):
        if rate is not None:
            return rate
    return DEFAULT_CHECKPOINT_WRITE_GB_PER_S_PER_NODE


def _price(hours: float, run: RunSpec) -> Optional[float]:
    return None if run.price_per_gpu_hour is None else hours * run.price_per_gpu_hour


def whole_run(estimate: Estimate, model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, run: RunSpec) -> WholeRun:
    """The whole run of `estimate`'s layout on `run.tokens`: failure-free days, GPU-hours, energy and cost,
    then the checkpoint interval (Daly 2006), the goodput and the days with failures. Raises SpecError when
    the failure settings leave a goodput below 1e-6 (the run would never finish)."""
    if estimate.time is None:
        raise SpecError("whole run: the estimate has no step time")
    gpus, step_s = cluster.num_gpus, estimate.time.step_s
    steps = math.ceil(run.tokens / (train.global_batch_size * train.seq_len(model)))
    hours = steps * step_s / HOUR_S
    rate = run.gpu_failure_rate_per_hour or DEFAULT_GPU_FAILURE_RATE_PER_HOUR
    ckpt = checkpoint_bytes(estimate.params.total, train)
    delta = checkpoint_write_s(ckpt, cluster.num_nodes, _write_rate(cluster, run))
    mtbf = mtbf_s(gpus, rate)
    tau = daly_interval_s(delta, mtbf)
    goodput = expected_goodput(tau, delta, mtbf, run.restart_s)
    if goodput < MIN_GOODPUT:
        raise SpecError(f"whole run: goodput {goodput:.2g}: with a cluster MTBF of {mtbf:.3g} s (failure rate "
                        f"{rate:g} per GPU-hour), restart {run.restart_s:g} s and checkpoints of {delta:.3g} s the "
                        "run never finishes; check the failure rate, restart time and checkpoint write rate")
    wall_hours = hours / goodput
    return WholeRun(
        tokens=run.tokens, step_s=step_s, steps=steps, days=hours / 24, gpu_hours=gpus * hours,
        energy_kwh=energy_kwh(gpus, cluster.gpu_profile.tdp_w, hours), cost_usd=_price(gpus * hours, run),
        checkpoint_bytes=ckpt, checkpoint_write_s=delta, mtbf_s=mtbf, young_interval_s=young_interval_s(delta, mtbf),
        checkpoint_interval_s=tau, checkpoint_interval_steps=max(1, round(tau / step_s)), goodput=goodput,
        days_with_failures=wall_hours / 24, gpu_hours_with_failures=gpus * wall_hours,
        cost_with_failures_usd=_price(gpus * wall_hours, run), expected_failures=wall_hours * HOUR_S / mtbf,
        restart_s=run.restart_s, gpu_failure_rate_per_hour=rate)
