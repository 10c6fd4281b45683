"""Multi-head latent attention (ModelSpec.mla): parameter counts against the DeepSeek papers, hand-worked
shapes, activations, torchtitan's per-op checkpointing of MoE blocks, and the readers and writers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import hardware_profiles as hp
from costmodels import activations as act
from costmodels.model_spec import ModelSpec
from costmodels.params import (active_params, attention_matrices, attention_params, local_attention_params,
                               total_params)
from planner.files.hf_config import model_from_hf_config

MLA = dict(q_lora_rank=0, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
# Hugging Face deepseek-ai/DeepSeek-V2-Lite config.json (the shapes of torchtitan's DeepSeek-V3 "16B").
V2_LITE = {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16,
           "num_key_value_heads": 16, "intermediate_size": 10944, "moe_intermediate_size": 1408,
           "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
           "moe_layer_freq": 1, "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
           "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 102400, "max_position_embeddings": 163840,
           "tie_word_embeddings": False, "attention_bias": False}


def small(**over) -> ModelSpec:
    fields = dict(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=100, activation="swiglu",
                  norm="rmsnorm", linear_bias=False, dropout=False, position_embedding="rope",
                  mla=dict(q_lora_rank=16, kv_lora_rank=8, qk_nope_head_dim=6, qk_rope_head_dim=2, v_head_dim=4))
    return ModelSpec.model_validate({**fields, **over})


def test_deepseek_v3_preset_is_671b():
    """DeepSeek-V3 technical report (arXiv 2412.19437) section 4.2: 671B parameters, 37B activated per
    token (the main model; the 14B multi-token-prediction module is not modelled)."""
    m = hp.load_model("deepseek-v3")
    assert round(total_params(m) / 1e9) == 671
    assert 37e9 <= active_params(m) < 38e9


def test_deepseek_v2_lite_from_hf_config_is_15_7b():
    """DeepSeek-V2 paper, appendix B: DeepSeek-V2-Lite has 15.7B parameters."""
    m = model_from_hf_config(V2_LITE)
    assert m.mla.q_lora_rank == 0 and m.num_kv_heads == 16 and m.head_dim == 192
    assert (m.num_experts, m.top_k, m.num_shared_experts, m.first_k_dense_layers) == (64, 6, 2, 1)
    assert round(total_params(m) / 1e8) == 157


def test_hf_config_names_a_bad_deepseek_key():
    with pytest.raises(ValueError, match="moe_layer_freq"):
        model_from_hf_config({**V2_LITE, "moe_layer_freq": 0})
    with pytest.raises(ValueError, match="kv_lora_rank"):
        model_from_hf_config({k: v for k, v in V2_LITE.items() if k != "kv_lora_rank"})


def test_hand_worked_attention_params():
    """h 64, a 4, r_q 16, r_kv 8, d_nope 6, d_rope 2, d_v 4, latent norms on:
    q down 64*16 + q up 16*4*8 + kv down 64*(8+2) + kv up 8*4*(6+4) + out 4*4*64 + norms 16 + 8."""
    m = small(qk_norm=True)
    expected = 64 * 16 + 16 * 32 + 64 * 10 + 8 * 40 + 16 * 64 + 16 + 8
    assert attention_params(m) == expected == 3544
    assert attention_params(small()) == expected - 24  # no latent norms


def test_tp_splits_up_projections_and_keeps_down_projections_whole():
    m = small(qk_norm=True)
    whole = 64 * 16 + 64 * 10 + 16 + 8  # down projections and latent norms
    split = 16 * 32 + 8 * 40 + 16 * 64
    assert local_attention_params(m, 2) == whole + split // 2
    assert local_attention_params(m, 4) == whole + split // 4


def test_mla_shapes_are_checked():
    with pytest.raises(ValidationError, match="num_kv_heads=2 must equal num_attention_heads=4"):
        small(num_kv_heads=2)
    with pytest.raises(ValidationError, match="head_dim=16 must equal"):
        small(head_dim=16)
    with pytest.raises(ValidationError, match="kv_lora_rank"):
        small(mla=dict(kv_lora_rank=0, qk_nope_head_dim=6, qk_rope_head_dim=2, v_head_dim=4))


def test_widths_and_json_round_trip():
    m = small()
    assert (m.q_width, m.ctx_width, m.kv_width) == (32, 16, 24)  # a*d_qk, a*d_v, a*(d_qk + d_v)/2
    assert ModelSpec.model_validate_json(m.model_dump_json()) == m


def test_attention_activations_hand_worked():
    """One token, no tp: norm and QKV inputs 2h, Q + context a*(d_qk + d_v), K + V the same, latents
    2r_q + 2r_kv + d_rope (with their norms), 2 bytes each."""
    m = small(qk_norm=True)
    x = act.ActShape(seq=1, mbs=1)
    per_token = 2 * 64 + (32 + 16) + (32 + 16) + (2 * 16 + 2 * 8 + 2)
    assert act.attention_bytes(m, x) == 2 * per_token


def test_per_op_checkpointing_of_an_moe_block():
    """torchtitan per-op SAC on a DeepSeek-V2-Lite MoE block, one token, no tp: kept are the block input
    h, matmuls 1 and 3 of q, kv_a, kv_b, o (q 16*192, kv_b 16*256), the attention output 16*128, and
    matmuls 5 and 7 of the shared experts' w1, w3, w2 (2*1408 and h); routed experts (grouped matmuls)
    are recomputed. Expert parallelism adds the two all-to-all outputs, top_k * h each."""
    m = model_from_hf_config(V2_LITE)
    x = act.ActShape(seq=1, mbs=1, recompute="selective", selective="per-op")
    kept = 2048 + 16 * 192 + 16 * 256 + 16 * 128 + 2 * 1408 + 2048
    assert act.layer_bytes(m, x, True) == 2 * kept
    assert act.layer_bytes(m, x.__class__(**{**x.__dict__, "ep": 8}), True) == 2 * (kept + 2 * 6 * 2048)


def test_per_op_checkpointing_of_a_llama_block_is_unchanged():
    """Llama 3 8B, one token, no tp: input h, wq 4096, wv 1024, attention output 4096, w1 14336, w2 h."""
    m = hp.load_model("llama3-8b")
    x = act.ActShape(seq=1, mbs=1, recompute="selective", selective="per-op")
    assert act.layer_bytes(m, x, False) == 2 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096)


def test_gqa_matrices_unchanged():
    m = hp.load_model("llama3-70b")
    assert attention_matrices(m, 8) == [(8192, 1024 + 2 * 128), (1024, 8192)]
    assert attention_matrices(m, 8, fused_qkv=False) == [(8192, 1024), (8192, 128), (8192, 128), (1024, 8192)]


def test_megatron_flags_round_trip(tmp_path):
    from planner.frameworks.megatron.flags import model_data, read_megatron
    script = tmp_path / "run.sh"
    script.write_text("torchrun pretrain_gpt.py --num-layers 61 --hidden-size 7168 --num-attention-heads 128 "
                      "--vocab-size 129280 --seq-length 4096 --multi-latent-attention --q-lora-rank 1536 "
                      "--kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --kv-channels 128\n")
    data = model_data(read_megatron(script.read_text()))
    assert data["mla"] == dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                               v_head_dim=128)
    assert "head_dim" not in data and ModelSpec.model_validate(data).head_dim == 192


def test_megatron_export_writes_mla_flags():
    from planner.frameworks.megatron.export import mla_args
    m = hp.load_model("deepseek-v3")
    flags = dict(mla_args(m.mla))
    assert flags == {"--multi-latent-attention": None, "--q-lora-rank": 1536, "--kv-lora-rank": 512,
                     "--qk-head-dim": 128, "--qk-pos-emb-head-dim": 64, "--v-head-dim": 128}
    assert "--q-lora-rank" not in dict(mla_args(model_from_hf_config(V2_LITE).mla))


def test_errors_name_the_mla_key():
    """A bad MLA width is named where the user wrote it: mla.<key> in a spec, the key in config.json."""
    bad = dict(kv_lora_rank="512", qk_nope_head_dim=6, qk_rope_head_dim=2, v_head_dim=4)
    with pytest.raises(ValidationError) as err:
        small(mla=bad)
    assert err.value.errors()[0]["loc"] == ("mla", "kv_lora_rank")
    with pytest.raises(ValidationError, match="must be at most 1000000"):
        small(mla=dict(kv_lora_rank=8, qk_nope_head_dim=999_999, qk_rope_head_dim=999_999, v_head_dim=4))
    with pytest.raises(ValueError, match="key 'qk_rope_head_dim'"):
        model_from_hf_config({**V2_LITE, "qk_rope_head_dim": -3})
