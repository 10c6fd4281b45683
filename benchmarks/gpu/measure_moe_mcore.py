"""Megatron-Core's own MoE layer at the Megatron-Bridge recipes' per-rank shapes: kernel time by kind, host time,
and the device's idle time (issue 35; docs/moe.md "Host time, measured" asked for this in place of a replica).

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_moe_mcore.py OUT_DIR [MODEL ...] [--grouped]

The device machine has PyTorch but no Transformer Engine, so this runs megatron-core 0.19.2's *local* MoE path:
the real `MoELayer`, `TopKRouter` (unfused, as GPT-OSS's recipe runs it), the all-to-all dispatcher (ep 1, one
process: the all-to-alls are size-1 copies; they are priced apart) with its unfused permute, and `SequentialMLP`
(one `MLP` per local expert: the same one cuBLAS GEMM per expert and pass that Transformer Engine 2.9's
multi-stream grouped GEMM issues, but from Python). The activations are megatron-core's own fused
(torch.compile) `bias_swiglu` / `weighted_bias_quick_geglu` with GPT-OSS's offset 1 and clamp 7.

EP is folded into the expert count: at ep 1 with E_local experts and the recipe's top-k, each expert receives the
rows it would at the recipe's EP (Qwen3-30B-A3B EP16: 8 local experts of 128, top-8, 4096 tokens -> 4096 rows
each; GPT-OSS-120B EP8: 16 of 128, top-4 -> 1024 rows; DeepSeek-V3 EP64 tp2: 4 of 256, 16384 rows -> 4096
each, top-k cut to 4 so it does not exceed the local count). Routers are forced balanced, as the recipes force.

Per model, `LAYERS` MoE layers in sequence, median of 10 steps after 3 (the first compiles the activation):
step_ms (wall, forward + backward, synchronised), busy_ms (union of kernel intervals in one profiled step),
host_fwd_ms (host time to issue the forward), kernel_ms by kind per layer, and forward phase spans (CUDA events
around route / preprocess / dispatch / experts / combine). Writes OUT_DIR/moe_mcore.json and one gzipped
chrome trace per model.
"""
import gzip
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
LAYERS = 4
REPS, WARM = 10, 3
# name: (hidden, local experts, expert ffn, top-k, tokens, activation, bias)
MODELS = {
    "qwen3-30b-a3b": (2048, 8, 768, 8, 4096, "swiglu", False),
    "gpt-oss-120b": (2880, 16, 2880, 4, 4096, "qgeglu", True),
    "deepseek-v3": (7168, 4, 2048, 4, 4096, "swiglu", False),
}
RESULT = {"env": {}, "models": {}, "errors": []}


def save():
    with open(os.path.join(OUT, "moe_mcore_grouped.json" if GROUPED else "moe_mcore.json"), "w") as fh:
        json.dump(RESULT, fh, indent=1)


def init_megatron():
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
    model_parallel_cuda_manual_seed(123)


def make_config(hidden, experts, ffn, topk, act, bias, plain=False):
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.fusions.fused_bias_geglu import quick_gelu
    kw = dict(num_layers=LAYERS, hidden_size=hidden, num_attention_heads=16, ffn_hidden_size=ffn,
              num_moe_experts=experts, moe_ffn_hidden_size=ffn, moe_router_topk=topk,
              moe_token_dispatcher_type="alltoall", moe_grouped_gemm=False, moe_router_dtype="fp32",
              moe_router_load_balancing_type="none" if act == "qgeglu" else "aux_loss",
              moe_aux_loss_coeff=0.0 if act == "qgeglu" else 1e-3, moe_router_force_load_balancing=True,
              gated_linear_unit=True, add_bias_linear=bias, bias_activation_fusion=True,
              bf16=True, params_dtype=torch.bfloat16, perform_initialization=False,
              normalization="RMSNorm")
    if act == "qgeglu":
        kw.update(activation_func=quick_gelu, glu_linear_offset=1.0, activation_func_clamp_value=7.0)
    else:
        kw.update(activation_func=F.silu)
    if plain:  # fallback: no aux loss, no fused activation
        kw.update(moe_router_load_balancing_type="none", moe_aux_loss_coeff=0.0, bias_activation_fusion=False)
    return TransformerConfig(**kw)


def build_layers(cfg, experts):
    from megatron.core.models.backends import LocalSpecProvider
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec_for_backend
    builder = get_moe_module_spec_for_backend(LocalSpecProvider(), num_experts=experts, moe_grouped_gemm=False)
    layers = []
    for i in range(LAYERS):
        m = builder(config=cfg)
        if hasattr(m, "set_layer_number"):
            m.set_layer_number(i + 1)
        if GROUPED:
            m.experts = GroupedExperts(cfg, experts)
        elif cfg.add_bias_linear:  # megatron-core 0.19.2 local path adds the fc2 bias in place into a custom
            for e in m.experts.local_experts:  # Function's view at tp 1 (autograd refuses): one copy, as a clone
                fc2 = e.linear_fc2.forward
                e.linear_fc2.forward = lambda *a, _f=fc2, **k: (lambda o: (o[0].clone(), *o[1:]))(_f(*a, **k))
        layers.append(m.cuda().to(torch.bfloat16).train())
    return layers


