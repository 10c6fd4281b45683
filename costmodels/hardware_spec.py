"""GPU profiles and cluster specs.

Human units live in the field names (`hbm_gib`, `bf16_tflops`, `scale_out_gb_per_s`) and are
converted to SI once, by the properties ending in `_bytes`, `_flops`, `_bytes_per_s` and `_s`.
Capacities are binary (GiB = 2**30); bandwidths and FLOP/s decimal (GB/s = 1e9).
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costmodels.errors import Name, SpecError

GIB = 2**30
GB = 1e9
TFLOP = 1e12
US = 1e-6

# fp32: fp32 weights, gradients and activations with full-FP32 GEMMs (PyTorch's default matmul precision:
# torch.backends.cuda.matmul.allow_tf32 is False since 1.12); tf32: the same storage with TF32 tensor-core
# GEMMs (Hugging Face --tf32, torch.set_float32_matmul_precision("high")).
Precision = Literal["bf16", "fp16", "fp8", "fp32", "tf32"]
FULL_PRECISIONS = ("fp32", "tf32")

# Sane physical minimums (floats are finite: allow_inf_nan=False). A rate or a fraction of 1e-300
# would turn times into inf and NaN; nothing real is slower than 1 MB/s or 1 GFLOP/s.
MIN_RATE = 1e-3  # GB/s and TFLOP/s
MIN_FRACTION = 1e-3  # efficiencies (fractions of peak) and half sizes
MIN_HBM_GIB = 1e-6  # about one KiB


class Efficiency(BaseModel):
    """Achieved fractions of peak, fitted to measurements by `benchmarks/calibrate.py`; the collective
    fields (scale_up, scale_out, launch_us, up_half_mib, out_half_mib, nvls_speedup) by
    `benchmarks/calibrate_nccl.py` on published nccl-tests data (see `costmodels.comm`).

    GEMM efficiency follows a saturating curve of the per-GPU GEMM size (see
    `costmodels.compute.gemm_efficiency`): eff(d) = gemm_max * d / (d + gemm_half_dim),
    where d is the harmonic-mean-like "effective dimension" of the local matrix product. Both this curve
    and the attention one are capped by the GPU's kernel bounds (costmodels.kernels, from the profile's
    sm_count and tensor_core_gen): a fit may price losses kernels do not have, never a faster kernel.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    gemm_max: float = Field(
        0.75, ge=MIN_FRACTION, le=1,
        description="Asymptotic fraction of dense peak reached by large GEMMs.")
    gemm_half_dim: float = Field(
        256.0, ge=0, le=1e6, description="Effective GEMM dimension at which half of gemm_max is reached."
    )
    hbm: float = Field(
        0.8, ge=MIN_FRACTION, le=1,
        description="Achieved fraction of HBM bandwidth for memory-bound kernels.")
    scale_up: float = Field(
        0.8, ge=MIN_FRACTION, le=1,
        description="eta_up: plateau NCCL bus bandwidth of ring collectives inside a node as a "
        "fraction of the scale-up (NVLink) rate per direction."
    )
    scale_out: float = Field(
        0.8, ge=MIN_FRACTION, le=1,
        description="eta_out: plateau NCCL bus bandwidth per NIC across nodes as a fraction of the "
        "scale-out rate per GPU and direction."
    )
    launch_us: float = Field(
        0.0, ge=0, le=1000, description="Launch overhead of one collective call (kernel launch and sync, one process "
        "per GPU), microseconds; 0 = none."
    )
    up_half_mib: float = Field(
        0.0, ge=0, le=1e6, description="Scale-up half-bandwidth size S_half: collective size (MiB) at which the "
        "achieved bus bandwidth is half the plateau; 0 = plateau at every size."
    )
    out_half_mib: float = Field(
        0.0, ge=0, le=1e6, description="Scale-out half-bandwidth size S_half (MiB) of collectives that cross nodes; "
        "0 = plateau at every size."
    )
    nvls_speedup: float = Field(
        1.0, ge=1, le=2, description="NVLink SHARP (NVLS) all-reduce bus bandwidth over the ring's on 8 GPUs of one "
        "NVSwitch node; 1 = no NVLS (A100, AMD); at most 2 (the all-reduce would beat an all-gather of its buffer)."
    )
    attn_max: float = Field(
        0.5, ge=MIN_FRACTION, le=1,
        description="Fused (flash) attention: fraction of the 16-bit peak its matmuls reach at long "
        "sequences, forward and backward alike (FlashAttention-2 reaches 50-73% on A100, 35% on H100; "
        "FlashAttention-3 / cuDNN 60-75% on H100: Dao 2023; Shah et al. 2024)."
    )
    attn_half_seq: float = Field(
        512.0, ge=MIN_FRACTION, le=1e7,
        description="Sequence length (tokens) at which fused attention reaches half of attn_max "
        "(its tiles are idle on short sequences; FlashAttention-2 Figure 4: about half speed at 512 tokens)."
    )
    layer_overhead_s: float = Field(
        0.0, ge=0, le=1, description="Host-side launch time of one layer's forward+backward kernels (framework "
        "overhead); a layer whose GPU work is shorter waits for it."
    )
    step_overhead_s: float = Field(
        0.0, ge=0, le=60, description="Fixed per-iteration cost in seconds (launch, optimizer bookkeeping, sync)."
    )
    curve_gen: Optional[Literal["volta", "ampere", "hopper", "blackwell", "blackwell-ultra", "cdna3", "cdna4"]] = Field(
        None, description="Tensor-core generation of the GPU the GEMM and attention curves were fitted on, when they "
        "were copied from another generation's GPU: they are then scaled by the ratio of the two generations' best "
        "measured GEMM and attention fractions of peak (costmodels.timing.curve_transfer); null = fitted on this "
        "GPU's own generation.")
    fitted_on: str = Field("not fitted: defaults", description="Which data fitted these numbers, and how.")


