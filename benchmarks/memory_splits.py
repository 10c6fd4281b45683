"""Which published memory peaks fit the memory model's free numbers and which are held out.

benchmarks/calibrate_memory.py fits only on these rows; benchmarks/memory_accuracy.py reports every
other row as held out. Declared by row, before fitting:
- Megatron fragmentation: the two Megatron logs that print both max allocated and max reserved
  (their measured ratio alone; the rows' own predictions never enter the fit).
- torch caching-allocator fragmentation: four torchtitan reserved peaks of the 2024-12 H100 table
  (8B FSDP on 8 and 128 GPUs, eager; 8B at 32k tokens; 70B tp8).
- device terms (CUDA context, NCCL buffers per communicator): four FlagPerf nvidia-smi peaks
  (Llama 3 8B tp4 pp2 and tp8 on A800, tp2 dp4 on H100; the Qwen MoE on A800).
"""

from __future__ import annotations

MEGATRON_FRAGMENTATION = frozenset({"mlm-dsv3proxy-14l-tp1pp4ep16-stage0", "mlm-dsv3proxy-14l-tp1pp4ep16-stage2"})
TORCH_FRAGMENTATION = frozenset({"tt-l31-8b-fsdp8-eager", "tt-l31-8b-fsdp128-eager", "tt-l31-8b-fsdp8-cp1-s32k",
                                 "tt-l31-70b-fsdp32-tp8"})
DEVICE = frozenset({"fp-llama3-8b-a800-pp2-dp1-tp4", "fp-llama3-8b-a800-pp1-dp1-tp8", "fp-llama3-8b-h100-pp1-dp4-tp2",
                    "fp-qwenmoe8e-a800-tp1-pp2-dp4-fp16"})
FIT = MEGATRON_FRAGMENTATION | TORCH_FRAGMENTATION | DEVICE


def is_fitted(case_id: str) -> bool:
    """Whether a case (or its ':reserved' twin) is in a fitting set."""
    return case_id.split(":")[0] in FIT
