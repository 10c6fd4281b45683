"""The oracle: plain enumeration of every candidate table and every stage split.

Used by the tests to check the CP-SAT optimum on small instances; exponential in the number of
pipeline stages (C(L - p(v-1) - 1, p - 1) splits per candidate), so only for small models.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterator, Optional

from costmodels.model_spec import ModelSpec
from planner.search.tables import Table, stage_counts


def splits(num_layers: int, pp: int, vpp: int) -> Iterator[list[int]]:
    """Every way to put num_layers on pp stages, each with at least vpp layers (one per virtual chunk)."""
    units = num_layers - pp * (vpp - 1)  # stage sizes less (vpp - 1): compositions into positive parts
    for cuts in combinations(range(1, units), pp - 1):
        bounds = (0, *cuts, units)
        yield [b - a + vpp - 1 for a, b in zip(bounds, bounds[1:])]


def best_split(model: ModelSpec, table: Table) -> Optional[tuple[int, list[int]]]:
    """(objective, stage_layers) of the best split of one candidate, or None if none fits."""
    best = None
    fixed = table.layout.fixed_stages
    for stages in [list(fixed)] if fixed else splits(model.num_layers, table.layout.pp, table.layout.vpp):
        value = table.objective(stage_counts(model, stages, table.layout.vpp))
        if value is not None and (best is None or value < best[0]):
            best = (value, stages)
    return best


def brute_force(model: ModelSpec, tables: list[Table]) -> Optional[tuple[int, Table, list[int]]]:
    """(objective, table, stage_layers) of the best candidate and split, or None if nothing fits."""
    best = None
    for table in tables:
        found = best_split(model, table)
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], table, found[1])
    return best