class GPUProfile(BaseModel):
    """One accelerator: capacity, peak rates and fitted efficiencies."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    name: Name = Field(..., description="Profile name, e.g. h100-sxm (at most 200 characters).")
    hbm_gib: float = Field(
        ..., ge=MIN_HBM_GIB, le=65536,
        description="Device memory in GiB as the driver reports it.")
    hbm_gb_per_s: float = Field(..., ge=MIN_RATE, le=1e6, description="Peak HBM bandwidth, GB/s.")
    bf16_tflops: float = Field(..., ge=MIN_RATE, le=1e6, description="Dense BF16 tensor-core peak, TFLOP/s.")
    fp16_tflops: float = Field(..., ge=MIN_RATE, le=1e6, description="Dense FP16 tensor-core peak, TFLOP/s.")
    fp8_tflops: Optional[float] = Field(
        None, ge=MIN_RATE, le=1e6,
        description="Dense FP8 peak, TFLOP/s; null if unsupported.")
    fp32_tflops: Optional[float] = Field(
        None, ge=MIN_RATE, le=1e6, description="Dense FP32 (non-tensor-core) peak, TFLOP/s; null = unknown "
        "(precision fp32 is then refused).")
    tf32_tflops: Optional[float] = Field(
        None, ge=MIN_RATE, le=1e6, description="Dense TF32 tensor-core peak, TFLOP/s; null = unknown or "
        "unsupported (precision tf32 is then refused).")
    sm_count: Optional[int] = Field(
        None, ge=1, le=100_000, description="Streaming multiprocessors (NVIDIA) or compute units (AMD) from the "
        "spec sheet: GEMM and attention tiles are quantized over them (costmodels.kernels); null = no kernel cap.")
    tensor_core_gen: Optional[Literal["volta", "ampere", "hopper", "blackwell", "blackwell-ultra", "cdna3", "cdna4"]] = Field(
        None, description="Tensor-core generation: its best measured GEMM fraction of peak, tile shapes and "
        "attention ceiling (costmodels.kernels.GENERATIONS); null = no kernel cap.")
    fp4_tflops: Optional[float] = Field(
        None, ge=MIN_RATE, le=1e6, description="Dense FP4 (NVFP4 / MXFP4) tensor-core peak, TFLOP/s; null if "
        "unsupported (fp8_recipe nvfp4 is then refused).")
    efficiency: Efficiency = Field(default_factory=Efficiency, description="Fitted achieved fractions of peak.")
    tdp_w: Optional[float] = Field(
        None, ge=1, le=1e5, description="Board power (TDP/TBP) from the datasheet, W; the whole run's energy "
        "(costmodels.whole_run) is GPUs x tdp_w x hours; null = energy unknown.")
    sources: list[str] = Field(default_factory=list, description="Where each number comes from.")

    @property
    def hbm_bytes(self) -> int:
        """Device memory in bytes."""
        return int(self.hbm_gib * GIB)

    @property
    def hbm_bytes_per_s(self) -> float:
        """Peak HBM bandwidth in bytes/s."""
        return self.hbm_gb_per_s * GB

    def peak_flops(self, precision: Precision) -> float:
        """Dense peak in FLOP/s for a precision; a precision whose peak the profile lacks is an error."""
        tflops = {"bf16": self.bf16_tflops, "fp16": self.fp16_tflops, "fp8": self.fp8_tflops,
                  "fp32": self.fp32_tflops, "tf32": self.tf32_tflops}[precision]
        if tflops is None:
            raise SpecError(f"gpu {self.name!r} has no {precision} peak ({precision}_tflops is null); use precision "
                            "bf16 or fp16")
        if precision == "bf16" and self.tensor_core_gen == "volta":
            raise SpecError(f"gpu {self.name!r} (Volta) has no bf16 tensor cores (bf16 came with Ampere: NVIDIA A100 "
                            "whitepaper); PyTorch runs bf16 there without them, at a fraction of the fp16 rate: use "
                            "precision fp16")
        return tflops * TFLOP


class ClusterSpec(BaseModel):
    """Nodes of identical GPUs on a two-tier network: scale-up inside a node, scale-out across."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    name: Name = Field("custom", description="Cluster name, e.g. dgx-h100 (at most 200 characters).")
    gpu: Union[str, GPUProfile] = Field(..., description="GPU profile name or inline profile.")
    gpus_per_node: int = Field(8, ge=1, le=1024, description="GPUs in one node (scale-up domain).")
    gpus_per_host: Optional[int] = Field(
        None, ge=1, le=1024, description="GPUs one host (one operating system: torchrun --nproc-per-node, SLURM "
        "--gpus-per-node) drives, where a node's NVLink domain spans several hosts (GB200 NVL72: 18 trays of 4); "
        "must divide gpus_per_node; null = gpus_per_node.")
    num_nodes: int = Field(1, ge=1, le=1_000_000, description="Number of nodes.")
    scale_up_gb_per_s: float = Field(
        ..., ge=MIN_RATE, le=1e6, description="Per GPU, per direction, inside a node (NVLink/Infinity Fabric), GB/s."
    )
    scale_out_gb_per_s: float = Field(
        ..., ge=MIN_RATE, le=1e6, description="Per GPU, per direction, across nodes (NIC share), GB/s."
    )
    scale_up_topology: Literal["switch", "mesh", "pcie"] = Field(
        "switch", description="How the GPUs of a node connect: switch (NVSwitch: every GPU reaches any group at "
        "scale_up_gb_per_s), mesh (AMD Infinity Fabric on MI300X/MI355X: one direct link to each other GPU, "
        "scale_up_gb_per_s being all of them together, so a group of r GPUs in a node uses r-1 of its g-1 links) "
        "or pcie (no NVLink: each GPU's PCIe share, and no NVLink SHARP all-reduce).")
    scale_up_latency_us: float = Field(
        3.0, ge=0, le=1e6, description="alpha_up: latency of one collective step (ring hop) inside a node, "
        "microseconds."
    )
    scale_out_latency_us: float = Field(
        10.0, ge=0, le=1e6, description="alpha_out: latency of one collective step of a group that crosses nodes, "
        "microseconds."
    )
    memory_reserve_gib: float = Field(
        1.0, ge=0, le=65536, description="Safety margin kept free per GPU beyond the modelled device use (the "
        "allocator reserve, CUDA context and NCCL buffers are modelled: costmodels.device_memory), GiB."
    )
    checkpoint_write_gb_per_s_per_node: Optional[float] = Field(
        None, ge=MIN_RATE, le=1e6, description="Sustained checkpoint write rate per node to the checkpoint "
        "storage, GB/s; null = the whole-run default (costmodels.whole_run: Llama 3's 2 TB/s over 2,048 nodes).")
    host_ram_gib: Optional[float] = Field(
        None, ge=0, le=1e7, description="Host (CPU) memory per node that offloaded optimizer states, parameters "
        "or activations may use, GiB; null = unknown (offload is then priced but its host fit is not checked).")
    host_to_device_gb_per_s: Optional[float] = Field(
        None, ge=MIN_RATE, le=1e6, description="Host<->device copy bandwidth per GPU, per direction (PCIe or "
        "C2C), GB/s, as achieved by pinned-memory copies; null = the GPU generation's default "
        "(costmodels.offload).")
    sources: list[str] = Field(default_factory=list, description="Where each number comes from.")

    @model_validator(mode="after")
    def _reserve_below_hbm(self) -> "ClusterSpec":
        """A reserve of the whole HBM or more leaves nothing (or less than nothing) to train in."""
        if isinstance(self.gpu, GPUProfile) and self.memory_reserve_gib >= self.gpu.hbm_gib:
            raise ValueError(f"memory_reserve_gib={self.memory_reserve_gib:g} must be below the GPU's HBM "
                             f"(gpu {self.gpu.name!r}: hbm_gib={self.gpu.hbm_gib:g})")
        return self

    @model_validator(mode="after")
    def _hosts_divide_the_node(self) -> "ClusterSpec":
        """A node's NVLink domain is a whole number of hosts."""
        if self.gpus_per_host is not None and self.gpus_per_node % self.gpus_per_host:
            raise ValueError(f"gpus_per_host={self.gpus_per_host} must divide gpus_per_node={self.gpus_per_node}")
        return self

    @property
    def host_gpus(self) -> int:
        """GPUs one host drives: gpus_per_host, else the whole node."""
        return self.gpus_per_host or self.gpus_per_node

    @property
    def num_hosts(self) -> int:
        """Hosts of the cluster (what launchers count as nodes)."""
        return self.num_gpus // self.host_gpus

    @property
    def num_gpus(self) -> int:
        """Total GPUs: nodes * GPUs per node."""
        return self.num_nodes * self.gpus_per_node

    @property
    def gpu_profile(self) -> GPUProfile:
        """The resolved GPU profile (loaders replace a name by the profile)."""
        if isinstance(self.gpu, str):
            raise ValueError(f"cluster {self.name!r}: gpu {self.gpu!r} was not resolved to a profile")
        return self.gpu

    @property
    def usable_bytes(self) -> int:
        """Per-GPU bytes available to training: HBM minus the reserve."""
        return self.gpu_profile.hbm_bytes - int(self.memory_reserve_gib * GIB)

    @property
    def scale_up_bytes_per_s(self) -> float:
        """Scale-up bandwidth per GPU per direction, bytes/s."""
        return self.scale_up_gb_per_s * GB

    @property
    def scale_out_bytes_per_s(self) -> float:
        """Scale-out bandwidth per GPU per direction, bytes/s."""
        return self.scale_out_gb_per_s * GB

    @property
    def scale_up_latency_s(self) -> float:
        """Scale-up per-message latency, seconds."""
        return self.scale_up_latency_us * US

    @property
    def scale_out_latency_s(self) -> float:
        """Scale-out per-message latency, seconds."""
        return self.scale_out_latency_us * US
