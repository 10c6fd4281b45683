"""Measure per-GPU memory of real training steps of a Llama-style decoder (torch + stdlib only).

Each configuration runs in a fresh child process (clean CUDA context, allocator and peaks). The
model is plain PyTorch: embedding, L x (RMSNorm -> GQA attention with RoPE through
scaled_dot_product_attention(is_causal=True) -> residual, RMSNorm -> SwiGLU MLP -> residual), final
RMSNorm, untied output Linear; loss = cross_entropy(logits.float()) as torchtitan does. No biases.

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_memory.py --out gpu_memory_h200.csv
    python3 benchmarks/gpu/measure_memory.py --dry-run --out /tmp/t.csv   # tiny shapes on CPU

Columns are described in benchmarks/gpu/README.md.
"""
import argparse, csv, datetime, json, os, socket, subprocess, sys, time

BASE = dict(h=2048, heads=16, kv_heads=4, ffn=5632, layers=8, vocab=128256, seq=4096, mbs=2,
            mode="fp32-autocast", checkpoint=False, alloc_conf="")
BIG = dict(h=4096, heads=32, kv_heads=8, ffn=14336, layers=8, vocab=128256, seq=8192, mbs=1)
VARIANTS = [  # (name, overrides of BASE); one thing changed at a time
    ("base", {}), ("seq2048", dict(seq=2048)), ("seq8192", dict(seq=8192)),
    ("mbs1", dict(mbs=1)), ("mbs4", dict(mbs=4)), ("L4", dict(layers=4)), ("L16", dict(layers=16)),
    ("V32000", dict(vocab=32000)), ("ckpt", dict(checkpoint=True)),
    ("bf16-pure", dict(mode="bf16-pure")), ("fsdp2-ws1", dict(mode="fsdp2-ws1")),
    ("fsdp2-ws1-ckpt", dict(mode="fsdp2-ws1", checkpoint=True)),
    ("big8L", dict(BIG)), ("big8L-ckpt", dict(BIG, checkpoint=True)),
    ("base-expandable", dict(alloc_conf="expandable_segments:True")),
]
CONFIG_FIELDS = ["name", "h", "heads", "kv_heads", "head_dim", "ffn", "layers", "vocab", "seq", "mbs",
                 "mode", "checkpoint", "alloc_conf", "params"]
MEASURE_FIELDS = [
    "context_bytes", "after_first_gemm_bytes", "first_gemm_allocated_bytes",
    "first_gemm_reserved_bytes", "nccl_init_bytes",
    "static_allocated_bytes", "static_reserved_bytes", "warmup_peak_allocated_bytes",
    "warmup_peak_reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "peak_fwd_bytes",
    "peak_bwd_bytes", "peak_opt_bytes", "allocated_after_fwd_bytes", "device_used_bytes",
    "nvidia_smi_used_mib", "num_alloc_retries", "num_segments", "expandable_segments",
    "sdpa_backend", "step_time_ms", "error"]


def configs():
    """Full configurations: BASE with each variant's overrides, plus head_dim."""
    out = []
    for name, over in VARIANTS:
        cfg = dict(BASE, name=name, **over)
        cfg["head_dim"] = cfg["h"] // cfg["heads"]
        out.append(cfg)
    return out


