"""What earlier CP-SAT solves of the same candidate tables proved, kept for the next solve.

The engine's top-K loop (planner.search.engine._solve_top) solves the same tables K times, each time without
the winners so far. A candidate settled in a model of its own (planner.search.cpsat._one_by_one) has an
optimum that does not depend on which other candidates are excluded, so the next solve can take it as known:
- `exact[i]`: candidate i's best split and objective, proven (its own model found it under the cap and proved
  nothing better);
- `floor[i]`: a lower bound on candidate i's objective, the cap + 1 of a model of its own that was proven to
  hold nothing under the cap;
- `unsettled`: pipeline degrees whose joint model of many candidates did not settle in its budget (CP-SAT
  wandered); the next solve goes to the one-by-one models for them at once instead of building the joint model
  again. GPT-OSS-120B on 256 B200 (1,015 and 1,395 candidates at pp 16 and 8): each joint model took 1.6-2.0 s
  and did not settle, three times for the default top 3; the one-by-one models that settled them took 0.6-2.1 s;
- `ceiling` (with `top`, K): in a top-K search a candidate's own model is solved up to an objective no lower than
  the K-th best's (the K-th best first split, lowered to the K-th best optimum settled once K are known), not only
  up to the best so far: its optimum is then settled for the next K - 1 solves instead of only a floor each of
  them must lift again. Llama 4 Maverick on 256 B200 (interleaved dense and MoE layers over virtual chunks, each
  candidate settled on its own): top 3 in 33.6 s instead of 175 s, the same three layouts.

Nothing here changes an answer: known objectives are the candidates' proven optima and floors are proven bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class Settled:
    """Proven facts about single candidates (by table index) and the pipeline degrees whose joint model did
    not settle."""

    exact: dict[int, Any] = field(default_factory=dict)  # index -> planner.search.cpsat.Solution
    floor: dict[int, int] = field(default_factory=dict)  # index -> objective lower bound
    unsettled: set[int] = field(default_factory=set)  # pipeline degrees
    # an objective no lower than the K-th best's (the engine's K-th best first split, a feasible objective of K
    # candidates): a candidate solved on its own is solved up to it, not only up to the best so far, so that
    # the next solves of the top K find it settled instead of solving it again under their higher caps
    ceiling: Optional[int] = None
    top: int = 1  # K

    def cap(self, best: Optional[int]) -> Optional[int]:
        """The cap a candidate's own model is solved under: the best so far, raised to the ceiling, itself
        lowered to the K-th best optimum settled so far once K are known."""
        if best is None or self.ceiling is None:
            return best
        known = sorted(sol.objective for sol in self.exact.values())
        ceiling = min(self.ceiling, known[self.top - 1]) if len(known) >= self.top else self.ceiling
        return max(best, ceiling)

    def bound(self, index: int, bound: Optional[int]) -> Optional[int]:
        """`bound` (the table's own lower bound; None: no split fits) raised to what a solve proved."""
        if bound is None or index not in self.floor:
            return bound
        return max(bound, self.floor[index])

    def record(self, index: int, sol, proven: bool, cap: Optional[int]) -> None:
        """Keep what candidate `index`'s own model, capped at `cap` (None: no cap), proved: its optimum when
        it found one under the cap and proved it, else (proven, with a cap) that its optimum lies above it."""
        if not proven:
            return
        if sol is not None and sol.index == index and (cap is None or sol.objective <= cap):
            self.exact[index] = sol
        elif cap is not None:
            self.floor[index] = max(self.floor.get(index, 0), cap + 1)


__all__ = ["Settled"]
