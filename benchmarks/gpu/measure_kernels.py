"""Measure achieved GEMM, attention and host<->device copy rates on one GPU (torch + stdlib only).

Calibration data for shape-aware kernel efficiency (issue: "kernels from physics"): the MAMF rows in
the reference are the best shape of a sweep; a layer's real GEMMs are narrower (TP-sharded, few tokens
per expert) and run below it. Each row is one kernel timed with CUDA events: median of `--iters`
runs after `--warmup` runs, on random normal data (data-dependent clocks: zeros run faster).

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_kernels.py --out gpu_kernels_h100.csv
    python3 benchmarks/gpu/measure_kernels.py --dry-run --out /tmp/k.csv   # tiny shapes on CPU

Kinds (`kind` column):
- `gemm`: C[m,n] = A[m,k] @ B[k,n] in bf16 (torch.mm), FLOP = 2mnk.
- `gemm_fp8`: torch._scaled_mm with e4m3 inputs, per-tensor fp32 scales, bf16 output
  (TE / torchao "tensorwise"); `gemm_fp8_rowwise` the same with per-row / per-column scales.
- `attn`: F.scaled_dot_product_attention forward and forward+backward, causal, bf16,
  (batch, heads, seq, head_dim); FLOP counted in full (4·b·h·s²·d forward, 2.5x that for fwd+bwd),
  i.e. parplan's convention with no causal halving; `tflops_causal_half` halves it (FlashAttention's).
- `h2d` / `d2h`: pinned host <-> device copies of `bytes`, GB/s = 1e9 bytes/s.
"""
import argparse, csv, datetime, json, os, subprocess, sys, time

# Transformer GEMM widths (hidden, ffn, fused qkv) of Llama 3 8B/70B/405B and Mixtral experts, whole
# and TP-sharded; m = tokens of a micro-batch (mbs x seq / cp) and a few small m (experts).
GEMM_MNK = sorted({
    *[(m, n, k) for m in (1024, 4096, 8192, 16384) for (n, k) in [
        (4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (28672, 4096),   # 8B (qkv fused 6144)
        (8192, 8192), (10240, 8192), (28672, 8192), (8192, 28672),                 # 70B
        (2048, 8192), (3584, 8192), (8192, 3584), (7168, 8192),                    # 70B at tp=4 / tp=8
        (16384, 16384), (6656, 16384), (16384, 6656), (2048, 16384),               # 405B at tp=8
    ]],
    *[(m, n, k) for m in (64, 128, 256, 512, 2048) for (n, k) in [(14336, 4096), (4096, 14336),
                                                                  (2048, 7168), (7168, 2048)]],
    *[(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192, 16384)],
})
ATTN = [(b, h, s, d) for (b, h, s, d) in [
    (1, 32, 2048, 128), (1, 32, 4096, 128), (1, 32, 8192, 128), (1, 32, 16384, 128), (1, 32, 32768, 128),
    (1, 8, 8192, 128), (1, 4, 8192, 128), (1, 64, 8192, 64), (1, 16, 8192, 256), (4, 32, 2048, 128),
    (1, 32, 1024, 128), (1, 32, 512, 128)]]
COPY_BYTES = [2**20, 16 * 2**20, 256 * 2**20, 2**30]
FIELDS = ["kind", "m", "n", "k", "batch", "heads", "seq", "head_dim", "bytes", "pass", "median_ms",
          "tflops", "tflops_causal_half", "gb_per_s", "error"]


def timer(torch, dev):
    """fn -> median milliseconds over iters after warmup (CUDA events on GPU, perf_counter on CPU)."""
    def run(fn, warmup, iters):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(iters):
            if dev == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); fn(); b.record(); torch.cuda.synchronize()
                times.append(a.elapsed_time(b))
            else:
                t = time.perf_counter(); fn(); times.append((time.perf_counter() - t) * 1e3)
        return sorted(times)[len(times) // 2]
    return run


def gemm_rows(torch, dev, shapes, run, a):
    for (m, n, k) in shapes:
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        yield _gemm_row("gemm", m, n, k, lambda: torch.mm(x, w.t()), run, a)
        if dev != "cuda":
            continue
        x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev, dtype=torch.float32)
        yield _gemm_row("gemm_fp8", m, n, k, lambda: torch._scaled_mm(
            x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), run, a)
        sa = torch.ones(m, 1, device=dev, dtype=torch.float32)
        sb = torch.ones(1, n, device=dev, dtype=torch.float32)
        yield _gemm_row("gemm_fp8_rowwise", m, n, k, lambda: torch._scaled_mm(
            x8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), run, a)


