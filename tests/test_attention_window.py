"""Sliding-window attention, attention sinks and the clamped SwiGLU (GPT-OSS) as model capabilities.

Sources: Megatron-Bridge 0.3.1 gpt_oss_provider.py (window_size (128, 0), window_attn_skip_freq 2, softmax_type
learnable, activation_func_clamp_value 7.0); megatron-core 0.19.2 fusions/fused_bias_geglu.py
weighted_bias_quick_geglu_impl (the eager clamps); transformers 5.24 GptOssConfig (sliding_window 128, layer_types
alternating from a windowed layer 0, swiglu_limit 7.0); FlashAttention-2 section 3.1.1 (masked tiles skipped).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import compute as cmp
from costmodels.activations import ActShape, dense_mlp_bytes, moe_mlp_bytes, attention_bytes
from costmodels.attention_window import visited_tiles, window_time_ratio, windowed_share
from costmodels.glu_clamp import clamp_bytes_per_row, clamp_strided_bytes_per_row
from costmodels.layout import Layout, resolve_layout
from costmodels.model_spec import ModelSpec
from costmodels.moe_compute import routed_activation_bytes
from costmodels.params import attention_params, total_params
from costmodels.strided import strided_s
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec
from tests.helpers import llama_like

OSS = hp.load_model("gpt-oss-120b")
DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "measured"
X = ActShape(seq=4096, mbs=1)


def _windowed(m: ModelSpec, window: int, interval: int = 0) -> ModelSpec:
    return ModelSpec.model_validate({**m.model_dump(), "sliding_window": window, "full_attention_interval": interval})


def _dev16():
    cluster = hp.load_cluster("dgx-h100", 1)
    train = hp.resolve_train(TrainSpec(global_batch_size=8, seq_length=4096, precision="bf16"), "megatron-core")
    base = llama_like(1024, 16, 8, 2, 4096)
    return make_context(base, cluster, train, resolve_layout(base, cluster, train, Layout())).dev16


DEV = _dev16()


def test_window_tiles_hand_worked():
    # s = 4096, w = 128, 128 x 128 tiles: query tile 0 visits its diagonal tile only, each of the other 31 its
    # diagonal and the one before (rows 128q .. 128q + 127 reach back to key 128q - 127): 1 + 31 x 2 = 63 tiles;
    # causal visits 1 + 2 + ... + 32 = 528
    assert visited_tiles(4096, 128) == 63 and visited_tiles(4096, 0) == 528
    assert window_time_ratio(4096, 128) == 63 / 528


def test_windowed_flops_hand_worked():
    m = llama_like(1024, 16, 8, 4, 4096)
    full = 2 * 4096 * 4096 * (1024 + 1024)  # 2 M s (q + ctx), model convention
    assert cmp.attention_core_flops(m, X) == full
    # every layer windowed: a query counts min(w, s) = 128 keys instead of 4096
    assert cmp.attention_core_flops(_windowed(m, 128), X) == full * 128 / 4096
    # GPT-OSS: every other layer windowed (18 of 36): (1 + 128 / 4096) / 2 of the full count
    assert OSS.windowed_layers == 18 and windowed_share(OSS) == 0.5
    oss_full = 2 * 4096 * 4096 * (4096 + 4096)
    assert math.isclose(cmp.attention_core_flops(OSS, X), oss_full * (0.5 + 0.5 * 128 / 4096))


def test_which_layers_are_windowed_follow_megatron_and_hugging_face():
    # Megatron is_layer_window_attention: 1-based layer_number % freq != 0 -> window; HF GptOssConfig layer_types:
    # (i + 1) % 2 -> sliding_attention: layer 0 windowed, layer 1 full
    assert [OSS.is_windowed_layer(i) for i in range(4)] == [True, False, True, False]
    m = _windowed(llama_like(1024, 16, 8, 6, 4096), 64, 3)
    assert [m.is_windowed_layer(i) for i in range(6)] == [True, True, False, True, True, False]
    assert _windowed(m, 64, 1).windowed_layers == 0 and _windowed(m, 64, 0).windowed_layers == 6


@settings(max_examples=60, deadline=None)
@given(seq=st.integers(64, 32768), w1=st.integers(1, 40000), w2=st.integers(1, 40000))
def test_windowed_time_is_below_full_monotone_and_full_beyond_the_sequence(seq, w1, w2):
    m = llama_like(1024, 16, 8, 4, 4096)
    x = ActShape(seq=seq, mbs=1)
    full = cmp.attention_core_s(m, x, DEV, causal_skip=True)
    lo, hi = sorted((w1, w2))
    t_lo = cmp.attention_core_s(_windowed(m, lo), x, DEV, causal_skip=True)
    t_hi = cmp.attention_core_s(_windowed(m, hi), x, DEV, causal_skip=True)
    assert t_lo <= t_hi * (1 + 1e-12) and t_hi <= full * (1 + 1e-12)
    if hi >= seq:
        assert math.isclose(t_hi, full)
    assert cmp.attention_core_flops(_windowed(m, lo), x) <= cmp.attention_core_flops(m, x)


def test_gpt_oss_windowed_layers_cost_less_attention_time():
    full = ModelSpec.model_validate({**OSS.model_dump(), "sliding_window": 0, "full_attention_interval": 0})
    t_oss, t_full = (cmp.attention_core_s(m, X, DEV, causal_skip=True) for m in (OSS, full))
    # half the layers visit 63 of 528 tiles, at the efficiency of s x 63/528 keys: well below the full time,
    # above the half it would be if windowed layers were free
    assert 0.5 * t_full < t_oss < 0.75 * t_full


def test_unfused_attention_gains_nothing_from_the_window():
    # Megatron's unfused attention computes every score and masks afterwards
    full = ModelSpec.model_validate({**OSS.model_dump(), "sliding_window": 0, "full_attention_interval": 0})
    assert cmp.attention_core_s(OSS, X, DEV, causal_skip=False) == cmp.attention_core_s(full, X, DEV, False)


@pytest.mark.parametrize("flash", [True, False])
def test_attention_activations_do_not_change_with_the_window(flash):
    # flash keeps Q, K, V, context and per-row statistics; unfused keeps every masked score: no window term
    m = llama_like(1024, 16, 8, 4, 4096)
    x = ActShape(seq=4096, mbs=1, flash=flash)
    assert attention_bytes(_windowed(m, 128, 2), x) == attention_bytes(m, x)


def test_sinks_are_one_parameter_per_head_and_layer():
    plain = ModelSpec.model_validate({**OSS.model_dump(), "attention_sinks": False})
    assert attention_params(OSS) - attention_params(plain) == 64
    assert total_params(OSS) - total_params(plain) == 36 * 64


def test_clamp_adds_bytes_and_activations_to_a_gated_mlp():
    plain = ModelSpec.model_validate({**OSS.model_dump(), "glu_clamp": None})
    x = ActShape(seq=4096, mbs=1, ep=8)
    # 23 f-wide passes per row over forward + backward: 9.5 on contiguous tensors at the HBM rate, 13.5 on chunk
    # views at the strided rate, each priced as a third per forward (backward = 2x forward)
    assert clamp_bytes_per_row(OSS, 2880) == 2 * 9.5 / 3 * 2880 and clamp_bytes_per_row(plain, 2880) == 0
    assert clamp_strided_bytes_per_row(OSS, 2880) == 2 * 13.5 / 3 * 2880 and clamp_strided_bytes_per_row(plain, 1) == 0
    rows = 4096 * 4
    assert routed_activation_bytes(OSS, x) - routed_activation_bytes(plain, x) == pytest.approx(rows * 2 * 9.5 / 3 * 2880)
    assert cmp.strided_bytes(OSS, x, True) == pytest.approx(rows * 2 * 13.5 / 3 * 2880) and cmp.strided_bytes(plain, x, True) == 0
    assert cmp.elementwise_bytes(OSS, x, True, moe=True) > cmp.elementwise_bytes(plain, x, True, moe=True)
    # the clamps keep fc1's 2f-wide output beside the fused GLU's clamped copy
    assert moe_mlp_bytes(OSS, x) - moe_mlp_bytes(plain, x) == rows * 2 * 2 * 2880
    dense = llama_like(1024, 16, 8, 4, 4096)
    clamped = ModelSpec.model_validate({**dense.model_dump(), "glu_clamp": 7.0})
    assert cmp.elementwise_bytes(clamped, X, True) - cmp.elementwise_bytes(dense, X, True) == pytest.approx(
        4096 * 2 * 9.5 / 3 * 4096)
    assert cmp.strided_bytes(clamped, X, False) == pytest.approx(4096 * 2 * 13.5 / 3 * 4096)
    assert dense_mlp_bytes(clamped, X) - dense_mlp_bytes(dense, X) == 4096 * 2 * 2 * 4096


def test_clamp_time_stays_below_the_measured_eager_difference():
    # gpu_moe_h100.csv: eager clamped quick-GeGLU 2.358 ms vs eager silu(gate) * up 1.048 ms, fwd + bwd over
    # (16384, 2 x 2880); the difference also holds the eager quick-GeGLU's own extra ops: an upper bound
    rows = {r["kind"]: float(r["median_ms"]) for r in csv.DictReader((DATA / "gpu_moe_h100.csv").open())}
    measured_extra_s = (rows["glu_clamped"] - rows["glu_plain"]) / 1e3
    h100 = hp.load_gpu("h100-sxm")
    priced_s = 3 * (cmp.memory_s(DEV, 16384 * clamp_bytes_per_row(OSS, 2880))  # forward + 2x backward
                    + strided_s(h100, DEV, 16384 * clamp_strided_bytes_per_row(OSS, 2880)))
    assert 0.5 * measured_extra_s < priced_s < measured_extra_s


def test_gpt_oss_preset_and_measured_models_agree():
    import json

    models = json.loads((DATA / "models.json").read_text())
    for name in ("gpt-oss-20b", "gpt-oss-120b"):
        m = ModelSpec.model_validate(models[name])
        assert (m.sliding_window, m.full_attention_interval, m.attention_sinks, m.glu_clamp) == (128, 2, True, 7.0)
    assert ModelSpec.model_validate(models["gpt-oss-120b"]) == OSS
    assert ModelSpec.model_validate_json(OSS.model_dump_json()) == OSS


@pytest.mark.parametrize("data,field", [
    ({"full_attention_interval": 2}, "full_attention_interval=2 needs sliding_window"),
    ({"glu_clamp": 7.0, "activation": "gelu"}, "glu_clamp=7.0 needs activation swiglu"),
    ({"sliding_window": -1}, "sliding_window"),
    ({"glu_clamp": 0.0}, "glu_clamp"),
])
def test_bad_window_fields_are_refused_naming_them(data, field):
    with pytest.raises(ValueError, match=field):
        ModelSpec.model_validate({**llama_like(1024, 16, 8, 4, 4096).model_dump(), **data})


def test_defaults_leave_every_preset_unchanged():
    for name in hp.list_models():
        m = hp.load_model(name)
        if name != "gpt-oss-120b":
            assert (m.sliding_window, m.full_attention_interval, m.attention_sinks, m.glu_clamp) == (0, 0, False, None)
            assert windowed_share(m) == 0


@given(layers=st.integers(1, 200), interval=st.integers(0, 210))
def test_windowed_layer_count_matches_the_per_layer_rule(layers, interval):
    m = _windowed(llama_like(256, 4, 4, layers, 1024), 64, interval)
    assert m.windowed_layers == sum(m.is_windowed_layer(i) for i in range(layers))


def test_context_parallel_ranks_share_the_windowed_attention_evenly():
    # each rank's queries shrink the windowed layers' work by the same tile ratio (attention_window docstring)
    one, two = (cmp.attention_core_s(OSS, ActShape(seq=4096, mbs=1, cp=cp), DEV, causal_skip=True) for cp in (1, 2))
    assert math.isclose(two, one / 2)


def test_the_interval_of_a_layer_list_is_the_one_modelspec_reads_back():
    """costmodels.attention_window.full_attention_interval_of, which the Hugging Face and Megatron readers share:
    GPT-OSS's alternation is 2, all windowed 0, none windowed 1, an irregular list None; and a ModelSpec built with
    the interval marks the same layers."""
    from costmodels.attention_window import full_attention_interval_of

    assert full_attention_interval_of([True, False] * 18) == 2
    assert full_attention_interval_of([True] * 8) == 0
    assert full_attention_interval_of([False] * 8) == 1
    assert full_attention_interval_of([True, True, False, True, False, True]) is None
    model = hp.load_model("gpt-oss-120b")
    windowed = [model.is_windowed_layer(i) for i in range(model.num_layers)]
    assert full_attention_interval_of(windowed) == model.full_attention_interval
