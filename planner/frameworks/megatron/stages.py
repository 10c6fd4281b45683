"""Megatron's pipeline stage flags read back into per-rank layer counts and virtual stages.

Source: megatron/training/arguments.py (--num-layers-per-virtual-pipeline-stage,
--num-virtual-stages-per-pipeline-rank, --decoder-first/last-pipeline-num-layers,
--pipeline-model-parallel-layout, at most one of the virtual-stage flags; the account-for flags:
planner.frameworks.megatron.account_split) and
benchmarks/data/launch_formats.md, section "Megatron-LM". Used by planner.frameworks.megatron.flags.layout_data.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from costmodels.pipeline import rank_chunks, stages_of_chunks
from planner.errors import UserError
from planner.frameworks.megatron import account_split as account

if TYPE_CHECKING:
    from planner.frameworks.megatron.flags import MegatronArgs

VIRTUAL_FLAGS = ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                 "--pipeline-model-parallel-layout")


def stage_split(a: MegatronArgs, layers: int, pp: int,
                strict: bool = True) -> tuple[Optional[list[int]], int, Optional[list[int]]]:
    """(layers per pipeline rank or None for an even split, virtual stages per rank, layers per virtual stage in
    model order where a layout string or the account-for flags size them otherwise than
    costmodels.pipeline.chunk_layers, else None). strict: refuse, as Megatron-LM does, layers that no flag splits
    over pp (Megatron-DeepSpeed's pipeline partitions them itself)."""
    given = [f for f in VIRTUAL_FLAGS if a.has(f)]
    if len(given) > 1:
        raise UserError(f"{' and '.join(given)}: Megatron accepts only one of them")
    account.refuse_conflicts(a)
    if a.has("--pipeline-model-parallel-layout"):
        return layout_stages(a.str("--pipeline-model-parallel-layout"), layers, pp)
    vpp = _vpp(a, layers, pp)
    stages, chunks = account.account_split(a, layers, pp, vpp)
    if stages is not None:
        return stages, vpp, chunks
    stages = uneven_stages(a, layers, pp)
    if stages is None and strict and layers % pp:
        raise UserError(account.refusal(layers, pp, 0, 0, vpp, a.int("--num-layers") == layers))
    return stages, vpp, None


def _vpp(a: MegatronArgs, layers: int, pp: int) -> int:
    """Virtual stages per rank: --num-virtual-stages-per-pipeline-rank, or the ranks' layers (the embedding and loss
    counted where the account-for flags say so: megatron-core 0.19.2 arguments.py lines 923-943) over
    --num-layers-per-virtual-pipeline-stage; 1 without either."""
    if a.has("--num-layers-per-virtual-pipeline-stage"):
        per = a.int("--num-layers-per-virtual-pipeline-stage")
        n = layers + sum(account.extra(a))
        if n % pp or (n // pp) % per:
            counted = f" ({n} with {' and '.join(account.given(a))})" if n != layers else ""
            raise UserError(f"--num-layers-per-virtual-pipeline-stage {per}: layers per pipeline rank "
                            f"({layers}{counted}/{pp}) must be a whole multiple of it; Megatron would run with "
                            f"{account.fixes(layers, pp)}")
        return n // pp // per
    return a.int("--num-virtual-stages-per-pipeline-rank", 1)


def uneven_stages(a: MegatronArgs, layers: int, pp: int) -> Optional[list[int]]:
    first = a.int("--decoder-first-pipeline-num-layers")
    last = a.int("--decoder-last-pipeline-num-layers")
    if first is None and last is None:
        return None
    rest = layers - (first or 0) - (last or 0)
    middle = pp - (first is not None) - (last is not None)
    if bool(rest) != bool(middle) or (middle and rest % middle) or rest < 0:
        raise UserError(f"--decoder-first-pipeline-num-layers {first}, --decoder-last-pipeline-num-layers {last}: "
                        f"the other {rest} layers do not split evenly over {middle} middle stages (pp={pp}); "
                        f"Megatron would run with {account.fixes(layers, pp)}")
    inner = [rest // middle] * middle if middle else []
    return ([first] if first is not None else []) + inner + ([last] if last is not None else [])


MAX_LAYOUT_CHARS = 1_000_000  # an expanded --pipeline-model-parallel-layout: far above any real model's


def _repeat(part: str, times: str, text: str) -> str:
    """`part * times` of a layout string, refused past MAX_LAYOUT_CHARS ('t*99999999999' would fill memory)."""
    if len(times) > 9 or len(part) * int(times) > MAX_LAYOUT_CHARS:
        raise UserError(f"--pipeline-model-parallel-layout {text[:40]!r}: {part[:20]}*{times[:20]} expands past "
                        f"{MAX_LAYOUT_CHARS} characters")
    return part * int(times)


def layout_stages(text: str, layers: int, pp: int) -> tuple[list[int], int, Optional[list[int]]]:
    """Per-rank layer counts, vpp and, where they are not chunk_layers' even split (larger chunks first), the
    layers of each virtual stage in model order, from a --pipeline-model-parallel-layout string."""
    flat = text.replace(",", "").replace(" ", "")
    for pattern in (r"\(([^)]+)\)\*([0-9]+)", r"(.)\*([0-9]+)"):
        flat = re.sub(pattern, lambda m: _repeat(m.group(1), m.group(2), text), flat)
    chunks = flat.split("|")
    bad = set(flat) - set("ELtm|")
    if bad or len(chunks) % pp or flat.count("E") != 1 or flat.count("L") != 1 or not chunks[0].startswith("E") \
            or not chunks[-1].endswith("L") or flat.count("t") != layers:
        raise UserError(f"--pipeline-model-parallel-layout {text!r}: needs E first, L last, {layers} t's and a "
                        f"multiple of pp={pp} stages separated by '|'")
    vpp = len(chunks) // pp
    sizes = [chunk.count("t") for chunk in chunks]
    stages = stages_of_chunks(sizes, pp)
    return stages, vpp, (None if vpp == 1 or rank_chunks(stages, vpp) == rank_chunks(stages, vpp, sizes) else sizes)
