"""FP8 costs beside the GEMMs: the casts of every GEMM operand and the FP8 tensor-parallel all-gathers."""

from __future__ import annotations

import pytest
from helpers import cluster, gpt

import hardware_profiles as hp
from costmodels import compute as cmp
from costmodels.layout import Layout, resolve_layout
from costmodels.stack import Stack
from costmodels.timing import layer_time, make_context
from costmodels.train_spec import TrainSpec

H, F, SEQ = 64, 256, 32  # GPT: GELU MLP (f = 4h), fused QKV (3h), context width h


def _ctx(tp: int, precision: str = "bf16", recipe: str = "tensorwise", stack=None, sp: bool = True):
    model, clus = gpt(H, 8, 2, vocab=512, seq=SEQ), cluster(8, gpu=hp.load_gpu("h100-sxm"))
    train = TrainSpec(global_batch_size=8, precision=precision, fp8_recipe=recipe, stack=stack)
    lay = resolve_layout(model, clus, train, Layout(tp=tp, sp=sp and tp > 1, mbs=1))
    return make_context(model, clus, train, lay)


def test_cast_elements_hand_worked():
    """tp 2, M = 32 tokens: forward casts each GEMM's input (M x k) and weight (k x n), backward each
    GEMM's output gradient (M x n): QKV (h -> 3h/2), proj (h/2 -> h), fc1 (h -> f/2), fc2 (f/2 -> h)."""
    c = _ctx(2)
    t, M = 2, c.x.tokens
    assert M == SEQ
    shapes = [(H, 3 * H / t), (H / t, H), (H, F / t), (F / t, H)]
    fwd, bwd = cmp.fp8_cast_elements(c.model, c.x, moe=False)
    assert fwd == pytest.approx(sum(M * k + k * n for k, n in shapes))
    assert bwd == pytest.approx(sum(M * n for _, n in shapes))


def test_output_gradient_casts_shrink_slower_than_gemms_with_tp():
    """The row-parallel projections' output gradients are M x h at any tp, so going from tp 1 to tp 8
    divides the GEMM FLOPs by 8 but the backward casts by less."""
    one, eight = _ctx(1), _ctx(8)
    flops = [cmp.attention_linear_flops(c.model, c.x) + cmp.mlp_flops(c.model, c.x, False) for c in (one, eight)]
    bwd = [cmp.fp8_cast_elements(c.model, c.x, moe=False)[1] for c in (one, eight)]
    assert flops[0] / flops[1] == pytest.approx(8.0)
    assert bwd[0] / bwd[1] < 4.0


def test_casts_cost_time_only_under_fp8():
    """The same layer is slower with casts of 6 bytes per element than with none (FP8 peak alike)."""
    free = Stack(name="no-casts", framework="torchtitan", fp8_cast_bytes_per_element=0.0, layer_overhead_s=0.0)
    paid = Stack(name="casts", framework="torchtitan", fp8_cast_bytes_per_element=6.0, layer_overhead_s=0.0)
    t_free, t_paid = (layer_time(_ctx(2, "fp8", stack=s), False).compute_s for s in (free, paid))
    assert t_paid > t_free
    bf16 = [layer_time(_ctx(2, "bf16", stack=s), False).compute_s for s in (free, paid)]
    assert bf16[0] == bf16[1]


@pytest.mark.parametrize("recipe, sp, cheaper", [("tensorwise", True, True), ("rowwise", True, False),
                                                 ("tensorwise", False, False)])
def test_fp8_tp_gather_moves_one_byte(recipe: str, sp: bool, cheaper: bool):
    """Stack.fp8_tp_gather: with sequence parallelism the gathers of a listed recipe move FP8, so the
    layer's tensor-parallel time drops; other recipes, or no SP, keep bf16 collectives."""
    gather = Stack(name="gather", framework="torchtitan", fp8_tp_gather=["tensorwise"])
    plain = Stack(name="plain", framework="torchtitan")
    tp = [layer_time(_ctx(8, "fp8", recipe, s, sp), False).tp_comm_s for s in (gather, plain)]
    assert (tp[0] < tp[1]) is cheaper
    assert tp[0] <= tp[1]


def test_fp8_mfu_is_also_given_against_the_bf16_peak():
    """mfu is against the run's own peak (fp8: twice bf16's on Hopper); mfu_bf16 is what torchtitan and Megatron
    log, twice it there; null for a bf16 run."""
    from costmodels.estimate import estimate

    model, clus = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", num_nodes=1)
    lay = Layout(dp=8, zero=1, mbs=1, recompute="selective")
    fp8 = estimate(model, clus, hp.resolve_train(TrainSpec(global_batch_size=8, precision="fp8"), "megatron-core"), lay)
    bf16 = estimate(model, clus, hp.resolve_train(TrainSpec(global_batch_size=8), "megatron-core"), lay)
    gpu = clus.gpu_profile
    assert fp8.throughput.mfu_bf16 == pytest.approx(fp8.throughput.mfu * gpu.fp8_tflops / gpu.bf16_tflops)
    assert bf16.throughput.mfu_bf16 is None
