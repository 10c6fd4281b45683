"""Megatron's --cp-comm-type (one type, or one per layer) and --hierarchical-context-parallel-sizes read into the one
context-parallel algorithm parplan's Layout prices (Layout.cp_comm: p2p, a2a or allgather, the same for every layer).

Sources: megatron-core 0.19.2 megatron/training/arguments.py line 3054 (`--cp-comm-type`, nargs='+', default p2p:
"p2p, a2a, allgather or a2a+p2p ... separated types for each layer"), lines 562-567 (the hierarchical sizes must
multiply to --context-parallel-size; a2a+p2p needs them); megatron/core/transformer/transformer_config.py lines
987-1000 (cp_comm_type: "p2p", "all_gather", "a2a", "a2a+p2p"; a2a+p2p runs "A2A communications in low-level CP
groups (e.g., via NVLink), and P2P communications in high-level CP groups (e.g., via IBLink)") and lines 2778-2783
(a per-layer list has one entry per transformer layer); megatron/core/model_parallel_config.py line 103
(hierarchical_context_parallel_sizes: first the a2a group's size, then the p2p group's); transformer_layer.py line
364 (layer i runs entry i). How parplan prices each: costmodels/layer_comm.py cp_s.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Optional

from planner.errors import UserError

TYPES = {"p2p": "p2p", "a2a": "a2a", "allgather": "allgather", "all_gather": "allgather", "a2a+p2p": "p2p"}
TIE_ORDER = ("a2a", "allgather", "p2p")  # a tie goes to an exposed collective (see priced)
FLAG = "--cp-comm-type"
SIZES = "--hierarchical-context-parallel-sizes"


def types(a) -> list[str]:
    """The types as written (one, or one per layer), each checked against Megatron's names."""
    text = a.str(FLAG, "p2p") or ""
    found = text.replace(",", " ").split()
    bad = [t for t in found if t not in TYPES]
    if bad or not found:
        raise UserError(f"{FLAG} {text[:60]!r}: Megatron runs p2p, a2a, allgather (all_gather) or a2a+p2p, one type "
                        "or one per layer")
    return found


def hierarchy(a) -> Optional[list[int]]:
    """--hierarchical-context-parallel-sizes as numbers (the a2a group's size first, then the p2p group's)."""
    text = a.str(SIZES)
    if text is None:
        return None
    words = text.replace(",", " ").split()
    if not words or not all(w.isdigit() and 0 < len(w) < 8 and int(w) > 0 for w in words):
        raise UserError(f"{SIZES} {text[:60]!r}: expected whole numbers (the a2a group's size, then the p2p group's)")
    return [int(w) for w in words]


def check(a, layers: int, cp: int) -> list[str]:
    """The types, refused where Megatron refuses them: a per-layer list whose length is not the layer count (with
    cp > 1), a2a+p2p without hierarchical sizes, sizes whose product is not the cp degree."""
    found, sizes = types(a), hierarchy(a)
    if cp > 1 and len(found) > 1 and len(found) != layers:
        raise UserError(f"{FLAG} lists {len(found)} types for {layers} layers: Megatron needs one type, or one per "
                        "layer (megatron-core 0.19.2 transformer_config.py line 2780)")
    if "a2a+p2p" in found and sizes is None:
        raise UserError(f"{FLAG} a2a+p2p needs {SIZES} (the a2a group's size, then the p2p group's; Megatron "
                        "asserts it: megatron-core 0.19.2 arguments.py line 566)")
    if sizes is not None and math.prod(sizes) != cp:
        raise UserError(f"{SIZES} {' '.join(map(str, sizes))}: their product {math.prod(sizes)} is not "
                        f"--context-parallel-size {cp} (Megatron asserts it: arguments.py line 564)")
    return found


def priced(a, layers: int, cp: int) -> str:
    """The one algorithm priced for every layer.

    a2a+p2p is priced as p2p. After its all-to-all inside the inner group of `a` ranks each rank holds a/cp of the
    sequence for 1/a of the heads, so the K/V chunk its ring passes has the bytes of a p2p ring's chunk, and it
    passes it beside the attention core as p2p does; what p2p prices differently is (cp - 1) ring steps instead
    of (p - 1), and no inner all-to-all. a2a would be further off: it prices an all-to-all over all cp ranks,
    across the outer (scale-out) groups and fully exposed, where a2a+p2p keeps the all-to-all on the inner,
    fast group. Memory does not depend on the algorithm in parplan's model (costmodels.memory), so only the time
    is approximate.

    A per-layer list is priced as its majority type (a2a+p2p counted as p2p): most layers are priced as they run,
    and the error is at most the minority's share of the per-layer difference. A tie goes to a2a, then allgather,
    which parplan prices fully exposed, rather than to p2p, which it hides behind attention: a tie does not
    understate the step time."""
    return _pick(Counter(TYPES[t] for t in check(a, layers, cp)))[0]


def _pick(counts: Counter) -> tuple[str, str]:
    """(the priced type of a count per priced type, why it was chosen): the majority, a tie by TIE_ORDER."""
    pick = max(counts, key=lambda t: (counts[t], -TIE_ORDER.index(t)))
    tie = sum(1 for n in counts.values() if n == counts[pick]) > 1
    return pick, ("a tie, given to the type priced fully exposed so the time is not understated" if tie
                  else "the majority")


def warnings(a, cp: int) -> list[str]:
    """One line per approximation priced(): a2a+p2p read as p2p, a mixed per-layer list read as one type."""
    if cp <= 1:
        return []
    found = types(a)
    counts = Counter(found)
    out = []
    if len(counts) > 1:
        listed = ", ".join(f"{n} {t}" for t, n in counts.items())
        pick, why = _pick(Counter(TYPES[t] for t in found))
        out.append(f"{FLAG} per layer ({listed}): parplan prices one algorithm for every layer; {pick} ({why}). "
                   "Memory does not depend on it; the cp time of the other layers is approximate")
    if "a2a+p2p" in counts:
        out.append(_hierarchical_note(hierarchy(a) or [cp], cp))
    return out


def _hierarchical_note(sizes: list[int], cp: int) -> str:
    inner, outer = sizes[0], math.prod(sizes[1:]) if len(sizes) > 1 else 1
    return (f"{FLAG} a2a+p2p ({SIZES} {' '.join(map(str, sizes))}: all-to-all inside groups of {inner}, a p2p ring "
            f"over {outer}): priced as p2p, a ring over all {cp} context-parallel ranks. The fit is unaffected (memory "
            f"does not depend on the cp algorithm); the cp time is approximate: the ring's {cp - 1} steps (not "
            f"{outer - 1}) run beside attention, and the {inner}-way all-to-all, exposed, is not priced, so the cp time "
            "is understated where attention hides the ring (long sequences) and overstated where it does not")