class GroupedExperts(torch.nn.Module):
    """`--grouped`: TEGroupedMLP's order of work without Transformer Engine: the split sizes to the host
    (`tokens_per_expert.tolist()`, its sync), one grouped GEMM per pass (torch._grouped_mm, offsets on the device),
    megatron-core's own fused activation with the routing probabilities once over all rows (TEGroupedMLP's
    bias_act_func). Expert biases are left out (Transformer Engine adds them in its GEMM's epilogue)."""

    def __init__(self, cfg, experts):
        super().__init__()
        h, f = cfg.hidden_size, cfg.moe_ffn_hidden_size
        self.cfg = cfg
        self.fc1 = torch.nn.Parameter(torch.randn(experts, h, 2 * f, dtype=torch.bfloat16) * 0.02)
        self.fc2 = torch.nn.Parameter(torch.randn(experts, f, h, dtype=torch.bfloat16) * 0.02)

    def forward(self, x, tokens_per_expert, probs):
        from megatron.core.fusions.fused_bias_geglu import weighted_bias_quick_geglu_impl
        from megatron.core.fusions.fused_bias_swiglu import weighted_bias_swiglu_impl
        tokens_per_expert.tolist()
        offs = torch.cumsum(tokens_per_expert.to(x.device), 0).to(torch.int32)
        mid = torch._grouped_mm(x, self.fc1, offs=offs)
        p = probs.unsqueeze(-1)
        if self.cfg.glu_linear_offset:
            mid = weighted_bias_quick_geglu_impl(mid, None, p, False, self.cfg.glu_linear_offset,
                                                 self.cfg.activation_func_clamp_value)
        else:
            mid = weighted_bias_swiglu_impl(mid, None, p, False)
        return torch._grouped_mm(mid.contiguous(), self.fc2, offs=offs), None


GROUPED = "--grouped" in sys.argv


PHASES = ("route", "preprocess", "dispatch", "routed_experts_compute", "combine")
SPANS = []  # (phase, start event, end event) of the traced forward


def instrument(layer):
    for name in PHASES:
        fn = getattr(layer, name)

        def wrapped(*a, _fn=fn, _name=name, **k):
            if not SPANS_ON[0]:
                return _fn(*a, **k)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            s.record()
            out = _fn(*a, **k)
            e.record()
            SPANS.append((_name, s, e, time.perf_counter() - t0))
            return out
        setattr(layer, name, wrapped)


SPANS_ON = [False]


def step(layers, x):
    h = x
    for m in layers:
        out = m(h)
        h = out[0] if isinstance(out, tuple) else out
    h.float().pow(2).mean().backward()


def kind(name):
    n = name.lower()
    if any(s in n for s in ("gemm", "cutlass", "nvjet", "xmma", "cublas", "wgmma")):
        return "gemm"
    if "memcpy" in n or "memset" in n:
        return "copy"
    if any(s in n for s in ("sort", "topk", "radix", "scan", "cumsum", "nonzero", "index", "scatter", "gather",
                            "masked", "bincount", "histogram", "unique", "select")):
        return "index_sort"
    if "triton" in n:
        return "compiled"
    if "reduce" in n:
        return "reduce"
    return "elementwise"


