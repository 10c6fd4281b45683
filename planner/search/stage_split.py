"""The stage split parplan chooses for one fixed layout, when the user gives none and pp does not
divide the layers (Llama 3.1 405B: 126 layers on pp=16; BLOOM-176B: 70 on pp=12; Qwen3-235B: 94 on 8).

The split is the search's own (planner.search): the candidate's integer table (planner.search.costing),
every split priced where there are few (planner.search.brute), else CP-SAT over its stage sizes alone
(planner.search.cpsat), so the embedding's states on the first stage,
the output head and loss on the last, memory and the uneven virtual chunks' bubble all count. When
no split fits in memory, the fastest split regardless of memory is taken (the estimate then says
it does not fit). Among splits of equal step time (within TIE_REL: differences far below the time
model's own error, whose best held-out band is about 3%, are not differences), one the frameworks
state most simply is preferred: lighter first and last stages around equal middle stages (Megatron's
--decoder-first/last-pipeline-num-layers, torchtitan's first/last_stage_less_layers; the Llama 3
paper, section 3.3.2: "we reduce one Transformer layer each from the first and the last stages").
costmodels stays free of the solver: this fills Layout.stage_layers before costmodels resolves it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout, LayoutError, resolve_layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.search import cpsat
from planner.search.brute import best_split
from planner.search.costing import Coster, first_objective
from planner.search.space import Candidate
from planner.search.tables import Table, stage_counts

TIME_LIMIT_S = 20.0
# up to this many splits, every one is priced (planner.search.brute: exact, ~0.1 s for 5,000): CP-SAT's
# model of one table's max-over-stages objective can wander for its whole time limit on a few hundred
# splits (39 layers on pp=3 with vpp=3, 496 splits: 20 s, not proven)
ENUMERATE_MAX_SPLITS = 5_000
TIE_REL = 1e-3  # step times within 0.1% of the optimum count as equal (module docstring)


def needs_split(model: ModelSpec, layout: Layout) -> bool:
    """True when the layout gives neither stage_layers nor chunk_layers (which sets them) and pp does not
    divide the layers (otherwise the uniform split stands, as before)."""
    return (layout.stage_layers is None and layout.chunk_layers is None and layout.pp > 1
            and model.num_layers % layout.pp != 0)


def complete(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, layout: Layout) -> tuple[Layout, bool]:
    """(layout with stage_layers, whether parplan chose them); unchanged when `needs_split` is False."""
    if not needs_split(model, layout):
        return layout, False
    return layout.model_copy(update={"stage_layers": choose(model, cluster, train, layout)}), True


def choose(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, layout: Layout,
           time_limit_s: float = TIME_LIMIT_S) -> list[int]:
    """Layers per pipeline rank for `layout` (its stage_layers ignored); raises LayoutError for a
    layout that breaks a rule other than the split."""
    L, pp, v = model.num_layers, layout.pp, layout.vpp
    if L < pp * v:
        raise LayoutError(f"num_layers={L} is fewer than pp*vpp={pp}*{v}={pp * v}: every virtual stage needs a layer")
    resolved = resolve_layout(model, cluster, train, layout.model_copy(update={"stage_layers": even_split(L, pp)}))
    table = Coster(model, cluster, train).table(candidate(resolved))
    found = _solve(model, table, time_limit_s)
    if found is None:  # nothing fits: the fastest split regardless of memory
        table = dataclasses.replace(table, cap=_no_limit(table, L))
        found = _solve(model, table, time_limit_s)
    value, stages = found
    return simplest_equal(model, table, value, stages)


def even_split(num_layers: int, pp: int) -> list[int]:
    """Layers as even as possible, the extra ones on the middle-to-last stages (a placeholder)."""
    base, extra = divmod(num_layers, pp)
    return [base + (1 if i >= pp - extra else 0) for i in range(pp)]


def candidate(lay: Layout) -> Candidate:
    """The search's Candidate of a resolved layout (same field names)."""
    names = [f.name for f in dataclasses.fields(Candidate) if f.name not in ("stage_layers", "fixed_stages")]
    return Candidate(**{name: getattr(lay, name) for name in names})


def _no_limit(table: Table, num_layers: int) -> int:
    """A memory capacity no split can exceed, table units."""
    return max(m.fixed + max(m.dense, m.moe) * num_layers for m in table.memory) + 1


def split_count(num_layers: int, pp: int, vpp: int) -> int:
    """How many stage splits there are (planner.search.brute.splits): compositions of L - pp (vpp - 1)
    into pp positive parts."""
    return math.comb(num_layers - pp * (vpp - 1) - 1, pp - 1)


def _solve(model: ModelSpec, table: Table, time_limit_s: float) -> Optional[tuple[int, list[int]]]:
    """(objective, stage_layers) of the best split of one table, or None when none fits: every split
    priced where there are few (ENUMERATE_MAX_SPLITS), else CP-SAT with one worker (the same answer on
    every run)."""
    if split_count(model.num_layers, table.layout.pp, table.layout.vpp) <= ENUMERATE_MAX_SPLITS:
        return best_split(model, table)
    first = first_objective(model, table)
    hint = (0, first[1], first[0]) if first is not None else None
    sol = cpsat.solve(model, [table], time_limit_s, workers=1, hint=hint)
    if sol is None:
        return None if first is None else first
    return sol.objective, list(sol.stage_layers)


def ends_splits(num_layers: int, pp: int, vpp: int):
    """Every split [a, m, ..., m, b] (equal middle stages, each stage at least vpp layers), the most
    even first (smallest total distance of a and b from m)."""
    if pp == 2:
        out = [[a, num_layers - a] for a in range(vpp, num_layers - vpp + 1)]
        return sorted(out, key=lambda s: abs(s[0] - s[1]))
    out = []
    for mid in range(vpp, num_layers // (pp - 2) + 1):
        rest = num_layers - mid * (pp - 2)  # ends within mid of the middle stages' size
        out += [[a] + [mid] * (pp - 2) + [rest - a] for a in range(max(vpp, rest - 2 * mid), min(rest - vpp, 2 * mid) + 1)]
    return sorted(out, key=lambda s: (abs(s[0] - s[1]) + abs(s[-1] - s[1]), s[0] > s[-1]))


def simplest_equal(model: ModelSpec, table: Table, value: int, stages: list[int], rel: float = TIE_REL) -> list[int]:
    """The first of `ends_splits` (whole virtual chunks first) whose step time equals the optimum
    `value` (within `rel`), else `stages` itself."""
    v = table.layout.vpp
    shaped = ends_splits(model.num_layers, table.layout.pp, v)
    shaped.sort(key=lambda s: any(n % v for n in s))  # stable: evenness order kept within each class
    for split in shaped:
        got = table.objective(stage_counts(model, split, v))
        if got is not None and got <= value * (1 + rel):
            return split
    return stages
