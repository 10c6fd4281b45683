"""How much a GEMM slows while a communication-like kernel holds some SMs beside it (one GPU).

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_overlap.py --out gpu_overlap_h100.json

NCCL runs its collectives as persistent CTAs (one per channel) that copy buffers through the SMs, beside
the compute kernels they overlap. One GPU cannot run a multi-rank collective, so this stands in for it:
a Triton kernel with `ctas` programs that stream a 1 GiB buffer (read + write) in a loop, on a second
stream, while bf16 GEMMs of transformer shapes run on the first. Reported per (shape, ctas): the GEMM's
time alone, its time beside the copy, and the copy's bandwidth meanwhile. The copy moves as many bytes as
its CTAs can, more than NCCL over NVLink moves (about 2 x 370 GB/s of HBM traffic per GPU), so the
slowdown is an upper bound on what the SM and HBM share of a collective costs.
"""
import argparse, json, time

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, iters, BLOCK: tl.constexpr):
    pid, progs = tl.program_id(0), tl.num_programs(0)
    for _ in range(iters):
        for start in range(pid * BLOCK, n, progs * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def _time_gemm(a, b, reps, sync=True):
    if sync:  # device-wide: it would also wait for the side stream's copy
        torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        torch.mm(a, b)
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu_overlap.json")
    args = ap.parse_args()
    dev = "cuda"
    n = 1 << 28  # 256 Mi float32 = 1 GiB
    src, dst = torch.randn(n, device=dev), torch.empty(n, device=dev)
    side = torch.cuda.Stream()
    shapes = [(8192, 8192, 8192), (8192, 4096, 14336), (4096, 3072, 8192), (16384, 2048, 2048)]
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "sm_count":
           torch.cuda.get_device_properties(0).multi_processor_count, "rows": []}
    for m, k, nn in shapes:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, nn, device=dev, dtype=torch.bfloat16)
        reps = max(5, int(4e13 / (2 * m * k * nn)))
        _time_gemm(a, b, reps)
        for ctas in (8, 16, 32):
            _copy[(ctas,)](src, dst, n, 1, BLOCK=4096)  # compile + warm
            torch.cuda.synchronize()
            alone, beside, copy_s = [], [], []
            for _ in range(5):  # interleaved, so clocks and power drift hit both alike
                alone.append(_time_gemm(a, b, reps))
                cs, ce = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(side):
                    cs.record()
                    _copy[(ctas,)](src, dst, n, 40, BLOCK=4096)
                    ce.record()
                torch.cuda.current_stream().synchronize()
                beside.append(_time_gemm(a, b, reps, sync=False))
                ce.synchronize()
                copy_s.append(cs.elapsed_time(ce) / 1e3)
            al, bs = sorted(alone)[2], sorted(beside)[2]
            row = dict(m=m, k=k, n=nn, ctas=ctas, gemm_alone_ms=round(al, 4), gemm_beside_ms=round(bs, 4),
                       slowdown=round(bs / al - 1, 4), tflops_alone=round(2 * m * k * nn / al / 1e9, 1),
                       gemm_window_ms=round(bs * reps, 2), copy_ms=round(1e3 * sorted(copy_s)[2], 2),
                       copy_gb_per_s=round(2 * 4 * n * 40 / sorted(copy_s)[2] / 1e9, 1))
            print(row, flush=True)
            out["rows"].append(row)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
