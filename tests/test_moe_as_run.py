"""MoE as Megatron-Core runs it with tensor parallelism: each GPU dispatches and computes for its own
sequence-parallel shard of the tokens (costmodels.compute._moe_gemms, costmodels.moe_timing.dispatch_tokens)."""

from __future__ import annotations

import hardware_profiles as hp
from costmodels.activations import ActShape
from costmodels.compute import linear_gemms
from costmodels.layout import Layout, resolve_layout
from costmodels.moe_timing import dispatch_tokens
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec


def _ctx(tp: int, sp: bool):
    model = hp.load_model("deepseek-v3-16b")
    cluster = hp.load_cluster("dgx-h100", num_nodes=2)
    train = hp.resolve_train(TrainSpec(global_batch_size=64), "megatron-core")
    lay = Layout(tp=tp, sp=sp, ep=8, etp=1, mbs=1, zero=1)
    return make_context(model, cluster, train, resolve_layout(model, cluster, train, lay))


def test_each_tensor_parallel_rank_dispatches_its_shard():
    """tp=2 with SP: a GPU holds s/2 tokens and dispatches those (Megatron-Core's MoE layer takes
    [s/tp, b, h]); without SP all s."""
    c = _ctx(2, True)
    assert dispatch_tokens(c) == c.x.tokens / 2
    assert dispatch_tokens(_ctx(1, False)) == c.x.tokens


def test_expert_rows_hand_worked():
    """DeepSeek-V3-like: 4,096 tokens, tp=2 with SP, etp=1, ep=8, 64 experts, top-6: a GPU routes
    2,048 x 6 = 12,288 copies to 8 local experts, 1,536 rows each; one grouped GEMM of 12,288 rows."""
    m = hp.load_model("deepseek-v3-16b")
    x = ActShape(seq=4096, mbs=1, tp=2, sp=True, etp=1, ep=8)
    experts = [g for g in linear_gemms(m, x, True, grouped=True) if g.n == m.hidden_size and g.k != m.hidden_size]
    per_rank = 4096 / 2 * m.top_k
    assert m.num_experts == 64 and m.top_k == 6
    assert any(abs(g.m - per_rank) < 1e-6 for g in experts)


def test_nemo_recipes_dispatch_with_deepep():
    """Megatron-Bridge's MoE recipes switch Hopper runs to the flex dispatcher (DeepEP / HybridEP):
    the nemo stack prices their dispatch deduplicated, one copy per destination node."""
    assert hp.load_stack("nemo").ep_dispatcher == "deepep"
    assert hp.load_stack("megatron-core").ep_dispatcher == "alltoall"  # Megatron-LM's default
