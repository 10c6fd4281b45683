"""Expert-parallel dispatch volume: all-to-all sends a copy per (token, expert), DeepEP one per
destination rank and, across nodes, one per destination node (costmodels.moe_dispatch)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import comm
from costmodels.layout import Layout, resolve_layout
from costmodels.moe_dispatch import copies_per_token, dispatch_s, miss_probability
from costmodels.step import step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_miss_probability_hand_worked():
    assert miss_probability(8, 4, 1) == 0.5
    assert math.isclose(miss_probability(8, 4, 2), 4 / 8 * 3 / 7)
    assert miss_probability(8, 4, 5) == 0.0  # 5 distinct experts cannot all avoid 4 of 8


def test_one_expert_per_token_sends_the_same_over_the_network():
    # k = 1: nothing to deduplicate, so DeepEP's network copies are all-to-all's (n - r) / n.
    for n, r, e in ((16, 8, 64), (64, 8, 256), (32, 4, 32)):
        assert math.isclose(copies_per_token("deepep", n, r, e, 1)[0], copies_per_token("alltoall", n, r, e, 1)[0])


def test_deepseek_v3_like_hand_worked():
    # 256 experts, top-8, EP 64 over 8 nodes of 8: all-to-all sends 8 * 56/64 = 7 copies across nodes;
    # DeepEP one per remote node hit: 7 * (1 - C(224, 8) / C(256, 8)) = 7 * (1 - 0.3399) = 4.62.
    q = math.comb(224, 8) / math.comb(256, 8)
    out, inside = copies_per_token("deepep", 64, 8, 256, 8)
    assert math.isclose(out, 7 * (1 - q)) and 4.6 < out < 4.65
    assert copies_per_token("alltoall", 64, 8, 256, 8) == (7.0, 8 * 7 / 64)
    # NVLink: 7 other ranks in each of the 8 nodes, each hit with probability 1 - C(252, 8) / C(256, 8)
    assert math.isclose(inside, 8 * 7 * (1 - math.comb(252, 8) / math.comb(256, 8)))


@st.composite
def groups(draw):
    nodes = draw(st.integers(1, 16))
    r = draw(st.sampled_from([1, 2, 4, 8]))
    per_rank = draw(st.integers(1, 8))
    experts = nodes * r * per_rank
    return nodes * r, r, experts, draw(st.integers(1, min(experts, 16)))


@settings(max_examples=300, deadline=None)
@given(g=groups())
def test_deepep_never_sends_more_across_nodes(g):
    n, r, e, k = g
    dedup, plain = copies_per_token("deepep", n, r, e, k)[0], copies_per_token("alltoall", n, r, e, k)[0]
    assert dedup <= plain + 1e-9
    assert dedup <= n / r - 1 + 1e-9  # at most one copy per other node
    if k < e:
        assert dedup <= copies_per_token("deepep", n, r, e, k + 1)[0] + 1e-9  # more experts, more nodes hit


def test_alltoall_dispatch_is_the_plain_all_to_all():
    links = comm.cluster_links(hp.load_cluster("dgx-h100", 8))
    assert dispatch_s(links, 64, 1, 1e6, "alltoall", 256, 8) == comm.all_to_all_s(links, 64, 1, 8e6)
    assert dispatch_s(links, 1, 1, 1e6, "deepep", 256, 8) == 0.0


def _ep_seconds(dispatcher: str) -> float:
    model = hp.load_model("qwen3-30b-a3b").model_copy(update={"seq_length": 4096})
    cluster = hp.load_cluster("dgx-h100", 4)
    stack = hp.load_stack("automodel").model_copy(update={"ep_dispatcher": dispatcher})
    train = hp.resolve_train(TrainSpec(global_batch_size=256, seq_length=4096, precision="bf16"), stack)
    lay = resolve_layout(model, cluster, train, Layout(ep=32, zero=3, mbs=2, recompute="full"))
    return step_time(make_context(model, cluster, train, lay)).ep_comm_s


def test_deepep_prices_less_expert_traffic_across_nodes():
    dedup, plain = _ep_seconds("deepep"), _ep_seconds("alltoall")
    assert 0 < dedup < 0.8 * plain


def test_automodel_runs_deepep():
    assert hp.load_stack("automodel").ep_dispatcher == "deepep"
    assert hp.load_stack("megatron-core").ep_dispatcher == "alltoall"


@pytest.mark.parametrize("experts, ranks, notes, want", [
    (128, 64, "kernels TE + DeepEP + FlexAttn", 64),
    (32, 8, "kernels TE + DeepEP", 8),
    (128, 48, "DeepEP", 16),
    (128, 64, "kernels TE", 1),
])
def test_deepep_rows_read_with_expert_parallelism(experts, ranks, notes, want):
    measured_data = pytest.importorskip("measured_data")
    model = hp.load_model("qwen3-30b-a3b").model_copy(update={"num_experts": experts})
    assert measured_data.deepep_expert_parallel({"notes": notes}, model, 1, ranks) == want
