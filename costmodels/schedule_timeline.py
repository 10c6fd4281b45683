"""One training step's pipeline schedule as timed blocks, for pictures (GPipe, 1F1B, interleaved).

Each rank runs its blocks in the schedule's order; a block starts when its rank is free and its
dependency is done: a forward needs the same micro-batch's forward on the previous virtual stage,
a backward the next virtual stage's backward (the last one its own forward). Orders follow
Narayanan et al. SC'21 section 2.2 (GPipe: all forwards then all backwards; 1F1B: p - s - 1
warm-up forwards, then one forward one backward; interleaved: Megatron's chunk order, warm-up
(p - s - 1) * 2 + (v - 1) * p). Communication is left out; forward takes 1/3 of a stage's time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """One forward or backward of one micro-batch chunk on one rank, seconds from the step start."""

    rank: int
    kind: str  # "F" or "B"
    microbatch: int
    chunk: int
    start_s: float
    end_s: float


def _order(schedule: str, rank: int, p: int, m: int, v: int) -> list[tuple[str, int, int]]:
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    fwd = [("F", (k // (p * v)) * p + k % p, (k // p) % v) for k in range(m * v)]
    bwd = [("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v) for k in range(m * v)]
    if v == 1:
        warm = min(p - rank - 1, m)
    else:
        warm = min((p - rank - 1) * 2 + (v - 1) * p, m * v)
    order = fwd[:warm]
    for i in range(m * v - warm):
        order += [fwd[warm + i], bwd[i]]
    return order + bwd[m * v - warm:]


def _dependency(op: tuple[str, int, int], rank: int, p: int, v: int):
    kind, mb, c = op
    if kind == "F":
        if rank > 0:
            return ("F", mb, c, rank - 1)
        return ("F", mb, c - 1, p - 1) if c > 0 else None
    if rank < p - 1:
        return ("B", mb, c, rank + 1)
    return ("B", mb, c + 1, 0) if c < v - 1 else ("F", mb, c, rank)


def simulate(schedule: str, stage_s: list[float], num_microbatches: int, vpp: int = 1) -> list[Block]:
    """Blocks of one step; stage_s[i] is one micro-batch's forward + backward on rank i."""
    p, m, v = len(stage_s), num_microbatches, (vpp if schedule == "interleaved" else 1)
    orders = [_order(schedule, r, p, m, v) for r in range(p)]
    done: dict[tuple, float] = {}
    free, pos, blocks = [0.0] * p, [0] * p, []
    while any(pos[r] < len(orders[r]) for r in range(p)):
        progressed = False
        for r in range(p):
            while pos[r] < len(orders[r]):
                op = orders[r][pos[r]]
                dep = _dependency(op, r, p, v)
                if dep is not None and dep not in done:
                    break
                dur = stage_s[r] / v * (1 / 3 if op[0] == "F" else 2 / 3)
                start = max(free[r], done[dep] if dep is not None else 0.0)
                free[r] = start + dur
                done[(op[0], op[1], op[2], r)] = free[r]
                blocks.append(Block(r, op[0], op[1], op[2], start, free[r]))
                pos[r] += 1
                progressed = True
        if not progressed:
            raise RuntimeError(f"schedule {schedule} deadlocked (p={p}, m={m}, v={v})")
    return blocks


def makespan_s(blocks: list[Block]) -> float:
    """End of the last block."""
    return max(b.end_s for b in blocks)
