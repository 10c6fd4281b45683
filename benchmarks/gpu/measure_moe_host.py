"""Is an eager MoE layer at the Megatron-Bridge recipes' shapes host-bound, and what do its host syncs cost?
(issue 35, docs/moe.md "Read as the performance recipes run them": Qwen3-30B-A3B and GPT-OSS-120B are priced
30% and 34% fast; the candidate is host time that the GPU waits for after each sync.)

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_moe_host.py > moe_host.json     # one GPU, about 1 minute
    python3 benchmarks/gpu/measure_moe_host.py --smoke    # shapes / 16, 2 steps: checks the script on a CPU

Not Megatron-Core itself (the device machine has torch only): a layer in plain PyTorch that issues the kernels
megatron-core 0.19.2's all-to-all dispatcher path issues, in its order, at one EP rank's shapes with EP folded
away (ep 1: the all-to-alls are left out, they are priced apart): router (logits, fp32 softmax, top-k),
tokens per expert copied to the host (the dispatcher's cuda_sync_point), permute (index_select), the local
experts, unpermute (probability-weighted index_add), and autograd's backward. GPT-OSS's activation is the
clamped quick-GeGLU with its per-call `torch.tensor(linear_offset, device=...)`; Qwen3's is SwiGLU. Not
modelled: TE's fused permute (the recipes set moe_permute_fusion), so the replica's indexing kernels are slower.

Variants per model:
- `mcore`: as TEGroupedMLP runs it: one GEMM call per local expert and pass (Transformer Engine 2.9's
  multi-stream cuBLAS grouped GEMM), the activation once over all experts' rows, recomputed in the backward
  for GPT-OSS (its recipe recomputes moe_act);
- `mcore_fp8`: adds the FP8 path's copy of the split sizes back to the device (one more sync);
- `mcore_nosync`: the tokens per expert from the previous step, no device tensor built from a Python number;
- `loop_sync`: the activation per expert (16 syncs per GPT-OSS forward): not Megatron's path, a bound;
- `grouped`: sync-free, one torch._grouped_mm per pass over device offsets: the host floor.

`rows` time the MoE layer alone. `stack` rows time 4 whole layers (RMSNorm, QKV GEMM, causal GQA attention,
output GEMM, RMSNorm, the MoE layer), so that attention's device time sits between the syncs as in a model,
with the device time per layer by kernel kind (`kernel_ms_per_layer`). `launch_us` gives this host's cost to
issue one small kernel (an in-place add, a 64x64 GEMM), so that a host of another speed can be scaled. The
host's CPU model is in `env`.

Per variant, median of 10 steps after 3: `step_ms` (wall, forward + backward, synchronised at the end),
`fwd_ms` (wall of the forward alone, synchronised), `busy_ms` (the union of the device kernels' intervals in
one profiled step, torch.profiler), `host_fwd_ms` (host time to issue the forward, perf_counter, syncs
included), `ops_fwd` and `ops_bwd` (aten ops the profiler saw). step_ms - busy_ms is the time the device
waited. Results: benchmarks/data/measured/gpu_moe_host_h100.json, benchmarks/gpu/README.md.
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
ATTN = {"qwen3-30b-a3b": (32, 4, 128), "gpt-oss-120b": (64, 8, 64)}  # query heads, KV heads, head dim
STACK = 4  # layers in a `stack` row
VARIANTS = (("loop_sync", ("loop", True)), ("mcore", ("mcore", True)), ("mcore_fp8", ("mcore", "fp8")),
            ("mcore_nosync", ("mcore", False)), ("grouped", ("grouped", False)))


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


def mcore_act(h, kind, sync):
    """The activation once over all local experts' rows; GPT-OSS's recipe recomputes it (moe_act)."""
    if kind == "swiglu":
        return act(h, kind, sync)
    return torch.utils.checkpoint.checkpoint(act, h, kind, sync, use_reentrant=False)


def experts_out(rows, w, kind, mode, sync, split, per_expert):
    """The local experts' fc1 -> activation -> fc2 on rows sorted by expert."""
    if mode == "grouped":  # one grouped kernel per pass, offsets left on the device
        offs = torch.cumsum(per_expert, 0).to(torch.int32)
        h = act(torch._grouped_mm(rows, w["fc1g"], offs=offs), kind, False)
        return torch._grouped_mm(h.contiguous(), w["fc2g"], offs=offs)
    if mode == "loop":  # the activation per expert
        return torch.cat([act(p @ w["fc1"][e], kind, sync) @ w["fc2"][e] for e, p in enumerate(rows.split(split))])
    h = mcore_act(torch.cat([p @ w["fc1"][e] for e, p in enumerate(rows.split(split))]), kind, sync)
    return torch.cat([p @ w["fc2"][e] for e, p in enumerate(h.split(split))])


