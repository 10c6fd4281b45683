"""DeepSpeed's pipeline partitioning, mirrored: which transformer layers each stage gets.

Source: DeepSpeed 0.19.8 deepspeed/runtime/pipe/module.py PipelineModule._partition_layers (methods
"uniform", "parameters", "type:<regex>"; the regex is searched in each layer spec's class name) and
deepspeed/runtime/utils.py partition_balanced (the linear-partition dynamic program, ported below
with its tie-breaking). The layer specs assumed are Megatron-DeepSpeed's GPTModelPipe order:
[embedding, L transformer layers, output head]; "type:transformer|embedding" then counts the
embedding and the (tied, EmbeddingPipe) head as one layer each, as BLOOM-176B's launch did
(--pp-partition-method 'type:transformer|embedding', 70 layers on 12 stages: 5, 6, ..., 6, 5).
"uniform" and "parameters" depend on the model code's other specs and sizes and are not offered.
Used by the exporter (planner.frameworks.deepspeed.export) and by `check` of a ds_config.json (planner.files.native).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from planner.errors import UserError

# method -> what it weighs (for the export's notes)
PARTITIONS = {
    "type:transformer": "type:transformer balances the transformer layers alone.",
    "type:transformer|embedding": "type:transformer|embedding counts the embedding and the output head as one layer "
                                  "each (the regex must match the head's class, e.g. Megatron-DeepSpeed's tied "
                                  "EmbeddingPipe).",
}


VECTOR_FROM = 200_000  # n^2 x parts steps past which the dynamic program runs on numpy arrays (imported then)


def partition_balanced(weights: list[int], parts: int) -> list[int]:
    """Boundaries (parts + 1 indices) minimising the largest minus the smallest part's weight:
    deepspeed.runtime.utils.partition_balanced, same loops and ties (the last k of equal cost wins).
    Large instances (Llama 3.1 405B's 128 specs on 64 stages: a second in the loops) run the same program
    column by column on numpy arrays (_balanced_arrays), which gives the same boundaries."""
    n = len(weights)
    if n <= parts:
        return [min(p, n) for p in range(parts + 1)]
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    pos = _balanced_arrays(prefix, parts) if n * n * parts > VECTOR_FROM else _balanced_loops(prefix, parts)
    bounds = [n]
    for j in range(parts, 0, -1):
        bounds.append(int(pos[bounds[-1]][j]))
    return bounds[::-1]


def _balanced_loops(prefix: list[int], parts: int) -> list[list[int]]:
    """DeepSpeed's loops: pos[i][j], where the j-th part of the best partition of the first i weights starts."""
    n, inf = len(prefix) - 1, float("inf")
    hi = [[inf] * (parts + 1) for _ in range(n + 1)]
    lo = [[inf] * (parts + 1) for _ in range(n + 1)]
    cost = [[inf] * (parts + 1) for _ in range(n + 1)]
    pos = [[0] * (parts + 1) for _ in range(n + 1)]
    hi[0][0] = cost[0][0] = 0
    for i in range(1, n + 1):
        for j in range(1, min(i, parts) + 1):
            for k in range(i):
                part = prefix[i] - prefix[k]
                top, bottom = max(hi[k][j - 1], part), min(lo[k][j - 1], part)
                if cost[i][j] >= top - bottom:
                    cost[i][j], hi[i][j], lo[i][j], pos[i][j] = top - bottom, top, bottom, k
    return pos


def _balanced_arrays(prefix: list[int], parts: int):
    """The loops' pos, a column j at a time (column j reads only column j - 1, at k < i, so the order of
    the loops does not matter): for each i, the last k of least cost among those whose column j - 1 is
    finite (an infinite one is replaced by any finite one in the loops, and one always exists for i >= j)."""
    import numpy as np

    n, inf = len(prefix) - 1, np.inf
    pre = np.asarray(prefix, dtype=np.float64)
    part = pre[:, None] - pre[None, :]  # part[i, k]: weights k..i-1
    valid = np.arange(n + 1)[None, :] < np.arange(n + 1)[:, None]  # k < i
    hi, lo = np.full(n + 1, inf), np.full(n + 1, inf)
    hi[0] = 0.0
    pos = np.zeros((n + 1, parts + 1), dtype=np.int64)
    rows = np.arange(n + 1)
    for j in range(1, parts + 1):
        top, bottom = np.maximum(hi[None, :], part), np.minimum(lo[None, :], part)
        cost = np.where(valid & np.isfinite(hi)[None, :], top - bottom, inf)
        k = n - np.argmin(cost[:, ::-1], axis=1)  # the last k of least cost
        reach = rows >= j  # rows i < j have no partition into j parts
        pos[:, j] = np.where(reach, k, 0)
        hi = np.where(reach, top[rows, k], inf)
        lo = np.where(reach, bottom[rows, k], inf)
    return pos


def ds_split(method: str, layers: int, pp: int) -> list[int]:
    """Transformer layers per stage that `method` (a PARTITIONS key) gives for specs
    [embedding, layers x transformer, head]."""
    ends = 1 if method == "type:transformer|embedding" else 0
    bounds = partition_balanced([ends] + [1] * layers + [ends], pp)
    return [sum(1 for i in range(a, b) if 1 <= i <= layers) for a, b in zip(bounds, bounds[1:])]


def ds_stages(cfg: dict, path: Path, layers: int, pp: int) -> Optional[list[int]]:
    """stage_layers from ds_config.json's pipeline.partition when it names a PARTITIONS method
    (as parplan's export writes it), else None (an even split)."""
    method = (cfg.get("pipeline") or {}).get("partition")
    if pp <= 1 or method not in PARTITIONS:
        return None
    split = ds_split(method, layers, pp)
    if min(split) < 1:
        raise UserError(f"{path}: pipeline.partition={method!r} leaves a stage of {pp} without transformer layers")
    return split
