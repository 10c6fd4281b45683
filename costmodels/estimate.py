"""The Estimate: memory, time and throughput of one layout (JSON keys: shared/DESIGN.md section 6)."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout, resolve_layout
from costmodels.memory import memory_by_stage
from costmodels.model_spec import ModelSpec
from costmodels.params import active_params, total_params
from costmodels.step import model_flops_per_step, step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StageOut(_Out):
    """Memory of one GPU on one pipeline stage, bytes."""

    stage: int = Field(..., description="Pipeline rank, 0 = first.")
    layers: int = Field(..., description="Transformer layers on this rank.")
    weights_bytes: int = Field(..., description="Working weights.")
    grads_bytes: int = Field(..., description="Gradients.")
    optimizer_bytes: int = Field(..., description="Optimizer states incl. fp32 master weights.")
    activations_bytes: int = Field(..., description="Activations kept for backward at the peak.")
    other_bytes: int = Field(..., description="ZeRO-3 gathered-layer buffers.")
    total_bytes: int = Field(..., description="Sum of the above.")


class MemoryOut(_Out):
    """Per-GPU memory against capacity."""

    hbm_bytes: int = Field(..., description="Device memory.")
    usable_bytes: int = Field(..., description="Device memory minus the cluster's reserve.")
    peak_bytes: int = Field(..., description="Largest stage total.")
    peak_stage: int = Field(..., description="Stage with the largest total.")
    stages: list[StageOut]


class TimeOut(_Out):
    """Step time and its parts, seconds. Communication terms count only what is not hidden."""

    step_s: float
    compute_s: float
    recompute_s: float
    bubble_s: float
    tp_comm_s: float
    cp_comm_s: float
    ep_comm_s: float
    pp_comm_s: float
    dp_comm_exposed_s: float
    optimizer_s: float
    overhead_s: float = Field(0.0, description="Fixed per-step overhead (fitted).")


class ThroughputOut(_Out):
    """Model-FLOP throughput (PaLM/Korthikanti convention: no recompute, full attention scores)."""

    tokens_per_s: float
    model_tflops_per_gpu: float
    mfu: float
    hardware_tflops_per_gpu: float = Field(0.0, description="Including recompute FLOPs.")


class ParamsOut(_Out):
    """Parameter counts."""

    total: int
    active: int


class Estimate(_Out):
    """Everything parplan predicts for one layout."""

    layout: Layout
    fits: bool
    memory: MemoryOut
    time: Optional[TimeOut] = None
    throughput: Optional[ThroughputOut] = None
    params: ParamsOut


def estimate_memory(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> MemoryOut:
    """MemoryOut for a resolved layout."""
    stages = [StageOut(total_bytes=s.total_bytes, **vars(s)) for s in memory_by_stage(model, cluster, train, lay)]
    peak = max(stages, key=lambda s: s.total_bytes)
    return MemoryOut(
        hbm_bytes=cluster.gpu_profile.hbm_bytes, usable_bytes=cluster.usable_bytes,
        peak_bytes=peak.total_bytes, peak_stage=peak.stage, stages=stages,
    )


def estimate(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, layout: Layout) -> Estimate:
    """Resolve `layout` (raises LayoutError) and predict its memory, time and throughput."""
    lay = resolve_layout(model, cluster, train, layout)
    memory = estimate_memory(model, cluster, train, lay)
    time, throughput = estimate_time(model, cluster, train, lay)
    return Estimate(
        layout=lay,
        fits=memory.peak_bytes <= memory.usable_bytes,
        memory=memory,
        time=time,
        throughput=throughput,
        params=ParamsOut(total=total_params(model), active=active_params(model)),
    )


def estimate_time(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> tuple[TimeOut, ThroughputOut]:
    """Step time and throughput of a resolved layout."""
    ctx = make_context(model, cluster, train, lay)
    st = step_time(ctx)
    model_flops, hw_flops = model_flops_per_step(ctx)
    gpus = cluster.num_gpus
    peak = cluster.gpu_profile.peak_flops(train.precision)
    per_gpu = model_flops / (st.step_s * gpus)
    throughput = ThroughputOut(
        tokens_per_s=train.global_batch_size * train.seq_len(model) / st.step_s,
        model_tflops_per_gpu=per_gpu / 1e12,
        mfu=per_gpu / peak,
        hardware_tflops_per_gpu=hw_flops / (st.step_s * gpus) / 1e12,
    )
    return TimeOut(**vars(st)), throughput
