"""Median CUDA-event time of a GPU callable, shared by the standalone device scripts beside this file (they run as
`python3 benchmarks/gpu/SCRIPT.py`, so this folder is on sys.path)."""
import statistics

import torch


def median_ms(fn, reps: int = 20, warm: int = 5) -> float:
    """Median ms of `reps` timed calls of `fn` after `warm` untimed ones, each between two CUDA events."""
    for _ in range(warm):
        fn()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end))
    return statistics.median(out)
