"""One Llama 3 8B layer, forward and forward+backward, eager PyTorch on one GPU: what a real layer costs, to set
beside parplan's per-layer price. Data: benchmarks/data/measured/gpu_layer_h100.csv (provenance in its .env.json).

The layer is torchtitan's llama3 block in plain PyTorch: RMSNorm (F.rms_norm), separate q/k/v projections (GQA 32/8
heads of 128), RoPE as a complex multiply in fp32 (theta 500,000), repeat_kv materialised, causal
F.scaled_dot_product_attention, output projection, residual; RMSNorm, SwiGLU MLP w2(silu(w1 x) * w3 x), residual.
bf16 weights (no fp32 master copy, no optimizer), seq 8192, micro-batch 1, no recompute, no torch.compile. Four
layers run back to back; per attention backend (flash = FlashAttention-2 in PyTorch, cuDNN): 3 warm-up calls and
10 timed with CUDA events, forward alone and forward + backward (the weight gradients accumulate into .grad as in
gradient accumulation). Printed per layer.

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
    main()
