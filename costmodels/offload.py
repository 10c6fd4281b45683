"""ZeRO-Offload / ZeRO-Infinity and Megatron's CPU optimizer: what leaves the GPU, what the host holds,
and what the copies and the CPU step add to the step time.

Fields (costmodels.train_spec, costmodels.hardware_spec): TrainSpec.offload_optimizer (none|cpu|nvme),
offload_optimizer_fraction f, offload_params (none|cpu|nvme, ZeRO-3), ClusterSpec.host_ram_gib (per node)
and host_to_device_gb_per_s (per GPU, per direction).

Memory (per GPU, of the states this GPU owns after ZeRO sharding):
- optimizer states (fp32 master + moments): a share f leaves the GPU (ZeRO-Offload, Ren et al.
  ATC'21, Figure 2: GPU keeps p16, CPU keeps g and os; Megatron-Core HybridDeviceOptimizer steps a
  fraction f of the parameters on the CPU, megatron/core/optimizer/cpu_offloading).
- gradients: DeepSpeed moves each reduced gradient partition to a pinned fp32 CPU buffer (ZeRO-Offload
  section 4.1; deepspeed runtime/zero/stage_1_and_2.py, stage3.py with offload): with ZeRO >= 2 the
  sharded gradient leaves the GPU (share f); Megatron keeps its fp32 main grads on the GPU and copies
  them (HybridDeviceOptimizer), so nothing leaves there.
- weights: ZeRO-Infinity offload_param keeps the 16-bit parameter shards on the CPU/NVMe between uses
  (Rajbhandari et al. SC'21, section 5): the sharded weights leave the GPU; the gathered layers in
  flight (costmodels.memory.zero3_buffer_bytes) stay.
Host memory per GPU: the offloaded optimizer states, the fp32 gradient partition (DeepSpeed: 4 bytes per
offloaded parameter; Megatron: its D2H copy of the fp32 grads, also 4), the 16-bit parameter shards with
offload_params=cpu, and with NVMe the pinned swap buffers (DeepSpeed defaults: offload_param
buffer_count 5 x buffer_size 1e8 elements x 2 bytes; offload_optimizer buffer_count 4 x 1e8 x 4 bytes).
It must fit in RAM: pinned (pin_memory: true in every corpus config) it cannot swap, and unpinned the copies
slow down but the bytes are the same.

Time per step (per GPU; all ranks of a node share the CPU and its memory):
- D2H of gradients: offloaded parameters x 2 bytes (16-bit grads, DeepSpeed; ZeRO-2 copies after every
  micro-batch's reduction) or x 4 (Megatron's fp32 main grads, once) at the host<->device bandwidth;
  hidden behind the backward passes when gradient reduction overlaps (ZeRO-Offload overlaps the
  copies with backward: section 4.2), else exposed; Megatron's HybridDeviceOptimizer copies the main
  grads once the step's reduction is done, exposed (its --overlap-cpu-optimizer-d2h-h2d is not priced).
- CPU optimizer step: memory-bound on the host: CPU-Adam reads p32, m, v, g32 and writes p32, m, v and
  a 16-bit copy: 30 bytes per parameter, for every offloaded parameter of the node's ranks, at
  HOST_ADAM_BYTES_PER_S_PER_NODE. Exposed: ZeRO-Offload's one-step delayed parameter update (section
  4.3) is not a DeepSpeed config key, so it is not assumed.
- H2D of updated parameters: 2 bytes (16-bit, DeepSpeed) or 4 (fp32 params, Megatron) per offloaded
  parameter, exposed (the next forward needs them).
- ZeRO-3 offload_params: every micro-batch gathers each layer twice (forward, backward), each time
  copying its 16-bit shard H2D first; prefetched, it hides behind compute: exposed = max(0, copies -
  compute).
- NVMe: optimizer states read and written once per step (28 bytes/param: the CPU step's traffic less
  the 16-bit copy), parameters read twice per micro-batch, at NVME_BYTES_PER_S_PER_NODE shared by the
  node's ranks, exposed beyond the work it overlaps (none assumed for the optimizer; compute for params).
Known deviations: PCIe contention among the node's GPUs sharing a CPU socket is not modelled (the
per-GPU bandwidth is what each achieves alone); DeepSpeed's partial offload (ratio < 1, ZeRO-3) steps
the GPU share on the GPU, priced as usual by the optimizer term.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels.hardware_spec import GB, GIB, ClusterSpec
from costmodels.params import local_stage_params

# Achieved pinned host<->device copy rate per GPU and direction, GB/s, by GPU generation.
# PCIe Gen5 x16: nvbandwidth on 8x H200 SXM (x86 host): 55.43 GB/s H2D, 55.06 D2H, 88% of 63 GB/s
# (stas00/ml-engineering network/README.md, in reference/kernels/kernels.json, host_device rows); on the
# lent H100 80GB HBM3 (Gen5 x16) 54.67 H2D / 54.74 D2H GB/s (benchmarks/gpu/offload_h100.json).
# PCIe Gen4 x16 (A100): 88% of 31.5 GB/s, the same efficiency (derived, not measured here).
# PCIe Gen3 x16 (V100): 88% of 15.75 GB/s (derived). NVLink-C2C (GH200/GB200/GB300): nvbandwidth on a
# GB300 DGX Station 359.05 GB/s H2D, 377.15 D2H (same source; C2C spec 450 GB/s per direction).
H2D_GB_PER_S = {"gen3": 13.9, "gen4": 27.7, "gen5": 55.2, "c2c": 359.0}
GEN_BY_PREFIX = (("gh200", "c2c"), ("gb200", "c2c"), ("gb300", "c2c"), ("v100", "gen3"), ("a100", "gen4"),
                 ("h100", "gen5"), ("h800", "gen5"), ("h200", "gen5"), ("b200", "gen5"), ("mi300", "gen5"))
# CPU-Adam is bound by host memory bandwidth: 200 GB/s achieved per 2-socket node (physical range
# 100-600 GB/s: 2 x 8 DDR4-3200 channels = 410 GB/s peak on DGX A100's EPYC 7742, 2 x 8 DDR5-4800 =
# 614 GB/s on DGX H100's Xeon 8480C; streaming kernels reach 50-80% of it). At 30 bytes/param this is
# 6.7e9 parameters/s per node, the order of ZeRO-Offload's CPU-Adam (Ren et al. ATC'21, section 4.1:
# about 1B parameters in a fraction of a second on one node); torch's fused CPU Adam on the lent H100's
# 16-core host stepped 5.2e9 parameters/s (benchmarks/gpu/offload_h100.json). A constant, not fitted.
HOST_ADAM_BYTES_PER_S_PER_NODE = 200e9
CPU_ADAM_BYTES_PER_PARAM = 30  # read p32, m, v, g32 (16); write p32, m, v (12) and a 16-bit copy (2)
NVME_ADAM_BYTES_PER_PARAM = 28  # read p32, m, v, g32; write p32, m, v (the 16-bit copy stays in RAM)
# Aggregate NVMe read/write rate of one node: 25 GB/s, the order ZeRO-Infinity (Rajbhandari et al.
# SC'21) reports for a DGX-2's NVMe array (physical range 3-56 GB/s: one PCIe Gen4 drive ~7 GB/s,
# eight Gen5 drives ~100 GB/s peak). A constant, not fitted.
NVME_BYTES_PER_S_PER_NODE = 25e9
NVME_PARAM_BUFFER_BYTES = 5 * 100_000_000 * 2  # DeepSpeed offload_param buffer_count 5 x buffer_size 1e8, fp16
NVME_OPT_BUFFER_BYTES = 4 * 100_000_000 * 4  # DeepSpeed offload_optimizer buffer_count 4 x 1e8 fp32 elements


def default_h2d_gb_per_s(gpu_name: str) -> float:
    """Host<->device GB/s per GPU and direction for a GPU profile name (gen5 when unknown)."""
    name = gpu_name.lower()
    gen = next((g for prefix, g in GEN_BY_PREFIX if name.startswith(prefix)), "gen5")
    return H2D_GB_PER_S[gen]


def h2d_bytes_per_s(cluster: ClusterSpec) -> float:
    """The cluster's host<->device rate per GPU and direction, bytes/s."""
    gbps = cluster.host_to_device_gb_per_s
    return (gbps if gbps is not None else default_h2d_gb_per_s(cluster.gpu_profile.name)) * GB


