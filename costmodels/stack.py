"""Software stacks: what a training framework overlaps, how it recomputes, and its fitted efficiencies.

The same layout runs at different speeds in Megatron-LM of 2021 (no overlap at all), Megatron-Core
(TP communication overlap, overlapped gradient reduce and parameter gather), DeepSpeed (ZeRO with
bucketed prefetch) and torchtitan/FSDP2 (per-block FSDP units, torch.compile, async TP). A Stack
says which of these mechanisms run and carries the few efficiency numbers that are the stack's,
not the GPU's (host launch overhead, element-wise fusion, contention while communication runs).
Profiles live in hardware_profiles/stacks/*.yaml, each with the rows it was fitted on and its error.

Mechanism sources (read from each framework's argument parser / config classes):
- Megatron-LM `--overlap-grad-reduce`, `--overlap-param-gather`, `--tp-comm-overlap`,
  `--recompute-granularity selective` (core attention only): megatron/training/arguments.py;
  DDP bucket size max(40M, 1M * dp) parameters: megatron/core/distributed/distributed_data_parallel.py.
- DeepSpeed ZeRO-3 `stage3_prefetch_bucket_size` (5e7 elements), `reduce_bucket_size` (5e8),
  `overlap_comm`: deepspeed/runtime/zero/config.py.
- torchtitan: FSDP2 `fully_shard` per transformer block, `reshard_after_forward` (True without PP),
  per-op selective checkpointing (saves matmul outputs but every second one, attention, reductions:
  torchtitan/models/llama3/infra/parallelize.py `_save_list`), `torch.compile` per block, async TP
  (torch/_inductor/fx_passes/micro_pipeline_tp.py: which collectives fuse with a matmul).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from costmodels.memory_semantics import MemorySemantics
from costmodels.moe_dispatch import Dispatcher

# Sane ranges (floats are finite: allow_inf_nan=False): a scale or bucket of 1e-300 would turn times
# into inf and NaN; a relative error beyond 100 (10,000%) is no measurement.
MIN_SCALE = 1e-3
MAX_REL_ERROR = 100.0

Framework = Literal["megatron", "deepspeed", "torchtitan", "fsdp"]
Fp8Recipe = Literal["tensorwise", "rowwise", "mxfp8", "blockwise", "nvfp4"]


class Fp8Efficiency(BaseModel):
    """Achieved FP8 GEMM speed of each scaling recipe, as a fraction of the GPU's bf16 GEMM curve
    applied to the FP8 peak (1.0 = FP8 GEMMs as efficient as bf16 ones, i.e. twice as fast)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    tensorwise: float = Field(0.75, ge=MIN_SCALE, le=1.5, description="Per-tensor scales (Transformer Engine delayed "
                              "scaling, torchao tensorwise): cuBLAS FP8 GEMMs.")
    rowwise: float = Field(0.6, ge=MIN_SCALE, le=1.5, description="Per-row scales (torchao rowwise): CUTLASS GEMMs.")
    mxfp8: float = Field(
        1.0, ge=MIN_SCALE, le=1.5,
        description="MX block scales (one E8M0 scale per 32 elements), Blackwell only: the tensor cores apply the "
        "scales inside the MMA (PTX tcgen05.mma block_scale), so the GEMM runs at the FP8 rate like tensorwise "
        "(1.0, as the stacks' tensorwise); its extra cost is in the casts (fp8_cast_bytes_per_element), not here.")
    nvfp4: float = Field(
        1.0, ge=MIN_SCALE, le=1.5,
        description="NVFP4 (E2M1 values, one E4M3 scale per 16 elements and a per-tensor FP32 scale), Blackwell "
        "only: the linear layers' GEMMs on the FP4 tensor cores at the GPU's fp4_tflops, the block scales applied "
        "inside the MMA like MXFP8's (1.0: no source for a slower rate).")
    blockwise: float = Field(
        0.65, ge=MIN_SCALE, le=1.5,
        description="128x128 / 1x128 block scales (DeepSeek-V3 style).")
    half_dim_scale: float = Field(
        1.0, ge=MIN_SCALE, le=20,
        description="FP8 GEMMs reach half their efficiency at this "
                    "multiple of the GPU's gemm_half_dim: FP8 kernels need larger tiles to saturate, so "
                    "small GEMMs gain less from FP8 than large ones.")
    rowwise_half_dim_scale: float = Field(
        1.0, ge=MIN_SCALE, le=50,
        description="Further factor on the half size for the "
                    "rowwise recipe (CUTLASS rowwise-scaled kernels saturate later than "
                    "cuBLAS per-tensor ones).")

    def half_dim_of(self, recipe: Fp8Recipe) -> float:
        """The half-size multiple of `recipe`."""
        return self.half_dim_scale * (self.rowwise_half_dim_scale if recipe == "rowwise" else 1.0)

    def of(self, recipe: Fp8Recipe) -> float:
        """The fraction for `recipe`."""
        return getattr(self, recipe)


