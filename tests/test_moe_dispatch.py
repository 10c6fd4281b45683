"""Expert-parallel dispatch volume: all-to-all sends a copy per (token, expert), DeepEP one per
destination rank and, across nodes, one per destination node (costmodels.moe_dispatch)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
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
from planner.errors import UserError

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


def _megatron_routing(experts: int, top_k: int, groups: int, chosen: int, tokens: int = 20000):
    """Expert ids per token as Megatron-Core's moe_utils.group_limited_topk picks them from independent normal
    scores: the `chosen` groups with the largest sum of their top top_k // chosen scores, then the top_k experts
    among those groups'."""
    rng = np.random.default_rng(7)
    scores = rng.standard_normal((tokens, experts))
    per = experts // groups
    group_scores = np.sort(scores.reshape(tokens, groups, per), axis=-1)[:, :, -(top_k // chosen):].sum(-1)
    mask = np.full((tokens, groups), -np.inf)
    np.put_along_axis(mask, np.argsort(-group_scores, axis=1)[:, :chosen], 0.0, axis=1)
    return np.argsort(-(scores + np.repeat(mask, per, axis=1)), axis=1)[:, :top_k]


@pytest.mark.parametrize("experts,top_k,n,r,groups,chosen", [
    (256, 8, 64, 8, 8, 4),   # DeepSeek-V3 on 8 nodes: a group per node
    (256, 8, 64, 8, 4, 2),   # two nodes per group
    (256, 8, 64, 8, 16, 4),  # two groups per node
    (64, 6, 16, 4, 8, 3),    # DeepSeek-V2-like device-limited, a group per two ranks
])
def test_group_limited_copies_match_megatrons_routing(experts, top_k, n, r, groups, chosen):
    """The closed forms against group_limited_topk itself, simulated on 20,000 tokens: the other nodes a token of
    node 0 reaches (the network copies) within 3%, and the distinct ranks it reaches (hit(E / n) n) within 5%."""
    ids = _megatron_routing(experts, top_k, groups, chosen)
    ranks = ids // (experts // n)
    nodes = np.mean([len(set(row) - {0}) for row in ranks // r])
    reached = np.mean([len(set(row)) for row in ranks])
    out, inside = copies_per_token("deepep", n, r, experts, top_k, groups, chosen)
    assert out == pytest.approx(nodes, rel=0.03)
    assert inside / (n // r * (r - 1)) * n == pytest.approx(reached, rel=0.05)


def test_deepseek_v3_node_limited_routing_hand_worked():
    """DeepSeek-V3 (E 256, k 8, 8 groups, 4 per token) over ep 64 = 8 nodes x 8: a node is one group, and every
    chosen group receives experts, so a token reaches 4 nodes: (8 - 1) x (1 - C(7, 4) / C(8, 4)) = 3.5 network
    copies per token (the report's "at most 4 nodes" less its own), against 4.63 unrestricted."""
    out, _ = copies_per_token("deepep", 64, 8, 256, 8, 8, 4)
    assert out == pytest.approx(7 * (1 - math.comb(7, 4) / math.comb(8, 4)), rel=1e-12) == pytest.approx(3.5)
    assert out < copies_per_token("deepep", 64, 8, 256, 8)[0]
    assert copies_per_token("deepep", 64, 8, 256, 8, 8, 8) == copies_per_token("deepep", 64, 8, 256, 8)
    # fewer experts than groups per token (k 2 < M 4, a review): they reach at most 2 groups, 2 / 8 of the nodes
    assert copies_per_token("deepep", 64, 8, 64, 2, 8, 4)[0] == pytest.approx(7 * 2 / 8)


@settings(max_examples=60, deadline=None)
@given(nodes_log=st.integers(1, 4), per_node_log=st.integers(0, 3), groups_log=st.integers(0, 6),
       chosen=st.integers(1, 64), top_k=st.integers(1, 16))
def test_group_limited_copies_stay_within_what_the_routing_allows(nodes_log, per_node_log, groups_log, chosen, top_k):
    """A token reaches at most k ranks, and across nodes at most the nodes its M groups span (M when groups hold
    whole nodes or more), never more than the other N - 1."""
    r, nodes, experts = 2 ** per_node_log, 2 ** nodes_log, 256
    groups = 2 ** groups_log
    chosen = min(chosen, groups)
    top_k = max(chosen, min(top_k, chosen * experts // groups))
    out, inside = copies_per_token("deepep", nodes * r, r, experts, top_k, groups, chosen)
    span = chosen * max(1, nodes // groups) if chosen < groups else nodes
    assert 0 <= out <= min(nodes - 1, top_k, span) + 1e-9
    if r > 1:  # inside = N (r - 1) hit(E / n): the ranks reached, n hit(E / n), are at most k
        assert 0 <= inside / (nodes * (r - 1)) * nodes * r <= min(top_k, nodes * r) + 1e-9


def test_the_routing_groups_are_read_and_written_as_megatron_and_hugging_face_name_them(tmp_path):
    """--moe-router-num-groups / --moe-router-group-topk (Megatron needs the second for any restriction) and
    n_group / topk_group (DeepSeek-V3 always; DeepSeek-V2 only with topk_method group_limited_greedy) become the
    spec's fields."""
    from planner.files.hf_config import model_from_hf_config  # noqa: PLC0415
    from planner.frameworks.megatron import flags as mf  # noqa: PLC0415
    from planner.files.shellread import parse_flags  # noqa: PLC0415

    def read(words):
        return mf.moe_data(mf.MegatronArgs(parse_flags(words, mf.SWITCHES), [], {}), 61)

    base = ["--num-experts", "256", "--moe-router-topk", "8", "--moe-router-num-groups", "8"]
    assert "moe_router_group_topk" not in read(base)
    got = read(base + ["--moe-router-group-topk", "4"])
    assert (got["moe_router_num_groups"], got["moe_router_group_topk"]) == (8, 4)
    deprecated = read(["--num-experts", "256", "--moe-router-topk", "8", "--expert-model-parallel-size", "16",
                       "--moe-router-topk-limited-devices", "3"])  # TransformerConfig: D of the ep ranks' groups
    assert (deprecated["moe_router_num_groups"], deprecated["moe_router_group_topk"]) == (16, 3)
    with pytest.raises(UserError, match="moe_router_num_groups must be specified"):
        read(["--num-experts", "256", "--moe-router-topk", "8", "--moe-router-group-topk", "4"])
    assert hp.load_model("deepseek-v3").moe_router_group_topk == 4
    v3 = {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
          "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
          "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
          "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
          "n_group": 8, "topk_group": 4, "topk_method": "noaux_tc"}
    spec = model_from_hf_config(v3)
    assert (spec.moe_router_num_groups, spec.moe_router_group_topk) == (8, 4)
    bare = {k: v for k, v in v3.items() if k not in ("n_group", "topk_group", "topk_method")}
    assert model_from_hf_config(bare).moe_router_group_topk == 4  # DeepseekV3Config defaults, always applied
    v2 = {**bare, "model_type": "deepseek_v2", "n_group": 8, "topk_group": 3}
    assert model_from_hf_config(v2).moe_router_num_groups == 1  # topk_method absent: "greedy", every expert
    grouped = model_from_hf_config({**v2, "topk_method": "group_limited_greedy"})
    assert (grouped.moe_router_num_groups, grouped.moe_router_group_topk) == (8, 3)


@pytest.mark.parametrize("fields,message", [
    ({"moe_router_num_groups": 3}, "must divide num_experts=256"),
    ({"moe_router_num_groups": 8, "moe_router_group_topk": 9}, "at most moe_router_num_groups=8"),
    ({"moe_router_num_groups": 64, "moe_router_group_topk": 1}, "top_k=8 must be at most the 4 experts"),
])
def test_routing_groups_are_refused_as_megatron_refuses_them(fields, message):
    from pydantic import ValidationError  # noqa: PLC0415

    spec = {**hp.load_model("deepseek-v3").model_dump(), **fields}
    if "moe_router_group_topk" not in fields:  # left out: the groups' count (no limit) at validation
        spec.pop("moe_router_group_topk")
    with pytest.raises(ValidationError, match=message):
        type(hp.load_model("deepseek-v3")).model_validate(spec)


def test_a_dumped_spec_keeps_the_group_limit_unset():
    """model_dump wrote moe_router_group_topk 1 for every model, so a user who then set moe_router_num_groups 8 in the
    dumped file got 1 group of 8 per token without a word (a review); null stays null: every group."""
    spec = hp.load_model("qwen3-30b-a3b").model_dump()
    assert spec["moe_router_group_topk"] is None
    edited = type(hp.load_model("qwen3-30b-a3b")).model_validate({**spec, "moe_router_num_groups": 8})
    assert edited.routed_groups == 8
    assert copies_per_token("deepep", 64, 8, 128, 8, 8, edited.routed_groups) == copies_per_token("deepep", 64, 8, 128, 8)
    dense = hp.load_model("llama3-8b").model_dump()
    with pytest.raises(ValueError, match="need num_experts > 0"):
        type(hp.load_model("llama3-8b")).model_validate({**dense, "moe_router_group_topk": 3})
