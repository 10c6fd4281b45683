"""Held-out check of costmodels.kernels' tile and wave quantization: bf16 torch.mm across wave boundaries.

Shapes: m = 1,408 (11 tiles of 128), k = 4,096, and n stepping over 128 x 256 / 128 x 128 tile-count
boundaries of a 132-SM H100 (n = 2,816 .. 4,352 by 128), plus m = 2,048 and 4,096 rows. None of them is in
gpu_kernels_h100.csv, so they test the model rather than the fit. Time: CUDA events over 50 calls after 10
warm-up calls, median of 5 such runs. Output CSV: m,n,k,median_ms,tflops. torch only.

Run: python benchmarks/gpu/measure_waves.py --out waves_h100.csv
"""

from __future__ import annotations

import argparse
import csv
import statistics

import torch


def time_mm(m: int, n: int, k: int) -> float:
    """Median milliseconds per torch.mm of (m x k) @ (k x n) in bf16."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(10):
        torch.mm(a, b)
    runs = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(50):
            torch.mm(a, b)
        end.record()
        torch.cuda.synchronize()
        runs.append(start.elapsed_time(end) / 50)
    return statistics.median(runs)


def shapes() -> list[tuple[int, int, int]]:
    """(m, n, k) across wave boundaries."""
    out = [(1408, n, 4096) for n in range(2816, 4353, 128)]
    out += [(m, n, 4096) for m in (2048, 4096) for n in (4096, 4224, 8192, 8320)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["m", "n", "k", "median_ms", "tflops"])
        for m, n, k in shapes():
            ms = time_mm(m, n, k)
            w.writerow([m, n, k, f"{ms:.5f}", f"{2 * m * n * k / ms / 1e9:.2f}"])
            print(m, n, k, f"{ms:.4f} ms", f"{2 * m * n * k / ms / 1e9:.1f} TFLOP/s", flush=True)
    print("gpu:", torch.cuda.get_device_name(), "torch", torch.__version__, "cuda", torch.version.cuda)


if __name__ == "__main__":
    main()
