"""Ordering pairs: runs on the same hardware and batch whose measured step times differ by >= 10%.

A planner ranks layouts; the ranking is right when, for every such pair, the faster measured run
is also predicted faster. Pairs are formed within the public measured runs (same GPU profile and
count, same model, same tokens per step: benchmarks/measured_data.same_problem_key) and, reported
apart, within vTrain's single- and multi-node sweeps (same GPU count, model and batch).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import splits
from predict import predict_s, prepared
from measured_data import same_problem_key
from reference_data import vtrain

import hardware_profiles as hp

MIN_GAP = 1.10


@dataclass(frozen=True)
class Run:
    """A run with its measured and predicted step time."""

    label: str
    key: tuple
    measured_s: float
    predicted_s: float


def pairs(runs: list[Run]) -> list[tuple[Run, Run]]:
    """Every pair with the same key whose measured times differ by at least MIN_GAP."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.key, []).append(r)
    return [(a, b) for g in groups.values() for a, b in itertools.combinations(g, 2)
            if max(a.measured_s, b.measured_s) >= MIN_GAP * min(a.measured_s, b.measured_s)]


def inversions(found: list[tuple[Run, Run]]) -> list[tuple[Run, Run]]:
    """The pairs the model orders the other way round."""
    return [(a, b) for a, b in found if (a.measured_s < b.measured_s) != (a.predicted_s < b.predicted_s)]


def measured_runs() -> list[Run]:
    """The public measured runs with a step time (benchmarks/measured_data)."""
    return [Run(c.row_id, same_problem_key(c), c.measured_s, predict_s(c, lay)) for c, lay in prepared(splits.measured())
            if splits.measured_role(c.row_id)]  # fitting and validation rows: never the frozen test rows


def vtrain_runs(which: str) -> list[Run]:
    """vTrain's runs, keyed by GPU count, model shape and batch."""
    out = []
    for i, (c, lay) in enumerate(prepared(vtrain(hp.load_gpu("a100-80gb"), which))):
        if not splits.vtrain_role(which, i):
            continue  # the frozen test block
        key = (c.cluster.num_gpus, c.model.hidden_size, c.model.num_layers, c.train.global_batch_size, c.model.seq_length)
        out.append(Run(c.label, key, c.measured_s, predict_s(c, lay)))
    return out


def all_pairs() -> dict[str, list[tuple[Run, Run]]]:
    """{data set: pairs} for the measured runs and vTrain's two sweeps."""
    return {"measured runs": pairs(measured_runs()), "vtrain-single": pairs(vtrain_runs("single")),
            "vtrain-multi": pairs(vtrain_runs("multi"))}
