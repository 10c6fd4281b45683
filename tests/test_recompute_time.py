"""Selective recompute of named modules (costmodels.recompute_time): hand-worked cases for each module, the
default (the attention core) unchanged, and monotonicity in the module set (property)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import compute as cmp
from costmodels import moe_compute
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.recompute_time import NORM_BYTES_PER_ELEMENT, module_recompute_s, recompute_flops, strided_view_s
from costmodels.timing import _passes, layer_time, make_context
from costmodels.train_spec import TrainSpec

MODULES = ["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"]


def _context(model_name: str, modules: list[str] | None, **lay):
    model = hp.load_model(model_name)
    cluster = hp.load_cluster("dgx-h100", num_nodes=8)
    train = hp.resolve_train(TrainSpec(global_batch_size=512, seq_length=4096), "megatron-core")
    layout = Layout(recompute="selective", recompute_modules=modules, mbs=1, **lay)
    return make_context(model, cluster, train, resolve_layout(model, cluster, train, layout))


def _bytes_s(c, nbytes: float) -> float:
    return cmp.memory_s(c.dev16, nbytes * c.stack.elementwise_scale * c.train.activation_scale)


def test_the_default_recomputes_the_attention_core_alone():
    """No module list: Megatron's default core_attn, the attention core's forward once more (as before modules)."""
    c = _context("llama3-8b", None, tp=2, pp=1, dp=32)
    _, core, _, _ = _passes(c, False)
    assert module_recompute_s(c, False, core) == (core, 0)
    assert layer_time(c, False).recompute_s == pytest.approx(core)


def test_moe_act_reruns_the_routed_activation_alone():
    """GPT-OSS-120B, ep 8: moe_act re-runs the clamped activation over the P routed rows, its clamps' passes over
    chunk views at the strided rate; the shared experts (none here) and the GEMMs are not re-run; a dense layer has
    nothing for it."""
    c = _context("gpt-oss-120b", ["moe_act"], ep=8, pp=1, dp=64)
    rows = moe_compute.routed_rows(c.model, c.x)
    assert rows == 4096 * 4  # M k, balanced
    strided = strided_view_s(c, moe_compute.expert_strided_bytes(c.model, c.x))
    assert strided > _bytes_s(c, moe_compute.expert_activation_bytes(c.model, c.x))  # issue-bound, not HBM-bound
    want = _bytes_s(c, moe_compute.expert_activation_bytes(c.model, c.x)) + strided
    assert module_recompute_s(c, True, 1.0) == (pytest.approx(want), 0)
    assert module_recompute_s(c, False, 1.0) == (0.0, 0)


def test_layernorm_reruns_only_the_norms_that_are_modules():
    """Transformer Engine fuses a dense layer's norms into the next linear: nothing to re-run there; an MoE layer's
    pre-MLP norm reads and writes M h 2-byte elements; MLA adds its input norm."""
    c = _context("gpt-oss-120b", ["layernorm"], ep=8, pp=1, dp=64)
    assert module_recompute_s(c, False, 1.0) == (0.0, 0)
    one_norm = _bytes_s(c, NORM_BYTES_PER_ELEMENT * 4096 * 2880)
    assert module_recompute_s(c, True, 1.0)[0] == pytest.approx(one_norm)
    d = _context("deepseek-v3", ["layernorm"], ep=64, tp=2, sp=True, pp=1, dp=32)
    assert module_recompute_s(d, True, 1.0)[0] == pytest.approx(_bytes_s(d, 2 * 4 * 2048 * 7168))


def test_the_moe_module_holds_moe_act_and_dispatches_again():
    """moe re-runs the whole MoE block, its activation included (counted once), and one more dispatch + combine."""
    both = _context("qwen3-30b-a3b", ["moe", "moe_act"], ep=8, pp=1, dp=64)
    alone = _context("qwen3-30b-a3b", ["moe"], ep=8, pp=1, dp=64)
    act = _context("qwen3-30b-a3b", ["moe_act"], ep=8, pp=1, dp=64)
    assert module_recompute_s(both, True, 0.0) == module_recompute_s(alone, True, 0.0)
    assert module_recompute_s(alone, True, 0.0)[1] == 1
    assert module_recompute_s(alone, True, 0.0)[0] > module_recompute_s(act, True, 0.0)[0] > 0
    assert layer_time(alone, True).ep_comm_s > layer_time(act, True).ep_comm_s


def test_mla_up_proj_counts_the_two_up_projections():
    """DeepSeek-V3 (q_lora_rank 1536, kv_lora_rank 512, 128 heads of 192 / 128): the re-run FLOPs are
    2 M (r_q a d_qk + r_kv a (d_nope + d_v)) / t; a model without MLA has nothing to re-run."""
    c = _context("deepseek-v3", ["mla_up_proj"], ep=64, tp=2, sp=True, pp=1, dp=32)
    ml, a = c.model.mla, c.model.num_attention_heads
    want = 2 * 4096 * (ml.q_lora_rank * a * ml.qk_head_dim + ml.kv_lora_rank * a * (ml.qk_nope_head_dim
                                                                                      + ml.v_head_dim)) / 2
    assert recompute_flops(c.model, c.x, True) == pytest.approx(want)
    assert module_recompute_s(c, True, 0.0)[0] > 0
    assert module_recompute_s(_context("llama3-8b", ["mla_up_proj"], dp=64), False, 0.0) == (0.0, 0)


@settings(max_examples=40, deadline=None)
@given(st.sets(st.sampled_from(MODULES)), st.sets(st.sampled_from(MODULES)),
       st.sampled_from(["deepseek-v3-16b", "gpt-oss-120b", "qwen3-30b-a3b", "llama3-8b"]), st.booleans())
def test_more_modules_never_recompute_less(first, more, name, moe):
    """Recompute time, EP passes and hardware FLOPs are monotone in the module set."""
    small, big = sorted(first), sorted(first | more)
    moe = moe and hp.load_model(name).is_moe
    ep = 8 if moe else 1
    a, b = _context(name, small or None, ep=ep, dp=64), _context(name, big or None, ep=ep, dp=64)
    core = _passes(a, moe)[1]
    (sa, ea), (sb, eb) = module_recompute_s(a, moe, core), module_recompute_s(b, moe, core)
    if small:
        assert sa <= sb * (1 + 1e-12) and ea <= eb
        assert recompute_flops(a.model, a.x, moe) <= recompute_flops(b.model, b.x, moe) * (1 + 1e-12)


def _block(n: int | None, method: str = "block", pp: int = 2, vpp: int = 1):
    model = hp.load_model("llama3-8b")
    cluster = hp.load_cluster("dgx-h100", num_nodes=1)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096), "megatron-core")
    lay = Layout(tp=2, pp=pp, vpp=vpp, recompute="full", recompute_num_layers=n, recompute_method=method, mbs=1)
    return estimate(model, cluster, train, resolve_layout(model, cluster, train, lay))


def test_block_recompute_reruns_only_the_first_n_layers_of_each_chunk():
    """llama3-8b, pp 2: 16 layers a rank. --recompute-method block --recompute-num-layers 4 reruns 4 of them, a
    quarter of full recompute's forward rerun; N at least the chunk's layers is full recompute; uniform groups
    still rerun every layer (megatron-core transformer_block.py _checkpointed_forward). Before, every N was priced
    as full recompute of every layer."""
    full, quarter = _block(None), _block(4)
    assert quarter.time.recompute_s == pytest.approx(full.time.recompute_s / 4, rel=1e-9)
    assert _block(16).time.step_s == pytest.approx(full.time.step_s, rel=1e-12)
    assert _block(4, "uniform").time.recompute_s == pytest.approx(full.time.recompute_s, rel=1e-12)
    assert _block(2, vpp=2).time.recompute_s == pytest.approx(full.time.recompute_s / 4, rel=1e-9)  # 2 of 8, twice
    assert _block(None).time.step_s > quarter.time.step_s > _block(None).time.step_s - full.time.recompute_s
