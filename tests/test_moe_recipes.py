"""Issue 35 part 3's done-when on the Megatron-Bridge H100 production recipes (benchmarks/moe_recipes.py, held out:
no parameter is fitted on them): MoE rows mean |error| <= 15% and max <= 30%, the DeepSeek-V3 row within 15%."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from moe_recipes import rows  # noqa: E402


def _errors() -> dict[str, float]:
    return {rid: abs(pred / meas - 1) for rid, moe, meas, pred, _ in rows() if moe}


@pytest.mark.xfail(strict=True, reason="not met since H100 GEMMs are priced at their measured rate (the Megatron "
                   "README rows read with full recompute, docs/kernels.md): GPT-OSS-120B is priced 31.5% fast even "
                   "with its unbalanced router, window, sinks and clamp priced (costmodels.moe_balance, "
                   "docs/models.md), mean 15.5%; DeepSeek-V3 is within 12%. The same model with a balanced gate "
                   "(AutoModel AM-007) is within 14%")
def test_moe_recipes_meet_issue_35():
    err = _errors()
    assert len(err) == 3
    assert sum(err.values()) / len(err) <= 0.15, err
    assert max(err.values()) <= 0.30, err
    assert err["mb2509-h100-deepseek-v3"] <= 0.15, err


def test_moe_recipes_where_they_stand():
    """The state the strict expected failure above names, so that a change to any of them is seen: Qwen3-30B
    and DeepSeek-V3 within 15%, GPT-OSS-120B between 25% and 40% fast."""
    signed = {rid: pred / meas - 1 for rid, moe, meas, pred, _ in rows() if moe}
    assert abs(signed["mb2604-h100-qwen3-30b-ep16"]) <= 0.15, signed
    assert abs(signed["mb2509-h100-deepseek-v3"]) <= 0.15, signed
    assert -0.40 <= signed["mb2604-h100-gpt-oss-120b"] <= -0.25, signed


def test_qwen3_expert_parallel_recipe_prices_its_dispatch_and_recompute():
    t = {rid: tout for rid, _, _, _, tout in rows()}["mb2604-h100-qwen3-30b-ep16"]
    assert t.ep_comm_s > 0 and t.recompute_s > 0  # EP16 spans two nodes; the recipe recomputes every layer