def ops_by_launcher(events: list, layers: int = LAYERS, top: int = 40) -> dict:
    """Kernel ms per layer by the CPU ops that launched them (the outermost three, ' > '-joined), heaviest first:
    each kernel's runtime launch (same correlation id) is matched to the cpu_op events enclosing it on its thread.
    '?' = launched outside any op the profiler recorded (cuBLAS and Triton launches from C++)."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    ops = {}
    for e in events:
        if e.get("cat") == "cpu_op" and "dur" in e:
            ops.setdefault(e["tid"], []).append(e)
    out = {}
    for k in events:
        if k.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") or "dur" not in k:
            continue
        r = launches.get(k.get("args", {}).get("correlation"))
        name = "?"
        if r is not None:
            enc = sorted((o for o in ops.get(r["tid"], []) if o["ts"] <= r["ts"] <= o["ts"] + o["dur"]),
                         key=lambda o: o["ts"])
            name = " > ".join(o["name"] for o in enc[:3])[:110] or "?"
        out[name] = out.get(name, 0.0) + k["dur"] / 1e3 / layers
    return dict(sorted(out.items(), key=lambda kv: -kv[1])[:top])


def profile_step(layers, x, trace_path):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(layers, x)
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)
    with open(trace_path, "rb") as fh, gzip.open(trace_path + ".gz", "wb") as gz:
        gz.write(fh.read())
    os.remove(trace_path)
    with gzip.open(trace_path + ".gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    kern = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    by_kind, count = {}, {}
    for e in kern:
        k = kind(e["name"])
        by_kind[k] = by_kind.get(k, 0.0) + e["dur"] / 1e3 / LAYERS
        count[k] = count.get(k, 0) + 1
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in kern)
    busy, end = 0.0, -1e30
    for s, t in spans:
        if t > end:
            busy += t - max(s, end)
            end = t
    top = {}
    for e in kern:
        top[e["name"][:90]] = top.get(e["name"][:90], 0.0) + e["dur"] / 1e3 / LAYERS
    top = dict(sorted(top.items(), key=lambda kv: -kv[1])[:25])
    return {"busy_ms": busy / 1e3, "kernel_ms_per_layer": by_kind, "kernels_per_step": count,
            "top_kernels_ms_per_layer": top, "ops_ms_per_layer": ops_by_launcher(events),
            "wall_traced_ms": (spans[-1][1] - spans[0][0]) / 1e3}


def measure(name, shape, plain=False):
    hidden, experts, ffn, topk, tokens, act, bias = shape
    cfg = make_config(hidden, experts, ffn, topk, act, bias, plain)
    layers = build_layers(cfg, experts)
    for m in layers:
        instrument(m)
    x = torch.randn(tokens, 1, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    t0 = time.perf_counter()
    for _ in range(WARM):
        step(layers, x)
    torch.cuda.synchronize()
    shape_row = dict(hidden=hidden, local_experts=experts, ffn=ffn, topk=topk, tokens=tokens, act=act, bias=bias)
    row = {"plain_fallback": plain, "shape": shape_row, "warm_s": time.perf_counter() - t0}
    steps, fwds, host_fwd = [], [], []
    for _ in range(REPS):
        torch.cuda.synchronize()
        t = time.perf_counter()
        step(layers, x)
        torch.cuda.synchronize()
        steps.append((time.perf_counter() - t) * 1e3)
    for _ in range(REPS):
        torch.cuda.synchronize()
        t = time.perf_counter()
        h = x
        for m in layers:
            out = m(h)
            h = out[0] if isinstance(out, tuple) else out
        host_fwd.append((time.perf_counter() - t) * 1e3)
        torch.cuda.synchronize()
        fwds.append((time.perf_counter() - t) * 1e3)
        del h, out
    row.update(step_ms=statistics.median(steps), fwd_ms=statistics.median(fwds),
               host_fwd_ms=statistics.median(host_fwd))
    SPANS.clear()
    SPANS_ON[0] = True
    h = x
    for m in layers:
        out = m(h)
        h = out[0] if isinstance(out, tuple) else out
    torch.cuda.synchronize()
    SPANS_ON[0] = False
    phase = {}
    for p, s, e, host_s in SPANS:
        d = phase.setdefault(p, {"gpu_span_ms": 0.0, "host_ms": 0.0})
        d["gpu_span_ms"] += s.elapsed_time(e) / LAYERS
        d["host_ms"] += host_s * 1e3 / LAYERS
    row["fwd_phases_per_layer"] = phase
    del h, out
    tag = "_grouped" if GROUPED else ""
    row.update(profile_step(layers, x, os.path.join(OUT, f"trace_{name}{tag}.json")))
    row["idle_ms_per_layer"] = (row["step_ms"] - row["busy_ms"]) / LAYERS
    row["step_ms_per_layer"] = row["step_ms"] / LAYERS
    del layers
    torch.cuda.empty_cache()
    return row


def launch_us():
    a = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(2000):
        a.add_(1.0)
    host = (time.perf_counter() - t) / 2000 * 1e6
    torch.cuda.synchronize()
    return host


def main():
    os.makedirs(OUT, exist_ok=True)
    import platform
    RESULT["env"] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                     "cpu": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d")}
    try:
        import megatron.core
        RESULT["env"]["megatron_core"] = getattr(megatron.core, "__version__", "?")
        init_megatron()
        RESULT["env"]["launch_us"] = launch_us()
    except Exception:
        RESULT["errors"].append(traceback.format_exc())
        save()
        raise
    save()
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    for name, shape in MODELS.items():
        if only and name not in only:
            continue
        try:
            RESULT["models"][name] = measure(name, shape)
            print(name, json.dumps({k: v for k, v in RESULT["models"][name].items()
                                    if k not in ("top_kernels_ms_per_layer",)}), flush=True)
        except Exception:
            RESULT["errors"].append(name + ": " + traceback.format_exc())
            print(RESULT["errors"][-1], flush=True)
            torch.cuda.empty_cache()
            try:
                RESULT["models"][name] = measure(name, shape, plain=True)
                print(name, "plain", RESULT["models"][name]["step_ms_per_layer"], flush=True)
            except Exception:
                RESULT["errors"].append(name + " plain: " + traceback.format_exc())
                print(RESULT["errors"][-1], flush=True)
        save()


if __name__ == "__main__":
    main()