def _gemm_row(kind, m, n, k, fn, run, a):
    row = dict(kind=kind, m=m, n=n, k=k, **{"pass": "fwd"})
    try:
        ms = run(fn, a.warmup, a.iters)
        row.update(median_ms=round(ms, 5), tflops=round(2 * m * n * k / ms / 1e9, 2))
    except Exception as e:  # an unsupported dtype or shape is a row with its error
        row["error"] = f"{type(e).__name__}: {e}"[:200]
    return row


def attn_rows(torch, dev, shapes, run, a):
    F = torch.nn.functional
    for (b, h, s, d) in shapes:
        q, kk, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        flops = 4 * b * h * s * s * d
        base = dict(kind="attn", batch=b, heads=h, seq=s, head_dim=d)

        def fwd():
            return F.scaled_dot_product_attention(q, kk, v, is_causal=True)

        def fwd_bwd():
            fwd().sum().backward()
        for name, fn, f in (("fwd", fwd, flops), ("fwd_bwd", fwd_bwd, 3.5 * flops)):
            row = dict(base, **{"pass": name})
            try:
                ms = run(fn, a.warmup, a.iters)
                row.update(median_ms=round(ms, 5), tflops=round(f / ms / 1e9, 2),
                           tflops_causal_half=round(f / 2 / ms / 1e9, 2))
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"[:200]
            yield row


def copy_rows(torch, dev, sizes, run, a):
    if dev != "cuda":
        return
    for nbytes in sizes:
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        devbuf = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        for kind, fn in (("h2d", lambda: devbuf.copy_(host, non_blocking=True)),
                         ("d2h", lambda: host.copy_(devbuf, non_blocking=True))):
            ms = run(fn, a.warmup, a.iters)
            yield dict(kind=kind, bytes=nbytes, median_ms=round(ms, 5), gb_per_s=round(nbytes / ms / 1e6, 2))


def environment(torch, dev):
    env = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(), torch=torch.__version__,
               cuda=torch.version.cuda, device=dev)
    if dev == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, sms=p.multi_processor_count, total_memory=p.total_memory,
                   cudnn=torch.backends.cudnn.version())
        try:
            env["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm,clocks.max.mem",
                 "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            env["nvidia_smi"] = f"unavailable: {e}"
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gpu_kernels.csv")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on CPU (syntax check)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget", type=int, default=240, help="total seconds; later rows skipped")
    a = ap.parse_args()
    import torch
    dev = "cpu" if a.dry_run else "cuda"
    gemms = [(64, 128, 64), (128, 256, 128)] if a.dry_run else GEMM_MNK
    attns = [(1, 2, 64, 16)] if a.dry_run else ATTN
    if a.dry_run:
        a.warmup, a.iters = 1, 3
    run, start, rows = timer(torch, dev), time.time(), []
    env = environment(torch, dev)
    with open(os.path.splitext(a.out)[0] + ".env.json", "w") as f:
        json.dump(env, f, indent=1)
    for gen in (gemm_rows(torch, dev, gemms, run, a), attn_rows(torch, dev, attns, run, a),
                copy_rows(torch, dev, COPY_BYTES, run, a)):
        for row in gen:
            if time.time() - start > a.budget:
                print("budget reached; stopping", file=sys.stderr)
                break
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows in {time.time() - start:.0f} s -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
