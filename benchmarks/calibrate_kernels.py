"""Fit the kernel model's free constants (costmodels.kernels) on measured H100 kernels, and report.

Data: benchmarks/data/measured/gpu_kernels_h100.csv (one H100 80GB HBM3 SXM, torch 2.11 + CUDA 13.0;
benchmarks/gpu/README.md): its `gemm` (bf16 torch.mm) rows and the 21 wave-boundary rows of
gpu_waves_h100.csv give k_half (`gemm_fp8`, tensorwise torch._scaled_mm, is reported, not fitted); `attn` fwd_bwd rows (cuDNN SDPA, causal) give attn_half_seq. The ceilings are not fitted here:
they are the MAMF rows of kernels.json (see costmodels.kernels.GENERATIONS).

Run: python benchmarks/calibrate_kernels.py [--check]. With --check it exits 1 when the constants in
costmodels.kernels differ from the fit by more than 10% (tests/test_kernels.py runs the same check).
"""

from __future__ import annotations

import csv
import functools
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from costmodels.kernels import GENERATIONS, KernelSpec, attention_kernel_efficiency, gemm_kernel_efficiency

DATA = Path(__file__).parent / "data" / "measured" / "gpu_kernels_h100.csv"
# bf16 torch.mm across wave boundaries on one H100 80GB HBM3 (700 W, torch 2.11.0+cu130), timed back to back
# with CUDA events (no per-call host cost): benchmarks/gpu/measure_waves.py, 2026-11-26.
WAVES = Path(__file__).parent / "data" / "measured" / "gpu_waves_h100.csv"
H100_SMS = 132  # NVIDIA H100 SXM5: 132 SMs (H100 Tensor Core GPU architecture whitepaper)
H100_PEAK = {"gemm": 989e12, "gemm_fp8": 1979e12}
H100_RIDGE = 989e12 / (3350e9 * 0.85)  # 16-bit peak over achieved HBM (hardware_profiles h100-sxm)
# The same script's run on one H200 (2026-11-27): the H100's SMs and peaks, HBM3e at 4.8 TB/s
# (hardware_profiles h200). Never fitted: printed beside the H100's errors as an out-of-sample check.
H200 = Path(__file__).parent / "data" / "measured" / "gpu_kernels_h200.csv"
H200_RIDGE = 989e12 / (4800e9 * 0.85)
K_HALF_GRID = [2.0 ** (i / 4) for i in range(0, 49)]  # 1 .. 4096
LAUNCH_GRID = [i * 1e-6 for i in range(0, 101, 2)]  # 0 .. 100 us
# Below 2,048 keys the measured fwd+bwd is host-bound (512 keys took longer than 1,024: 0.43 vs 0.32 ms),
# so those rows say nothing about the kernel.
MIN_ATTN_SEQ = 2048
SEQ_HALF_GRID = [2.0 ** (i / 4) for i in range(16, 65)]  # 16 .. 65536


@functools.lru_cache(maxsize=None)
def _read(path: Path) -> tuple[dict, ...]:
    """A CSV file's rows, read once (the fit's grid evaluates the errors ~5,000 times)."""
    with path.open() as f:
        return tuple(csv.DictReader(f))


def rows(kind: str, path: Path = DATA) -> list[dict]:
    """The CSV rows of one kind without an error."""
    return [r for r in _read(path) if r["kind"] == kind and not r["error"]]


def gemm_errors(k_half: float, kind: str = "gemm", launch_s: float = 0.0, path: Path = DATA,
                ridge: float = H100_RIDGE) -> list[float]:
    """log(predicted / measured) time of each GEMM row of `kind` (CSV columns m, n, k); `launch_s` is the
    timing loop's fixed cost per call (host dispatch of one torch.mm, measured with the kernel), which
    the kernel model leaves out: in training, kernels launch asynchronously (timing.layer_overhead_s)."""
    gen = replace(GENERATIONS["hopper"], k_half=k_half)
    fp8 = kind == "gemm_fp8"
    spec = KernelSpec(gen, H100_SMS, fp8=fp8, flops_per_byte=ridge * (2 if fp8 else 1))
    out = []
    for r in rows(kind, path):
        m, n, k = float(r["m"]), float(r["n"]), float(r["k"])
        flops = 2 * m * n * k
        pred_s = flops / (gemm_kernel_efficiency(spec, m, k, n) * H100_PEAK[kind]) + launch_s
        out.append(math.log(pred_s / (float(r["median_ms"]) * 1e-3)))
    return out


