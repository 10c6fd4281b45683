"""Parameter counts: published totals of the presets, hand-counted tiny models, per-GPU splits.

Published numbers (the models' own cards; the exact integers are the tensor sizes of the
safetensors checkpoints on the Hugging Face Hub, which the cards round):
- Meta Llama 3 model card (meta-llama/Meta-Llama-3-8B, -70B): "8B" and "70B"; checkpoints hold
  8,030,261,248 and 70,553,706,496 parameters (8.03B, 70.55B).
- Meta Llama 3.1 model card (meta-llama/Llama-3.1-405B): "405B"; checkpoint 405,853,388,800 (405.85B).
- Meta Llama 2 paper (Touvron et al. 2023) and model card: "7B"; checkpoint 6,738,415,616 (6.74B).
- Mistral AI, "Mixtral of experts" (blog, Dec 2023; Jiang et al. 2024): "46.7B total parameters but
  only uses 12.9B parameters per token".
- Qwen3-30B-A3B model card (Qwen/Qwen3-30B-A3B): "Number of Parameters: 30.5B in total and 3.3B
  activated", "Number of Parameters (Non-Embedding): 29.9B".
"""

from __future__ import annotations

import pytest
from helpers import gpt, llama_like

import hardware_profiles as hp
from costmodels.model_spec import ModelSpec
from costmodels.params import (
    active_params,
    layer_params,
    local_attention_params,
    local_layer_params,
    local_stage_params,
    norm_params,
    total_params,
)

B = 1e9


# ---- published totals ----------------------------------------------------------------------------


@pytest.mark.parametrize("name, billions, tol", [
    ("llama3-8b", 8.03, 0.01),      # Meta Llama 3 model card; checkpoint 8,030,261,248
    ("llama3-70b", 70.55, 0.01),    # Meta Llama 3 model card; checkpoint 70,553,706,496
    ("llama2-7b", 6.74, 0.01),      # Llama 2 paper / model card; checkpoint 6,738,415,616
    ("llama3.1-405b", 405.8, 0.1),  # Meta Llama 3.1 model card; checkpoint 405,853,388,800
])
def test_dense_preset_totals(name: str, billions: float, tol: float):
    m = hp.load_model(name)
    assert total_params(m) / B == pytest.approx(billions, abs=tol)
    assert active_params(m) == total_params(m)  # dense: every parameter is active


@pytest.mark.parametrize("name, exact", [
    ("llama3-8b", 8_030_261_248), ("llama3-70b", 70_553_706_496), ("llama2-7b", 6_738_415_616),
    ("llama3.1-405b", 405_853_388_800),
])
def test_dense_preset_totals_match_checkpoints_exactly(name: str, exact: int):
    """The safetensors checkpoints on the Hugging Face Hub (sum of tensor sizes)."""
    assert total_params(hp.load_model(name)) == exact


def test_mixtral_total_and_active():
    """Mistral AI: 46.7B total, 12.9B used per token (2 of 8 experts)."""
    m = hp.load_model("mixtral-8x7b")
    assert total_params(m) / B == pytest.approx(46.70, abs=0.05)
    assert active_params(m) / B == pytest.approx(12.9, abs=0.05)


def test_qwen3_30b_a3b_total_and_active():
    """Qwen3-30B-A3B model card: 30.5B total, 3.3B activated, 29.9B non-embedding."""
    m = hp.load_model("qwen3-30b-a3b")
    assert total_params(m) / B == pytest.approx(30.5, abs=0.1)
    assert active_params(m) / B == pytest.approx(3.3, abs=0.1)
    non_embedding = total_params(m) - 2 * m.vocab_size * m.hidden_size  # untied: embedding + output layer
    assert non_embedding / B == pytest.approx(29.9, abs=0.1)


# ---- hand-counted tiny models --------------------------------------------------------------------


