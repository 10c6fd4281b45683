"""The planner against layouts chosen by experts (issue 4, item 7): under the same cost model, the
plan is at least as fast as the published layout, and it fits."""

from __future__ import annotations

import pytest

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.search import search

A100_2021 = dict(precision="fp16", flash_attention=False, overlap_grad_reduce=False)  # Megatron-LM of 2021

CASES = {
    # Narayanan et al. SC'21 Table 1, 1,536-GPU row (145.6B): t=8, p=8, micro-batch 2, 5 layers per
    # virtual stage (vpp 2), full recompute, batch 2,304.
    "megatron-145.6b/1536xA100": ("megatron-145.6b", "dgx-a100", 192, dict(global_batch_size=2304, **A100_2021),
                                  Layout(tp=8, pp=8, vpp=2, mbs=2, recompute="full", sp=False)),
    # GPT-3 175B on 1,536 A100 with the same recipe: t=8, p=12 (8 layers per stage), micro-batch 1.
    "gpt3-175b/1536xA100": ("gpt3-175b", "dgx-a100", 192, dict(global_batch_size=1536, **A100_2021),
                            Layout(tp=8, pp=12, mbs=1, recompute="full")),
    # NVIDIA NeMo's Llama 3 70B pre-training recipe: TP 4, PP 4, CP 2, VP 5, micro-batch 1, seq 8192.
    "llama3-70b/64xH100": ("llama3-70b", "dgx-h100", 8, dict(global_batch_size=128, seq_length=8192),
                           Layout(tp=4, pp=4, cp=2, vpp=5, mbs=1, zero=1, sp=True, recompute="selective")),
    # NeMo's Mixtral 8x7B recipe: TP 1, PP 4, EP 8, VP 8, micro-batch 1, seq 4096, batch 256.
    "mixtral-8x7b/64xH100": ("mixtral-8x7b", "dgx-h100", 8, dict(global_batch_size=256, seq_length=4096),
                             Layout(tp=1, pp=4, ep=8, vpp=8, mbs=1, zero=1, recompute="selective")),
}


@pytest.mark.parametrize("name", CASES)
def test_plan_beats_or_matches_expert_layout(name: str):
    model_name, cluster_name, nodes, train_kw, expert_layout = CASES[name]
    model, cluster = hp.load_model(model_name), hp.load_cluster(cluster_name, nodes)
    train = TrainSpec(**train_kw)
    expert = estimate(model, cluster, train, expert_layout)
    result = search(model, cluster, train, top=1, time_limit_s=60)
    assert result.status == "optimal"
    plan = result.plans[0]
    assert plan.fits
    assert plan.time.step_s <= expert.time.step_s * (1 + 1e-9), (plan.layout, expert.layout)
