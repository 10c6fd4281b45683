"""Element-wise kernels on strided views against the same bytes on contiguous tensors, one GPU: is their rate set by
the SMs (issue-bound) or by HBM? (costmodels/strided.py; measured first inside Megatron-Core's MoE layer on an H200,
benchmarks/data/measured/gpu_moe_mcore_h200.json.) Run it on GPUs that share SMs and clock but not HBM (H100,
H200): an issue-bound rate is the same on both.

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu/measure_strided.py > strided_GPU.json     # one GPU, about 10 s

Tensor: GPT-OSS-120B's fc1 output at one EP rank, (16384, 2 x 2880) bf16. Views: `chunk` = input.chunk(2, -1)[0]
(Megatron-Core's halves, row stride 2f), `interleaved` = input[..., ::2] (Hugging Face GptOss's gate, element
stride 2), `contiguous` = a fresh (16384, 2880) tensor. Ops: clamp (read 1, write 1 unit), le (read 1, write a
0.5 bool mask), where(mask, view, 0) (read 1.5, write 1), add of two views (read 2, write 1). Per op and view:
median of 20 timed launches after 5 (CUDA events), bytes moved and TB/s. Also a device-to-device copy of the
whole tensor (HBM rate) and the GPU's SM count and clock read after the runs.
"""
import json
import subprocess

import torch

from cuda_timing import median_ms

ROWS, F = 16384, 2880
UNIT = ROWS * F * 2  # one f-wide bf16 pass


def views(x):
    return {"chunk": x.chunk(2, -1)[0], "interleaved": x[..., ::2], "contiguous": x[:, :F].contiguous()}


def main():
    x = torch.randn(ROWS, 2 * F, device="cuda", dtype=torch.bfloat16)
    other = views(torch.randn(ROWS, 2 * F, device="cuda", dtype=torch.bfloat16))
    rows = []
    for name, v in views(x).items():
        mask = (v <= 7.0).contiguous()
        ops = {"clamp": (lambda: v.clamp(-7.0, 7.0), 2.0), "le": (lambda: v <= 7.0, 1.5),
               "where": (lambda: torch.where(mask, v, 0.0), 2.5), "add": (lambda: v + other[name], 3.0)}
        for op, (fn, units) in ops.items():
            ms = median_ms(fn)
            rows.append({"view": name, "op": op, "ms": round(ms, 4), "units": units,
                         "tb_per_s": round(units * UNIT / ms / 1e9, 3)})
    ms = median_ms(lambda: x.clone())
    rows.append({"view": "whole", "op": "clone", "ms": round(ms, 4), "units": 4.0,
                 "tb_per_s": round(4 * UNIT / ms / 1e9, 3)})
    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,power.limit", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "sm_count": props.multi_processor_count,
                      "clocks_sm_max_sm_power": smi, "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
