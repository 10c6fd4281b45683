"""The leave-one-regime-out cache (benchmarks/data/loro_errors.json) is current, and its digest ignores the bands.

The bands every estimate prints are built from that cache (benchmarks/uncertainty_table.py), and
`accuracy.py --write` rewrites them into the stack profiles, which the digest reads. The digest used to cut each
profile at a top-level 'held_out:' that the profiles no longer have (the bands sit under 'provenance:'), so
writing new bands made the cache look stale and the next run refit every fold for nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
loro = pytest.importorskip("loro")

PROFILE = """name: s
gemm_scale: 0.9
provenance:
  fitted_by: benchmarks/calibrate.py
  held_out:
    '*/*': {rows: 3, mean: 0.1, p50: 0.1, p90: 0.2, bias: 0.0}
memory:
  held_out:
    device: {rows: 2, mean: 0.1, p90: 0.1, bias: 0.0}
"""


def test_the_digest_ignores_the_bands_and_sees_a_fitted_value(tmp_path):
    base, bands, fitted = (tmp_path / n for n in ("a.yaml", "b.yaml", "c.yaml"))
    base.write_text(PROFILE)
    bands.write_text(PROFILE.replace("p90: 0.2", "p90: 0.3").replace("rows: 2", "rows: 5"))
    fitted.write_text(PROFILE.replace("gemm_scale: 0.9", "gemm_scale: 0.8"))
    assert loro._without_bands(base) == loro._without_bands(bands)
    assert loro._without_bands(base) != loro._without_bands(fitted)


# Read when pytest collects this module, before any test runs: a test that calls loro.load() (band_loo's) refits
# a stale cache and rewrites it, which would hide the staleness from a check made later.
COMMITTED = json.loads(loro.CACHE.read_text())["digest"]


def test_the_committed_cache_is_current():
    """A cost model, profile, split or data change without `python benchmarks/loro.py` leaves bands and
    docs/accuracy.md built from folds of the old model."""
    assert COMMITTED == loro.digest(), "run: python benchmarks/loro.py, then benchmarks/accuracy.py --write"
