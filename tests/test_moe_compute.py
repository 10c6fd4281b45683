"""The MoE block's own work (costmodels.moe_compute): grouped-GEMM rate at few tokens per expert (measured on one
H100, benchmarks/data/measured/gpu_moe_h100.csv), the routed experts' activation bytes, and the permutes around the
dispatch (Megatron-Core 0.16.1 token_dispatcher.py)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import compute as cmp
from costmodels.activations import ActShape
from costmodels.moe_compute import (GROUP_OVERHEAD_TOKENS, grouped_gemm_factor, permute_bytes, received_tokens,
                                    routed_activation_bytes, routed_rows, tokens_per_expert)
from costmodels.moe_dispatch import miss_probability

CSV = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "measured" / "gpu_moe_h100.csv"
QWEN = hp.load_model("qwen3-30b-a3b")  # 128 experts, top-8, hidden 2048, expert FFN 768
X16 = ActShape(seq=4096, mbs=1, ep=16)  # the Megatron-Bridge H100 recipe: tp 1, ep 16


def _grouped_ratios() -> list[tuple[float, float]]:
    """(tokens per expert, grouped TFLOP/s over one GEMM of all rows) per measured grouped row."""
    rows = list(csv.DictReader(CSV.open()))
    dense = {(r["model"], r["tokens"], r["k"], r["n"]): float(r["tflops"]) for r in rows if r["kind"] == "dense_fwd"}
    return [(float(r["tokens"]), float(r["tflops"]) / dense[(r["model"], r["tokens"], r["k"], r["n"])])
            for r in rows if r["kind"].startswith("grouped_")]


def test_group_overhead_is_the_least_squares_fit_of_the_h100_rows():
    pts = _grouped_ratios()
    assert len(pts) == 108
    # closed form of min_c sum (y - t / (t + c))^2 has none; scan c in 1-token steps
    sse = {c: sum((y - t / (t + c)) ** 2 for t, y in pts) for c in range(40, 300)}
    best = min(sse, key=sse.get)
    assert abs(best - GROUP_OVERHEAD_TOKENS) <= 5


def test_grouped_factor_hand_worked():
    assert grouped_gemm_factor(GROUP_OVERHEAD_TOKENS) == 0.5
    assert math.isclose(grouped_gemm_factor(4096), 4096 / 4201)
    # at the recipes' load the grouped kernel runs near one big GEMM; at 128 tokens per expert it does not
    assert grouped_gemm_factor(4096) > 0.97 and grouped_gemm_factor(128) < 0.6


def test_qwen3_rows_hand_worked():
    # 4096 tokens x top-8 = 32768 rows through 8 local experts: 4096 per expert
    assert routed_rows(QWEN, X16) == 32768 and tokens_per_expert(QWEN, X16) == 4096
    # DeepEP delivers a token once per rank holding any of its 8 experts: 16 x 4096 x (1 - C(120,8)/C(128,8))
    q = math.comb(120, 8) / math.comb(128, 8)
    assert math.isclose(received_tokens(QWEN, X16, "deepep"), 16 * 4096 * (1 - q))
    assert math.isclose(permute_bytes(QWEN, X16, "deepep"), 2 * (16 * 4096 * (1 - q) + 32768) * 2048 * 2)
    # all-to-all: T -> T k rows and back (2 x (4096 + 32768)), and the chunk sort of 32768 rows both ways
    assert permute_bytes(QWEN, X16, "alltoall") == 2 * (4096 + 32768 + 2 * 32768) * 2048 * 2


def test_routed_activation_counts_every_routed_row():
    # SwiGLU over P rows: read 2 x 768, write 768, 2 bytes each
    assert routed_activation_bytes(QWEN, X16) == 32768 * 3 * 768 * 2
    # GPT-OSS: top-4 experts of width 2880 = 4x the dense FFN width the layer used to be charged
    oss = QWEN.model_copy(update={"top_k": 4, "moe_ffn_hidden_size": 2880, "ffn_hidden_size": 2880,
                                  "hidden_size": 2880})
    x = ActShape(seq=4096, mbs=1, ep=8)
    dense = cmp.elementwise_bytes(oss, x, True, moe=False)
    moe = cmp.elementwise_bytes(oss, x, True, moe=True)
    assert math.isclose(moe - dense, 4096 * 3 * 2880 * 2 * (4 - 1))


@st.composite
def moe_shapes(draw):
    ep = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
    experts = ep * draw(st.integers(1, 8))
    k = draw(st.integers(1, min(experts, 8)))
    return experts, k, ep, draw(st.sampled_from([1, 2, 4])), draw(st.booleans())


@settings(max_examples=200, deadline=None)
@given(s=moe_shapes())
def test_deepep_receives_at_most_one_row_per_routed_pair(s):
    experts, k, ep, tp, sp = s
    model = QWEN.model_copy(update={"num_experts": experts, "top_k": k})
    x = ActShape(seq=2048, mbs=1, tp=tp, sp=sp, ep=ep)
    # union bound: P(a rank holds one of a token's k experts) <= k / ep, so R <= T k = P
    assert received_tokens(model, x, "deepep") <= routed_rows(model, x) * (1 + 1e-12)
    assert permute_bytes(model, x, "deepep") > 0 and permute_bytes(model, x, "alltoall") > 0
    assert 0 < grouped_gemm_factor(tokens_per_expert(model, x)) < 1


def test_received_tokens_uses_the_miss_probability():
    x = ActShape(seq=4096, mbs=1, ep=8)
    hit = 1 - miss_probability(128, 16, 4)
    oss = QWEN.model_copy(update={"top_k": 4})
    assert math.isclose(received_tokens(oss, x, "deepep"), 8 * 4096 * hit)


def test_layer_time_pays_the_permutes_forward_and_backward(monkeypatch):
    from costmodels import moe_compute
    from costmodels.layout import Layout, resolve_layout
    from costmodels.moe_timing import permute_s
    from costmodels.timing import layer_time, make_context
    from costmodels.train_spec import TrainSpec

    cluster = hp.load_cluster("dgx-h100", 2)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096, precision="bf16"), "nemo")
    c = make_context(QWEN, cluster, train, resolve_layout(QWEN, cluster, train, Layout(ep=16, zero=1)))
    perm = permute_s(c)
    assert perm > 0
    with_perm = layer_time(c, True)
    monkeypatch.setattr(moe_compute, "permute_bytes", lambda *a: 0.0)
    without = layer_time(c, True)
    assert math.isclose(with_perm.compute_s - without.compute_s, 2 * perm)
    assert layer_time(c, False) == layer_time(c, False)  # dense layers have no permute


def test_allgather_permute_reads_the_gathered_tokens():
    x = ActShape(seq=4096, mbs=1, tp=2, sp=True, ep=4, moe_allgather=True)
    # P = 2048 x 8 = 16384 local rows; the gathered group holds 2 x 4 x 2048 tokens
    assert permute_bytes(QWEN, x, "allgather") == 2 * (2 * 16384 + 8 * 2048) * 2048 * 2


def test_fp8_grouped_rows_fall_in_the_constants_physical_range():
    # the FP8 grouped kernel (torch._scaled_grouped_mm, gpu_moe_fp8_h100.csv) fits c = 130: inside 80-160
    rows = list(csv.DictReader((CSV.parent / "gpu_moe_fp8_h100.csv").open()))
    dense = {(r["model"], r["tokens"], r["k"], r["n"]): float(r["tflops"]) for r in rows if r["kind"] == "dense_fwd_fp8"}
    pts = [(float(r["tokens"]), float(r["tflops"]) / dense[(r["model"], r["tokens"], r["k"], r["n"])])
           for r in rows if r["kind"] == "grouped_fwd_fp8"]
    assert len(pts) == 36
    sse = {c: sum((y - t / (t + c)) ** 2 for t, y in pts) for c in range(40, 400, 5)}
    assert 80 <= min(sse, key=sse.get) <= 160


def test_gpt_oss_120b_preset_matches_the_model_card():
    # OpenAI gpt-oss model card: 116.83B total, 5.13B active per token (the input embedding not counted)
    from costmodels.params import active_params, embedding_params, total_params

    m = hp.load_model("gpt-oss-120b")
    assert abs(total_params(m) / 1e9 - 116.83) < 0.005
    assert abs((active_params(m) - embedding_params(m)) / 1e9 - 5.13) < 0.005