def shrink(cfg):
    """Tiny CPU version of a configuration for --dry-run (same structure, small shapes)."""
    small = dict(cfg, h=cfg["h"] // 16, ffn=cfg["ffn"] // 16, vocab=1000, seq=cfg["seq"] // 64)
    small["head_dim"] = small["h"] // small["heads"]
    return small


# ----------------------------------------------------------------------------- model (child only)
def build_model_classes(torch):
    """Define the model classes lazily so the parent never needs to import torch."""
    nn, F = torch.nn, torch.nn.functional
    from torch.utils.checkpoint import checkpoint

    def rope(x, freqs):
        """torchtitan-style RoPE: complex multiply in fp32, result cast back to x's dtype."""
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs[None, :, None, :]).flatten(3).type_as(x)

    class RMSNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(dim))
        def forward(self, x):
            return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-5)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            h, hd = c["h"], c["head_dim"]
            self.c, self.attn_norm, self.mlp_norm = c, RMSNorm(h), RMSNorm(h)
            self.wq = nn.Linear(h, c["heads"] * hd, bias=False)
            self.wk = nn.Linear(h, c["kv_heads"] * hd, bias=False)
            self.wv = nn.Linear(h, c["kv_heads"] * hd, bias=False)
            self.wo = nn.Linear(c["heads"] * hd, h, bias=False)
            self.w1 = nn.Linear(h, c["ffn"], bias=False)
            self.w3 = nn.Linear(h, c["ffn"], bias=False)
            self.w2 = nn.Linear(c["ffn"], h, bias=False)

        def attention(self, x, freqs):
            b, s, _ = x.shape
            hd, nh, nkv = self.c["head_dim"], self.c["heads"], self.c["kv_heads"]
            q = rope(self.wq(x).view(b, s, nh, hd), freqs)
            k = rope(self.wk(x).view(b, s, nkv, hd), freqs)
            v = self.wv(x).view(b, s, nkv, hd)
            rep = nh // nkv  # repeat_kv as torchtitan: materialised copies
            k = k[:, :, :, None, :].expand(b, s, nkv, rep, hd).reshape(b, s, nh, hd)
            v = v[:, :, :, None, :].expand(b, s, nkv, rep, hd).reshape(b, s, nh, hd)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, s, nh * hd))

        def inner(self, x, freqs):
            x = x + self.attention(self.attn_norm(x), freqs)
            y = self.mlp_norm(x)
            return x + self.w2(F.silu(self.w1(y)) * self.w3(y))

        def forward(self, x, freqs):
            if self.c["checkpoint"]:  # full recompute; FSDP2 hooks stay outside the region
                return checkpoint(self.inner, x, freqs, use_reentrant=False)
            return self.inner(x, freqs)

    class Decoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c = c
            self.tok = nn.Embedding(c["vocab"], c["h"])
            self.layers = nn.ModuleList(Block(c) for _ in range(c["layers"]))
            self.norm = RMSNorm(c["h"])
            self.output = nn.Linear(c["h"], c["vocab"], bias=False)
            self.freqs = None  # complex64 RoPE table, a plain attribute made by init_weights

        def init_weights(self, device):
            """Initialise in place (works on plain tensors and FSDP2 DTensors)."""
            hd = self.c["head_dim"]
            inv = 1.0 / 10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
            ang = torch.outer(torch.arange(self.c["seq"], dtype=torch.float32), inv)
            self.freqs = torch.polar(torch.ones_like(ang), ang).to(device)
            with torch.no_grad():
                for m in self.modules():
                    if isinstance(m, (nn.Linear, nn.Embedding)):
                        nn.init.normal_(m.weight, std=0.02)
                    elif isinstance(m, RMSNorm):
                        nn.init.ones_(m.weight)

        def forward(self, tokens):
            x = self.tok(tokens)
            for layer in self.layers:
                x = layer(x, self.freqs)
            return self.output(self.norm(x))

    return Decoder


# ----------------------------------------------------------------------------- child measurement
class Mem:
    """torch.cuda memory queries; zeros on CPU so --dry-run exercises the same code."""
    def __init__(self, torch, dev):
        self.t, self.cuda = torch, dev.type == "cuda"
    def sync(self):
        if self.cuda: self.t.cuda.synchronize()
    def used(self):
        if not self.cuda: return 0
        free, total = self.t.cuda.mem_get_info()
        return total - free
    def alloc(self): return self.t.cuda.memory_allocated() if self.cuda else 0
    def reserved(self): return self.t.cuda.memory_reserved() if self.cuda else 0
    def peaks(self):
        self.sync()
        if not self.cuda: return 0, 0
        return self.t.cuda.max_memory_allocated(), self.t.cuda.max_memory_reserved()
    def reset(self):
        self.sync()
        if self.cuda: self.t.cuda.reset_peak_memory_stats()


