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
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.moe_dispatch import allgather_dispatch_s, copies_per_token, dispatch_s, miss_probability
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


def test_allgather_dispatch_gathers_the_whole_tp_ep_group():
    # Megatron's MoEAllGatherTokenDispatcher: all-gather over tp x ep of every rank's X1 bytes, ring over 8 GPUs
    links = comm.cluster_links(hp.load_cluster("dgx-h100", 1))
    assert allgather_dispatch_s(links, 8, 1e6) == comm.all_gather_s(links, 8, 1, 8e6)
    assert allgather_dispatch_s(links, 1, 1e6) == 0.0


def _mixtral_ep_s(dispatcher: str) -> float:
    model = hp.load_model("mixtral-8x7b")
    cluster = hp.load_cluster("dgx-h100", 1)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096, precision="bf16",
                                       moe_dispatcher=dispatcher), "megatron-core")
    lay = resolve_layout(model, cluster, train, Layout(ep=8, zero=1, recompute="full"))
    return step_time(make_context(model, cluster, train, lay)).ep_comm_s


def test_allgather_dispatcher_is_priced_in_time_not_only_memory():
    # top-2 of 8 experts over 8 ranks: all-to-all receives 2 x 7/8 of a rank's tokens, all-gather 7 x
    ag, a2a = _mixtral_ep_s("allgather"), _mixtral_ep_s("alltoall")
    assert ag > 2 * a2a > 0


def test_megatron_dispatcher_flag_sets_what_the_time_prices():
    # a Megatron script's --moe-token-dispatcher-type decides the priced dispatch; flex (DeepEP/HybridEP) dedups
    from planner.frameworks.megatron.train import EP_DISPATCHERS

    assert EP_DISPATCHERS == {"allgather": "allgather", "alltoall": "alltoall", "alltoall_seq": "alltoall",
                              "flex": "deepep"}
    model = hp.load_model("qwen3-30b-a3b")
    cluster = hp.load_cluster("dgx-h100", 4)
    seconds = {}
    for d in ("alltoall", "deepep", "allgather"):
        train = hp.resolve_train(TrainSpec(global_batch_size=256, seq_length=4096, precision="bf16",
                                           ep_dispatcher=d), "megatron-core")
        lay = resolve_layout(model, cluster, train, Layout(ep=32, zero=1, recompute="full"))
        seconds[d] = step_time(make_context(model, cluster, train, lay)).ep_comm_s
    # top-8 over 4 nodes: DeepEP sends each token once per node hit, all-to-all once per expert; the all-gather
    # moves 31 copies, but as rings that use all 8 NICs of a node and NVLink inside it, not one NIC per GPU
    assert 0 < seconds["deepep"] < seconds["alltoall"]
    assert seconds["allgather"] > 0 and seconds["allgather"] != seconds["alltoall"]


MEGATRON = """torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py \\
  --num-layers 8 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 --group-query-attention \\
  --num-query-groups 4 --seq-length 4096 --vocab-size 151936 --swiglu --normalization RMSNorm \\
  --position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear \\
  --num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 768 --expert-model-parallel-size 16 \\
  --use-distributed-optimizer --micro-batch-size 1 --global-batch-size 64 --bf16 {extra}
"""


def _script_ep_s(extra: str) -> tuple[str | None, float]:
    from planner.files.native import load_native_text

    p = load_native_text(MEGATRON.format(extra=extra), "megatron", None, "dgx-h100", None)
    return p.train.ep_dispatcher, estimate(p.model, p.cluster, p.train, p.layout).time.ep_comm_s


def test_megatron_script_dispatcher_is_what_the_time_prices():
    a2a, flex = _script_ep_s("--moe-token-dispatcher-type alltoall"), _script_ep_s(
        "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep")
    assert a2a[0] == "alltoall" and flex[0] == "deepep"
    assert 0 < flex[1] < a2a[1]  # EP16 over 2 nodes: DeepEP sends a token once per node, all-to-all once per expert
    assert _script_ep_s("--moe-token-dispatcher-type flex --moe-enable-deepep")[0] == "deepep"
    default = _script_ep_s("")  # no flag: Megatron's default dispatcher (TransformerConfig), not the stack's
    assert default[0] == "allgather" and default[1] != a2a[1]


def test_megatron_refuses_deepep_without_the_flex_dispatcher():
    """megatron-core TransformerConfig.__post_init__ raises 'DeepEP backend is only supported with flex token
    dispatcher.'; the reader exits 2 the same way instead of pricing DeepEP."""
    from planner.errors import UserError

    with pytest.raises(UserError, match="--moe-enable-deepep needs --moe-token-dispatcher-type flex"):
        _script_ep_s("--moe-enable-deepep")
