"""Megatron-Core's unfused token permute and unpermute, alone, at the recipes' per-rank shapes (costmodels.moe_compute;
docs/moe.md measured them inside megatron-core 0.19.2's MoELayer on an H200: gpu_moe_mcore_h200.json).

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_unpermute.py > unpermute_GPU.json     # one GPU, about 10 s

The calls are moe_utils.permute / unpermute's without --moe-permute-fusion: the permute is
`tokens.index_select(0, sorted_indices)`, whose backward is an index_add_ into a zeroed (T, h) tensor (atomic
adds); the unpermute is `zeros(T, h).scatter_add_(0, sorted_indices[:, None].expand(-1, h), rows * probs)`, whose
backward is a gather with the same expanded index. Per shape (T tokens, top-k, h; P = T k rows, each token sent to
k distinct experts, rows sorted by expert): median ms of 20 timed calls after 5 (CUDA events) for each kernel, and a
contiguous copy of the P rows (the HBM rate the fused kernels run near). `rows_gb` = P h 2 bytes / 1e9.
"""
import json

import torch

from cuda_timing import median_ms

DEV = "cuda" if torch.cuda.is_available() else "cpu"

SHAPES = {"qwen3-30b-a3b": (4096, 8, 2048, 128), "gpt-oss-120b": (4096, 4, 2880, 128),
          "deepseek-v3": (2048, 8, 7168, 256)}  # T, k, h, experts (DeepSeek-V3: tp2 with SP halves T)


def timed_ms(fn):
    """median_ms (cuda_timing), rounded to 0.1 us."""
    return round(median_ms(fn), 4)


def sorted_indices(tokens, k, experts):
    """Token index of each routed row, rows sorted by expert (moe_utils.permute's sorted_indices)."""
    choice = torch.rand(tokens, experts, device=DEV).topk(k, dim=1).indices  # k distinct experts per token
    expert_of_row = choice.reshape(-1)
    token_of_row = torch.arange(tokens, device=DEV).repeat_interleave(k)
    return token_of_row[expert_of_row.argsort(stable=True)]


def row(name, shape):
    t, k, h, experts = shape
    x = torch.randn(t, h, device=DEV, dtype=torch.bfloat16)
    idx = sorted_indices(t, k, experts)
    rows = x.index_select(0, idx)
    probs = torch.rand(rows.shape[0], 1, device=DEV, dtype=torch.bfloat16)
    wide = idx.unsqueeze(1).expand(-1, h)
    return {"model": name, "tokens": t, "topk": k, "hidden": h, "rows_gb": round(rows.numel() * 2 / 1e9, 4),
            "permute_index_select": timed_ms(lambda: x.index_select(0, idx)),
            "permute_bwd_index_add": timed_ms(lambda: torch.zeros_like(x).index_add_(0, idx, rows)),
            "unpermute_scatter_add": timed_ms(lambda: torch.zeros_like(x).scatter_add_(0, wide, rows * probs)),
            "unpermute_bwd_gather": timed_ms(lambda: x.gather(0, wide)),
            "copy_rows": timed_ms(lambda: rows.clone())}


def main():
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "rows": [row(name, shape) for name, shape in SHAPES.items()]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