def nvidia_smi(query):
    """One nvidia-smi --query-gpu value for GPU 0, or '' if nvidia-smi is unavailable."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
        return out.strip().splitlines()[0].strip()
    except Exception:
        return ""


def setup_device(torch, dev, mem, row, c):
    """CUDA context, first cuBLAS GEMM and (fsdp2) NCCL init, each as a device-memory delta."""
    if mem.cuda:
        torch.cuda.init()
        torch.empty(1, device=dev)
        mem.sync()
        row["context_bytes"] = mem.used()
        a = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
        (a @ a).sum().item()
        del a
        mem.sync()
        row["after_first_gemm_bytes"] = mem.used()
        row["first_gemm_allocated_bytes"] = mem.alloc()
        row["first_gemm_reserved_bytes"] = mem.reserved()
    if c["mode"] == "fsdp2-ws1":
        import torch.distributed as dist
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
        before = mem.used()
        dist.init_process_group("nccl" if mem.cuda else "gloo")
        t = torch.ones(1, device=dev)
        dist.all_reduce(t)
        mem.sync()
        row["nccl_init_bytes"] = mem.used() - before


def make_model(torch, dev, c):
    """Build on meta, (fsdp2: fully_shard layers and root), materialise on dev, init."""
    Decoder = build_model_classes(torch)
    dtype = torch.bfloat16 if c["mode"] == "bf16-pure" else torch.float32
    with torch.device("meta"):
        model = Decoder(c).to(dtype)
    params = sum(p.numel() for p in model.parameters())
    if c["mode"] == "fsdp2-ws1":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
        mesh = init_device_mesh(dev.type, (1,))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
        fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=True)
    model.to_empty(device=dev)
    model.init_weights(dev)
    return model, params


def child(c, device):
    """Run one configuration and return its measurement row (dict)."""
    import torch
    F = torch.nn.functional
    dev = torch.device(device)
    mem, row = Mem(torch, dev), {}
    setup_device(torch, dev, mem, row, c)
    model, row["params"] = make_model(torch, dev, c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True, fused=False)
    g = torch.Generator(device="cpu").manual_seed(0)
    tokens = torch.randint(0, c["vocab"], (c["mbs"], c["seq"] + 1), generator=g).to(dev)
    inp, tgt = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    use_autocast = c["mode"] == "fp32-autocast"

    def forward():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_autocast):
            logits = model(inp)
        return F.cross_entropy(logits.flatten(0, 1).float(), tgt.flatten(0, 1))

    def step():
        forward().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    mem.reset(); step()  # warm-up: creates optimizer states, autotunes kernels
    row["warmup_peak_allocated_bytes"], row["warmup_peak_reserved_bytes"] = mem.peaks()
    row["static_allocated_bytes"], row["static_reserved_bytes"] = mem.alloc(), mem.reserved()
    pa, pr, times = 0, 0, []
    for _ in range(3):  # whole-step peaks
        mem.reset(); t0 = time.perf_counter(); step(); mem.sync()
        times.append(time.perf_counter() - t0)
        a, r = mem.peaks(); pa, pr = max(pa, a), max(pr, r)
    row.update(peak_allocated_bytes=pa, peak_reserved_bytes=pr,
               step_time_ms=round(1e3 * sorted(times)[1], 2))
    phase = dict(peak_fwd_bytes=0, peak_bwd_bytes=0, peak_opt_bytes=0, allocated_after_fwd_bytes=0)
    for _ in range(3):  # per-phase peaks (reset between phases)
        mem.reset(); loss = forward(); mem.sync()
        phase["allocated_after_fwd_bytes"] = max(phase["allocated_after_fwd_bytes"], mem.alloc())
        phase["peak_fwd_bytes"] = max(phase["peak_fwd_bytes"], mem.peaks()[0])
        mem.reset(); loss.backward(); del loss
        phase["peak_bwd_bytes"] = max(phase["peak_bwd_bytes"], mem.peaks()[0])
        mem.reset(); opt.step()
        phase["peak_opt_bytes"] = max(phase["peak_opt_bytes"], mem.peaks()[0])
        opt.zero_grad(set_to_none=True)
    row.update(phase)
    mem.sync()
    row["device_used_bytes"] = mem.used()
    if mem.cuda:
        row["nvidia_smi_used_mib"] = nvidia_smi("memory.used")
        row["num_alloc_retries"] = torch.cuda.memory_stats().get("num_alloc_retries", "")
        segs = torch.cuda.memory._snapshot()["segments"]
        row["num_segments"] = len(segs)
        row["expandable_segments"] = any(s.get("is_expandable", False) for s in segs)
        row["gpu_name"] = torch.cuda.get_device_name()
        q = torch.zeros(1, c["heads"], 256, c["head_dim"], device=dev, dtype=torch.bfloat16)
        names = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn"}
        row["sdpa_backend"] = names.get(int(torch._fused_sdp_choice(q, q, q, is_causal=True)), "?")
    if c["mode"] == "fsdp2-ws1":
        torch.distributed.destroy_process_group()
    return row


def child_main(c, device):
    """Child entry: print one RESULT line with the row or the error text."""
    try:
        row = child(c, device)
    except Exception as e:  # OOM, NCCL or FSDP2 failures are recorded, not fatal
        row = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    print("RESULT " + json.dumps(row), flush=True)


# ----------------------------------------------------------------------------- parent
def run_config(c, device, timeout):
    """Run one configuration in a fresh python process; return the merged row."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if c["alloc_conf"]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = c["alloc_conf"]
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(c), "--device", device]
    row = dict(c)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        if lines:
            row.update(json.loads(lines[-1][7:]))
        else:
            row["error"] = f"rc={p.returncode}: {p.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        row["error"] = f"timeout after {timeout}s"
    if device == "cpu":  # no device memory on CPU: leave the columns empty, not zero
        row.update({k: "" for k in MEASURE_FIELDS if k.endswith("_bytes")})
    return row


