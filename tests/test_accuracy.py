"""Accuracy bounds of the time model with the shipped (fitted) profiles (issue 3, item 6).

Bounds: Narayanan Table 1 mean |err| <= 7% and max <= 15%; vTrain multi-node mean <= 12%;
vTrain single-node mean <= 15%. benchmarks/accuracy.py prints the full tables (docs/accuracy.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
accuracy = pytest.importorskip("accuracy")


@pytest.fixture(scope="module")
def table():
    return accuracy.by_dataset(accuracy.collect())


def test_narayanan_table1(table):
    """Narayanan et al. SC'21 Table 1 (never fitted on): mean <= 7%, max <= 15%."""
    s = table["narayanan2021"]["all"]
    assert s["n"] == 10
    assert s["mean"] <= 0.07 and s["max"] <= 0.15


def test_vtrain_multi_node(table):
    """vTrain multi-node (109 runs, up to 512 A100): mean <= 12%, also on the held-out half."""
    assert table["vtrain-multi"]["all"]["n"] == 109
    assert table["vtrain-multi"]["all"]["mean"] <= 0.12
    assert table["vtrain-multi"]["held out"]["mean"] <= 0.12


def test_vtrain_single_node(table):
    """vTrain single-node (1,440 runs): mean <= 15%, also on the held-out rows."""
    assert table["vtrain-single"]["all"]["n"] == 1440
    assert table["vtrain-single"]["all"]["mean"] <= 0.15
    assert table["vtrain-single"]["held out"]["mean"] <= 0.15


def test_h100_and_per_layer(table):
    """Megatron-Core H100 table and Korthikanti Table 4: mean <= 10% (both fitted on)."""
    assert table["megatron-h100"]["all"]["mean"] <= 0.10
    assert table["korthikanti-table4"]["all"]["mean"] <= 0.10
