"""Table.objective (planner.search.tables), the step time every search, oracle and split chooser reads, equals
its definition term by term: memory check, (q m - q/v) max t + (q/v) sum t + q (const + max opt), the largest
stage's dp_term (the ceiling of q (reduce + gather exposure) / 3v) and the uneven chunks' term."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.search.space import Candidate
from planner.search.tables import OBJ_PER_TIME, IntAffine, Table


def _reference(t: Table, counts) -> int | None:
    """The objective as docs/design.md states it, from the table's own pieces (dp_term per stage)."""
    if any(mem.at(*n) > t.cap for mem, n in zip(t.memory, counts)):
        return None
    times = [a.at(*n) for a, n in zip(t.time, counts)]
    dp = max(t.dp_term(r.at(*n), g.at(*n), ti) for r, g, n, ti in zip(t.reduce, t.gather, counts, times))
    opt = max(o.at(*n) for o, n in zip(t.optimizer, counts))
    q = OBJ_PER_TIME
    return ((q * t.m - q // t.v) * max(times) + q // t.v * sum(times) + q * (t.const + opt) + dp
            + t.chunk_term([d + e for d, e in counts]))


def _affines(pp: int, lo: int = 0):
    one = st.builds(IntAffine, st.integers(lo, 10**6), st.integers(0, 10**5), st.integers(0, 10**5))
    return st.lists(one, min_size=pp, max_size=pp).map(tuple)


@st.composite
def tables_and_splits(draw):
    pp, v = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    lay = Candidate(1, False, 1, "p2p", 1, 1, pp, v, 2, 1, 1, "none", "interleaved" if v > 1 else "1f1b",
                    draw(st.integers(1, 64)), None, None, None)
    table = Table(lay, draw(_affines(pp)), draw(_affines(pp)), draw(_affines(pp, -10**5)), draw(_affines(pp, -10**5)),
                  draw(_affines(pp)), draw(st.integers(0, 10**6)), draw(st.integers(10**5, 10**7)),
                  draw(st.booleans()), draw(st.booleans()), draw(st.sampled_from([1, 1, 2, 4])))
    counts = draw(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), min_size=pp, max_size=pp))
    return table, counts


@settings(max_examples=400, deadline=None)
@given(tables_and_splits())
def test_objective_equals_its_definition(case):
    table, counts = case
    assert table.objective(counts) == _reference(table, counts)
