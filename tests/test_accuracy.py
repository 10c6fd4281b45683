"""Accuracy of the time model against published runs, with the shipped (fitted) profiles.

benchmarks/accuracy.py prints the full tables (docs/accuracy.md). Bounds, with margin over what
the model reaches today (in brackets), on rows the fit never saw unless said otherwise:
- Narayanan et al. SC'21 Table 1 (validation only): mean <= 8%, max <= 12%   [6.0%, 9.8%]
- A100 Megatron runs on >= 256 GPUs (Narayanan + vTrain multi-node): mean <= 8%   [6.2%]
- vTrain multi-node: mean <= 9.5% [7.8%]; single-node: mean <= 9.5% [8.3%]
- ZeRO-3 / FSDP / HSDP held out: mean <= 15% (issue 12's target) [8.4%]; dense (torchtitan) rows
  mean <= 10% [5.9%];
  none predicted faster than measured by more than 25% [-16.1%]
- Megatron-Core H100 held out: mean <= 10% (issue 12's target) [3.6%]; fitted rows <= 6% [3.6%]
- Korthikanti Table 4 per layer (fitted): mean <= 4%   [1.0%]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
accuracy = pytest.importorskip("accuracy")


@pytest.fixture(scope="module")
def rows():
    return accuracy.collect()


@pytest.fixture(scope="module")
def table(rows):
    return accuracy.by_dataset(rows)


@pytest.fixture(scope="module")
def done(rows):
    return accuracy.done_when(rows)


def test_narayanan_table1(table):
    s = table["narayanan2021"]["all"]
    assert s["n"] == 10 and s["mean"] <= 0.08 and s["max"] <= 0.12


def test_a100_megatron_at_scale(done):
    s = done["A100 Megatron >= 256 GPUs, all"]
    assert s["n"] >= 80 and s["mean"] <= 0.08


def test_vtrain(table):
    assert table["vtrain-multi"]["all"]["n"] == 109 and table["vtrain-multi"]["all"]["mean"] <= 0.095
    assert table["vtrain-multi"]["held out"]["mean"] <= 0.10
    assert table["vtrain-single"]["all"]["n"] == 1440 and table["vtrain-single"]["held out"]["mean"] <= 0.095


def test_sharded_data_parallel_held_out(done, rows):
    s = done["ZeRO-3 / FSDP / HSDP, held out"]
    assert s["n"] >= 20 and s["mean"] <= 0.15
    assert s["min_signed"] >= -0.25, "a held-out ZeRO-3/FSDP row is predicted > 25% faster than measured"
    dense = accuracy.summary([r for r in rows if r.dataset == "torchtitan-bench" and not r.fitted and not r.excluded])
    assert dense["n"] >= 15 and dense["mean"] <= 0.10


def test_megatron_core_h100(table, done):
    assert done["Megatron-Core H100, held out"]["mean"] <= 0.10
    assert table["megatron-readme"]["fitted"]["mean"] <= 0.06


def test_korthikanti_per_layer(table):
    assert table["korthikanti-table4"]["all"]["mean"] <= 0.04


def test_excluded_rows_are_shown_with_a_reason(rows):
    """Rows left out of the bands stay in the tables and say why."""
    excluded = [r for r in rows if r.excluded]
    assert {r.label for r in excluded} == set(accuracy.EXCLUDED)
    assert all(len(r.excluded) > 20 for r in excluded)
