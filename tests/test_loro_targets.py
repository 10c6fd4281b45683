"""Issue 35's done-when on the leave-one-regime-out folds (benchmarks/loro.py, cached in
benchmarks/data/loro_errors.json, which tests/test_loro_digest.py keeps current): each GPU generation and each
framework held out within 12% mean |error|; the MoE fold within 15% mean and 30% max. Read from the cache, so a model
change that breaks a bound fails here once `python benchmarks/loro.py` has been run (and the digest test fails until
it is)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FOLDS = json.loads((Path(__file__).resolve().parents[1] / "benchmarks/data/loro_errors.json").read_text())["folds"]


def _errors(fold: str) -> list[float]:
    return [abs(r["predicted_s"] / r["measured_s"] - 1) for r in FOLDS[fold]["rows"]]


@pytest.mark.parametrize("fold", ["gpu:ampere", "gpu:hopper", "framework:torchtitan", "framework:megatron-core"])
def test_each_generation_and_framework_held_out_within_12_percent(fold):
    err = _errors(fold)
    assert len(err) >= 10 and sum(err) / len(err) <= 0.12


def test_moe_held_out_within_15_percent_mean_and_30_percent_max():
    """6 rows: four NeMo AutoModel runs (-8.8%..+14.3%) and two Megatron-Bridge recipes, GPT-OSS-120B -29.2% (-34.4%
    before its clamps' strided kernels were priced) and Qwen3-30B-A3B -29.8%; DeepSeek-V3's recipe (+14.8%) is in
    the frozen test split. The max has no margin left: Qwen3 is the row to watch (docs/moe.md)."""
    err = _errors("moe")
    assert len(err) == 6 and sum(err) / len(err) <= 0.15 and max(err) <= 0.30
