"""Is an eager MoE layer at the Megatron-Bridge recipes' shapes host-bound, and what do its host syncs cost?
(issue 35, docs/moe.md "Read as the performance recipes run them": Qwen3-30B-A3B and GPT-OSS-120B are priced
30% and 34% fast; the candidate is host time that the GPU waits for after each sync.)

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_moe_host.py > moe_host.json     # one GPU, about 1 minute
    python3 benchmarks/gpu/measure_moe_host.py --smoke    # shapes / 16, 2 steps: checks the script on a CPU

Not Megatron-Core itself (the device machine has torch only): a layer in plain PyTorch that issues the kernels
megatron-core 0.19.2's all-to-all dispatcher path issues, in its order, at one EP rank's shapes with EP folded
away (ep 1: the all-to-alls are left out, they are priced apart):
router (logits, fp32 softmax, top-k, routing map), tokens per expert copied to the host (the dispatcher's
cuda_sync_point), permute (index_select), per local expert fc1 -> activation -> fc2 (one GEMM call per expert
and pass, as Transformer Engine 2.9's multi-stream cuBLAS grouped GEMM issues them), unpermute (probability-
weighted index_add), and autograd's backward. GPT-OSS's activation is the clamped quick-GeGLU with its
per-call `torch.tensor(linear_offset, device=...)`; Qwen3's is SwiGLU.

Variants per model: `sync` as above; `nosync` takes the tokens per expert from the previous step and builds
no device tensor from a Python number (what a host-sync-free path would cost).

Per variant, median of 10 steps after 3: `step_ms` (wall, forward + backward, synchronised at the end),
`fwd_ms` (wall of the forward alone, synchronised), `busy_ms` (sum of the device kernels' times in one profiled
step, torch.profiler), `host_fwd_ms` (host time to issue the forward, perf_counter, syncs included), `ops_fwd`
and `ops_bwd` (aten ops the profiler saw). step_ms - busy_ms is the time the device waited.
"""
import json
import statistics
import sys
import time

import torch

SMOKE = "--smoke" in sys.argv
REPS, WARM = (2, 1) if SMOKE else (10, 3)  # median of REPS timed steps after WARM
DEV = "cuda" if torch.cuda.is_available() else "cpu"
DT = torch.bfloat16 if DEV == "cuda" else torch.float32
# name: (hidden, local experts, expert ffn, top-k, tokens per rank, activation) at the recipes' per-rank shapes:
# Qwen3-30B-A3B EP16 -> 8 local experts of 128, 4096 tokens each (top-8); GPT-OSS-120B EP8 -> 16 of 128, 1024 each.
MODELS = {"qwen3-30b-a3b": (2048, 8, 768, 8, 4096, "swiglu"), "gpt-oss-120b": (2880, 16, 2880, 4, 4096, "qgeglu")}


def sync_now():
    if DEV == "cuda":
        torch.cuda.synchronize()


def act(h, kind, sync):
    gate, up = h.chunk(2, -1)
    if kind == "swiglu":
        return torch.nn.functional.silu(gate) * up
    offset = torch.tensor(1.0, dtype=h.dtype, device=h.device) if sync else 1.0  # megatron-core builds it per call
    gate, up = gate.clamp(max=7.0), up.clamp(-7.0, 7.0)
    return gate * torch.sigmoid(1.702 * gate) * (up + offset)


def layer(x, w, cfg, sync, counts):
    hidden, experts, ffn, k, tokens, kind = cfg
    probs = torch.softmax((x @ w["router"]).float(), -1)
    top, idx = torch.topk(probs, k, -1)
    flat = idx.reshape(-1)
    per_expert = torch.bincount(flat, minlength=experts)
    split = per_expert.tolist() if sync else counts  # the dispatcher's device-to-host copy
    order = torch.argsort(flat, stable=True)
    rows = x.index_select(0, order // k)
    outs = []
    for e, part in enumerate(rows.split(split)):
        outs.append(act(part @ w["fc1"][e], kind, sync) @ w["fc2"][e])
    y = torch.cat(outs) * top.reshape(-1)[order].unsqueeze(-1).to(x.dtype)
    return torch.zeros_like(x).index_add_(0, order // k, y), split


def weights(cfg):
    hidden, experts, ffn, k, tokens, kind = cfg
    g = torch.Generator(device="cpu").manual_seed(0)
    make = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(DEV, DT).requires_grad_()  # noqa: E731
    return {"router": make(hidden, experts), "fc1": make(experts, hidden, 2 * ffn), "fc2": make(experts, ffn, hidden)}


def one_step(x, w, cfg, sync, counts):
    y, split = layer(x, w, cfg, sync, counts)
    y.float().square().mean().backward()
    return split


def timed(fn, reps=REPS, warm=WARM):
    for _ in range(warm):
        fn()
    sync_now()
    out = []
    for _ in range(reps):
        sync_now()
        t0 = time.perf_counter()
        fn()
        sync_now()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def profiled(x, w, cfg, sync, counts):
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if DEV == "cuda" else [])
    with torch.profiler.profile(activities=acts) as prof:
        with torch.profiler.record_function("fwd"):
            y, _ = layer(x, w, cfg, sync, counts)
        with torch.profiler.record_function("bwd"):
            y.float().square().mean().backward()
        sync_now()
    events = prof.events()
    busy = sum(e.device_time for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    aten = [e for e in events if e.name.startswith("aten::")]
    fwd_end = next((e.time_range.end for e in events if e.name == "fwd"), 0)
    return busy / 1e3, sum(e.time_range.start < fwd_end for e in aten), sum(e.time_range.start >= fwd_end for e in aten)


def host_forward_ms(x, w, cfg, sync, counts, reps=REPS):
    out = []
    for _ in range(reps):
        sync_now()
        t0 = time.perf_counter()
        y, _ = layer(x, w, cfg, sync, counts)
        out.append((time.perf_counter() - t0) * 1e3)
        y.float().square().mean().backward()
    return statistics.median(out)


def smoke(cfg):
    """The shapes cut 16-fold (top-k and expert count kept), for a run on a CPU."""
    hidden, experts, ffn, k, tokens, kind = cfg
    return hidden // 16, experts, ffn // 16, k, tokens // 16, kind


def main():
    rows = []
    for name, full in MODELS.items():
        cfg = smoke(full) if SMOKE else full
        w = weights(cfg)
        x = torch.randn(cfg[4], cfg[0], device=DEV, dtype=DT)
        counts = one_step(x, w, cfg, True, None)
        for variant, sync in (("sync", True), ("nosync", False)):
            step = timed(lambda: one_step(x, w, cfg, sync, counts))
            fwd = timed(lambda: layer(x, w, cfg, sync, counts))
            busy, ops_fwd, ops_bwd = profiled(x, w, cfg, sync, counts)
            rows.append({"model": name, "variant": variant, "step_ms": round(step, 3), "fwd_ms": round(fwd, 3),
                         "busy_ms": round(busy, 3), "host_fwd_ms": round(host_forward_ms(x, w, cfg, sync, counts), 3),
                         "ops_fwd": ops_fwd, "ops_bwd": ops_bwd})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if DEV == "cuda" else "cpu",
           "smoke": SMOKE}
    print(json.dumps({"env": env, "rows": rows}))


if __name__ == "__main__":
    main()
