"""Measured runs that no subadditive time model can both fit, and the error floor they set.

    python benchmarks/consistency.py        # print the conflicting pairs and the floor of each set

A time model is judged by its error on measured runs; some pairs of runs bound that error from below
whatever the model, because the physics every step-time model shares orders them one way and the
measurements the other.

Notation:
    b, k     micro-batch size of the smaller run; the other's is k * b (k an integer >= 2)
    m        micro-batches per step of the smaller-micro-batch run (the other has m / k)
    p, v     pipeline stages, virtual stages per rank
    M, P     measured and predicted step time, s; error = P / M - 1
    R        the bound T_big <= R * T_small of the class below

The class (what "subadditive" means here): one micro-batch of k * b on a stage costs no more than k
micro-batches of b, t(k b) <= k t(b) (GEMMs and collectives are no less efficient on more data and
per-call costs are >= 0), and a step takes m + (p - 1) / v micro-batch slots (1F1B, GPipe and
interleaved 1F1B: Narayanan et al., SC'21, section 2.2) plus terms F >= 0 that do not depend on the
micro-batch (data-parallel reduction, optimizer). Two runs of one problem (same model, GPUs, global
batch, stack and layout except the micro-batch) then satisfy

    T_big = (m/k + (p-1)/v) t(k b) + F <= (m + k (p-1)/v) t(b) + F <= R T_small,
    R = (m + k (p-1)/v) / (m + (p-1)/v)        (R = 1 at p = 1).

When M_big > R M_small no model of the class fits both: the best it can do is P_big = R P_small
with the errors balanced, so max(|err_big|, |err_small|) >= (M_big - R M_small) / (M_big + R M_small).
Over a set of rows the floors of its max and mean |error| are linear programs over every such
constraint (GLOP); rows in no conflict contribute zero. parplan's model is in the class
(tests/test_consistency.py checks it), so these floors bound it too. Outside the class sit effects a
step-time model does not see: allocator retries near the memory limit, a kernel path that changes
with the batch, a different cluster state on the day.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ortools.linear_solver import pywraplp  # noqa: E402


@dataclass(frozen=True)
class Run:
    """One measured run as the bound needs it."""

    label: str
    key: tuple  # the problem: everything but the micro-batch
    mbs: int
    microbatches: int
    pp: int
    vpp: int
    measured_s: float


@dataclass(frozen=True)
class Conflict:
    """Two runs of one problem that the class orders T_big <= bound * T_small, measured otherwise."""

    big: Run
    small: Run
    bound: float  # R

    @property
    def floor(self) -> float:
        """The least max |error| over the pair that a model of the class can reach."""
        mb, ms = self.big.measured_s, self.bound * self.small.measured_s
        return (mb - ms) / (mb + ms)


def slot_bound(small: Run, k: int) -> float:
    """R = k slots(m / k) / slots(m), slots(m) = m + (p-1)/v (+ (p - m)(v - 1)/v when interleaving runs fewer
    micro-batches than stages, as torch's schedules may: costmodels.pipeline), i.e. (m + k (p-1)/v) / (m + (p-1)/v)
    where m / k >= p: T_big <= R T_small for micro-batches k * b against b."""
    p, v, m = small.pp, small.vpp, small.microbatches

    def slots(n: float) -> float:
        return n + (p - 1) / v + ((p - n) * (v - 1) / v if v > 1 and n < p else 0.0)
    return k * slots(m / k) / slots(m)


def conflicts(runs: list[Run], tolerance: float = 0.0) -> list[Conflict]:
    """Every pair of runs of one problem with mbs_big = k * mbs_small measured slower than R allows
    by more than `tolerance` (relative)."""
    found = []
    for a, b in itertools.combinations(runs, 2):
        if a.key != b.key or a.mbs == b.mbs:
            continue
        small, big = (a, b) if a.mbs < b.mbs else (b, a)
        if big.mbs % small.mbs:
            continue
        bound = slot_bound(small, big.mbs // small.mbs)
        if big.measured_s > bound * small.measured_s * (1 + tolerance):
            found.append(Conflict(big, small, bound))
    return found


def floors(runs: list[Run], found: list[Conflict]) -> tuple[float, float]:
    """(least max |error|, least mean |error|) over `runs` that a model of the class can reach, given
    the conflicts among them (linear programs; P_i > 0 free for every other row)."""
    labels = {r.label for r in runs}
    mine = [c for c in found if c.big.label in labels and c.small.label in labels]
    if not runs or not mine:
        return 0.0, 0.0
    return _solve(mine, "max"), _solve(mine, "sum") / len(runs)


def _solve(found: list[Conflict], objective: str) -> float:
    solver = pywraplp.Solver.CreateSolver("GLOP")
    rows = {r.label: r for c in found for r in (c.big, c.small)}
    pred = {k: solver.NumVar(0.0, solver.infinity(), f"p_{k}") for k in rows}
    err = {k: solver.NumVar(0.0, solver.infinity(), f"e_{k}") for k in rows}
    for k, r in rows.items():  # e >= |P / M - 1|
        solver.Add(err[k] >= pred[k] * (1 / r.measured_s) - 1)
        solver.Add(err[k] >= 1 - pred[k] * (1 / r.measured_s))
    for c in found:
        solver.Add(pred[c.big.label] <= c.bound * pred[c.small.label])
    if objective == "max":
        top = solver.NumVar(0.0, solver.infinity(), "max")
        for e in err.values():
            solver.Add(e <= top)
        solver.Minimize(top)
    else:
        solver.Minimize(sum(err.values()))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("the floor LP did not solve")
    return solver.Objective().Value()


def from_cases(prepared_cases) -> list[Run]:
    """Runs of (case, resolved layout) pairs; the problem key leaves out only the micro-batch."""
    out = []
    for c, lay in prepared_cases:
        layout = c.layout.model_dump(exclude={"mbs", "num_microbatches"})
        key = (c.dataset, c.model.model_dump_json(), c.cluster.model_dump_json(), c.train.model_dump_json(),
               tuple(sorted((k, str(v)) for k, v in layout.items())))
        out.append(Run(c.label, key, lay.mbs, lay.num_microbatches, lay.pp, lay.vpp, c.measured_s))
    return out


def data_sets() -> dict[str, list[tuple[Run, bool]]]:
    """{data set: [(run, fitted)]}: vTrain's two sweeps and the public measured runs, fitting and
    validation rows only (benchmarks/splits.py)."""
    import splits
    from predict import prepared
    from reference_data import vtrain

    import hardware_profiles as hp

    a100 = hp.load_gpu("a100-80gb")
    out = {}
    for which in ("single", "multi"):
        runs = from_cases(prepared(vtrain(a100, which)))
        out[f"vtrain-{which}"] = [(r, splits.vtrain_fitted(which, i)) for i, r in enumerate(runs)
                                  if splits.vtrain_role(which, i)]  # never the frozen test rows
    measured = from_cases(prepared(splits.measured()))
    out["measured runs"] = [(r, splits.measured_fitted(r.label)) for r in measured if splits.measured_role(r.label)]
    return out


def floor_table(sets: dict[str, list[tuple[Run, bool]]],
                found: dict[str, list[Conflict]]) -> list[tuple[str, str, int, int, float, float]]:
    """(data set, subset, rows, conflicting pairs, floor of max |error|, floor of mean |error|), given each
    set's conflicts (`all_conflicts`)."""
    out = []
    for name, tagged in sets.items():
        for subset, runs in (("all", [r for r, _ in tagged]), ("held out", [r for r, f in tagged if not f])):
            labels = {r.label for r in runs}
            n_pairs = sum(c.big.label in labels and c.small.label in labels for c in found[name])
            out.append((name, subset, len(runs), n_pairs, *floors(runs, found[name])))
    return out


def all_conflicts(sets: dict[str, list[tuple[Run, bool]]]) -> dict[str, list[Conflict]]:
    """{data set: its conflicting pairs}, over all its rows, fitted and held out."""
    return {name: conflicts([r for r, _ in tagged]) for name, tagged in sets.items()}


SECTION = """## Error floors: what no subadditive model reaches (benchmarks/consistency.py)

Two runs of one problem that differ only in the micro-batch (k * b against b) are bound by every time
model in which one micro-batch of k * b costs no more than k of b and a step takes m + (p - 1) / v
micro-batch slots: T_big <= R * T_small, R = (m + k (p - 1) / v) / (m + (p - 1) / v). Where the
measurements break that bound, no such model fits both, and the floors below are the least max and
mean |error| any of them can reach on the set (linear programs over every conflicting pair).
parplan's model is in the class (tests/test_consistency.py), so they bound it too.
"""


def markdown(sets: dict[str, list[tuple[Run, bool]]], worst: int = 8) -> str:
    """The docs/accuracy.md section: what the floors mean, the floor table and the worst conflicting pairs."""
    found = all_conflicts(sets)
    lines = [SECTION, "| data set | subset | rows | conflicting pairs | floor of max abs err | floor of mean abs err |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {n} | {s} | {k} | {c} | {mx:.1%} | {mn:.2%} |" for n, s, k, c, mx, mn in floor_table(sets, found)]
    lines += ["", "| data set | larger micro-batch | measured s | smaller micro-batch | measured s | R | pair floor |",
              "|---|---|---|---|---|---|---|"]
    every = [(name, c) for name, pairs in found.items() for c in pairs]
    for name, c in sorted(every, key=lambda nc: -nc[1].floor)[:worst]:
        lines.append(f"| {name} | {c.big.label} (mbs {c.big.mbs}) | {c.big.measured_s:.4g} | {c.small.label} "
                     f"(mbs {c.small.mbs}) | {c.small.measured_s:.4g} | {c.bound:.3f} | {c.floor:.1%} |")
    return "\n".join(lines)


def main() -> None:
    print(markdown(data_sets(), worst=20))


if __name__ == "__main__":
    main()