class RegimeError(BaseModel):
    """Held-out relative error of step time in one regime (benchmarks/accuracy.py)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    rows: int = Field(..., ge=0, le=1_000_000, description="Held-out published runs behind the numbers.")
    mean: float = Field(..., ge=0, le=MAX_REL_ERROR, description="Mean |predicted/measured - 1|.")
    p50: float = Field(..., ge=0, le=MAX_REL_ERROR, description="Median |relative error|.")
    p90: float = Field(..., ge=0, le=MAX_REL_ERROR, description="90th percentile |relative error|.")
    bias: float = Field(
        ..., ge=-MAX_REL_ERROR, le=MAX_REL_ERROR,
        description="Median signed error (negative: predicted faster than measured).")


ZERO3_CALL_OVERHEAD_MAX_S = 1e-4  # see Stack.zero3_call_overhead_s


class Stack(BaseModel):
    """One software stack: mechanisms (what overlaps what) and fitted efficiencies."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$",
                      description="Stack name, e.g. megatron-core: letters, digits and . _ + - (at most 64).")
    family: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$", description="Stacks whose error bands are measured together (e.g. "
                                  "torchtitan with and without compile); null = the stack's own name.")
    framework: Framework = Field(..., description="The framework family that runs it.")
    description: str = Field("", description="What this stack is, in one sentence.")
    tp_comm_overlap: bool = Field(False, description="Default for TrainSpec.tp_comm_overlap: TP collectives "
                                  "hidden behind the layer's GEMMs (Megatron --tp-comm-overlap, torchtitan async "
                                  "TP), with sequence parallelism only.")
    tp_overlap_impl: Literal["userbuffers", "micro-pipeline"] = Field(
        "userbuffers", description="How TP overlap runs: userbuffers = Transformer Engine (every TP collective "
        "beside a GEMM, FP8 included); micro-pipeline = PyTorch async TP, which fuses a collective only with "
        "a matmul that consumes or produces it directly, so some stay exposed (costmodels.timing._tp_unfused_s).")
    overlap_grad_reduce: bool = Field(True, description="Default for TrainSpec.overlap_grad_reduce: bucketed "
                                      "gradient reduction runs during the last micro-batch's backward.")
    overlap_param_gather: bool = Field(True, description="ZeRO-1/2: the all-gather of updated weights runs "
                                       "during the next forward (Megatron --overlap-param-gather); else exposed.")
    overlap_p2p: bool = Field(False, description="Interleaved pipelines: stage-to-stage sends run beside the "
                              "next virtual chunk's compute (Megatron --overlap-p2p-communication, on by "
                              "default with virtual stages); false = every send on the critical path.")
    grad_bucket_mparams: float = Field(
        40.0, ge=MIN_SCALE, le=1e6,
        description="Gradient-reduction bucket, millions of "
                    "parameters (Megatron: max(40M, 1M*dp); DeepSpeed reduce_bucket_size 500M).")
    zero3_bucket_mparams: Optional[float] = Field(
        None, ge=MIN_SCALE, le=1e6,
        description="ZeRO-3 gather granularity, "
                    "millions of parameters per collective (DeepSpeed "
                    "stage3_prefetch_bucket_size 50M); null = one transformer "
                    "block per collective (an FSDP unit).")
    zero3_call_overhead_s: float = Field(0.0, ge=0, le=ZERO3_CALL_OVERHEAD_MAX_S, description="Host time of one "
                                         "ZeRO-3 collective call that nothing hides (NCCL launch, DeepSpeed's "
                                         "fetch bookkeeping), seconds. Physical range 0-100 us: nccl-tests' "
                                         "small-message floor is 10-17 us per call with one process per GPU, "
                                         "~35 us with -g 8 (/work/shared/reference/nccl_busbw.md section 1, "
                                         "tables 3.1 and 4.1); fitted where data allows, never above.")
    zero3_persistence_threshold_mparams: float = Field(
        0.0, ge=0, le=1e3, description="ZeRO-3 tensors smaller than this many millions of parameters are never "
        "partitioned nor gathered (DeepSpeed stage3_param_persistence_threshold, default 1e5 elements = 0.1; "
        "deepspeed/runtime/zero/config.py); 0 = every tensor is gathered (FSDP).")
    zero3_max_live_mparams: Optional[float] = Field(
        None, ge=MIN_SCALE, le=1e6, description="ZeRO-3 parameters, millions, allowed gathered at once (DeepSpeed "
        "stage3_max_live_parameters, default 1e9 = 1000): the prefetcher fetches ahead only while the gathered "
        "total stays under it (partitioned_param_coordinator.fetch_sub_module), so a layer that alone exceeds "
        "half of it is fetched with nothing ahead (exposed); null = no limit (FSDP).")
    zero3_prefetch: int = Field(1, ge=0, le=4, description="ZeRO-3 units gathered ahead of compute; 0 = none "
                                "(every gather exposed).")
    reshard_after_forward: bool = Field(True, description="ZeRO-3 without pipeline: weights freed after forward "
                                        "and gathered again for backward (FSDP FULL_SHARD, ZeRO-3); false = kept "
                                        "(SHARD_GRAD_OP-like).")
    moe_grouped_gemm: bool = Field(True, description="MoE experts run as one grouped GEMM over all local experts "
                                   "(TE grouped GEMM, Megatron --moe-grouped-gemm, torch._grouped_mm); false = one "
                                   "GEMM per expert.")
    ep_dispatcher: Dispatcher = Field(
        "alltoall", description="How expert-parallel dispatch sends tokens: alltoall = one copy per (token, "
        "expert) (Megatron --moe-token-dispatcher-type alltoall); deepep = one copy per destination rank and, "
        "across nodes, per destination node (DeepEP normal kernels): costmodels.moe_dispatch.")
    selective_recompute: Literal["attention-core", "per-op"] = Field(
        "attention-core", description="What recompute=selective means: Megatron's core attention, or "
        "torchtitan's per-op policy (every second matmul and all element-wise ops recomputed).")
    elementwise_scale: float = Field(
        1.0, ge=MIN_SCALE, le=4,
        description="Bytes moved by element-wise kernels relative "
                    "to unfused eager kernels (fusion by TE, Apex or torch.compile lowers it).")
    attn_scale: float = Field(1.0, ge=MIN_SCALE, le=2, description="Fused-attention efficiency relative to the GPU "
                              "profile's attn_max (the stack's attention kernel: cuDNN/FlashAttention-3 in Transformer "
                              "Engine vs FlashAttention-2 in PyTorch SDPA).")
    gemm_scale: float = Field(1.0, ge=MIN_SCALE, le=1.5, description="GEMM efficiency relative to the GPU profile's "
                              "curve (1 = the same cuBLAS kernels).")
    fp8: Fp8Efficiency = Field(default_factory=Fp8Efficiency, description="FP8 GEMM efficiency per recipe.")
    fp8_cast_bytes_per_element: float = Field(6.0, ge=0, le=64, description="HBM bytes moved to quantize one "
                                              "GEMM operand element to FP8 (compute.fp8_cast_elements): "
                                              "dynamic scaling reads it for its amax (2) and again to cast "
                                              "(2), writes the FP8 copy (1) and the transposed copy the "
                                              "other GEMM needs (1); not reduced by element-wise fusion.")
    fp8_tp_gather: list[Fp8Recipe] = Field(
        default_factory=list, description="FP8 recipes under which the sequence-parallel all-gathers (inputs in "
        "forward, output gradients in backward) move FP8 instead of bf16; the reduce-scatters stay bf16 "
        "(torchtitan's Float8ColwiseParallel / Float8RowwiseParallel, tensorwise only).")
    overlap_slowdown: float = Field(0.0, ge=0, le=1, description="Compute slows by this fraction of the time "
                                    "communication overlaps it (SMs and HBM shared with NCCL kernels).")
    layer_overhead_s: Optional[float] = Field(None, ge=0, le=1, description="Host launch time of one layer's "
                                              "forward+backward kernels; null = the GPU profile's.")
    step_overhead_s: Optional[float] = Field(None, ge=0, le=60, description="Fixed per-step cost; null = the "
                                             "GPU profile's.")
    memory: MemorySemantics = Field(default_factory=MemorySemantics, description="What the stack allocates, "
                                    "reserves and keeps on the device beyond the papers' formulas.")
    fitted_on: str = Field("not fitted", description="Which rows fitted these numbers, and how.")
    fit_rows: list[str] = Field(default_factory=list, description="Ids of the measured rows the fit used.")
    fit_error: Optional[float] = Field(
        None, ge=0, le=MAX_REL_ERROR,
        description="Mean |relative error| on the fitting rows.")
    held_out: dict[str, RegimeError] = Field(
        default_factory=dict, description="Held-out error per regime 'sharding/scale' ('*' = any), written by "
        "benchmarks/accuracy.py; costmodels.uncertainty reads it.")
    sources: list[str] = Field(default_factory=list, description="Where each mechanism is documented.")

    @property
    def regime_name(self) -> str:
        """The name regimes group by: the family, else the stack's name."""
        return self.family or self.name


DEFAULT_STACK = "megatron-core"
