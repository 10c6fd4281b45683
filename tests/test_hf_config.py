"""Hugging Face config.json -> ModelSpec (planner/files/hf_config.py), checked against the presets."""

from __future__ import annotations

import json

import pytest

from planner.files.hf_config import load_hf_config_file, model_from_hf_config
from hardware_profiles import load_model

# Abridged public config.json files (the keys the mapping reads, plus a few it ignores).
LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "attention_dropout": 0.0,
    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
    "mlp_bias": False, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256,
}
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 1e6, "sliding_window": None, "tie_word_embeddings": False,
    "vocab_size": 32000,
}
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
    "attention_dropout": 0.0, "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "mlp_only_layers": [], "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "tie_word_embeddings": False, "vocab_size": 151936,
}
QWEN2_7B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 131072, "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rope_theta": 1e6, "tie_word_embeddings": False,
    "vocab_size": 152064,
}


def _shape(spec):
    return spec.model_dump(exclude={"name", "seq_length"})


@pytest.mark.parametrize("config, preset", [
    (LLAMA3_8B, "llama3-8b"), (MIXTRAL_8X7B, "mixtral-8x7b"), (QWEN3_30B_A3B, "qwen3-30b-a3b"),
])
def test_matches_preset(config, preset):
    """Every shape field equals the preset's; seq_length differs by design (see the next test)."""
    spec = model_from_hf_config(config, name=preset)
    assert _shape(spec) == _shape(load_model(preset))
    assert spec.name == preset
    assert model_from_hf_config(config, name=preset, seq_length=load_model(preset).seq_length) == load_model(preset)


def test_seq_length_default_and_override():
    assert model_from_hf_config(LLAMA3_8B).seq_length == 4096  # min(8192, 4096); the preset uses 8192
    assert model_from_hf_config(MIXTRAL_8X7B).seq_length == 4096  # min(32768, 4096)
    assert model_from_hf_config(MIXTRAL_8X7B, seq_length=16384).seq_length == 16384
    assert model_from_hf_config({**LLAMA3_8B, "max_position_embeddings": 2048}).seq_length == 2048


def test_qwen2_7b():
    spec = model_from_hf_config(QWEN2_7B, name="qwen2-7b")
    assert (spec.num_layers, spec.hidden_size, spec.num_attention_heads, spec.num_kv_heads, spec.head_dim) == (
        28, 3584, 28, 4, 128)
    assert (spec.ffn_hidden_size, spec.vocab_size, spec.seq_length) == (18944, 152064, 4096)
    assert (spec.activation, spec.norm, spec.position_embedding) == ("swiglu", "rmsnorm", "rope")
    assert not (spec.linear_bias or spec.qk_norm or spec.tied_embeddings or spec.dropout or spec.is_moe)


def test_unsupported_model_type_is_named():
    with pytest.raises(ValueError, match="gpt2") as err:
        model_from_hf_config({**LLAMA3_8B, "model_type": "gpt2"})
    assert "qwen3_moe" in str(err.value)  # lists what is supported
    with pytest.raises(ValueError, match="None"):
        model_from_hf_config({k: v for k, v in LLAMA3_8B.items() if k != "model_type"})


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size"])
def test_missing_key_is_named(key):
    with pytest.raises(ValueError, match=key):
        model_from_hf_config({k: v for k, v in LLAMA3_8B.items() if k != key})


def test_missing_moe_key_is_named():
    with pytest.raises(ValueError, match="num_local_experts"):
        model_from_hf_config({k: v for k, v in MIXTRAL_8X7B.items() if k != "num_local_experts"})


def test_qwen3_moe_dense_layers():
    spec = model_from_hf_config({**QWEN3_30B_A3B, "mlp_only_layers": [0, 1]})
    assert spec.first_k_dense_layers == 2 and spec.num_moe_layers == 46
    with pytest.raises(ValueError, match="mlp_only_layers"):
        model_from_hf_config({**QWEN3_30B_A3B, "mlp_only_layers": [5]})
    with pytest.raises(ValueError, match="decoder_sparse_step"):
        model_from_hf_config({**QWEN3_30B_A3B, "decoder_sparse_step": 0})


def test_qwen3_moe_sparse_step_interleaves_dense_and_moe_layers():
    """Qwen3MoeDecoderLayer is MoE where (layer_idx + 1) % decoder_sparse_step == 0 and layer_idx is not in
    mlp_only_layers: step 2 puts experts on layers 1, 3, ..., 47 (24 of 48); with mlp_only_layers [0, 1, 2]
    on 3, 5, ..., 47 (23). It was refused."""
    spec = model_from_hf_config({**QWEN3_30B_A3B, "decoder_sparse_step": 2})
    assert (spec.moe_layer_period, spec.moe_layer_offset, spec.num_moe_layers) == (2, 1, 24)
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    spec = model_from_hf_config({**QWEN3_30B_A3B, "decoder_sparse_step": 2, "mlp_only_layers": [0, 1, 2]})
    assert spec.num_moe_layers == 23 and not spec.is_moe_layer(1) and spec.is_moe_layer(3)


def test_bias_dropout_and_defaults():
    assert model_from_hf_config({**LLAMA3_8B, "attention_bias": True}).linear_bias
    assert model_from_hf_config({**LLAMA3_8B, "attention_dropout": 0.1}).dropout
    minimal = {k: v for k, v in LLAMA3_8B.items() if k not in ("num_key_value_heads", "tie_word_embeddings")}
    spec = model_from_hf_config(minimal)
    assert spec.num_kv_heads == 32 and not spec.tied_embeddings


def test_load_file(tmp_path):
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(json.dumps(LLAMA3_8B))
    spec = load_hf_config_file(path)
    assert spec.name == "Meta-Llama-3-8B" and _shape(spec) == _shape(load_model("llama3-8b"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_hf_config_file(bad)
    with pytest.raises(ValueError, match="missing.json"):
        load_hf_config_file(tmp_path / "missing.json")
