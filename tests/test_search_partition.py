"""DeepSpeed's partition_balanced on numpy arrays (planner.frameworks.deepspeed.partition._balanced_arrays,
what `plan --framework any` runs for Llama 3.1 405B's pipeline degrees up to 64) gives DeepSpeed's loops'
boundaries, ties included: any weights, any number of parts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.frameworks.deepspeed import partition as dsp


def _pos(fn, weights, parts):
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    return [[int(x) for x in row] for row in fn(prefix, parts)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=2, max_size=40), st.integers(1, 40))
def test_arrays_equal_the_loops(weights, parts):
    parts = min(parts, len(weights) - 1)
    loops, arrays = _pos(dsp._balanced_loops, weights, parts), _pos(dsp._balanced_arrays, weights, parts)
    n = len(weights)
    # every entry the backtracking can read: pos[i][j] for i >= j (the others are never used)
    assert [row[j] for i, row in enumerate(loops) for j in range(1, min(i, parts) + 1)] == \
        [row[j] for i, row in enumerate(arrays) for j in range(1, min(i, parts) + 1)], (n, parts)


def test_ds_split_the_same_either_way(monkeypatch):
    """The splits the search offers for DeepSpeed (both PARTITIONS methods) on the layer counts of the
    presets, for every pipeline degree, computed by the loops and by the arrays."""
    cases = [(layers, pp) for layers in (24, 32, 70, 80, 94, 126) for pp in (2, 3, 4, 8, 12, 16, 32, 64) if pp < layers]
    got = {}
    for vector_from in (float("inf"), 0):
        monkeypatch.setattr(dsp, "VECTOR_FROM", vector_from)
        got[vector_from] = [dsp.ds_split(m, layers, pp) for layers, pp in cases for m in dsp.PARTITIONS]
    assert got[float("inf")] == got[0]
    assert dsp.ds_split("type:transformer|embedding", 70, 12) == [5] + [6] * 10 + [5]  # BLOOM-176B (module doc)
