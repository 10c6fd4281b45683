"""One Llama 3 8B layer, forward and forward+backward, eager PyTorch on one GPU: what a real layer costs, to set
beside parplan's per-layer price. Data: benchmarks/data/measured/gpu_layer_h100.csv (provenance in its .env.json).

The layer is torchtitan's llama3 block in plain PyTorch: RMSNorm (F.rms_norm), separate q/k/v projections (GQA 32/8
heads of 128), RoPE as a complex multiply in fp32 (theta 500,000), repeat_kv materialised, causal
F.scaled_dot_product_attention, output projection, residual; RMSNorm, SwiGLU MLP w2(silu(w1 x) * w3 x), residual.
bf16 weights (no fp32 master copy, no optimizer), seq 8192, micro-batch 1, no recompute, no torch.compile. Four
layers run back to back; per attention backend (flash = FlashAttention-2 in PyTorch, cuDNN): 3 warm-up calls and
10 timed with CUDA events, forward alone and forward + backward (the weight gradients accumulate into .grad as in
gradient accumulation). Printed per layer.

`parts` times the layer's pieces alone: causal SDPA forward and forward + backward on q, k, v [1, 32, 8192, 128]
per backend, and the layer's 7 projection GEMMs on 8,192 rows (7 forward products, 14 backward: dY @ W and
dY^T @ X), 20 calls after 3 warm-ups. Layer - GEMMs - attention = the element-wise kernels and launches.

The 2026-11-26 run sent the same code inline, in a compact form (the device command carries no files).
"""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

H, HEADS, KV_HEADS, FFN, SEQ, LAYERS, HEAD_DIM = 4096, 32, 8, 14336, 8192, 4, 128
DEV, BF16 = "cuda", torch.bfloat16


def weight(n_in: int, n_out: int) -> torch.Tensor:
    return (torch.randn(n_out, n_in, device=DEV, dtype=BF16) * 0.02).requires_grad_()


def norm_weight() -> torch.Tensor:
    return torch.ones(H, device=DEV, dtype=BF16, requires_grad=True)


def make_layer() -> dict:
    kv = KV_HEADS * HEAD_DIM
    return dict(q=weight(H, H), k=weight(H, kv), v=weight(H, kv), o=weight(H, H), w1=weight(H, FFN),
                w3=weight(H, FFN), w2=weight(FFN, H), n1=norm_weight(), n2=norm_weight())


def rope_table() -> torch.Tensor:
    inv = 5e5 ** (-torch.arange(0, HEAD_DIM, 2, device=DEV).float() / HEAD_DIM)
    angles = torch.outer(torch.arange(SEQ, device=DEV).float(), inv)
    return torch.polar(torch.ones_like(angles), angles)


def rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], HEAD_DIM // 2, 2))
    return torch.view_as_real(xc * table[None, :, None]).flatten(3).type_as(x)


def layer(x: torch.Tensor, p: dict, table: torch.Tensor) -> torch.Tensor:
    y = F.rms_norm(x, (H,), p["n1"], 1e-5)
    q = rope((y @ p["q"].t()).view(1, SEQ, HEADS, HEAD_DIM), table)
    k = rope((y @ p["k"].t()).view(1, SEQ, KV_HEADS, HEAD_DIM), table)
    v = (y @ p["v"].t()).view(1, SEQ, KV_HEADS, HEAD_DIM)
    rep = HEADS // KV_HEADS
    k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    x = x + o.transpose(1, 2).reshape(1, SEQ, H) @ p["o"].t()
    y = F.rms_norm(x, (H,), p["n2"], 1e-5)
    return x + (F.silu(y @ p["w1"].t()) * (y @ p["w3"].t())) @ p["w2"].t()


def timed_ms(fn, n: int = 10) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def parts() -> None:
    s, width = SEQ, HEADS * HEAD_DIM
    q, k, v = (torch.randn(1, HEADS, s, HEAD_DIM, device=DEV, dtype=BF16, requires_grad=True) for _ in range(3))
    grad = torch.randn(1, HEADS, s, HEAD_DIM, device=DEV, dtype=BF16)

    def attention() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        with sdpa_kernel(backend):
            fwd, both = timed_ms(attention, 20), timed_ms(lambda: attention().backward(grad), 20)
        print(f"attn {name} fwd_ms {fwd:.3f} fwd_bwd_ms {both:.3f} exec_tflops {3.5 * 2 * s * s * width / both / 1e9:.1f}")
    kv = KV_HEADS * HEAD_DIM
    shapes = [(H, H), (H, kv), (H, kv), (H, H), (H, FFN), (H, FFN), (FFN, H)]  # (k, n) of each projection
    inputs = {k: torch.randn(s, k, device=DEV, dtype=BF16) for k in (H, FFN)}
    weights = [torch.randn(n, k, device=DEV, dtype=BF16) for k, n in shapes]
    grads = [torch.randn(s, n, device=DEV, dtype=BF16) for _, n in shapes]

    def forward() -> None:
        for (k, _), w in zip(shapes, weights):
            inputs[k] @ w.t()

    def backward() -> None:
        for (k, _), w, dy in zip(shapes, weights, grads):
            dy @ w
            dy.t() @ inputs[k]

    fwd, bwd = timed_ms(forward, 20), timed_ms(backward, 20)
    flops = 3 * 2 * s * sum(k * n for k, n in shapes)
    print(f"gemm fwd_ms {fwd:.3f} bwd_ms {bwd:.3f} fwd_bwd_ms {fwd + bwd:.3f} tflops {flops / (fwd + bwd) / 1e9:.1f}")


def main() -> None:
    torch.manual_seed(0)
    params, table = [make_layer() for _ in range(LAYERS)], rope_table()
    x0 = torch.randn(1, SEQ, H, device=DEV, dtype=BF16, requires_grad=True)
    grad_out = torch.randn(1, SEQ, H, device=DEV, dtype=BF16)

    def run(backward: bool) -> None:
        x = x0
        for p in params:
            x = layer(x, p, table)
        if backward:
            x.backward(grad_out)

    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        with sdpa_kernel(backend):
            fwd, both = timed_ms(lambda: run(False)), timed_ms(lambda: run(True))
        print(f"layer {name} fwd_ms {fwd / LAYERS:.2f} fwd_bwd_ms {both / LAYERS:.2f}", flush=True)
    print(torch.__version__, torch.cuda.get_device_name())


if __name__ == "__main__":
    import sys

    parts() if "parts" in sys.argv[1:] else main()