def test_tiny_gpt_by_hand():
    """h=4, a=2, L=1, V=10, f=8, GELU, LayerNorm, biases, learned positions (s=3), tied embeddings.

    word embedding      V*h          = 10*4            = 40
    position table      s*h          = 3*4             = 12
    QKV                 h*3h + 3h    = 48 + 12         = 60
    attention output    h*h + h      = 16 + 4          = 20
    MLP up              h*f + f      = 32 + 8          = 40
    MLP down            f*h + h      = 32 + 4          = 36
    two LayerNorms      2 * (h + h)                    = 16
    final LayerNorm     h + h                          =  8
    output layer        tied to the embedding          =  0
    total                                              = 232
    """
    m = ModelSpec(num_layers=1, hidden_size=4, num_attention_heads=2, vocab_size=10, ffn_hidden_size=8,
                  seq_length=3, activation="gelu", norm="layernorm", linear_bias=True,
                  position_embedding="learned", tied_embeddings=True)
    assert total_params(m) == 232
    assert layer_params(m, 0).total == 60 + 20 + 40 + 36 + 16
    assert active_params(m) == 232


def test_tiny_llama_by_hand():
    """h=8, a=4, kv=2 (head_dim 2), L=2, V=10, f=12, SwiGLU, RMSNorm, no biases, RoPE, untied.

    word embedding      V*h                   = 80
    per layer:
      Q                 h * a*d   = 8*8       = 64
      K, V              2 * h * kv*d = 2*8*4  = 64
      attention output  a*d * h   = 8*8       = 64
      gate, up, down    3 * h*f   = 3*8*12    = 288
      two RMSNorms      2 * h                 = 16
      layer total                             = 496
    two layers                                = 992
    final RMSNorm       h                     = 8
    output layer        V*h (untied)          = 80
    total               80 + 992 + 8 + 80     = 1160
    """
    m = ModelSpec(num_layers=2, hidden_size=8, num_attention_heads=4, num_kv_heads=2, vocab_size=10,
                  ffn_hidden_size=12, activation="swiglu", norm="rmsnorm", linear_bias=False,
                  position_embedding="rope", tied_embeddings=False)
    assert layer_params(m, 0).total == 496
    assert total_params(m) == 1160


def test_tiny_moe_by_hand():
    """The tiny Llama above with 4 experts (width 6), top-2, first layer dense.

    layer 0 (dense)                                 = 496
    layer 1: attention 192 + RMSNorms 16            = 208
             router h*E = 8*4                       = 32
             experts 4 * (3 * 8*6 = 144)            = 576
             layer total                            = 816
    total   80 + 496 + 816 + 8 + 80                 = 1480
    active  1480 - (4 - 2) * 144                    = 1192
    """
    m = ModelSpec(num_layers=2, hidden_size=8, num_attention_heads=4, num_kv_heads=2, vocab_size=10,
                  ffn_hidden_size=12, activation="swiglu", norm="rmsnorm", linear_bias=False,
                  position_embedding="rope", tied_embeddings=False, num_experts=4, top_k=2,
                  moe_ffn_hidden_size=6, first_k_dense_layers=1)
    assert layer_params(m, 1).dense == 208 + 32 and layer_params(m, 1).expert == 576
    assert total_params(m) == 1480
    assert active_params(m) == 1192


# ---- per GPU -------------------------------------------------------------------------------------

# GPT-style (LayerNorm, GELU, biases, learned positions) with an untied output layer.
UNTIED_GPT = ModelSpec(num_layers=8, hidden_size=256, num_attention_heads=8, vocab_size=1000, seq_length=128,
                       tied_embeddings=False)
TIED_GPT = gpt(256, 8, 8, vocab=1000, seq=128)
LLAMA = llama_like(h=512, a=8, kv=2, layers=8, ffn=1408, vocab=1000)
MIXTRAL = hp.load_model("mixtral-8x7b")


def _stage_sum(m: ModelSpec, stages: list[int], tp: int = 1, ep: int = 1, etp: int = 1) -> int:
    return sum(local_stage_params(m, stages, i, tp, ep, etp, m.seq_length).total for i in range(len(stages)))


@pytest.mark.parametrize("model", [UNTIED_GPT, LLAMA, MIXTRAL, hp.load_model("qwen3-30b-a3b")],
                         ids=["gpt-untied", "llama", "mixtral", "qwen3-moe"])
