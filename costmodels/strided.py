"""Eager element-wise kernels that read strided views: mostly issue-bound, not HBM-bound.

Notation (SI units): B_sm bytes moved per SM (CU) per clock by PyTorch's generic element-wise kernel, N_sm the SM
count, f_clk the clock the datasheet peak is quoted at (peak_16 / (N_sm x tensor FLOPs per SM per clock),
costmodels.kernels Generation.tensor_per_sm_clock), R_hbm the fitted HBM rate (hbm_gb_per_s x efficiency.hbm).

What it counts. `x.chunk(2, -1)` returns two views with a row stride twice their width. PyTorch's TensorIterator
runs an element-wise op on such a view with its generic, non-vectorised kernel (one element per thread per
iteration: `elementwise_kernel<128, 4, gpu_kernel_impl_nocast>` in the traces below), whose rate is set mostly by
load/store instructions per SM and clock, not by HBM bandwidth. The same bytes on contiguous tensors run the
vectorised kernel at the HBM rate.

Measured, in Megatron-Core's own MoE layer (benchmarks/data/measured/gpu_moe_mcore_h200.json, megatron-core 0.19.2,
GPT-OSS-120B's clamped quick-GeGLU over 16,384 rows x 2 x 2,880 on one H200): the clamps and their autograd backward
(le, ge, where) on the chunk views moved 1.2-1.8 TB/s (25-38% of the 4.8 TB/s peak), 1.46 TB/s over the clamp path's
strided passes; the cats and logical_and on contiguous tensors 3.9-4.0 TB/s. Measured alone on an H100 and an H200
(benchmarks/gpu/measure_strided.py, gpu_strided_h100.json and gpu_strided_h200.json: the same tensor, clamp / le /
where / add on the chunk view, an interleaved view and a contiguous copy): contiguous ops and a clone run 1.39-1.42
x faster on the H200 (its HBM is 1.43 x the H100's); the same ops on the chunk view only 1.08-1.16 x faster (on the
interleaved view clamp and le 1.12 x, where and add 1.37-1.41 x). Over the clamp path's strided passes: 1.20 TB/s
(H100) and 1.33 (H200). Per SM and datasheet clock (132 SMs, 989 TFLOP/s / (132 x 4,096) = 1.83 GHz): 5.0 (H100),
5.5 (H200 alone), 6.0 (H200 in Megatron-Core): B_sm = 5.5, physical range 5.0-6.0, every reading within 10% of it.

Cross-check on the H100 (gpu_moe_h100.csv): an eager clamped quick-GeGLU over the same chunk views took 2.358 ms fwd
+ bwd against 1.048 ms for silu(gate) * up, so the clamps cost at most 1.31 ms there. With its contiguous passes at
the HBM rate, this rate prices Megatron-Core's clamp path at 1.27 ms on the H100 (below the bound) and 1.14 ms on
the H200 (measured 1.10). Read as HBM-bound instead (the H200's in-layer rate x 3.35 / 4.8), the H100's path would
take 1.6 ms, above the bound.

Known deviations: the rate is not purely issue-bound: the H200's faster HBM ran these ops 8-16% faster than the
H100's, which one constant per SM and clock splits (H100 priced 10% fast, H200 between its two readings). Measured
on Hopper only; other generations carry the same bytes per SM and clock (an assumption: the generic kernel's
per-thread loop is the same code), and AMD CUs the same per CU. The clock is the datasheet's, not the sustained clock
under a power limit."""

from __future__ import annotations

from costmodels.kernels import GENERATIONS

BYTES_PER_SM_CLOCK = 5.5  # measured on H100 and H200 (above): physical range 5.0-6.0
# Atomic index_add of 16-bit rows (megatron-core's unfused permute backward): 0.23-0.26 TB/s of rows on one H100 at
# three shapes (gpu_unpermute_h100.json) and 0.25 inside Megatron-Core's layer on an H200 (gpu_moe_mcore_h200.json):
# the same on both, so set by the SMs and L2 atomics, not HBM: 0.24e12 / (132 x 1.83e9) = 1.0 byte per SM and clock,
# physical range 0.95-1.1.
ATOMIC_BYTES_PER_SM_CLOCK = 1.0


def datasheet_clock_hz(gpu) -> float | None:
    """f_clk: the clock the GPU's dense 16-bit peak is quoted at, Hz; None without its SM count or generation."""
    gen = GENERATIONS.get(gpu.tensor_core_gen or "")
    if gpu.sm_count is None or gen is None or gen.tensor_per_sm_clock <= 0:
        return None
    return gpu.bf16_tflops * 1e12 / (gpu.sm_count * gen.tensor_per_sm_clock)


def strided_bytes_per_s(gpu, hbm_bytes_per_s: float) -> float:
    """Rate of eager element-wise kernels on strided views, bytes/s: min(R_hbm, N_sm f_clk B_sm); R_hbm where the
    profile lacks the SM count or generation (no issue bound known)."""
    clock = datasheet_clock_hz(gpu)
    if clock is None:
        return hbm_bytes_per_s
    return min(hbm_bytes_per_s, gpu.sm_count * clock * BYTES_PER_SM_CLOCK)


def strided_s(gpu, dev, nbytes: float) -> float:
    """Seconds to move `nbytes` through strided-view element-wise kernels on `gpu`, whose 16-bit device `dev`
    gives the fitted HBM rate R_hbm."""
    if nbytes <= 0:
        return 0.0
    return nbytes / strided_bytes_per_s(gpu, dev.hbm_bytes_per_s * dev.eff.hbm)


def atomic_bytes_per_s(gpu, hbm_bytes_per_s: float) -> float:
    """Rate of an atomic index_add of 16-bit rows, bytes of rows per second: min(R_hbm, N_sm f_clk x
    ATOMIC_BYTES_PER_SM_CLOCK); R_hbm / 12 (the H100's measured ratio) where the profile lacks SM count or
    generation."""
    clock = datasheet_clock_hz(gpu)
    if clock is None:
        return hbm_bytes_per_s / 12
    return min(hbm_bytes_per_s, gpu.sm_count * clock * ATOMIC_BYTES_PER_SM_CLOCK)
