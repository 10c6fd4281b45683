"""The token dispatcher and permute a Megatron-Core MoE script runs, as the reader reads it, the time prices it and the
exporter writes it (megatron-core 0.19.2: TransformerConfig.moe_token_dispatcher_type defaults to allgather, and
every dispatcher calls moe_utils.permute / unpermute with fused=moe_permute_fusion; HybridEP permutes inside its
own kernels)."""

from __future__ import annotations

import pytest

import hardware_profiles as hp
from costmodels import moe_compute
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.moe_timing import permute_backward_s, permute_s
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec
from planner.files.native import load_native_text

SCRIPT = """torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py \\
  --num-layers 8 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 --group-query-attention \\
  --num-query-groups 4 --seq-length 4096 --vocab-size 151936 --swiglu --normalization RMSNorm \\
  --position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear \\
  --num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 768 --expert-model-parallel-size 16 \\
  --moe-grouped-gemm --use-distributed-optimizer --micro-batch-size 1 --global-batch-size 64 --bf16 {extra}
"""


def _read(extra: str):
    return load_native_text(SCRIPT.format(extra=extra), "megatron", None, "dgx-h100", None)


def _context(dispatcher: str, fused: bool, ep: int = 16):
    model = hp.load_model("qwen3-30b-a3b")
    cluster = hp.load_cluster("dgx-h100", 2)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096, ep_dispatcher=dispatcher,
                                       moe_permute_fusion=fused), "megatron-core")
    return make_context(model, cluster, train, resolve_layout(model, cluster, train, Layout(ep=ep, dp=16)))


def test_a_script_without_the_dispatcher_flag_runs_and_is_priced_as_allgather():
    read = _read("--moe-permute-fusion")
    assert read.train.ep_dispatcher == "allgather" and read.train.moe_permute_fusion
    explicit = _read("--moe-permute-fusion --moe-token-dispatcher-type allgather")
    same = estimate(read.model, read.cluster, read.train, read.layout).time.step_s
    assert same == estimate(explicit.model, explicit.cluster, explicit.train, explicit.layout).time.step_s


def test_hybridep_permutes_in_its_own_kernels_so_the_flag_does_not_matter():
    hybrid = _read("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep")
    deepep = _read("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep")
    assert hybrid.train.moe_permute_fusion is True and deepep.train.moe_permute_fusion is False


def test_unfused_bytes_off_the_all_to_all_are_the_local_rows_without_the_probability_multiply():
    """Hand-worked at Qwen3's EP16 shapes: R = P h 2 with P = 4096 x 8 routed rows; DeepEP forward 9.5 R, backward
    2 R and R atomic; the all-gather adds the 16 x 4096 gathered rows' zero fill (16 x 4096 x 2048 x 2 bytes) to both
    passes."""
    c = _context("deepep", False)
    r = 4096 * 8 * 2048 * 2
    assert moe_compute.unfused_permute_bytes(c.model, c.x, "deepep") == pytest.approx((9.5 * r, 2 * r, r))
    zeros = 16 * 4096 * 2048 * 2
    assert moe_compute.unfused_permute_bytes(c.model, c.x, "allgather") == pytest.approx(
        (9.5 * r + zeros, 2 * r + zeros, r))


@pytest.mark.parametrize("dispatcher", ["alltoall", "allgather", "deepep"])
def test_every_dispatcher_pays_for_the_unfused_permute(dispatcher):
    """Before, only the all-to-all's was priced: a script on the all-gather (Megatron's default) or DeepEP without
    --moe-permute-fusion got the fused price. The atomic index_add makes the backward at least 1.5x the fused one."""
    fused, unfused = _context(dispatcher, True), _context(dispatcher, False)
    assert permute_s(unfused) > permute_s(fused) and permute_backward_s(unfused) > 1.5 * permute_backward_s(fused)


def test_the_exporter_writes_the_dispatcher_the_plan_priced():
    from planner.frameworks.megatron.export import dispatcher_args

    nemo = hp.resolve_train(TrainSpec(global_batch_size=8), "nemo")
    mcore = hp.resolve_train(TrainSpec(global_batch_size=8), "megatron-core")
    assert dispatcher_args(nemo) == [("--moe-token-dispatcher-type", "flex"),
                                     ("--moe-flex-dispatcher-backend", "deepep")]
    assert dispatcher_args(mcore) == [("--moe-token-dispatcher-type", "alltoall")]
    asked = hp.resolve_train(TrainSpec(global_batch_size=8, ep_dispatcher="allgather"), "nemo")
    assert dispatcher_args(asked) == [("--moe-token-dispatcher-type", "allgather")]


def test_check_says_when_megatrons_default_dispatcher_is_priced():
    """At ep > 1 a script without --moe-token-dispatcher-type gets one warning line naming the allgather priced."""
    without = _read("--moe-permute-fusion")
    said = [w for w in without.warnings if "--moe-token-dispatcher-type is not set" in w]
    assert len(said) == 1 and "allgather" in said[0]
    assert not any("dispatcher-type" in w for w in _read("--moe-token-dispatcher-type alltoall").warnings)
