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


def partition_balanced(weights: list[int], parts: int) -> list[int]:
    """Boundaries (parts + 1 indices) minimising the largest minus the smallest part's weight:
    deepspeed.runtime.utils.partition_balanced, same loops and ties (the last k of equal cost wins)."""
    n, inf = len(weights), float("inf")
    if n <= parts:
        return [min(p, n) for p in range(parts + 1)]
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
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
    bounds = [n]
    for j in range(parts, 0, -1):
        bounds.append(pos[bounds[-1]][j])
    return bounds[::-1]


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
