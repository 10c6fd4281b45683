"""Invariants of three mechanisms read from the tools' own code (hypothesis over random shapes): a chunked loss
never holds more logits than an unchunked one (costmodels.memory.loss_transient_bytes, TrainSpec.loss_chunks), the
unfused permute never costs less than the fused one behind the all-to-all and DeepEP dispatchers (costmodels.moe_timing;
not behind the all-gather, whose fused kernels stream all g T gathered rows where index_select reads only the P local
ones: at top-1 and ep 8 the unfused pair is priced 2% cheaper, and may be), and DeepSpeed
never overlaps the gradient reduction at ZeRO 0 or under a pipeline while Megatron-Core follows the run's setting
(costmodels.step.grad_reduce_overlaps)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels.layout import Layout, resolve_layout
from costmodels.memory import loss_transient_bytes
from costmodels.moe_timing import permute_backward_s, permute_s
from costmodels.step import grad_reduce_overlaps
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec
from tests.helpers import llama_like

CLUSTER = hp.load_cluster("dgx-h100", 2)


@settings(max_examples=40, deadline=None)
@given(hidden=st.sampled_from([1024, 2048, 4096]), vocab=st.sampled_from([32000, 128256]),
       seq=st.sampled_from([2048, 4096, 8192]), tp=st.sampled_from([1, 2]), chunks=st.integers(2, 32))
def test_more_loss_chunks_never_hold_more(hidden, vocab, seq, tp, chunks):
    model = llama_like(hidden, 16, 8, 4, hidden * 4, vocab=vocab, seq=seq)
    base = hp.resolve_train(TrainSpec(global_batch_size=16, seq_length=seq), "torchtitan-eager")
    lay = resolve_layout(model, CLUSTER, base, Layout(tp=tp, sp=tp > 1, zero=3, mbs=1))

    def held(n: int) -> float:
        return loss_transient_bytes(model, base.model_copy(update={"loss_chunks": n}), lay, 0)

    assert held(2 * chunks) <= held(chunks) <= held(1) + 4 * seq * hidden


@settings(max_examples=30, deadline=None)
@given(dispatcher=st.sampled_from(["alltoall", "deepep"]), ep=st.sampled_from([1, 2, 4, 8]),
       topk=st.sampled_from([1, 2, 8]), hidden=st.sampled_from([1024, 2048, 4096]))
def test_the_unfused_permute_never_costs_less_than_the_fused_one(dispatcher, ep, topk, hidden):
    model = llama_like(hidden, 16, 8, 4, hidden * 4).model_copy(
        update={"num_experts": 16, "top_k": topk, "moe_ffn_hidden_size": hidden})

    def context(fused: bool):
        train = hp.resolve_train(TrainSpec(global_batch_size=32, seq_length=4096, ep_dispatcher=dispatcher,
                                           moe_permute_fusion=fused), "megatron-core")
        return make_context(model, CLUSTER, train, resolve_layout(model, CLUSTER, train, Layout(ep=ep, mbs=1)))

    fused, unfused = context(True), context(False)
    assert permute_s(unfused) >= permute_s(fused) and permute_backward_s(unfused) >= permute_backward_s(fused)


@settings(max_examples=40, deadline=None)
@given(zero=st.integers(0, 2), pp=st.sampled_from([1, 2, 4]), overlap=st.booleans())
def test_deepspeed_overlaps_only_what_it_can(zero, pp, overlap):
    model = llama_like(2048, 16, 16, 8, 8192)
    for stack in ("deepspeed", "megatron-core"):
        train = hp.resolve_train(TrainSpec(global_batch_size=64, overlap_grad_reduce=overlap), stack)
        lay = resolve_layout(model, CLUSTER, train, Layout(zero=zero, pp=pp, mbs=1))
        got = grad_reduce_overlaps(make_context(model, CLUSTER, train, lay))
        if stack == "deepspeed" and (zero == 0 or pp > 1):
            assert not got
        else:
            assert got == overlap