def environment():
    """Environment of the measurement (parent never initialises CUDA)."""
    env = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "python": sys.version.split()[0],
           "gpu": nvidia_smi("name"), "driver": nvidia_smi("driver_version"),
           "memory_total_mib": nvidia_smi("memory.total")}
    try:
        import torch
        env.update(torch=torch.__version__, cuda=torch.version.cuda)
        try:
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else ""
        except Exception as e:
            env["nccl"] = f"unknown: {e}"
        env["parent_cuda_initialized"] = torch.cuda.is_initialized()  # must stay False
    except Exception as e:
        env["torch"] = f"unavailable: {e}"
    env["nvidia_smi_used_mib_before_runs"] = nvidia_smi("memory.used")
    return env


def gib(x):
    return f"{x / 2**30:7.2f}" if isinstance(x, (int, float)) and x != "" else "      -"


def print_table(rows):
    """Readable GiB table on stdout."""
    cols = ["static_allocated_bytes", "allocated_after_fwd_bytes", "peak_fwd_bytes", "peak_bwd_bytes",
            "peak_opt_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes"]
    print(f"{'name':16s} {'params':>13s} " + " ".join(f"{k.split('_bytes')[0][:10]:>10s}" for k in cols)
          + "   ms  error")
    for r in rows:
        print(f"{r['name']:16s} {r.get('params', 0):13,d} "
              + " ".join(f"{gib(r.get(k, '')):>10s}" for k in cols)
              + f" {r.get('step_time_ms', ''):>6} {r.get('error', '')[:60]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gpu_memory.csv")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on CPU (syntax/shape check)")
    ap.add_argument("--configs", help="JSON list of configuration dicts (default: built-in list)")
    ap.add_argument("--only", help="comma-separated configuration names")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per configuration")
    ap.add_argument("--budget", type=int, default=330, help="total seconds; later configs skipped")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child_main(json.loads(a.child), a.device)
    cfgs = json.loads(a.configs) if a.configs else configs()
    if a.only:
        cfgs = [c for c in cfgs if c["name"] in a.only.split(",")]
    if a.dry_run:
        cfgs, a.device = [shrink(c) for c in cfgs], "cpu"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    env = environment()
    env["configs"] = cfgs
    print(json.dumps(env), flush=True)
    with open(os.path.splitext(a.out)[0] + ".env.json", "w") as f:
        json.dump(env, f, indent=1)
    rows, t0 = [], time.time()
    for c in cfgs:
        if time.time() - t0 > a.budget:
            rows.append(dict(c, error="skipped: time budget"))
        else:
            rows.append(run_config(c, a.device, a.timeout))
        print(f"[{time.time() - t0:6.1f}s] " + json.dumps(rows[-1]), flush=True)
        with open(a.out, "w", newline="") as f:  # rewritten after every row: partial runs survive
            w = csv.DictWriter(f, CONFIG_FIELDS + MEASURE_FIELDS, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    print_table(rows)


if __name__ == "__main__":
    main()
