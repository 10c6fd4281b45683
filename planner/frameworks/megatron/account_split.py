"""Megatron's --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split read into the
layers each pipeline rank (and virtual stage) builds, and the flags that would fix a split Megatron refuses.

Source: megatron-core 0.19.2 megatron/core/transformer/transformer_block.py get_num_layers_to_build (lines
70-190): with either flag (and no --decoder-first/last-pipeline-num-layers) the embedding, the loss, or both count
as one layer each: n = layers + e + l must divide by pp (line 150), every rank holds n/pp, split into vpp
virtual stages of n/pp/vpp (line 161), and the first virtual stage of the first rank builds one layer fewer for the
embedding (line 178), the last virtual stage of the last rank one fewer for the loss (line 184).
megatron/core/transformer/transformer_config.py lines 1923-1933 and 1936-1953 refuse the flags beside
--decoder-first/last-pipeline-num-layers and beside --pipeline-model-parallel-layout; megatron/training/arguments.py
lines 928-935 (--num-layers-per-virtual-pipeline-stage counts them too) and 957-964 (without the flags nor an
uneven first/last stage: "Number of layers should be divisible by the pipeline-model-parallel size").
"""

from __future__ import annotations

from typing import Optional

from costmodels.pipeline import rank_chunks, stages_of_chunks
from planner.errors import UserError

EMBEDDING = "--account-for-embedding-in-pipeline-split"
LOSS = "--account-for-loss-in-pipeline-split"
FIRST, LAST = "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"
PP = "--pipeline-model-parallel-size"
SOURCE = "megatron-core 0.19.2 transformer_block.py get_num_layers_to_build"


def extra(a) -> tuple[int, int]:
    """(1 when the embedding counts as a layer, 1 when the loss does)."""
    return int(a.has(EMBEDDING)), int(a.has(LOSS))


def given(a) -> list[str]:
    return [flag for flag in (EMBEDDING, LOSS) if a.has(flag)]


def refuse_conflicts(a) -> None:
    """Megatron refuses the account-for flags beside an uneven first/last stage or a layout string."""
    others = [f for f in (FIRST, LAST, "--pipeline-model-parallel-layout") if a.has(f)]
    if given(a) and others:
        raise UserError(f"{' and '.join(given(a))} cannot be given with {' and '.join(others)}: Megatron refuses them "
                        "together (megatron-core 0.19.2 transformer_config.py lines 1923-1953); keep one way of "
                        "shaping the split")


def account_split(a, layers: int, pp: int, vpp: int) -> tuple[Optional[list[int]], Optional[list[int]]]:
    """(layers per rank, layers per virtual stage in model order where they differ from chunk_layers' split) under
    the account-for flags; (None, None) without them or with pp == 1 (one stage builds every layer)."""
    e, l = extra(a)
    if not (e or l) or pp == 1:
        return None, None
    n = layers + e + l
    if n % pp or (n // pp) % vpp:
        raise UserError(refusal(layers, pp, e, l, vpp, a.int("--num-layers") == layers))
    chunks = [n // pp // vpp] * (pp * vpp)
    chunks[0] -= e
    chunks[-1] -= l
    if min(chunks) < 0:
        raise UserError(f"{' and '.join(given(a))}: a virtual stage of {n // pp // vpp} layer(s) cannot also hold the "
                        f"embedding or loss ({SOURCE}: 'Not enough layers')")
    stages = stages_of_chunks(chunks, pp)
    same = vpp == 1 or rank_chunks(stages, vpp) == rank_chunks(stages, vpp, chunks)
    return stages, None if same else chunks


def refusal(layers: int, pp: int, e: int, l: int, vpp: int = 1, named: bool = True) -> str:
    """Why Megatron refuses this split, and the flags that would make one it accepts. named: the layer count is the
    script's --num-layers (else --model's)."""
    counted = [name for name, on in (("the embedding", e), ("the loss", l)) if on]
    what = (f"--num-layers {layers}" if named else f"{layers} layers (--model's)") + (f" + {' and '.join(counted)} counted as a layer = {layers + e + l}" if counted else "")
    per = f" into {vpp} virtual stages per rank" if vpp > 1 and (layers + e + l) % pp == 0 else ""
    return (f"{what} cannot be split evenly over {PP} {pp}{per}: Megatron refuses this ({SOURCE}; "
            f"arguments.py lines 928-964). It would run with {fixes(layers, pp, vpp)}")


def fixes(layers: int, pp: int, vpp: int = 1) -> str:
    """The Megatron flags that give an accepted split of `layers` over `pp` ranks (and vpp virtual stages)."""
    out = []
    for e, l in ((1, 1), (1, 0), (0, 1), (0, 0)):
        n = layers + e + l
        if n % pp == 0 and (n // pp) % vpp == 0 and n // pp // vpp >= max(e, l):
            flags = [f for f, on in ((EMBEDDING, e), (LOSS, l)) if on]
            out.append(" ".join(flags) if flags else f"an even split of {n // pp} per rank (none of these flags)")
    uneven = _uneven(layers, pp, vpp)
    if uneven:
        out.append(f"{FIRST} {uneven[0]} {LAST} {uneven[1]} (without the account-for flags)")
    return "; or ".join(out) if out else f"another {PP} or --num-layers"


def _uneven(layers: int, pp: int, vpp: int) -> Optional[tuple[int, int]]:
    """(first, last) stage sizes around even middle stages, as close to layers/pp as they can be; None for pp < 2."""
    if pp < 2:
        return None
    if pp == 2:
        first = layers // 2
        ok = min(first, layers - first) >= 1 and first % vpp == 0 and (layers - first) % vpp == 0
        return (first, layers - first) if ok else None
    for middle in sorted(range(1, layers + 1), key=lambda m: abs(m - layers / pp)):
        rest = layers - middle * (pp - 2)
        first, last = rest // 2, rest - rest // 2
        if first >= 1 and middle % vpp == 0 and first % vpp == 0 and last % vpp == 0:
            return first, last
    return None
