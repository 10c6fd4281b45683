"""Measure what costmodels/offload.py and the fp32/tf32 precisions assume, on one GPU and its host (torch only).

    python3 benchmarks/gpu/measure_offload.py --out offload_h100.json

1. Pinned host<->device copies (torch.Tensor.copy_ with non_blocking on pinned memory, 1 GiB, median of
   10): the per-GPU rate offload.H2D_GB_PER_S assumes by PCIe generation.
2. CPU Adam: torch.optim.Adam(fused=True) on fp32 CPU tensors, N parameters, median step seconds, and
   the bytes per second at offload.CPU_ADAM_BYTES_PER_PARAM; with the host's streaming copy rate
   (numpy, 1 GiB) beside it, to see what share of the memory bandwidth CPU-Adam reaches.
3. GEMM rates: 8192^3 matmuls in bf16, fp32 with TF32 off (PyTorch's default) and on: the fp32_tflops
   and tf32_tflops peaks the GPU profiles carry, as achieved.
Everything goes to one JSON file with the machine's description (nvidia-smi, CPU count, PCIe link).
"""

import argparse
import json
import os
import statistics
import subprocess
import time


def _smi(query: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"


def copies(torch, nbytes: int, reps: int) -> dict:
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    out = {}
    for name, dst, src in (("h2d", dev, host), ("d2h", host, dev)):
        times = []
        for _ in range(reps + 2):
            torch.cuda.synchronize()
            start = time.perf_counter()
            dst.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        med = statistics.median(times[2:])
        out[name] = {"bytes": nbytes, "median_s": med, "gb_per_s": nbytes / med / 1e9}
    return out


def cpu_adam(torch, params: int, reps: int) -> dict:
    p = torch.zeros(params, dtype=torch.float32, requires_grad=True)
    p.grad = torch.randn(params, dtype=torch.float32)
    opt = torch.optim.Adam([p], lr=1e-4, fused=True)
    times = []
    for _ in range(reps + 1):
        start = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - start)
    med = statistics.median(times[1:])
    return {"params": params, "median_s": med, "params_per_s": params / med, "bytes_per_s_at_30": 30 * params / med,
            "threads": torch.get_num_threads(), "fused": True}


def host_stream(nbytes: int, reps: int) -> dict:
    import numpy as np
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    times = []
    for _ in range(reps + 1):
        start = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - start)
    med = statistics.median(times[1:])
    return {"bytes": nbytes, "median_s": med, "copy_gb_per_s_read_plus_write": 2 * nbytes / med / 1e9}


def gemm(torch, n: int, reps: int) -> dict:
    out = {}
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp32", torch.float32, False),
                              ("tf32", torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        for _ in range(2):
            a @ b
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / reps
        out[name] = {"n": n, "seconds": seconds, "tflops": 2 * n**3 / seconds / 1e12}
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--adam-params", type=int, default=250_000_000)
    args = parser.parse_args()
    import torch
    result = {"gpu": _smi("name,memory.total,driver_version,pcie.link.gen.current,pcie.link.gen.max,"
                          "pcie.link.width.current,pcie.link.width.max"),
              "cpu_count": os.cpu_count(), "torch": torch.__version__}
    result["copies"] = copies(torch, 2**30, 10)
    result["gemm"] = gemm(torch, 8192, 5)
    result["host_stream"] = host_stream(2**30, 5)
    result["cpu_adam"] = cpu_adam(torch, args.adam_params, 3)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
