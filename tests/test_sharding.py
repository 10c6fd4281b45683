"""Sharded data parallelism as it executes: ZeRO-3/FSDP per unit, DeepSpeed's packed fetches, HSDP,
ZeRO-2's per-micro-batch reduction, and the overlap rule (costmodels.overlap, sharding, step)."""

from __future__ import annotations

import pytest
from helpers import cluster, gpt
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import sharding
from costmodels.layout import Layout, resolve_layout
from costmodels.memory import memory_by_stage
from costmodels.overlap import exposed_s
from costmodels.params import local_layer_params
from costmodels.step import dp_comm_s, step_time
from costmodels.timing import layer_time, make_context
from costmodels.train_spec import TrainSpec


def test_exposed_hand_worked():
    """Nothing to hide behind: all of it; short collective: kappa of it; long one: the excess (+ kappa f)."""
    assert exposed_s(0.0, 2.0, 0.3) == pytest.approx(2.0)
    assert exposed_s(5.0, 2.0, 0.3) == pytest.approx(0.6)
    assert exposed_s(1.0, 3.0, 0.0) == pytest.approx(2.0)
    assert exposed_s(1.0, 3.0, 0.5) == pytest.approx(2.0)  # max(1 + 0.5, 3) - 1


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 10), st.floats(0, 10), st.floats(0, 1))
def test_exposed_never_negative_nor_above_the_collective(f, g, kappa):
    """0 <= exposed <= g: overlap can hide a collective, never make it cost more than running alone."""
    assert -1e-12 <= exposed_s(f, g, kappa) <= g + 1e-12


def test_deepspeed_fetches_a_gpt_layer_in_four_calls():
    """ZeRO++ tutorial's 18B GPT (h 6144): fused QKV 113M, proj 38M, fc1 151M, fc2 151M parameters;
    50M-element prefetch buckets: QKV alone, proj + fc1, fc2, the small rest = 4 calls; FSDP: 1."""
    model = gpt(6144, 32, 40, vocab=50304, seq=512)
    mats = sharding.layer_matrices(model, False, 1, 1, 1)
    assert [round(m / 1e6) for m in mats] == [113, 38, 151, 151]
    assert sharding.fetch_calls(mats, 50) == 4
    assert sharding.fetch_calls(mats, None) == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(1e3, 1e9), min_size=1, max_size=12), st.floats(1, 500), st.floats(1, 4))
def test_larger_buckets_never_more_calls(mats, bucket, factor):
    assert sharding.fetch_calls(mats, bucket * factor) <= sharding.fetch_calls(mats, bucket)


def _ctx(gpus: int, layout: Layout, stack: str = "torchtitan", out_gb_per_s: float = 50.0, gbs: int | None = None):
    model = gpt(4096, 32, 8, vocab=32000, seq=2048)
    clus = cluster(gpus).model_copy(update={"scale_out_gb_per_s": out_gb_per_s})
    train = hp.resolve_train(TrainSpec(global_batch_size=gbs or gpus * layout.mbs), stack)
    return make_context(model, clus, train, resolve_layout(model, clus, train, layout))


def test_zero3_pays_per_layer_and_slower_network_costs_more():
    """ZeRO-3 without pipelining books per-layer collectives; a 10x slower network exposes more of them."""
    lay = Layout(zero=3, mbs=1)
    fast, slow = _ctx(64, lay), _ctx(64, lay, out_gb_per_s=5.0)
    assert layer_time(fast, False).dp_comm_s >= 0
    assert layer_time(slow, False).dp_comm_s > layer_time(fast, False).dp_comm_s
    assert step_time(slow).step_s > step_time(fast).step_s


def test_prefetch_and_resharding_cost_what_they_should():
    """No prefetch exposes every gather; keeping weights after forward saves the backward gather."""
    lay = Layout(zero=3, mbs=1)
    base = _ctx(64, lay, out_gb_per_s=5.0)
    stack = base.train.stack_spec
    no_prefetch = base.train.model_copy(update={"stack": stack.model_copy(update={"zero3_prefetch": 0})})
    keep = base.train.model_copy(update={"stack": stack.model_copy(update={"reshard_after_forward": False})})
    t = step_time(base).step_s
    assert step_time(make_context(base.model, base.cluster, no_prefetch, base.lay)).step_s >= t
    assert step_time(make_context(base.model, base.cluster, keep, base.lay)).step_s <= t


def test_deepspeed_ring_latency_grows_with_ranks():
    """DeepSpeed's bucketed gathers pay (n-1) ring steps each: 512 ranks expose more than 64."""
    lay = Layout(zero=3, mbs=1)
    small, large = _ctx(64, lay, stack="deepspeed"), _ctx(512, lay, stack="deepspeed")
    assert layer_time(large, False).dp_comm_s > layer_time(small, False).dp_comm_s


def test_hsdp_shards_inside_the_node():
    """HSDP with 8-rank shard groups: more state memory than full sharding over 64, less exposed time
    on a slow network (gathers stay on NVLink; only a shard's all-reduce crosses nodes)."""
    full, hsdp = Layout(zero=3, mbs=1), Layout(zero=3, mbs=1, shard_group=8)
    a, b = _ctx(64, full, out_gb_per_s=2.0), _ctx(64, hsdp, out_gb_per_s=2.0)
    assert b.lay.replicas == 8 and b.lay.dense_shards == 8
    mem = [memory_by_stage(c.model, c.cluster, c.train, c.lay)[0] for c in (a, b)]
    assert mem[1].weights_bytes > mem[0].weights_bytes
    assert layer_time(b, False).dp_comm_s < layer_time(a, False).dp_comm_s


def test_zero2_reduces_every_microbatch():
    """ZeRO-2 keeps gradients sharded between micro-batches: m reductions per step where ZeRO-1 has one."""
    z1, z2 = (_ctx(16, Layout(zero=z, mbs=1), gbs=64) for z in (1, 2))
    assert z1.lay.num_microbatches == 4
    params = local_layer_params(z1.model, False, 1, 1, 1)
    assert dp_comm_s(z2, params)[0] == pytest.approx(4 * dp_comm_s(z1, params)[0])


def test_zero3_with_pipelining_holds_zero1_memory():
    """Pipelining keeps a stage's weights gathered and its gradients whole for the step: ZeRO-1 memory."""
    z3, z1 = (_ctx(64, Layout(zero=z, pp=2, mbs=1), gbs=128) for z in (3, 1))
    m3, m1 = (memory_by_stage(c.model, c.cluster, c.train, c.lay) for c in (z3, z1))
    assert [s.total_bytes for s in m3] == [s.total_bytes for s in m1]
