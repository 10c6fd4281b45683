"""Estimate one layout: memory, time and throughput (output models in costmodels.outputs)."""

from __future__ import annotations

from costmodels import offload
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout, resolve_layout
from costmodels.device_memory import DeviceTerms, device_terms
from costmodels.memory import StageMemory, memory_by_stage
from costmodels.model_spec import ModelSpec
from costmodels.outputs import Estimate, MemoryOut, ParamsOut, StageOut, ThroughputOut, TimeOut
from costmodels.params import active_params, total_params
from costmodels.step import model_flops_per_step, step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec
from costmodels.uncertainty import band_gpu, comm_share, memory_uncertainty, uncertainty

__all__ = ["Estimate", "MemoryOut", "StageOut", "TimeOut", "ThroughputOut", "estimate", "estimate_memory",
           "estimate_time"]


def estimate_memory(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> MemoryOut:
    """MemoryOut for a resolved layout: allocated, reserved and device bytes per stage."""
    dev = device_terms(cluster, train, lay)
    stages = [_stage_out(dev, s) for s in memory_by_stage(model, cluster, train, lay)]
    peak = max(stages, key=lambda s: s.total_bytes)
    device = max(s.device_bytes for s in stages)
    unhindered = max(s.unhindered_device_bytes for s in stages)
    floor = max(s.floor_bytes for s in stages)
    return MemoryOut(
        hbm_bytes=dev.hbm_bytes, usable_bytes=dev.floor_budget,
        peak_bytes=peak.total_bytes, peak_stage=peak.stage, stages=stages,
        peak_allocated_bytes=peak.total_bytes, peak_reserved_bytes=max(s.reserved_bytes for s in stages),
        device_bytes=device, margin_bytes=dev.hbm_bytes - dev.device_budget,
        headroom_bytes=dev.device_budget - device, floor_bytes=floor, unhindered_device_bytes=unhindered,
        unhindered_usable_bytes=dev.allocated_budget(peak.persistent_bytes),
        allocator_pressure=floor <= dev.device_budget < unhindered, expandable_segments=train.alloc_expandable,
        uncertainty=memory_uncertainty(train.stack_spec),
        **_host(model, cluster, train, lay),
    )


def _host(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> dict:
    """The host-memory fields of MemoryOut (costmodels.offload)."""
    need, ram = round(offload.host_bytes_per_node(model, cluster, train, lay)), offload.host_ram_bytes(cluster)
    return {"host_bytes_per_node": need, "host_ram_bytes": ram, "host_fits": ram is None or need <= ram}


def _stage_out(dev: DeviceTerms, s: StageMemory) -> StageOut:
    """One stage's StageOut: its allocated parts and the reserved/device bytes they lead to."""
    reserved, device = dev.seen(s.total_bytes, s.persistent_bytes)
    return StageOut(total_bytes=s.total_bytes, reserved_bytes=round(reserved), device_bytes=round(device),
                    floor_bytes=round(dev.floor(s.total_bytes)),
                    unhindered_device_bytes=round(dev.device(s.total_bytes, s.persistent_bytes)), **vars(s))


def estimate(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, layout: Layout) -> Estimate:
    """Resolve `layout` (raises LayoutError) and predict its memory, time and throughput."""
    lay = resolve_layout(model, cluster, train, layout)
    memory = estimate_memory(model, cluster, train, lay)
    time, throughput = estimate_time(model, cluster, train, lay)
    return Estimate(
        layout=lay,
        fits=memory.fits,
        memory=memory,
        time=time,
        throughput=throughput,
        params=ParamsOut(total=total_params(model), active=active_params(model)),
        uncertainty=uncertainty(train.stack_spec, lay, cluster.num_gpus, band_gpu(cluster.gpu_profile),
                                model.is_moe, train.seq_len(model), comm_share(time)),
    )


def _bf16_share(cluster: ClusterSpec, precision: str, flops_per_gpu: float) -> float | None:
    """MFU against the bf16 peak, for a precision other than bf16 on a GPU that has one; else None."""
    gpu = cluster.gpu_profile
    if precision == "bf16" or not gpu.bf16_tflops or gpu.tensor_core_gen == "volta":  # peak_flops refuses Volta bf16
        return None
    return flops_per_gpu / gpu.peak_flops("bf16")


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
        mfu_bf16=_bf16_share(cluster, train.precision, per_gpu),
    )
    return st, throughput

