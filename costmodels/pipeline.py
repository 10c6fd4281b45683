"""Pipeline schedules: how per-stage micro-batch times add up to a step.

Notation: p stages, m micro-batches, v virtual chunks per rank (interleaved 1F1B), t_i the
forward + backward time of one micro-batch on stage i.

Sources: Narayanan et al. SC'21 section 2.2: GPipe and 1F1B take (m + p - 1) * t for uniform
stages (bubble (p-1)/m of the ideal time; 1F1B only lowers memory), interleaved 1F1B
(m + (p-1)/v) * t (bubble (p-1)/(v*m)). Non-uniform stages: the slowest stage sets the steady
state, the others add their fill and drain once: span = m * t_max + (sum_i t_i - t_max) / v,
which equals the uniform formulas when all t_i are equal. The seeds' bubble share
(p-1)/(m+p-1): p = 4, m = 4 -> 3/7; m = 16 -> 3/19.

Virtual chunks of unequal size: a rank whose n_i layers are not a multiple of v splits them as
evenly as possible (`chunk_layers`: chunks differ by at most one layer, larger first), as Megatron-Core
builds them from --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_layer_layout.py,
any count per virtual stage) and torchtitan from module_fqns_per_model_part or its
generate_llm_fqn_per_model_part (virtual stages differing by one layer). The fill and drain then pass
through each rank's largest chunk instead of t_i / v, so every rank adds the time of its extra layer
share, layer_s * (ceil(n_i / v) - n_i / v), to the bubble. Checked against the block simulation of
costmodels.schedule_timeline with per-chunk times (p = 2..8, v = 2..4, random splits): never below
the simulated span; the even-chunk formula underestimates such splits by up to 7%.

Interleaving with fewer micro-batches than stages (m < p; Megatron refuses it, torch's ScheduleInterleaved1F1B,
which torchtitan runs, accepts any m < 2p): the warm-up cannot fill every rank's v chunks, and torch's order
(torch/distributed/pipelining/schedules.py, simulated with its _schedule_visualizer at p = 8, v = 2) idles
(v p - 1 - m (v - 1)) / v micro-batch times per rank: 5.5 at m = 4 and 4 at m = 7, against (p - 1) / v = 3.5
(equal at m = p). `bubble_s` adds the difference, (p - m)(v - 1) / v, of the slowest stage's time.
"""

from __future__ import annotations


def pipeline_span_s(stage_s: list[float], num_microbatches: int, vpp: int = 1,
                    chunk_excess_s: list[float] | None = None) -> float:
    """Seconds from the first forward to the last backward of one step, compute only."""
    return num_microbatches * max(stage_s) + bubble_s(stage_s, vpp, chunk_excess_s, num_microbatches)


def bubble_s(stage_s: list[float], vpp: int = 1, chunk_excess_s: list[float] | None = None,
             num_microbatches: int | None = None) -> float:
    """Idle time of the slowest stage in one step: (sum_i t_i - t_max) / v, plus each rank's
    `chunk_excess_s` (the time its largest virtual chunk adds over t_i / v; see `chunk_excess_layers`), plus
    (p - m)(v - 1) / v of t_max when interleaving runs fewer micro-batches m than stages p (module docstring)."""
    short = few_microbatches_excess(len(stage_s), vpp, num_microbatches) * max(stage_s)
    return (sum(stage_s) - max(stage_s)) / vpp + sum(chunk_excess_s or ()) + short


def few_microbatches_excess(pp: int, vpp: int, num_microbatches: int | None) -> float:
    """Micro-batch times per rank that interleaving with fewer micro-batches m than stages p idles beyond the
    (p - 1)/v of m >= p: (p - m)(v - 1)/v (module docstring; torch's order). 0 otherwise."""
    m = num_microbatches
    return (pp - m) * (vpp - 1) / vpp if m is not None and vpp > 1 and m < pp else 0.0


def chunk_layers(layers: int, vpp: int) -> list[int]:
    """Layers of each virtual chunk of one rank, first to last: as even as possible, larger chunks
    first (Megatron --pipeline-model-parallel-layout and torchtitan module_fqns_per_model_part can
    place them so; module docstring)."""
    base, extra = divmod(layers, vpp)
    return [base + 1] * extra + [base] * (vpp - extra)


def rank_chunks(stage_layers: list[int], vpp: int, chunks: list[int] | None = None) -> list[list[int]]:
    """Each rank's virtual chunks, first to last: from `chunks` (Layout.chunk_layers: model order, entry
    j * pp + r is chunk j of rank r, as Megatron's --pipeline-model-parallel-layout lists them) when given,
    else chunk_layers of each rank's layers."""
    if chunks is None:
        return [chunk_layers(n, vpp) for n in stage_layers]
    pp = len(stage_layers)
    return [chunks[r::pp] for r in range(pp)]


def stages_of_chunks(chunks: list[int], pp: int) -> list[int]:
    """Layers per rank of virtual chunks listed in model order (rank r holds entries r, r + pp, ...)."""
    return [sum(chunks[r::pp]) for r in range(pp)]


def chunk_excess_layers(stage_layers: list[int], vpp: int, chunks: list[int] | None = None) -> list[float]:
    """Per rank, layers by which its largest chunk exceeds the even share: max chunk - n_i / v (ceil(n_i / v) -
    n_i / v for chunk_layers' split; 0 when v divides n_i evenly). Times the slowest layer's seconds, the
    rank's extra bubble."""
    return [max(sizes) - n / vpp for n, sizes in zip(stage_layers, rank_chunks(stage_layers, vpp, chunks))]


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
