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


@pytest.mark.xfail(strict=True, reason="not met since the rows read their performance recipes (megatron-bridge 0.6.2 "
                   "perf_recipes: bf16 gradient reduction, forced balancing, Qwen3 without recompute, GPT-OSS "
                   "recomputing layernorm + moe_act, DeepSeek-V3 recomputing mla_up_proj + mlp with MTP): Qwen3-30B "
                   "and GPT-OSS-120B, eager Megatron-Core MoE at micro-batch 1 with 2048- and 2880-wide layers, are "
                   "priced 30% and 29% fast (GPT-OSS 34% before its clamps' strided kernels were priced), mean 25%; the "
                   "same models under AutoModel (AM-004, AM-007) are within 15% (docs/moe.md)")
def test_moe_recipes_meet_issue_35():
    err = _errors()
    assert len(err) == 3
    assert sum(err.values()) / len(err) <= 0.15, err
    assert max(err.values()) <= 0.30, err
    assert err["mb2509-h100-deepseek-v3"] <= 0.15, err


def test_moe_recipes_where_they_stand():
    """The state the strict expected failure above names, so that a change to any of them is seen: DeepSeek-V3
    within 20% slow, Qwen3-30B and GPT-OSS-120B between 20% and 40% fast."""
    signed = {rid: pred / meas - 1 for rid, moe, meas, pred, _ in rows() if moe}
    assert 0.0 <= signed["mb2509-h100-deepseek-v3"] <= 0.20, signed
    assert -0.40 <= signed["mb2604-h100-qwen3-30b-ep16"] <= -0.20, signed
    assert -0.40 <= signed["mb2604-h100-gpt-oss-120b"] <= -0.20, signed


def test_the_recipes_price_what_they_recompute_and_dispatch():
    """Qwen3's performance recipe recomputes nothing (EP16 spans two nodes: its dispatch is priced); GPT-OSS's
    recomputes its MoE pre-norm and expert activation (costmodels.recompute_time); DeepSeek-V3's its MLA up
    projections and dense MLPs, and its MTP module adds a layer and an output layer to the last stage."""
    t = {rid: tout for rid, _, _, _, tout in rows()}
    assert t["mb2604-h100-qwen3-30b-ep16"].ep_comm_s > 0 and t["mb2604-h100-qwen3-30b-ep16"].recompute_s == 0
    assert 0 < t["mb2604-h100-gpt-oss-120b"].recompute_s < 0.1 * t["mb2604-h100-gpt-oss-120b"].compute_s
    assert t["mb2509-h100-deepseek-v3"].recompute_s > 0