def layer(x, w, cfg, variant, counts):
    hidden, experts, ffn, k, tokens, kind = cfg
    mode, sync = variant
    probs = torch.softmax((x @ w["router"]).float(), -1)
    top, idx = torch.topk(probs, k, -1)
    flat = idx.reshape(-1)
    per_expert = torch.bincount(flat, minlength=experts)
    split = per_expert.tolist() if sync else counts  # the dispatcher's device-to-host copy 
    if sync == "fp8":  # TEGroupedMLP under FP8 copies the padded split sizes back to the device
        torch.tensor(split, device=x.device)
    order = torch.argsort(flat, stable=True)
    rows = x.index_select(0, order // k)
    y = experts_out(rows, w, kind, mode, sync, split, per_expert) * top.reshape(-1)[order].unsqueeze(-1).to(x.dtype)
    return torch.zeros_like(x).index_add_(0, order // k, y), split


def weights(cfg):
    hidden, experts, ffn, k, tokens, kind = cfg
    g = torch.Generator(device="cpu").manual_seed(0)
    make = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(DEV, DT).requires_grad_()  # noqa: E731
    # one leaf per expert, as Transformer Engine's GroupedLinear holds weight0..weightN (indexing one stacked leaf
    # would make autograd write a zero tensor of all experts' size per expert in the backward); stacked copies
    # for the grouped variant
    w = {"router": make(hidden, experts), "fc1g": make(experts, hidden, 2 * ffn), "fc2g": make(experts, ffn, hidden)}
    return w | {n: [t.detach().clone().requires_grad_() for t in w[n + "g"]] for n in ("fc1", "fc2")}


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
    busy = device_busy_ms(events)
    aten = [e for e in events if e.name.startswith("aten::")]
    fwd_end = next((e.time_range.end for e in events if e.name == "fwd"), 0)
    return busy, sum(e.time_range.start < fwd_end for e in aten), sum(e.time_range.start >= fwd_end for e in aten)


def device_busy_ms(events):
    """Milliseconds in which at least one device kernel or copy ran: the union of their intervals. The device
    side of record_function annotations ("fwd", "bwd") spans idle time too and is left out."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events
                   if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and e.name not in ("fwd", "bwd"))
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        total += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return total / 1e3


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


def rms(x):
    return x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + 1e-6).to(x.dtype)


def attention(x, w, heads):
    """Pre-norm causal GQA attention with its residual (Flash/cuDNN SDPA on the GPU)."""
    q_heads, kv_heads, dim = heads
    q, k, v = (rms(x) @ w["qkv"]).split([q_heads * dim, kv_heads * dim, kv_heads * dim], -1)
    q, k, v = (t.unflatten(-1, (-1, dim)).transpose(0, 1).unsqueeze(0) for t in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return x + o.squeeze(0).transpose(0, 1).flatten(1) @ w["proj"]


def stack_step(x, ws, cfg, heads, sync, counts):
    """STACK whole layers forward, then backward."""
    for w in ws:
        x = attention(x, w, heads)
        y, _ = layer(rms(x), w, cfg, sync, counts)
        x = x + y
    x.float().square().mean().backward()


def stack_weights(cfg, heads):
    hidden, q_heads, kv_heads, dim = cfg[0], *heads
    g = torch.Generator(device="cpu").manual_seed(1)
    make = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(DEV, DT).requires_grad_()  # noqa: E731
    extra = lambda: {"qkv": make(hidden, (q_heads + 2 * kv_heads) * dim), "proj": make(q_heads * dim, hidden)}  # noqa: E731
    return [weights(cfg) | extra() for _ in range(STACK)]


KINDS = (("attention", ("flash", "fmha", "attention", "sdpa")),  # before gemm: cuDNN's SDPA names hold "sm90_"
         ("gemm", ("gemm", "nvjet", "cutlass", "sm90_", "cublas", "matmul")), ("copy", ("memcpy", "memset")))


def kernel_kinds_ms(events, layers):
    """Device milliseconds per layer by kernel kind (GEMM, attention, copy, other: element-wise, reductions,
    indexing), and the 6 costliest kernel names."""
    kinds, names = {}, {}
    for e in events:
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA or e.name in ("fwd", "bwd"):
            continue
        low = e.name.lower()
        kind = next((k for k, keys in KINDS if any(key in low for key in keys)), "other")
        ms = (e.time_range.end - e.time_range.start) / 1e3
        kinds[kind] = kinds.get(kind, 0.0) + ms / layers
        names[e.name[:70]] = names.get(e.name[:70], 0.0) + ms / layers
    top = sorted(names.items(), key=lambda kv: -kv[1])[:6]
    return {k: round(v, 3) for k, v in kinds.items()} | {"top": [[n, round(v, 3)] for n, v in top]}


def launch_us(n=2000):
    """Host microseconds to issue one in-place add and one 64x64 GEMM (no sync between calls)."""
    a, m = torch.zeros(16, device=DEV), torch.randn(64, 64, device=DEV, dtype=DT)
    out = {}
    for name, fn in (("add", lambda: a.add_(1.0)), ("mm64", lambda: m @ m)):
        for _ in range(50):
            fn()
        sync_now()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out[name] = round((time.perf_counter() - t0) / n * 1e6, 2)
        sync_now()
    return out


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        return "?"


def layer_rows(name, cfg):
    w = weights(cfg)
    x = torch.randn(cfg[4], cfg[0], device=DEV, dtype=DT)
    counts = one_step(x, w, cfg, ("loop", True), None)
    rows = []
    for variant, sync in VARIANTS:
        try:
            step = timed(lambda: one_step(x, w, cfg, sync, counts))
            fwd = timed(lambda: layer(x, w, cfg, sync, counts))
            busy, ops_fwd, ops_bwd = profiled(x, w, cfg, sync, counts)
            rows.append({"model": name, "variant": variant, "step_ms": round(step, 3), "fwd_ms": round(fwd, 3),
                         "busy_ms": round(busy, 3), "host_fwd_ms": round(host_forward_ms(x, w, cfg, sync, counts), 3),
                         "ops_fwd": ops_fwd, "ops_bwd": ops_bwd})
        except Exception as err:  # noqa: BLE001 - a variant the build lacks (grouped on an old torch) is reported
            rows.append({"model": name, "variant": variant, "error": str(err)[:200]})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows, counts


def stack_rows(name, cfg, counts):
    heads = ATTN[name]
    if SMOKE:  # heads cut 4-fold, head dim 4-fold
        heads = (heads[0] // 4, max(1, heads[1] // 4), heads[2] // 4)
    ws = stack_weights(cfg, heads)
    x = torch.randn(cfg[4], cfg[0], device=DEV, dtype=DT)
    rows = []
    for variant, sync in VARIANTS:
        try:
            fn = lambda: stack_step(x, ws, cfg, heads, sync, counts)  # noqa: E731
            step = timed(fn)
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if DEV == "cuda" else [])
            with torch.profiler.profile(activities=acts) as prof:
                fn()
                sync_now()
            busy = device_busy_ms(prof.events())
            rows.append({"model": name, "variant": variant, "layers": STACK, "step_ms": round(step, 3),
                         "busy_ms": round(busy, 3), "idle_ms_per_layer": round((step - busy) / STACK, 3),
                         "kernel_ms_per_layer": kernel_kinds_ms(prof.events(), STACK)})
        except Exception as err:  # noqa: BLE001
            rows.append({"model": name, "variant": variant, "layers": STACK, "error": str(err)[:200]})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main():
    rows, stacks = [], []
    for name, full in MODELS.items():
        cfg = smoke(full) if SMOKE else full
        layer_out, counts = layer_rows(name, cfg)
        rows += layer_out
        stacks += stack_rows(name, cfg, counts)
        if DEV == "cuda":
            torch.cuda.empty_cache()
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if DEV == "cuda" else "cpu",
           "cpu": cpu_model(), "smoke": SMOKE, "launch_us": launch_us()}
    print(json.dumps({"env": env, "rows": rows, "stack": stacks}))


if __name__ == "__main__":
    main()