@pytest.mark.parametrize("split", ["1", "2", "4", "uneven"])
def test_stages_sum_to_total_untied(model: ModelSpec, split: str):
    L = model.num_layers
    stages = {"1": [L], "2": [L // 2] * 2, "4": [L // 4] * 4, "uneven": [1, L - 3, 2]}[split]
    assert _stage_sum(model, stages) == total_params(model)


def test_tied_single_stage_counts_embedding_once():
    assert _stage_sum(TIED_GPT, [8]) == total_params(TIED_GPT)


@pytest.mark.parametrize("stages", [[4, 4], [2, 2, 2, 2], [1, 3, 4], [1] * 8])
def test_tied_pipeline_keeps_megatron_copy_of_embedding(stages: list[int]):
    """With pp > 1 the last stage holds its own copy of the tied embedding (Megatron): exactly +V*h."""
    m = TIED_GPT
    assert _stage_sum(m, stages) - total_params(m) == m.vocab_size * m.hidden_size


def _replicated_per_layer(m: ModelSpec) -> int:
    """Parameters every tp rank holds whole: two norms, row-parallel output biases, QK-norm weights."""
    biases = 2 * m.hidden_size if m.linear_bias else 0  # attention output bias + MLP output bias
    return 2 * norm_params(m, m.hidden_size) + biases + (2 * m.head_dim if m.qk_norm else 0)


@pytest.mark.parametrize("model", [TIED_GPT, LLAMA, hp.load_model("llama3-70b"), hp.load_model("gpt3-175b")],
                         ids=["gpt", "llama", "llama3-70b", "gpt3-175b"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_tp_splits_matrices(model: ModelSpec, tp: int):
    """t * (one rank's layer) = the whole layer + (t - 1) copies of what is replicated (norms, biases);
    with t > kv heads each rank also holds one whole K and V head (Megatron replicates them)."""
    full = layer_params(model, 0).total
    local = local_layer_params(model, False, tp, 1, 1).total
    kv_extra = 0
    if model.num_kv_heads < tp:  # t ranks hold t K and V heads where the model has kv of each
        per_head = 2 * model.head_dim * (model.hidden_size + (1 if model.linear_bias else 0))
        kv_extra = (tp - model.num_kv_heads) * per_head
    assert tp * local - full == (tp - 1) * _replicated_per_layer(model) + kv_extra
    assert tp * local >= full


def test_kv_heads_replicated_beyond_kv():
    """tp = 16 > 8 kv heads (llama3-70b): every rank holds one K and one V head (Megatron replicates)."""
    m = hp.load_model("llama3-70b")
    h, d = m.hidden_size, m.head_dim
    assert local_attention_params(m, 16) == h * (2 * m.q_width // 16 + 2 * d)
    assert local_attention_params(m, 8) == h * (2 * m.q_width // 8 + 2 * d)


@pytest.mark.parametrize("tp", [1, 2, 3, 4, 8])
def test_vocab_split_pads_to_tp(tp: int):
    """First stage holds ceil(V/t) rows of the embedding (Megatron pads the vocabulary to a multiple of t)."""
    m = ModelSpec(num_layers=1, hidden_size=24, num_attention_heads=1, vocab_size=1001, position_embedding="rope",
                  tied_embeddings=False, ffn_hidden_size=24)
    emb = local_stage_params(m, [1], 0, tp, 1, 1, m.seq_length).total
    layer = local_layer_params(m, False, tp, 1, 1).total
    head_norm = norm_params(m, m.hidden_size)
    rows = -(-m.vocab_size // tp)
    assert emb - layer - head_norm == 2 * rows * m.hidden_size  # embedding + output layer, both split
    assert m.vocab_size <= rows * tp < m.vocab_size + tp


@pytest.mark.parametrize("ep, etp", [(1, 1), (2, 1), (4, 1), (8, 1), (2, 2), (1, 4)])
def test_experts_split_over_ep_and_etp(ep: int, etp: int):
    """Mixtral (no biases): ep * etp ranks together hold every routed expert exactly once."""
    m = MIXTRAL
    local = local_layer_params(m, True, 1, ep, etp)
    assert local.expert * ep * etp == layer_params(m, 0).expert
    assert local.dense == layer_params(m, 0).dense  # attention, norms, router: not split by ep/etp
