"""Golden numbers for the time model: FLOP equations, bubbles, collectives (published_numbers.md)."""

from __future__ import annotations

import pytest
from helpers import cluster, gpt

from costmodels import comm
from costmodels.layout import Layout, resolve_layout
from costmodels.pipeline import bubble_ratio, bubble_share, pipeline_span_s
from costmodels.step import model_flops_per_step
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec

H, A, L, S, V, B = 12288, 96, 96, 2048, 51200, 1536  # GPT-3 175B shape


def _ctx(recompute: str):
    model, clus = gpt(H, A, L, vocab=V, seq=S), cluster(64)
    train = TrainSpec(global_batch_size=B, precision="fp16")
    lay = resolve_layout(model, clus, train, Layout(tp=8, pp=8, mbs=1, recompute=recompute))
    return make_context(model, clus, train, lay)


def test_korthikanti_model_flops():
    """Korthikanti et al. Appendix A: model FLOPs 72*B*L*s*h^2*(1 + s/(6h) + V/(12hL))."""
    expected = 72 * B * L * S * H**2 * (1 + S / (6 * H) + V / (12 * H * L))
    model_flops, _ = model_flops_per_step(_ctx("selective"))
    assert model_flops == pytest.approx(expected, rel=1e-12)


def test_narayanan_eq3_hardware_flops_with_full_recompute():
    """Narayanan et al. SC'21 eq. (3): 96*B*s*L*h^2*(1 + s/(6h) + V/(16Lh)) with full recompute."""
    expected = 96 * B * S * L * H**2 * (1 + S / (6 * H) + V / (16 * L * H))
    _, hardware = model_flops_per_step(_ctx("full"))
    assert hardware == pytest.approx(expected, rel=1e-12)


def test_mfu_excludes_recompute():
    """Model FLOPs do not change with recompute; hardware FLOPs do."""
    none, full = model_flops_per_step(_ctx("none")), model_flops_per_step(_ctx("full"))
    assert none[0] == full[0] and none[1] < full[1]


def test_seed_bubbles():
    """Seed worked example: (p-1)/(m+p-1) = 3/7 (p=4, m=4), 3/19 (m=16); (p-1)/m = 9% at m=32."""
    assert bubble_share(4, 4) == pytest.approx(3 / 7)
    assert bubble_share(4, 16) == pytest.approx(3 / 19)
    assert bubble_ratio(4, 32) == pytest.approx(0.09375)


def test_interleaved_bubble():
    """Narayanan SC'21 section 2.2.2: interleaving divides the bubble by v."""
    assert bubble_ratio(8, 16, 4) == pytest.approx(bubble_ratio(8, 16) / 4)


@pytest.mark.parametrize("p,m,v", [(4, 4, 1), (4, 16, 1), (8, 32, 2), (16, 64, 4)])
def test_uniform_span_matches_closed_form(p: int, m: int, v: int):
    """Uniform stages: (m + (p-1)/v) * t (Narayanan SC'21 section 2.2)."""
    assert pipeline_span_s([0.1] * p, m, v) == pytest.approx((m + (p - 1) / v) * 0.1)


def test_nonuniform_span_slowest_stage_sets_steady_state():
    """Sum over stages of one micro-batch + (m-1) x slowest stage (issue 3, item 4)."""
    t = [1.0, 2.0, 1.5]
    assert pipeline_span_s(t, 10) == pytest.approx(sum(t) + 9 * 2.0)


def test_seed_ring_all_reduce():
    """Seed worked example: 2(N-1)/N * X / B with N = 8, X = 2 GB, B = 25 GB/s -> 0.14 s."""
    links = comm.Links(gpus_per_node=1, up_bytes_per_s=25e9, out_bytes_per_s=25e9, up_latency_s=0, out_latency_s=0)
    assert comm.all_reduce_s(links, 8, 1, 2e9) == pytest.approx(0.14)


def test_group_placement():
    """Rank order tp, cp, ep, dp, pp: a group of 8 with stride 1 stays in an 8-GPU node; stride 8 crosses."""
    links = comm.Links(gpus_per_node=8, up_bytes_per_s=300e9, out_bytes_per_s=25e9, up_latency_s=0, out_latency_s=0)
    assert comm.group_link(links, 8, 1)[0] == 300e9
    assert comm.group_link(links, 4, 8)[0] == 25e9  # one rank per node: one NIC
    assert comm.group_link(links, 8, 2)[0] == 100e9  # 4 ranks per node share 4 NICs
