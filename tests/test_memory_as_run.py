"""Memory as production recipes run: FP8 activations as Transformer Engine keeps them, recompute by
module and by layer count, activation offload, expandable segments (issue 34).

Hand-worked numbers: Llama 3 70B (h 8192, f 28672, 64 heads, 8 KV heads of 128) with tp 4 and sequence
parallelism, per token of one layer. bf16 (Korthikanti Table 2 generalised as costmodels.activations says):
attention 2 (norm input) + 2 (QKV input) + 2*8192/4 (Q) + 2*8192/4 (context) + 2*2*256 (K, V) in units of
bytes x h/t = 4096 + 4096 + 4096 + 4096 + 1024 = 17408; MLP 4096 (norm input) + 4096 (MLP input) +
3 x 7168 x 2 (gate|up and product) = 51200; 68608 bytes per token. FP8 under TE (GEMM inputs kept
quantized, 1 byte; the attention output kept twice, bf16 by fused attention and FP8 by the projection):
QKV input 2048, context 4096 + 2048, MLP input 2048, product 7168: 17408 + 41984 = 59392 bytes per token.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import activations as act
from costmodels.device_memory import device_terms
from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec

MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")


def test_fp8_layer_bytes_hand_worked():
    m = hp.load_model("llama3-70b")
    x = act.ActShape(seq=8192, mbs=1, tp=4, sp=True)
    assert act.layer_bytes(m, x, False) == 8192 * 68608
    assert act.layer_bytes(m, replace(x, gemm_in_bytes=1.0), False) == 8192 * 59392


def _stage0(model: str, layout: dict, **train) -> object:
    m, c = hp.load_model(model), hp.load_cluster("dgx-h100").model_copy(update={"num_nodes": 1})
    t = hp.resolve_train(TrainSpec(global_batch_size=16, seq_length=4096, **train), "megatron-core")
    return estimate(m, c, t, Layout(**layout)).memory.stages[0]


@settings(max_examples=25, deadline=None)
@given(st.sets(st.sampled_from(MODULES), min_size=1), st.sampled_from(MODULES))  # an empty list is refused
def test_more_recomputed_modules_never_keep_more(mods, extra):
    base = {"tp": 2, "sp": True, "ep": 4, "mbs": 1, "zero": 1, "recompute": "selective"}
    a = _stage0("mixtral-8x7b", {**base, "recompute_modules": sorted(mods)}).activations_bytes
    b = _stage0("mixtral-8x7b", {**base, "recompute_modules": sorted(mods | {extra})}).activations_bytes
    none = _stage0("mixtral-8x7b", {**base, "recompute": "none"}).activations_bytes
    assert b <= a <= none


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8))
def test_block_recompute_is_monotone_in_layers_and_between_none_and_full(n1, n2):
    lo, hi = sorted((n1, n2))
    base = {"pp": 1, "mbs": 1, "zero": 1, "recompute": "full", "recompute_method": "block"}
    fewer = _stage0("llama3-8b", {**base, "recompute_num_layers": lo}).activations_bytes
    more = _stage0("llama3-8b", {**base, "recompute_num_layers": hi}).activations_bytes
    full = _stage0("llama3-8b", {**base, "recompute_method": "uniform"}).activations_bytes
    assert full <= more <= fewer <= _stage0("llama3-8b", {**base, "recompute": "none"}).activations_bytes


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 40))
def test_activation_offload_never_adds_memory(layers):
    kept = _stage0("llama3-8b", {"mbs": 1, "zero": 1}, activation_offload_layers=layers).activations_bytes
    assert kept <= _stage0("llama3-8b", {"mbs": 1, "zero": 1}).activations_bytes


def test_expandable_segments_shrink_the_reserve_not_the_allocation():
    c = hp.load_cluster("dgx-h100")
    t = hp.resolve_train(TrainSpec(global_batch_size=16), "megatron-core")
    lay = Layout(tp=8, dp=1)
    plain, grown = device_terms(c, t, lay), device_terms(c, t.model_copy(update={"expandable_segments": True}), lay)
    assert grown.fragmentation < plain.fragmentation
    assert grown.fixed_bytes == plain.fixed_bytes


def test_precision_aware_optimizer_bytes_per_param():
    t = TrainSpec(global_batch_size=1)
    assert t.optimizer_bytes_per_param == 12
    assert t.model_copy(update={"exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}).optimizer_bytes_per_param == 8
    assert t.model_copy(update={"master_dtype": "fp16", "exp_avg_dtype": "fp8",
                                "exp_avg_sq_dtype": "fp8"}).optimizer_bytes_per_param == 4
    assert TrainSpec(global_batch_size=1, precision="fp8", fp8_param_gather=True).weight_bytes_per_param == 1
    assert TrainSpec(global_batch_size=1, fp8_param_gather=True).weight_bytes_per_param == 2  # bf16: ignored


def test_interleaved_in_flight_matches_megatron_warmup():
    """megatron-core 0.16 schedules.py get_pp_rank_microbatches: warm-up (p - r - 1) * 2 + (v - 1) * p chunks
    (microbatch_group_size_per_vp_stage = p), one more in steady state, capped at m * v."""
    for p, v, m in ((8, 5, 128), (8, 8, 192), (4, 2, 4), (2, 4, 2)):
        for r in range(p):
            chunks = min((p - r - 1) * 2 + (v - 1) * p + 1, m * v)
            assert act.inflight_microbatches("interleaved", r, p, v, m) == pytest.approx(chunks / v)


@pytest.mark.parametrize("edp_one, expected_saving", [(True, 2), (False, 0)])
def test_whole_experts_outside_fsdp_keep_their_gradients_in_bf16(edp_one, expected_saving):
    """NeMo AutoModel leaves experts that ep holds whole (edp = 1) out of FSDP, so with pipelining their
    gradients accumulate in bf16 (2 bytes), not FSDP2's fp32 reduce dtype (4): the stage's gradients shrink
    by 2 bytes per local expert parameter, and by nothing where the experts are sharded (edp > 1).
    Mixtral 8x7B, 16 H100, pp2 ZeRO-3: ep 8 spans the 8 data-parallel ranks (edp 1), or ep 4 (edp 2)."""
    m = hp.load_model("mixtral-8x7b")
    c = hp.load_cluster("dgx-h100").model_copy(update={"num_nodes": 2})
    lay = Layout(pp=2, zero=3, ep=8 if edp_one else 4, mbs=1, recompute="full")
    grads = []
    for outside in (False, True):
        stack = hp.load_stack("automodel")
        stack = stack.model_copy(update={"memory": stack.memory.model_copy(
            update={"whole_experts_outside_fsdp": outside})})
        t = hp.resolve_train(TrainSpec(global_batch_size=16, seq_length=4096), stack)
        grads.append(estimate(m, c, t, lay).memory.stages[0])
    local_experts = 16 * (8 // lay.ep) * 3 * 4096 * 14336  # 16 layers on stage 0, experts of 3 h x f
    assert grads[0].grads_bytes - grads[1].grads_bytes == expected_saving * local_experts