def wave_errors(k_half: float) -> list[float]:
    """log(predicted / measured) time of the wave-boundary GEMM rows (no per-call cost: timed back to back)."""
    spec = KernelSpec(replace(GENERATIONS["hopper"], k_half=k_half), H100_SMS, flops_per_byte=H100_RIDGE)
    out = []
    for r in _read(WAVES):
        m, n, k = float(r["m"]), float(r["n"]), float(r["k"])
        pred_s = 2 * m * n * k / (gemm_kernel_efficiency(spec, m, k, n) * H100_PEAK["gemm"])
        out.append(math.log(pred_s / (float(r["median_ms"]) * 1e-3)))
    return out


def attn_errors(seq_half: float, launch_s: float = 0.0, path: Path = DATA) -> list[float]:
    """log(predicted / measured) time of causal fwd+bwd attention rows (`launch_s` as in gemm_errors)."""
    spec = KernelSpec(replace(GENERATIONS["hopper"], attn_half_seq=seq_half), H100_SMS)
    out = []
    for r in rows("attn", path):
        if r["pass"] != "fwd_bwd" or float(r["seq"]) < MIN_ATTN_SEQ:
            continue
        seq, bh = float(r["seq"]), float(r["batch"]) * float(r["heads"])
        flops = float(r["tflops_causal_half"]) * 1e12 * float(r["median_ms"]) * 1e-3
        pred_s = flops / (attention_kernel_efficiency(spec, bh, seq, seq, float(r["head_dim"])) * 989e12) + launch_s
        out.append(math.log(pred_s / (float(r["median_ms"]) * 1e-3)))
    return out


def _cost(errors: list[float]) -> float:
    return statistics.fmean(abs(e) for e in errors)


def fit() -> dict[str, float]:
    """Grid-searched constants minimising the mean |log error|."""
    k_half, g_launch = min(((k, t) for k in K_HALF_GRID for t in LAUNCH_GRID),
                           key=lambda v: _cost(gemm_errors(v[0], "gemm", v[1]) + wave_errors(v[0])))
    seq_half, a_launch = min(((q, t) for q in SEQ_HALF_GRID for t in LAUNCH_GRID),
                             key=lambda v: _cost(attn_errors(*v)))
    return {"k_half": k_half, "attn_half_seq": seq_half, "gemm_launch_s": g_launch, "attn_launch_s": a_launch}


def _report(name: str, errors: list[float]) -> str:
    ratios = sorted(math.exp(e) - 1 for e in errors)
    mean = statistics.fmean(abs(r) for r in ratios)
    return f"{name}: {len(ratios)} rows, mean |error| {mean:.1%}, median {statistics.median(ratios):+.1%}"


def main(argv: list[str]) -> int:
    fitted = fit()
    gen = GENERATIONS["hopper"]
    g_launch, a_launch = fitted["gemm_launch_s"], fitted["attn_launch_s"]
    print(f"fitted: k_half {fitted['k_half']:.1f} (in code {gen.k_half}), attn_half_seq "
          f"{fitted['attn_half_seq']:.0f} (in code {gen.attn_half_seq}); per-call timing cost "
          f"{g_launch * 1e6:.0f} us (gemm), {a_launch * 1e6:.0f} us (attention)")
    print(_report("bf16 gemm (in-code constants)", gemm_errors(gen.k_half, "gemm", g_launch)))
    print(_report("bf16 gemm across wave boundaries", wave_errors(gen.k_half)))
    print(_report("fp8 tensorwise gemm (not fitted)", gemm_errors(gen.k_half, "gemm_fp8", g_launch)))
    print(_report("attention fwd+bwd", attn_errors(gen.attn_half_seq, a_launch)))
    for kind in ("gemm", "gemm_fp8"):
        print(_report(f"H200 {kind} (out of sample)", gemm_errors(gen.k_half, kind, g_launch, H200, H200_RIDGE)))
    print(_report("H200 attention fwd+bwd (out of sample)", attn_errors(gen.attn_half_seq, a_launch, H200)))
    if "--check" in argv:
        off = [k for k in ("k_half", "attn_half_seq") if abs(fitted[k] / getattr(gen, k) - 1) > 0.10]
        if off:
            print(f"constants differ from the fit by more than 10%: {', '.join(off)}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
