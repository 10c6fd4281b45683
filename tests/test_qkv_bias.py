"""Q/K/V-only biases (ModelSpec.qkv_bias): Qwen2/2.5 carry them, Megatron writes them as --add-qkv-bias. Found by a
new-user pass: a Qwen2.5-72B config.json was read with no biases and exported without --add-qkv-bias, a model
other than the one in the file (its checkpoints would not load)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from costmodels.params import total_params
from planner.cli import app
from planner.files.hf_config import model_from_hf_config
from planner.files.native import load_native

QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
             "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
             "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def test_qwen2_reads_qkv_biases_and_counts_them_exactly():
    """Qwen2.5-7B has 7,615,616,512 parameters (its model card: 7.61 B); the q, k, v biases are
    28 x (3584 + 2 x 512) = 129,024 of them."""
    spec = model_from_hf_config(QWEN25_7B)
    assert spec.qkv_bias and not spec.linear_bias
    assert total_params(spec) == 7_615_616_512
    assert total_params(spec) - total_params(spec.model_copy(update={"qkv_bias": False})) == 28 * (3584 + 2 * 512)


def test_megatron_writes_add_qkv_bias_and_reads_it_back(tmp_path: Path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(QWEN25_7B))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["plan", str(config), "--cluster", "dgx-h100", "--nodes", "1", "--global-batch",
                                      "8", "--seq-len", "1024", "--framework", "megatron", "--export", str(out),
                                      "--format", "megatron"])
    assert result.exit_code == 0, result.output
    script = out / "launch_megatron.sh"
    assert "--add-qkv-bias" in script.read_text() and "--disable-bias-linear" in script.read_text()
    assert load_native(script, None, "dgx-h100", None).model.qkv_bias