def deepspeed_style(train) -> bool:
    """DeepSpeed moves gradients to the host (and copies 16-bit values); Megatron keeps fp32 main grads."""
    return train.stack_spec.framework != "megatron"


def optimizer_share(train) -> float:
    """Share of the optimizer states (and the parameters stepped) held and updated on the host."""
    return train.offload_optimizer_fraction if train.offload_optimizer != "none" else 0.0


def on_gpu(weights: float, grads: float, optimizer: float, zero: int, train) -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes left on the GPU of what ZeRO stage `zero` keeps there: the
    offloaded share of the optimizer states, of DeepSpeed's sharded gradients (ZeRO >= 2) and, with
    offload_params and ZeRO-3, the weight shards leave (module docstring)."""
    f = optimizer_share(train)
    if f == 0.0 and train.offload_params == "none":
        return weights, grads, optimizer
    grad_share = f if zero >= 2 and deepspeed_style(train) else 0.0
    weight_share = 1.0 if zero >= 3 and train.offload_params != "none" else 0.0
    return weights * (1 - weight_share), grads * (1 - grad_share), optimizer * (1 - f)


def host_bytes_per_gpu(owned_params: float, train) -> float:
    """Host RAM one rank pins for its `owned_params` (its ZeRO shard): offloaded optimizer states with
    their fp32 gradient buffer (on CPU only: NVMe keeps them there), the 16-bit parameter shard with
    offload_params=cpu, and the NVMe swap buffers."""
    f = optimizer_share(train)
    total = 0.0
    if train.offload_optimizer == "cpu":
        total += f * owned_params * (train.optimizer_bytes_per_param + 4)
    elif train.offload_optimizer == "nvme":
        total += NVME_OPT_BUFFER_BYTES + f * owned_params * 2  # the 16-bit copy staged for the H2D
    if train.offload_params == "cpu":
        total += owned_params * train.weight_bytes_per_param
    elif train.offload_params == "nvme":
        total += NVME_PARAM_BUFFER_BYTES
    return total


def cpu_step_s(owned_params: float, cluster: ClusterSpec, train) -> float:
    """Seconds of the host's optimizer step for one rank owning `owned_params`: CPU-Adam over the
    offloaded share, every rank of the node at once on the node's memory bandwidth, plus with NVMe the
    states' read and write (module docstring). Affine in the parameters: costmodels.step.optimizer_s
    adds it to the GPU's share, so the planner's tables (costmodels.stage_linear) carry it too."""
    moved = optimizer_share(train) * owned_params * cluster.gpus_per_node
    seconds = moved * CPU_ADAM_BYTES_PER_PARAM / HOST_ADAM_BYTES_PER_S_PER_NODE
    if train.offload_optimizer == "nvme":
        seconds += moved * NVME_ADAM_BYTES_PER_PARAM / NVME_BYTES_PER_S_PER_NODE
    return seconds


@dataclass(frozen=True)
class OffloadTime:
    """Seconds one step spends copying between host and device, on the critical path, per part."""

    d2h_s: float = 0.0  # gradient copies not hidden behind backward
    h2d_s: float = 0.0  # updated parameters back to the GPU
    param_fetch_s: float = 0.0  # ZeRO-Infinity parameter shards fetched per layer, beyond compute

    @property
    def total_s(self) -> float:
        """All parts: they are sequential on the critical path."""
        return self.d2h_s + self.h2d_s + self.param_fetch_s


def offload_time(owned_params: float, cluster: ClusterSpec, train, zero: int, microbatches: int,
                 compute_s: float, grad_overlap: bool) -> OffloadTime:
    """OffloadTime of one rank owning `owned_params` (its ZeRO shard), whose step computes for
    `compute_s` seconds over `microbatches` micro-batches (module docstring); the CPU step is
    cpu_step_s."""
    f, link = optimizer_share(train), h2d_bytes_per_s(cluster)
    ranks = cluster.gpus_per_node
    out = {}
    if f > 0:
        moved = f * owned_params
        ds = deepspeed_style(train)
        copies = microbatches if ds and zero == 2 else 1
        d2h = copies * moved * (2 if ds else 4) / link
        hidden = grad_overlap and ds  # Megatron copies its main grads after the step's reduction
        out["d2h_s"] = max(0.0, d2h - compute_s * 2 / 3) if hidden else d2h
        out["h2d_s"] = moved * (2 if ds else 4) / link
    if zero >= 3 and train.offload_params != "none":
        fetch = 2 * microbatches * owned_params * train.weight_bytes_per_param
        seconds = fetch / link  # NVMe -> RAM -> GPU is pipelined: the slower hop sets the pace
        if train.offload_params == "nvme":
            seconds = max(seconds, ranks * fetch / NVME_BYTES_PER_S_PER_NODE)
        out["param_fetch_s"] = max(0.0, seconds - compute_s)
    return OffloadTime(**out)


def owned_params(model, cluster: ClusterSpec, lay, stage: int, seq: int) -> float:
    """Parameters whose optimizer states one GPU of pipeline rank `stage` owns: its local parameters
    divided by the ZeRO shards (dense over dp*cp, experts over edp), all of them at ZeRO-0."""
    local = local_stage_params(model, lay.stage_layers, stage, lay.tp, lay.ep, lay.etp, seq, lay.vpp,
                               lay.chunk_layers)
    if lay.zero == 0:
        return float(local.total)
    edp = max(cluster.num_gpus // (lay.etp * lay.ep * lay.pp), 1)
    return local.dense / lay.dense_shards + local.expert / edp


def host_bytes_per_node(model, cluster: ClusterSpec, train, lay) -> float:
    """Host RAM the node's ranks pin for offload: gpus_per_node x the largest rank's (ranks of one node
    usually share a pipeline stage; the largest is the conservative choice)."""
    if train.offload_optimizer == "none" and train.offload_params == "none":
        return 0.0
    seq = train.seq_len(model)
    worst = max(host_bytes_per_gpu(owned_params(model, cluster, lay, i, seq), train) for i in range(lay.pp))
    return cluster.gpus_per_node * worst


def host_ram_bytes(cluster: ClusterSpec) -> int | None:
    """The node's host RAM in bytes (None when the cluster does not say)."""
    return None if cluster.host_ram_gib is None else int(cluster.host_ram_gib * GIB)
