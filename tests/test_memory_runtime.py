"""Memory as the GPU sees it (costmodels.memory_semantics, device_memory): hand-worked transients,
the three numbers and their order, fits on device bytes, and accuracy bounds on measured peaks.

Bounds on benchmarks/memory_accuracy.py's held-out rows, with margin over today (in brackets):
allocated mean <= 5% and max <= 12% (issue 13's bounds) [3.3%, 10.9%], device mean <= 10% [8.3%],
reserved mean <= 10% [6.5%]; the
published out-of-memory run predicted not to fit; at least 38 of the 42 rows that ran predicted to
fit [39].
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import cluster, llama_like
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import activations as act
from costmodels.device_memory import communicators, device_terms
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.memory import memory_by_stage
from costmodels.memory_semantics import MIB
from costmodels.params import total_params
from costmodels.train_spec import TrainSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

MODEL = llama_like(1024, 8, 2, 4, 4096, vocab=32000, seq=2048)
CLUS = cluster(8)


def _train(stack: str, **kw) -> TrainSpec:
    return hp.resolve_train(TrainSpec(global_batch_size=8, **kw), stack)


def _stage(stack: str, lay: Layout, **kw):
    train = _train(stack, **kw)
    return memory_by_stage(MODEL, CLUS, train, resolve_layout(MODEL, CLUS, train, lay))[-1]


def test_eager_torch_loss_holds_twelve_bytes_per_logit():
    """torchtitan: bf16 logits, fp32 copy, log_softmax and its fp32 gradients: 12 B x tokens x vocab."""
    s = _stage("torchtitan-eager", Layout(zero=3, mbs=1))
    assert s.transient_bytes == 12 * 2048 * 32000


def test_fused_loss_holds_four_and_megatron_six():
    assert _stage("torchtitan-eager", Layout(zero=3, mbs=1), fused_loss=True).transient_bytes == 4 * 2048 * 32000
    assert _stage("megatron-core", Layout(tp=2, sp=True, mbs=1)).transient_bytes == 6 * 2048 * 32000 // 2


def test_torchtitan_loss_parallel_holds_sixteen_bytes_per_logit():
    """With tp > 1 torchtitan's loss runs under DTensor loss_parallel, whose backward builds zeros_like,
    exp, their sum and the product beside the saved log-softmax output: 16 B x tokens x vocab / tp."""
    assert _stage("torchtitan-eager", Layout(tp=2, sp=True, mbs=1)).transient_bytes == 16 * 2048 * 32000 // 2
    assert _stage("torchtitan-eager", Layout(tp=2, sp=True, mbs=1), fused_loss=True).transient_bytes == \
        4 * 2048 * 32000 // 2


def test_loss_and_recompute_working_set_do_not_add_up():
    """On the last stage the loss's backward ends before its last layer is recomputed: the peak holds the
    larger of the two, not their sum (the working set is in activations, the loss only beyond it)."""
    s = _stage("torchtitan-eager", Layout(zero=3, mbs=1, recompute="full"))
    x = act.ActShape(seq=2048, mbs=1, recompute="full")
    working = act.recompute_working_bytes(MODEL, x, False)
    assert 0 < working < 12 * 2048 * 32000
    assert s.transient_bytes == 12 * 2048 * 32000 - working


def test_megatron_0_6_allgather_dispatcher_keeps_three_token_copies():
    """Megatron-Core 0.6 MoEAllGatherTokenDispatcher, tp 2 with SP, top-2 of 4 experts, one token per
    rank: the tp-gathered tokens G = 2, the routed copy L = G*k = 4 and the un-permuted output L, h wide."""
    moe = llama_like(64, 4, 4, 2, 128, vocab=100, seq=1, num_experts=4, top_k=2)
    x = act.ActShape(seq=2, mbs=1, tp=2, sp=True, moe_allgather=True)  # 2 tokens, one per rank before the gather
    assert act.allgather_dispatch_bytes(moe, x) == 2 * (2 + 4 + 4) * 64
    assert act.allgather_dispatch_bytes(moe, act.ActShape(seq=2, mbs=1, tp=2, sp=True)) == 0


def test_eager_hugging_face_norms_and_swiglu_keep_more():
    """DeepSpeed runs the Hugging Face model eagerly: LlamaRMSNorm keeps its fp32 upcast and bf16 output
    (6 B per element, not 2) and LlamaMLP four f-wide tensors (not 3): the MLP block of one token keeps
    (6 - 2) h + 2 f bytes more."""
    x_fused = act.ActShape(seq=1, mbs=1)
    x_eager = act.ActShape(seq=1, mbs=1, norm_bytes=6.0, glu_widths=4.0)
    diff = act.dense_mlp_bytes(MODEL, x_eager) - act.dense_mlp_bytes(MODEL, x_fused)
    assert diff == 4 * 1024 + 2 * 4096
    sem = hp.load_stack("deepspeed").memory
    assert (sem.norm_saved_bytes, sem.glu_saved_widths) == (6.0, 4.0)


def test_megatron_keeps_fp32_main_grads():
    """Megatron docs: bf16 weights + fp32 grads + 12 B Adam = 18 B/param without the distributed optimizer."""
    s = _stage("megatron-core", Layout(mbs=1))
    total = total_params(MODEL)
    assert s.grads_bytes == 4 * total and s.weights_bytes == 2 * total and s.optimizer_bytes == 12 * total
    assert _stage("megatron-core", Layout(mbs=1), grad_dtype="bf16").grads_bytes == 2 * total


def test_pipelined_fsdp2_accumulates_unsharded_fp32_gradients():
    """torch.distributed.pipelining keeps FSDP2 from reducing until the last micro-batch, and FSDP2 then
    accumulates the unsharded gradients in its reduce dtype (fp32): 4 B per parameter of the stage, not
    the bf16 2 B, nor sharded; without pipelining ZeRO-3 shards bf16 gradients 8 ways."""
    train = _train("torchtitan")
    piped = resolve_layout(MODEL, CLUS, train, Layout(pp=2, zero=3, mbs=1))
    first = memory_by_stage(MODEL, CLUS, train, piped)[0]
    local_weights = first.weights_bytes / 2  # bf16 weights, gathered for the whole step
    assert first.grads_bytes == pytest.approx(4 * local_weights, abs=4)
    flat = memory_by_stage(MODEL, CLUS, train, resolve_layout(MODEL, CLUS, train, Layout(zero=3, mbs=1)))[0]
    assert flat.grads_bytes == pytest.approx(2 * total_params(MODEL) / 8, abs=4)
    assert _stage("torchtitan", Layout(pp=2, zero=3, mbs=1), grad_dtype="bf16").grads_bytes * 2 == \
        pytest.approx(_stage("torchtitan", Layout(pp=2, zero=3, mbs=1)).grads_bytes, abs=4)


def test_per_op_selective_keeps_input_q_v_context_w1_w2():
    """torchtitan per-op SAC, hand-worked: h + q + kv + q + f + h elements per token, 2 bytes each."""
    x = act.ActShape(seq=2048, mbs=1, recompute="selective", selective="per-op")
    per_token = 1024 + 1024 + 256 + 1024 + 4096 + 1024
    assert act.layer_bytes(MODEL, x, False) == 2 * 2048 * per_token
    full = act.layer_bytes(MODEL, act.ActShape(seq=2048, mbs=1), False)
    assert act.recompute_working_bytes(MODEL, x, False) == full - 2 * 2048 * per_token


def test_foreach_adamw_temporaries_set_the_peak_when_activations_are_tiny():
    """DDP with a one-token-wide batch: the optimizer step (4 B/param, torch.optim.AdamW's default foreach path,
    the fsdp stack's) outgrows activations + logits. torchtitan builds AdamW fused (optimizer.implementation
    "fused" by default), which updates in place: no step temporaries."""
    model = llama_like(1024, 8, 2, 4, 4096, vocab=1024, seq=16)
    train = _train("fsdp")
    lay = resolve_layout(model, CLUS, train, Layout(mbs=1))
    s = memory_by_stage(model, CLUS, train, lay)[0]
    assert s.total_bytes == s.weights_bytes + s.grads_bytes + s.optimizer_bytes + 4 * total_params(model)
    for name in ("torchtitan", "torchtitan-eager"):
        assert _train(name).stack_spec.memory.optimizer_temp_bytes == 0.0


def test_device_terms_and_fits_on_device_bytes():
    train = _train("megatron-core")
    est = estimate(MODEL, CLUS, train, Layout(tp=2, sp=True, mbs=1))
    sem, mem = train.stack_spec.memory, est.memory
    assert communicators(CLUS, est.layout) == 2  # tp and data parallel
    kept = mem.stages[0].persistent_bytes
    assert mem.peak_reserved_bytes == round(kept + (mem.peak_allocated_bytes - kept) * (1 + sem.fragmentation))
    fixed = (sem.context_mib + 2 * sem.nccl_mib_per_group) * MIB
    assert mem.device_bytes == pytest.approx(mem.peak_reserved_bytes + fixed, abs=1)
    assert est.fits == (mem.device_bytes <= mem.hbm_bytes - mem.margin_bytes) == (mem.peak_bytes <= mem.usable_bytes)


def test_a_tighter_margin_walks_through_pressure_to_not_fitting():
    """Three regimes as the margin grows: the reserve grows unhindered; then it fits only because the
    allocator releases its cache (device held at the budget); then not even the floor A + C + gN fits."""
    train = _train("megatron-core")
    mem = estimate(MODEL, CLUS, train, Layout(mbs=1)).memory
    unhindered_edge = (mem.hbm_bytes - mem.unhindered_device_bytes) / 2**30
    floor_edge = (mem.hbm_bytes - mem.floor_bytes) / 2**30
    assert mem.floor_bytes == mem.peak_allocated_bytes + mem.unhindered_device_bytes - mem.peak_reserved_bytes
    free = estimate(MODEL, cluster(8, memory_reserve_gib=unhindered_edge - 0.01), train, Layout(mbs=1))
    assert free.fits and not free.memory.allocator_pressure and free.memory.headroom_bytes >= 0
    pressed = estimate(MODEL, cluster(8, memory_reserve_gib=unhindered_edge + 0.01), train, Layout(mbs=1))
    assert pressed.fits and pressed.memory.allocator_pressure
    assert pressed.memory.device_bytes == pressed.memory.device_budget_bytes and pressed.memory.headroom_bytes == 0
    assert pressed.memory.peak_bytes <= pressed.memory.usable_bytes
    assert pressed.memory.peak_bytes > pressed.memory.unhindered_usable_bytes
    assert estimate(MODEL, cluster(8, memory_reserve_gib=floor_edge - 0.01), train, Layout(mbs=1)).fits
    short = estimate(MODEL, cluster(8, memory_reserve_gib=floor_edge + 0.01), train, Layout(mbs=1))
    assert not short.fits and not short.memory.allocator_pressure
    assert short.memory.device_bytes == short.memory.unhindered_device_bytes and short.memory.headroom_bytes < 0


@settings(max_examples=40, deadline=None)
@given(stack=st.sampled_from(hp.list_stacks()), mbs=st.sampled_from([1, 2, 4]), zero=st.sampled_from([0, 1, 3]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_allocated_le_reserved_le_device_and_monotone_in_mbs(stack, mbs, zero, recompute):
    train = hp.resolve_train(TrainSpec(global_batch_size=64), stack)
    mems = [estimate(MODEL, CLUS, train, Layout(mbs=b, zero=zero, recompute=recompute)).memory for b in (mbs, 2 * mbs)]
    for m in mems:
        assert m.peak_allocated_bytes <= m.peak_reserved_bytes <= m.device_bytes
    assert mems[0].peak_allocated_bytes < mems[1].peak_allocated_bytes


@pytest.mark.parametrize("persistent_gib", [0, 10, 40])
def test_device_budget_matches_device_rule(persistent_gib):
    train = _train("torchtitan")
    lay = resolve_layout(MODEL, CLUS, train, Layout(zero=3, mbs=1))
    dev = device_terms(CLUS, train, lay)
    kept = persistent_gib * 2**30
    budget = dev.allocated_budget(kept)
    assert dev.device(budget, kept) <= dev.device_budget + 1
    assert dev.device(budget + 2**20, kept) > dev.device_budget


def test_fragmentation_spares_the_persistent_states():
    """Reserve = P + (A - P)(1 + f): states allocated once add no fragmentation (torchtitan DeepSeek-V3
    16B log: the reserve grew by exactly the Adam moments), what is re-allocated each step does."""
    train = _train("torchtitan")
    dev = device_terms(CLUS, train, resolve_layout(MODEL, CLUS, train, Layout(zero=3, mbs=1)))
    assert dev.fragmentation > 0
    assert dev.reserved(50 * 2**30, 20 * 2**30) == pytest.approx(20 * 2**30 + 30 * 2**30 * (1 + dev.fragmentation))
    assert dev.reserved(50 * 2**30, 20 * 2**30) < dev.reserved(50 * 2**30)
    stage = estimate(MODEL, CLUS, train, Layout(zero=3, mbs=1)).memory.stages[0]
    assert stage.persistent_bytes == stage.weights_bytes + stage.grads_bytes + stage.optimizer_bytes
    assert stage.reserved_bytes == pytest.approx(dev.reserved(stage.total_bytes, stage.persistent_bytes), abs=1)


def test_sharded_pipeline_keeps_only_the_optimizer_states():
    """ZeRO-3 with pipelining counts gathered weights and unsharded gradients, freed after each step."""
    train = _train("torchtitan")
    clus = CLUS.model_copy(update={"num_nodes": 2}) if CLUS.num_gpus < 16 else CLUS
    stage = estimate(MODEL, clus, train, Layout(zero=3, pp=2, mbs=1)).memory.stages[0]
    assert stage.persistent_bytes == stage.optimizer_bytes < stage.weights_bytes + stage.grads_bytes + stage.optimizer_bytes


@pytest.fixture(scope="module")
def table():
    memory_accuracy = pytest.importorskip("memory_accuracy")
    return memory_accuracy, memory_accuracy.rows()


@pytest.mark.parametrize("kind, bound, worst", [("allocated", 0.05, 0.12), ("device", 0.10, 1.0),
                                                ("reserved", 0.10, 1.0)])
def test_held_out_peaks_within_bounds(table, kind, bound, worst):
    mod, rows = table
    s = mod.summary([r["error"] for r in rows if r["kind"] == kind and not r["fitted"] and r["error"] is not None])
    assert s["n"] >= 5 and s["mean"] <= bound and s["max"] <= worst, s


def test_verdicts(table):
    mod, rows = table
    wrong_oom, wrong_ran = mod.verdict_check(rows)
    assert not wrong_oom
    assert not wrong_ran


@pytest.mark.parametrize("stage", [0, 2])
def test_proxy_shape_read_from_its_log_holds_the_logged_states(stage):
    """benchmarks/memory_data.FROM_LOG: with 64 experts and four layers on stages 0 and 2 the states
    (weights, fp32 main grads, optimizer) come within 6% under the logged rest; the data's assumed
    256 experts would be 2.4x over it."""
    from memory_data import load_memory_cases, logged_rest_bytes
    case_id = f"mlm-dsv3proxy-14l-tp1pp4ep16-stage{stage}"
    case = next(c for c in load_memory_cases() if c.case_id == case_id)
    s = estimate(case.model, case.cluster, case.train, case.layout).memory.stages[stage]
    states = s.weights_bytes + s.grads_bytes + s.optimizer_bytes
    assert -0.06 <= states / logged_rest_bytes(case_id) - 1 <= 0
