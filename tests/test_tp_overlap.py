"""TP communication overlap by implementation: Transformer Engine userbuffers hide every TP collective;
PyTorch's micro-pipeline (async) TP leaves exposed the collectives it cannot fuse with a matmul
(costmodels.layer_comm._tp_unfused_s)."""

from __future__ import annotations

import pytest
from helpers import cluster, gpt, llama_like

import hardware_profiles as hp
from costmodels import comm
from costmodels import compute as cmp
from costmodels.layout import Layout, resolve_layout
from costmodels.overlap import exposed_s
from costmodels.stack import Stack
from costmodels.layer_comm import _tp_unfused_s, tp_overlap_applies, tp_s
from costmodels.timing import layer_time, make_context
from costmodels.train_spec import TrainSpec

H = 4096


def _stack(impl: str) -> Stack:
    return Stack(name=impl, framework="torchtitan", tp_overlap_impl=impl, fp8_tp_gather=["tensorwise"],
                 overlap_slowdown=0.2, layer_overhead_s=0.0)


def _ctx(impl: str, precision: str = "bf16", recipe: str = "tensorwise", recompute: str = "none", swiglu: bool = True,
         sp: bool = True, overlap: bool = True):
    model = llama_like(H, 32, 8, 8, 14336) if swiglu else gpt(H, 32, 8, vocab=32000, seq=4096)
    clus = cluster(8, gpu=hp.load_gpu("h100-sxm"))
    train = TrainSpec(global_batch_size=8, precision=precision, fp8_recipe=recipe, stack=_stack(impl),
                      tp_comm_overlap=overlap)
    lay = resolve_layout(model, clus, train, Layout(tp=8, sp=sp, mbs=1, recompute=recompute))
    return make_context(model, clus, train, lay)


def _pass_s(c, bytes_per_element: float) -> float:
    """One pass's 2 all-reduces at `bytes_per_element`, as costmodels.timing prices a pass."""
    return 2 * comm.all_reduce_s(c.links, 8, 1, c.x.tokens * H * bytes_per_element)


def test_userbuffers_leave_nothing_unfused():
    c = _ctx("userbuffers")
    assert _tp_unfused_s(c, 1.0, 0) == 0.0


def test_bf16_micro_pipeline_leaves_the_backward_reduce_scatters():
    """bf16: gathers fuse with the matmuls they feed; of a backward pass, the 2 reduce-scatters of the
    input gradients (half of a pass's bytes) stay exposed, whatever the recompute."""
    for recompute, extra in (("none", 0), ("full", 1)):
        c = _ctx("micro-pipeline", recompute=recompute)
        assert _tp_unfused_s(c, 3.0, extra) == pytest.approx(1.5)


def test_a_gelu_mlp_input_gradient_fuses():
    """GELU: the MLP input gradient comes from one fc1 matmul and fuses; only the attention's (wq, wk, wv
    summed) stays exposed: a quarter of a pass."""
    c = _ctx("micro-pipeline", swiglu=False)
    assert _tp_unfused_s(c, 4.0, 0) == pytest.approx(1.0)


def test_rowwise_gathers_stay_exposed_in_every_pass():
    """Rowwise FP8 gathers 16-bit data and casts after the gather, so no gather fuses: exposed are the
    backward reduce-scatters plus the gather half of every pass (3 passes with full recompute)."""
    c = _ctx("micro-pipeline", "fp8", "rowwise", recompute="full")
    assert _tp_unfused_s(c, 2.0, 1) == pytest.approx(1.0 + 3 * 1.0)


def test_tensorwise_gathers_fuse_and_move_one_byte():
    """Tensorwise casts before the gather (1 byte), which then feeds the FP8 matmul and fuses: only the
    backward reduce-scatters (2 of a pass's 3 bytes per element) stay exposed."""
    c = _ctx("micro-pipeline", "fp8", "tensorwise")
    assert _tp_unfused_s(c, 3.0, 0) == pytest.approx(2.0)


def test_exposed_tp_is_the_overlap_of_the_fused_part_plus_the_unfused():
    c = _ctx("micro-pipeline")
    tp_pass = _pass_s(c, cmp.ACT_BYTES)
    lin = 1e-3
    want = exposed_s(3 * lin, 2 * tp_pass - tp_pass / 2, 0.2) + tp_pass / 2
    assert tp_s(c, lin, 0) == pytest.approx(want)


@pytest.mark.parametrize("precision, recipe", [("bf16", "tensorwise"), ("fp8", "tensorwise"), ("fp8", "rowwise")])
def test_micro_pipeline_is_never_faster_than_userbuffers(precision: str, recipe: str):
    ub, mp = (layer_time(_ctx(i, precision, recipe), False).tp_comm_s for i in ("userbuffers", "micro-pipeline"))
    assert mp > ub


def test_async_tp_saves_less_under_rowwise_than_bf16():
    """torchtitan's async-TP benchmark (Llama 3 8B, TP 8): async TP saved 0.25 s in bf16 and 0.17 s with
    rowwise FP8 (rows TT-025/026 and TT-029/030); the rowwise gathers cannot fuse."""
    def saving(precision: str, recipe: str) -> float:
        on = layer_time(_ctx("micro-pipeline", precision, recipe), False).tp_comm_s
        off_train = TrainSpec(global_batch_size=8, precision=precision, fp8_recipe=recipe,
                              stack=_stack("micro-pipeline"), tp_comm_overlap=False)
        c = _ctx("micro-pipeline", precision, recipe)
        off = layer_time(make_context(c.model, c.cluster, off_train, c.lay), False).tp_comm_s
        return off - on
    assert saving("fp8", "rowwise") < saving("bf16", "tensorwise")


@pytest.mark.parametrize("impl", ["userbuffers", "micro-pipeline"])
def test_without_sequence_parallelism_nothing_overlaps(impl: str):
    """sp = 0 runs plain all-reduces, which neither implementation overlaps (Megatron refuses
    --tp-comm-overlap without --sequence-parallel; the micro-pipeline pass fuses only all-gathers and
    reduce-scatters): asking for overlap then costs exactly what not asking does."""
    asked, plain = _ctx(impl, sp=False), _ctx(impl, sp=False, overlap=False)
    assert not tp_overlap_applies(asked.train, asked.lay) and tp_overlap_applies(_ctx(impl).train, _ctx(impl).lay)
    lin = 1e-3
    assert tp_s(asked, lin, 0) == pytest.approx(tp_s(plain, lin, 0)) == pytest.approx(2 * _pass_s(asked, 2.0))
    assert tp_s(_ctx(impl), lin, 0) < tp_s(asked, lin, 0)
