"""Pipeline schedules: how per-stage micro-batch times add up to a step.

Notation: p stages, m micro-batches, v virtual chunks per rank (interleaved 1F1B), t_i the
forward + backward time of one micro-batch on stage i.

Sources: Narayanan et al. SC'21 section 2.2: GPipe and 1F1B take (m + p - 1) * t for uniform
stages (bubble (p-1)/m of the ideal time; 1F1B only lowers memory), interleaved 1F1B
(m + (p-1)/v) * t (bubble (p-1)/(v*m)). Non-uniform stages: the slowest stage sets the steady
state, the others add their fill and drain once: span = m * t_max + (sum_i t_i - t_max) / v,
which equals the uniform formulas when all t_i are equal. The seeds' bubble share
(p-1)/(m+p-1): p = 4, m = 4 -> 3/7; m = 16 -> 3/19.
"""

from __future__ import annotations


def pipeline_span_s(stage_s: list[float], num_microbatches: int, vpp: int = 1) -> float:
    """Seconds from the first forward to the last backward of one step, compute only."""
    slowest = max(stage_s)
    return num_microbatches * slowest + (sum(stage_s) - slowest) / vpp


def bubble_s(stage_s: list[float], vpp: int = 1) -> float:
    """Idle time of the slowest stage in one step: (sum_i t_i - t_max) / v."""
    return (sum(stage_s) - max(stage_s)) / vpp


def bubble_share(pp: int, num_microbatches: int, vpp: int = 1) -> float:
    """Bubble as a share of the whole span for uniform stages: (p-1)/(v*m + p - 1)."""
    return (pp - 1) / (vpp * num_microbatches + pp - 1)


def bubble_ratio(pp: int, num_microbatches: int, vpp: int = 1) -> float:
    """Bubble relative to the ideal (bubble-free) time: (p-1)/(v*m) (Narayanan SC'21)."""
    return (pp - 1) / (vpp * num_microbatches)


def p2p_transfers(pp: int, num_microbatches: int, vpp: int = 1) -> int:
    """Activation/gradient sends on the critical path: 2 per chunk boundary crossing, v*m + p - 1 slots."""
    if pp <= 1:
        return 0
    return 2 * (vpp * num_microbatches + pp - 1)
