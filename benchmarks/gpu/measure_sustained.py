"""Burst vs sustained bf16 GEMM rate on one GPU: does a short benchmark overstate what a long run holds under the
board's power limit? Data: benchmarks/data/measured/gpu_sustained_h100.csv (provenance in its .env.json).

Per shape: 8 s idle; 50 warm-up products and 100 timed with CUDA events (MAMF's method, "burst"); then products
back to back, timed in ~0.5 s windows for `dur` seconds ("sustained"). Each row reads the SM clock, board power
and temperature through NVML right after its window.

Usage on the device machine: python3 benchmarks/gpu/measure_sustained.py (writes $OUT/gpu_sustained.csv). The
2026-11-26 run sent the same code inline (the device command carries no files) in a compact form.
"""

import os
import time

import pynvml as nvml
import torch

SHAPES = [(8192, 4096, 14336, 45), (8192, 14336, 4096, 45), (8192, 8192, 8192, 30)]  # m, k, n, sustained seconds
HEADER = "gpu,power_limit_w,shape,phase,t_s,tflops,sm_mhz,power_w,temp_c\n"


def reading(handle) -> str:
    """SM clock (MHz), board power (W) and temperature (C) now."""
    mhz = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
    watts = nvml.nvmlDeviceGetPowerUsage(handle) / 1e3
    return f"{mhz},{watts:.0f},{nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)}"


def timed_tflops(a, b, count: int, flops: float) -> float:
    """TFLOP/s of `count` back-to-back products, CUDA events around them."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return count * flops / start.elapsed_time(end) / 1e9


def measure_shape(out, prefix: str, handle, m: int, k: int, n: int, dur: float) -> None:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    flops, shape = 2 * m * k * n, f"{m}x{k}x{n}"
    time.sleep(8)
    out.write(f"{prefix},{shape},idle,0.0,0.0,{reading(handle)}\n")
    for _ in range(50):
        a @ b
    out.write(f"{prefix},{shape},burst,0.0,{timed_tflops(a, b, 100, flops):.1f},{reading(handle)}\n")
    per_window, t0 = max(1, int(350e12 / flops)), time.time()
    while time.time() - t0 < dur:
        rate = timed_tflops(a, b, per_window, flops)
        out.write(f"{prefix},{shape},sustained,{time.time() - t0:.1f},{rate:.1f},{reading(handle)}\n")
        out.flush()


def main() -> None:
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    prefix = f"{torch.cuda.get_device_name()},{nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3:.0f}"
    path = os.path.join(os.environ.get("OUT", "."), "gpu_sustained.csv")
    with open(path, "w") as out:
        out.write(HEADER)
        for m, k, n, dur in SHAPES:
            measure_shape(out, prefix, handle, m, k, n, dur)


if __name__ == "__main__":
    main()
