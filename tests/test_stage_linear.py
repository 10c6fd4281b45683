"""The planner's affine stage coefficients reproduce the cost model exactly (memory and step time)."""

from __future__ import annotations

import pytest
from helpers import cluster, gpt, llama_like
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.layout import Layout, resolve_layout
from costmodels.memory import memory_by_stage
from costmodels.model_spec import ModelSpec
from costmodels.params import stage_layer_mix
from costmodels.stage_linear import LayoutCoefficients, layout_coefficients
from costmodels.step import step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec


def step_from_coefficients(k: LayoutCoefficients, counts: list[tuple[int, int]]) -> float:
    """The step formula of costmodels.stage_linear's docstring, evaluated on the coefficients."""
    t = [s.time_s.at(*n) for s, n in zip(k.stages, counts)]
    m, v = k.num_microbatches, k.vpp
    dp = []
    for s, n, ti in zip(k.stages, counts, t):
        r, g = s.dp_reduce_s.at(*n), s.dp_gather_s.at(*n)
        reduce = max(0.0, r - k.overlap.windows * 2 * ti / 3) if k.overlap.reduce else r
        dp.append(reduce + (max(0.0, g - ti / 3) if k.overlap.gather else g))
    opt = max(s.optimizer_s.at(*n) for s, n in zip(k.stages, counts))
    return (m - 1 / v) * max(t) + sum(t) / v + k.pp_comm_s + max(dp) + opt + k.overhead_s


MOE = ModelSpec(name="tiny-moe", num_layers=8, hidden_size=256, num_attention_heads=8, num_kv_heads=4,
                ffn_hidden_size=512, vocab_size=1000, seq_length=512, activation="swiglu", norm="rmsnorm",
                position_embedding="rope", linear_bias=False, dropout=False, num_experts=8, top_k=2,
                moe_ffn_hidden_size=128, first_k_dense_layers=3)
MOE_MTP = ModelSpec.model_validate({**MOE.model_dump(), "name": "tiny-moe-mtp", "mtp_num_layers": 1})
MODELS = [gpt(512, 8, 8, vocab=1024, seq=512), llama_like(512, 8, 2, 8, 1024, vocab=1024, seq=512), MOE, MOE_MTP]

def _h100_cluster(gpus: int):
    import hardware_profiles as hp

    return cluster(gpus, gpu=hp.load_gpu("h100-sxm"))


@settings(max_examples=120, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    tp=st.sampled_from([1, 2]),
    pp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([1, 2, 4]),
    zero=st.integers(0, 3),
    recompute=st.sampled_from(["none", "selective", "full"]),
    vpp=st.sampled_from([1, 2]),
    overlap=st.booleans(),
    split=st.integers(0, 10_000),
    ep=st.sampled_from([1, 2]),
)
def test_coefficients_reproduce_memory_and_time(model, tp, pp, dp, zero, recompute, vpp, overlap, split, ep):
    vpp = vpp if pp > 1 else 1
    ep = ep if model.is_moe and tp * dp % ep == 0 else 1
    stages = _random_split(model.num_layers, pp, vpp, split)
    clus = _h100_cluster(tp * pp * dp)
    train = TrainSpec(global_batch_size=8 * dp, overlap_grad_reduce=overlap)
    lay = resolve_layout(model, clus, train, Layout(tp=tp, sp=tp > 1, pp=pp, vpp=vpp, zero=zero, mbs=2, ep=ep,
                                                    recompute=recompute, stage_layers=stages))
    k = layout_coefficients(model, clus, train, lay)
    counts = [stage_layer_mix(model, stages, i, vpp)[::-1] for i in range(pp)]
    for s, mem, n in zip(k.stages, memory_by_stage(model, clus, train, lay), counts):
        assert s.memory_bytes.at(*n) == pytest.approx(mem.total_bytes, abs=8)
        assert s.persistent_bytes.at(*n) == pytest.approx(mem.persistent_bytes, abs=8)
    expected = step_time(make_context(model, clus, train, lay)).step_s
    # exact but for the expert group's collective latency (microseconds), see stage_linear._param_affine
    # Collectives below the half-bandwidth size are concave in their bytes (costmodels.comm), so the
    # per-layer coefficients read off at 1 and 2 layers are exact only above it: on these tiny
    # models the data-parallel term (m of them under ZeRO-2) stays within 1% of the step (0.52% seen at
    # pp=1, zero=2; every plan is re-estimated exactly).
    assert step_from_coefficients(k, counts) == pytest.approx(expected, rel=1e-2, abs=1e-4)


def _random_split(layers: int, pp: int, vpp: int, seed: int) -> list[int]:
    """A composition of `layers` into pp parts, each a positive multiple of vpp."""
    units = layers // vpp
    cuts = sorted({1 + (seed * (i + 7) * 2654435761) % (units - 1) for i in range(pp - 1)}) if pp > 1 else []
    while len(cuts) < pp - 1:  # collisions: fill with the smallest unused cut
        cuts = sorted(set(cuts) | {next(c for c in range(1, units) if c not in cuts)})
    bounds = [0, *cuts, units]
    return [(b - a) * vpp for a, b in zip(bounds, bounds[1:])]
