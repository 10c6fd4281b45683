"""Output models: the Estimate and its parts (JSON keys: docs/design.md section 6)."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from costmodels.layout import Layout


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
    other_bytes: int = Field(..., description="ZeRO-3 gathered-layer buffers (units in flight, FSDP root).")
    transient_bytes: int = Field(0, description="Alive only at the peak: the loss's logits and their gradient "
                                 "(last stage), or the optimizer step's temporaries.")
    total_bytes: int = Field(..., description="Sum of the above: the allocated peak "
                             "(torch.cuda.max_memory_allocated).")
    persistent_bytes: int = Field(0, description="The part of total_bytes allocated once and kept from step "
                                  "to step (model states); the allocator's fragmentation applies to the rest.")
    reserved_bytes: int = Field(0, description="Peak reserved by the caching allocator "
                                "(torch.cuda.max_memory_reserved).")
    device_bytes: int = Field(0, description="Whole-device use (nvidia-smi): reserved + CUDA context + NCCL buffers; "
                              "held at hbm - margin when the allocator must release its cache to stay there.")
    floor_bytes: int = Field(0, description="The least the device can hold: allocated peak + CUDA context + NCCL "
                             "buffers (the allocator's cached blocks all released).")
    unhindered_device_bytes: int = Field(0, description="Whole-device use with memory to spare: what device_bytes "
                                         "would be if the reserve could grow unhindered.")


class MemoryUncertaintyOut(_Out):
    """How far to trust the memory numbers: held-out error of the measurement kind (benchmarks/memory_accuracy.py)."""

    kind: str = Field(..., description="allocated, reserved or device.")
    rows: int = Field(..., description="Held-out published peaks behind the band.")
    mean: Optional[float] = Field(..., description="Mean |relative error|; null = no rows.")
    p90: Optional[float] = Field(..., description="90th percentile |relative error|.")
    bias: Optional[float] = Field(..., description="Median signed error (negative: predicted below measured).")


class MemoryOut(_Out):
    """Per-GPU memory against capacity. `fits` is decided on floor_bytes <= hbm_bytes - margin_bytes
    (every stage), the same as peak_bytes <= usable_bytes; `allocator_pressure` when some stage fits only
    because the caching allocator releases its cache (costmodels.device_memory)."""

    hbm_bytes: int = Field(..., description="Device memory.")
    usable_bytes: int = Field(..., description="The largest allocated peak that fits: HBM - margin - CUDA context - "
                              "NCCL buffers.")
    peak_bytes: int = Field(..., description="Largest stage total (allocated peak).")
    peak_stage: int = Field(..., description="Stage with the largest total.")
    stages: list[StageOut]
    peak_allocated_bytes: int = Field(0, description="torch.cuda.max_memory_allocated at the peak stage (= peak_bytes).")
    peak_reserved_bytes: int = Field(0, description="torch.cuda.max_memory_reserved, largest over stages.")
    device_bytes: int = Field(0, description="Whole-device use (nvidia-smi), largest over stages.")
    margin_bytes: int = Field(0, description="Kept free beyond the modelled use (cluster memory_reserve_gib).")
    headroom_bytes: int = Field(0, description="hbm - margin - device: negative when it does not fit, 0 under "
                                "allocator pressure.")
    floor_bytes: int = Field(0, description="The least the device can hold, largest over stages.")
    unhindered_device_bytes: int = Field(0, description="Whole-device use with memory to spare, largest over stages.")
    unhindered_usable_bytes: int = Field(0, description="The largest allocated peak on the peak stage that needs "
                                         "no allocator pressure: persistent + (usable - persistent) / "
                                         "(1 + fragmentation); the planner keeps its layouts within it.")
    allocator_pressure: bool = Field(False, description="Fits, but only because the caching allocator releases its "
                                     "cache: some stage's unhindered device use passes hbm - margin. Expect "
                                     "synchronising cudaFree calls and a risk of fragmentation out-of-memory.")
    expandable_segments: bool = Field(False, description="The caching allocator maps growable segments "
                                      "(TrainSpec.alloc_expandable), as the fragmentation was priced.")
    uncertainty: Optional[MemoryUncertaintyOut] = None
    host_bytes_per_node: int = Field(0, description="Host RAM per node pinned for offloaded optimizer states, "
                                     "gradients, parameter shards and NVMe swap buffers (costmodels.offload); 0 = "
                                     "no offload.")
    host_ram_bytes: Optional[int] = Field(None, description="The node's host RAM (cluster host_ram_gib); null = "
                                          "unknown, the host fit is then not checked.")
    host_fits: bool = Field(True, description="host_bytes_per_node <= host_ram_bytes (true when either is unknown "
                            "or zero); `fits` requires it.")

    @property
    def device_budget_bytes(self) -> int:
        """What a GPU may hold: hbm_bytes - margin_bytes (device_bytes is compared with it)."""
        return self.hbm_bytes - self.margin_bytes

    @property
    def fits(self) -> bool:
        """Every stage's least device use within the budget, and the host's offload within its RAM (Estimate.fits)."""
        return self.floor_bytes <= self.device_budget_bytes and self.host_fits


class TimeOut(_Out):
    """Step time and its parts, seconds, on the critical (slowest) stage; they add up to step_s.
    Communication terms count only what is not hidden behind compute."""

    step_s: float = Field(..., description="One optimizer step.")
    compute_s: float = Field(..., description="GEMMs, attention and memory-bound kernels, forward + backward.")
    recompute_s: float = Field(..., description="The extra forward that recompute adds.")
    bubble_s: float = Field(..., description="Pipeline fill and drain.")
    tp_comm_s: float = Field(..., description="Tensor-parallel all-reduces (or all-gather + reduce-scatter).")
    cp_comm_s: float = Field(..., description="Context-parallel K/V exchange not hidden by attention.")
    ep_comm_s: float = Field(..., description="Expert-parallel all-to-all dispatch and combine.")
    pp_comm_s: float = Field(..., description="Pipeline sends of activations and gradients.")
    dp_comm_exposed_s: float = Field(..., description="Data-parallel traffic not hidden by backward/forward.")
    optimizer_s: float = Field(..., description="Optimizer step over the local shard (with optimizer offload: the "
                               "GPU's share plus the host's CPU step, costmodels.offload).")
    overhead_s: float = Field(0.0, description="Fixed per-step overhead (fitted).")
    offload_s: float = Field(0.0, description="ZeRO-Offload/Infinity host<->device copies on the critical path: "
                             "gradient copies to the host not hidden by backward, updated parameters copied back, "
                             "ZeRO-Infinity parameter fetches beyond compute (costmodels.offload).")


class ThroughputOut(_Out):
    """Model-FLOP throughput (PaLM/Korthikanti convention: no recompute, full attention scores)."""

    tokens_per_s: float
    model_tflops_per_gpu: float
    mfu: float
    hardware_tflops_per_gpu: float = Field(0.0, description="Including recompute FLOPs.")
    mfu_bf16: Optional[float] = Field(None, description="Model FLOP/s over the GPU's bf16 dense peak where the run's "
                                      "precision has another (mfu is against the run's own: fp8 against the fp8 "
                                      "peak); torchtitan and Megatron logs report MFU against bf16. Null for bf16.")


class ParamsOut(_Out):
    """Parameter counts."""

    total: int
    active: int


class UncertaintyOut(_Out):
    """How far to trust `time.step_s`: the held-out error of the layout's regime (costmodels.uncertainty)."""

    rel_error_p50: Optional[float] = Field(..., description="Median |relative error| of held-out runs; null = none.")
    rel_error_p90: Optional[float] = Field(..., description="90th percentile |relative error| of held-out runs.")
    bias: Optional[float] = Field(..., description="Median signed error (negative: predictions too fast).")
    rows: int = Field(..., description="Held-out published runs behind the band, each counted once: the regime's "
                      "own, or those of the pool `basis` names where the band is borrowed.")
    regime_rows: Optional[int] = Field(None, description="Held-out runs in this very regime (0 where the band is "
                                       "borrowed from a pool: `rows` then counts that pool); null = not looked up.")
    samples: Optional[int] = Field(None, description="Out-of-sample errors behind the band's quantiles (a run "
                                   "predicted by the shipped profiles and by leave-one-regime-out refits counts "
                                   "once per prediction); null = rows.")
    regime: str = Field(..., description="stack/sharding/scale/GPU generation of this layout (e.g. "
                        "megatron-core/zero1-2/<=512/hopper; no generation for a stack file whose bands have none).")
    validated: bool = Field(..., description="At least 5 held-out runs in this very regime, mean error <= 15%.")
    basis: str = Field("regime", description="Which rows the band comes from: the regime, or a fallback.")
    mean: Optional[float] = Field(None, description="Mean |relative error| of those rows.")
    extrapolated: Optional[str] = Field(None, description="Why the estimate lies beyond the runs behind its band "
                                        "(e.g. a longer sequence than any of them), else null; never validated then.")


class Estimate(_Out):
    """Everything parplan predicts for one layout."""

    layout: Layout
    fits: bool
    memory: MemoryOut
    time: Optional[TimeOut] = None
    throughput: Optional[ThroughputOut] = None
    params: ParamsOut
    uncertainty: Optional[UncertaintyOut] = None
