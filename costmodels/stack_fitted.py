"""The numbers of a software stack that a script fits: host overheads, kernel efficiencies relative to
the GPU profile, contention while communication runs, FP8 GEMM speed per recipe.

Each field has a finite range (ge/le) and RANGE_SOURCES says where that range comes from: a physical
bound with its source, or a guard that only keeps times finite (MIN_SCALE: a scale of 1e-300 would
turn times into inf and NaN). benchmarks/calibrate.py (STACK_FIELDS) fits exactly these fields and
writes them under `fitted:` in hardware_profiles/stacks/*.yaml; `parplan calibrate` fits a subset
(planner/calibration/fit.py FREE) within narrower bounds.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

# Sane ranges (floats are finite: allow_inf_nan=False): a scale or bucket of 1e-300 would turn times
# into inf and NaN; a relative error beyond 100 (10,000%) is no measurement.
MIN_SCALE = 1e-3
MAX_REL_ERROR = 100.0

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
        "scales inside the MMA (PTX tcgen05.mma block_scale), so the GEMM runs at the FP8 rate: the stacks' "
        "tensorwise fraction (benchmarks/calibrate.py sets them equal); its extra cost is in the casts "
        "(fp8_cast_bytes_per_element), not here.")
    nvfp4: float = Field(
        1.0, ge=MIN_SCALE, le=1.5,
        description="NVFP4 (E2M1 values, one E4M3 scale per 16 elements and a per-tensor FP32 scale), Blackwell "
        "only: the linear layers' GEMMs on the FP4 tensor cores at the GPU's fp4_tflops, the block scales applied "
        "inside the MMA like MXFP8's (1.0: no source for a slower rate).")
    blockwise: float = Field(
        1.0, ge=MIN_SCALE, le=1.5,
        description="128x128 / 1x128 block scales (DeepSeek-V3 style): the tensorwise fraction (benchmarks/"
        "calibrate.py sets them equal). DeepGEMM's "
        "block-scaled FP8 dense GEMMs reach 1,127-1,520 TFLOP/s at 4,096 rows on H800 (README @989c9e3, H100 die), "
        "at or above cuBLAS tensorwise FP8 at like shapes on our H100 (1,014-1,383, gpu_kernels_h100.csv); "
        "not fitted (no fitting row).")
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



ZERO3_CALL_OVERHEAD_MAX_S = 1e-4  # see Stack.zero3_call_overhead_s


class Fitted(BaseModel):
    """The stack's fitted efficiencies, each within its range (RANGE_SOURCES)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    layer_overhead_s: Optional[float] = Field(None, ge=0, le=1, description="Host launch time of one layer's "
                                              "forward+backward kernels; null = the GPU profile's.")
    step_overhead_s: Optional[float] = Field(None, ge=0, le=60, description="Fixed per-step cost; null = the "
                                             "GPU profile's.")
    overlap_slowdown: float = Field(0.0, ge=0, le=1, description="Compute slows by this fraction of the time "
                                    "communication overlaps it (SMs and HBM shared with NCCL kernels).")
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
    zero3_call_overhead_s: float = Field(0.0, ge=0, le=ZERO3_CALL_OVERHEAD_MAX_S, description="Host time of one "
                                         "ZeRO-3 collective call that nothing hides (NCCL launch, DeepSpeed's "
                                         "fetch bookkeeping), seconds. Physical range 0-100 us: nccl-tests' "
                                         "small-message floor is 10-17 us per call with one process per GPU, "
                                         "~35 us with -g 8 (/work/shared/reference/nccl_busbw.md section 1, "
                                         "tables 3.1 and 4.1); fitted where data allows, never above.")


GUARD = "guard, not physical: keeps times finite and positive (MIN_SCALE 1e-3); the fit decides inside it"
RANGE_SOURCES = {  # Fitted field -> where its ge/le come from
    "layer_overhead_s": "0-1 s: guard, not physical (a layer's kernels launch in tens of microseconds to a few "
                        "milliseconds; one second would dominate any step)",
    "step_overhead_s": "0-60 s: guard, not physical (a fixed cost beyond a minute is no per-step overhead)",
    "overlap_slowdown": "0-1: a fraction of the overlapped time by definition",
    "elementwise_scale": "1e-3-4: " + GUARD + "; 1 = unfused eager kernels, fusion only lowers it",
    "attn_scale": "1e-3-2: " + GUARD + "; relative to the GPU profile's fitted attn_max",
    "gemm_scale": "1e-3-1.5: " + GUARD + "; costmodels/kernels.py caps every GEMM at the GPU's measured "
                  "best matmul whatever the scale",
    "fp8": "1e-3-1.5 per recipe (half-size multiples 20 and 50): " + GUARD + "; 1.0 = FP8 GEMMs exactly twice as "
           "fast as bf16, the datasheet ratio",
    "zero3_call_overhead_s": "0-100 us: nccl-tests' small-message floor, /work/shared/reference/nccl_busbw.md "
                             "section 1, tables 3.1 and 4.1 (see the field)",
}
