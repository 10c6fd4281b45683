"""Hugging Face config.json families beyond Llama (planner/files/hf_families.py), the refusals, names, error locations
and warnings of the Hugging Face path (planner/files/hf_notes.py), Llama 4's chunked attention and the Qwen-MoE window
rule by transformers version (hf_llama4.py, hf_window.py).

Golden totals are the parameter counts the model cards publish (huggingface.co/<repo>, the card's text or its
safetensors "Model size"; technical reports where named). Where a card rounds (1T, 7B), the test pins the hand
count from the config instead; every case also pins the exact hand count, its arithmetic in the comment
(h hidden, L layers, a heads, g kv heads, d head_dim, f MLP width, E experts, k top-k, V vocabulary).
"""

from __future__ import annotations

import json

import pytest

from costmodels.params import active_params, total_params
from planner.errors import UserError
from planner.files import loading
from planner.files.hf_config import model_from_hf_config
from planner.files.hf_notes import hf_warnings

GEMMA_7B = dict(model_type="gemma", num_hidden_layers=28, hidden_size=3072, num_attention_heads=16,
                num_key_value_heads=16, head_dim=256, intermediate_size=24576, vocab_size=256000,
                max_position_embeddings=8192, hidden_act="gelu")
GEMMA2_9B = dict(model_type="gemma2", num_hidden_layers=42, hidden_size=3584, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=256, intermediate_size=14336, vocab_size=256000,
                 max_position_embeddings=8192, sliding_window=4096, attn_logit_softcapping=50.0,
                 final_logit_softcapping=30.0)
GEMMA3_1B = dict(model_type="gemma3_text", num_hidden_layers=26, hidden_size=1152, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=256, intermediate_size=6912, vocab_size=262144,
                 max_position_embeddings=32768, sliding_window=512, sliding_window_pattern=6)
PHI3_MINI = dict(model_type="phi3", num_hidden_layers=32, hidden_size=3072, num_attention_heads=32,
                 num_key_value_heads=32, intermediate_size=8192, vocab_size=32064, max_position_embeddings=4096,
                 sliding_window=2047, tie_word_embeddings=False)
PHI3_MEDIUM = {**PHI3_MINI, "num_hidden_layers": 40, "hidden_size": 5120, "num_attention_heads": 40,
               "num_key_value_heads": 10, "intermediate_size": 17920}
PHI35_MOE = dict(model_type="phimoe", num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                 num_key_value_heads=8, intermediate_size=6400, num_local_experts=16, num_experts_per_tok=2,
                 vocab_size=32064, max_position_embeddings=131072, sliding_window=131072, attention_bias=True,
                 lm_head_bias=True, tie_word_embeddings=False)
KIMI_K2 = dict(model_type="kimi_k2", architectures=["DeepseekV3ForCausalLM"], num_hidden_layers=61, hidden_size=7168,
               num_attention_heads=64, num_key_value_heads=64, intermediate_size=18432, vocab_size=163840,
               max_position_embeddings=131072, n_routed_experts=384, num_experts_per_tok=8, moe_intermediate_size=2048,
               n_shared_experts=1, first_k_dense_replace=1, moe_layer_freq=1, q_lora_rank=1536, kv_lora_rank=512,
               qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, num_nextn_predict_layers=0,
               tie_word_embeddings=False, quantization_config={"quant_method": "fp8", "fmt": "e4m3"})
GLM45 = dict(model_type="glm4_moe", num_hidden_layers=92, hidden_size=5120, num_attention_heads=96,
             num_key_value_heads=8, head_dim=128, intermediate_size=12288, vocab_size=151552,
             max_position_embeddings=131072, n_routed_experts=160, num_experts_per_tok=8, moe_intermediate_size=1536,
             n_shared_experts=1, first_k_dense_replace=3, num_nextn_predict_layers=1, partial_rotary_factor=0.5,
             use_qk_norm=True, attention_bias=True, tie_word_embeddings=False)
OLMO2_7B = dict(model_type="olmo2", num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                num_key_value_heads=32, intermediate_size=11008, vocab_size=100352, max_position_embeddings=4096,
                tie_word_embeddings=False)
OLMOE = dict(model_type="olmoe", num_hidden_layers=16, hidden_size=2048, num_attention_heads=16, num_key_value_heads=16,
             intermediate_size=1024, num_experts=64, num_experts_per_tok=8, vocab_size=50304,
             max_position_embeddings=4096, tie_word_embeddings=False)
GRANITE_8B = dict(model_type="granite", num_hidden_layers=40, hidden_size=4096, num_attention_heads=32,
                  num_key_value_heads=8, intermediate_size=12800, vocab_size=49155, max_position_embeddings=4096,
                  tie_word_embeddings=True, attention_dropout=0.1, embedding_multiplier=12.0,
                  residual_multiplier=0.22, attention_multiplier=0.0078125, logits_scaling=16.0)
STARCODER2_7B = dict(model_type="starcoder2", num_hidden_layers=32, hidden_size=4608, num_attention_heads=36,
                     num_key_value_heads=4, intermediate_size=18432, vocab_size=49152, max_position_embeddings=16384,
                     sliding_window=4096, use_bias=True, attention_dropout=0.1, residual_dropout=0.1)
FALCON_7B = dict(model_type="falcon", num_hidden_layers=32, hidden_size=4544, num_attention_heads=71, vocab_size=65024,
                 multi_query=True, new_decoder_architecture=False, parallel_attn=True, bias=False)
FALCON_40B = {**FALCON_7B, "num_hidden_layers": 60, "hidden_size": 8192, "num_attention_heads": 128,
              "new_decoder_architecture": True, "num_kv_heads": 8}
DBRX = dict(model_type="dbrx", n_layers=40, d_model=6144, n_heads=48, vocab_size=100352, max_seq_len=32768,
            attn_config={"kv_n_heads": 8, "clip_qkv": 8}, tie_word_embeddings=False,
            ffn_config={"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4})
INTERNLM2_7B = dict(model_type="internlm2", num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                    num_key_value_heads=8, intermediate_size=14336, vocab_size=92544, max_position_embeddings=32768,
                    bias=False, tie_word_embeddings=False)
QWEN15_MOE = dict(model_type="qwen2_moe", num_hidden_layers=24, hidden_size=2048, num_attention_heads=16,
                  num_key_value_heads=16, intermediate_size=5632, vocab_size=151936, max_position_embeddings=8192,
                  num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
                  shared_expert_intermediate_size=5632, decoder_sparse_step=1, use_sliding_window=False,
                  sliding_window=32768, max_window_layers=21, tie_word_embeddings=False,
                  transformers_version="4.39.0.dev0")
QWEN2_57B = {**QWEN15_MOE, "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
             "num_key_value_heads": 4, "intermediate_size": 18944, "num_experts": 64, "num_experts_per_tok": 8,
             "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480, "max_window_layers": 28}

B = 1e9
CASES = {
    # card: (total, active) and whether it states them to <= 0.5% (else the hand count is the golden number).
    # google/gemma-7b; Gemma report (2024) Table 2: embedding 786,432,000 + non-embedding 7,751,248,896.
    # Hand: V*h = 256000*3072; layer = 2*h*a*d + 2*h*g*d (50,331,648) + 3*h*f (226,492,416) + 2h = 276,830,208;
    # tied: 786,432,000 + 28 * 276,830,208 + 3072 (final norm) = 8,537,680,896, the report's sum exactly.
    "gemma-7b": (GEMMA_7B, 8_537_680_896, None, True, 8_537_680_896, None),
    # google/gemma-2-9b; Gemma 2 report Table 1: 917,504,000 + 8,324,201,984 = 9,241,705,984. Hand: layer =
    # 44,040,192 + 3*3584*14336 + 2h = 198,188,032; 917,504,000 + 42 * 198,188,032 + 3584 = 9,241,404,928; the
    # 2 pre/post feed-forward norms ModelSpec has no field for are 2*3584*42 = 301,056 (-0.003%).
    "gemma-2-9b": (GEMMA2_9B, 9_241_705_984, None, True, 9_241_404_928, None),
    # google/gemma-3-1b-pt, "1B" (Gemma 3 report Table 1: 302M embedding + 698M): rounds. Hand: layer = 2*1152*1024
    # + 2*1152*256 + 2*256 (qk norms) + 3*1152*6912 + 2h = 26,839,808; 262144*1152 + 26 * 26,839,808 + 1152 =
    # 999,826,048 (+ Gemma's extra 2h per layer = 999,885,952 in the checkpoint).
    "gemma-3-1b": (GEMMA3_1B, 1.0 * B, None, False, 999_826_048, None),
    # microsoft/Phi-3-mini-4k-instruct: 3.82B. Hand: layer = 4*3072^2 + 3*3072*8192 + 2h = 113,252,352 (fused
    # qkv_proj and gate_up_proj: the same matrices); 2*32064*3072 + 32 * 113,252,352 + 3072 = 3,821,079,552.
    "phi-3-mini": (PHI3_MINI, 3.82 * B, None, True, 3_821_079_552, None),
    # microsoft/Phi-3-medium-4k-instruct: 13.96B. Hand: layer = 2*5120*5120 + 2*5120*1280 + 3*5120*17920 + 2h =
    # 340,797,440; 2*32064*5120 + 40 * 340,797,440 + 5120 = 13,960,238,080.
    "phi-3-medium": (PHI3_MEDIUM, 13.96 * B, None, True, 13_960_238_080, None),
    # microsoft/Phi-3.5-MoE-instruct: 41.9B total, 6.6B active. Hand: attention 2*4096*4096 + 2*4096*1024 =
    # 41,943,040, expert 3*4096*6400 = 78,643,200, LayerNorms 4h, router 16h; layer = 1,300,316,160 total;
    # 2*32064*4096 + 2h + 32 * layer = 41,872,793,600; active: 2 experts of 16 = 6,640,640,000.
    "phi-3.5-moe": (PHI35_MOE, 41.9 * B, 6.6 * B, True, 41_872_793_600, 6_640_640_000),
    # moonshotai/Kimi-K2-Instruct: "1T total, 32B activated": rounds. Hand (DeepSeek-V3's MLA): attention
    # h*r_q + r_q + r_q*a*192 + h*576 + r_kv + r_kv*a*256 + a*128*h = 101,124,096; dense layer + 3*h*18432 + 2h =
    # 497,500,160; MoE layer + 385 experts of 3*h*2048 (44,040,192) + router 384h = 17,059,364,864;
    # 2*163840*7168 + h + 497,500,160 + 60 * 17,059,364,864 = 1,026,408,209,408; active 8 + 1 experts.
    "kimi-k2": (KIMI_K2, 1000 * B, 32 * B, False, 1_026_408_209_408, 32_861_477_888),
    # zai-org/GLM-4.5: "355B total, 32B active": rounds. Hand: attention 2*h*96*128 + 2*h*8*128 + 2*128 (qk norm)
    # = 136,315,136; dense layer 325,069,056; MoE layer + 161 experts of 3*h*1536 + router 160h = 3,935,611,136;
    # main 2*151552*5120 + h + 3 * 325,069,056 + 89 * 3,935,611,136 = 352,796,495,872; MTP layer + 3 norms + eh_proj
    # 2h^2 = 3,988,055,296; total 356,784,551,168 (the checkpoint's MTP also stores embedding and head: ~358.3B);
    # plus the q/k/v biases (attention_bias: qkv_bias), 96*128 + 2*8*128 = 14,336 a layer over 93 layers.
    "glm-4.5": (GLM45, 355 * B, 32 * B, False, 356_784_551_168 + 93 * 14_336, 34_032_858_368 + 93 * 14_336),
    # allenai/OLMo-2-1124-7B: 7.30B. Hand: layer 4*4096^2 + 3*4096*11008 + 2h + 2*128 (qk_norm: ModelSpec's per-head
    # 2d; OLMo's whole-width norms are 2h, 7,936 more per layer) = 202,383,616; 2*100352*h + h + 32 * layer.
    "olmo-2-7b": (OLMO2_7B, 7.30 * B, None, True, 7_298_363_392, None),
    # allenai/OLMoE-1B-7B-0924: 6.92B total, 1.3B active (OLMoE paper Table 1: 6.9B / 1.3B). Hand: layer 4*2048^2
    # + 2*128 + 2h + 64h + 64 experts of 3*2048*1024 (6,291,456) = 419,565,824; 2*50304*h + h + 16 * layer.
    "olmoe": (OLMOE, 6.92 * B, 1.3 * B, True, 6_919_100_416, 1_281_955_840),
    # ibm-granite/granite-3.0-8b-base: 8.17B. Hand: layer 2*h*4096 + 2*h*1024 + 3*h*12800 + 2h = 199,237,632; tied:
    # 49155*4096 + 40 * 199,237,632 + 4096 = 8,170,848,256 (the four multipliers are scalars of the config).
    "granite-3.0-8b": (GRANITE_8B, 8.17 * B, None, True, 8_170_848_256, None),
    # bigcode/starcoder2-7b: 7.17B. Hand: attention 2*4608*4608 + 2*4608*512 + biases 4608 + 1024 + 4608 =
    # 47,196,160; GELU MLP 2*h*18432 + 18432 + h = 169,892,352; 2 LayerNorms 4h; tied: 49152*h + 2h + 32 layers.
    "starcoder2-7b": (STARCODER2_7B, 7.17 * B, None, True, 7_173_923_840, None),
    # tiiuae/falcon-7b, "7B": rounds. Hand: attention h*(h + 2*64) + h*h = 41,873,408 (MQA), MLP 2*h*4h =
    # 165,187,584, 2 LayerNorms 4h (Falcon-7B has one: +2h per layer, 290,816 in all); tied: 65024*h + 2h + 32 layers.
    "falcon-7b": (FALCON_7B, 7 * B, None, False, 6_922_011_520, None),
    # tiiuae/falcon-40b, "40B": rounds. Hand: layer 2*h*h + 2*h*1024 + 2*h*4h + 4h = 679,510,016;
    # 65024*8192 + 2h + 60 * layer = 41,303,293,952.
    "falcon-40b": (FALCON_40B, 40 * B, None, False, 41_303_293_952, None),
    # databricks/dbrx-base: "132B total parameters of which 36B are active". Hand: attention 2*h*h + 2*h*1024 =
    # 88,080,384, GLU expert 3*6144*10752 = 198,180,864, 2 bias-free LayerNorms 2h, router 16h;
    # 2*100352*h + h + 40 * (88,080,384 + 2h + 16h + 16 experts); active 4 experts of 16.
    "dbrx": (DBRX, 132 * B, 36 * B, True, 131_596_523_520, 36_469_708_800),
    # internlm/internlm2-7b: 7.74B. Hand: layer 2*h*h + 2*h*1024 + 3*h*14336 + 2h = 218,112,000 (fused wqkv);
    # 2*92544*h + h + 32 * 218,112,000 = 7,737,708,544.
    "internlm2-7b": (INTERNLM2_7B, 7.74 * B, None, True, 7_737_708_544, None),
    # Qwen/Qwen1.5-MoE-A2.7B: "14.3B parameters in total and 2.7B activated". Hand: layer 4h^2 + 2h + 60h + shared
    # 3*h*5632 (= 4 experts of 1408) + 60 * 3*h*1408 = 570,552,320; 2*151936*h + h + 24 layers; plus the q/k/v
    # biases (qkv_bias) 3h a layer; the shared-expert gate ModelSpec has no field for: 49,152 (0.0003%).
    "qwen1.5-moe-a2.7b": (QWEN15_MOE, 14.3 * B, 2.7 * B, True, 14_315_587_584 + 24 * 3 * 2048,
                          2_688_976_896 + 24 * 3 * 2048),
    # Qwen/Qwen2-57B-A14B: 57.4B total (card: 57B, 14B activated). Hand: layer 2*h*h + 2*h*512 + 2h + 64h + shared
    # 3*h*20480 (8 of 2560) + 64 * 3*h*2560 = 2,011,405,312; 2*151936*h + h + 28 layers; plus the q/k/v biases
    # (qkv_bias) h + 2*512 a layer.
    "qwen2-57b-a14b": (QWEN2_57B, 57.4 * B, 14 * B, True, 57_408_429_568 + 28 * 4608, 14_249_041_408 + 28 * 4608),
}


@pytest.mark.parametrize("name", CASES)
def test_family_total_matches_its_card(name):
    config, card, card_active, states_it, hand, hand_active = CASES[name]
    m = model_from_hf_config(config, name=name)
    assert total_params(m) == hand
    assert active_params(m) == (hand_active or hand)
    tolerance = 0.005 if states_it else 0.05  # a card that rounds (1T, 40B, 355B) only bounds it
    assert total_params(m) == pytest.approx(card, rel=tolerance)
    if card_active and states_it:  # these cards count the input embedding in "active"; DeepSeek's do not
        assert active_params(m) == pytest.approx(card_active, rel=0.02)


def test_family_shapes():
    gemma = model_from_hf_config(GEMMA2_9B)
    assert (gemma.head_dim, gemma.activation, gemma.tied_embeddings, gemma.sliding_window,
            gemma.full_attention_interval) == (256, "swiglu", True, 4096, 2)  # GeGLU: 3 matrices; 0, 2, ... windowed
    gemma3 = model_from_hf_config(GEMMA3_1B)
    assert (gemma3.qk_norm, gemma3.sliding_window, gemma3.full_attention_interval) == (True, 512, 6)  # 5 local : 1
    types = ["sliding_attention"] * 5 + ["full_attention"]
    assert model_from_hf_config({**GEMMA3_1B, "num_hidden_layers": 12, "layer_types": types * 2}
                                ).full_attention_interval == 6
    with pytest.raises(ValueError, match="use_bidirectional_attention"):
        model_from_hf_config({**GEMMA3_1B, "use_bidirectional_attention": True})
    sc2 = model_from_hf_config(STARCODER2_7B)
    assert (sc2.activation, sc2.norm, sc2.linear_bias, sc2.num_kv_heads, sc2.sliding_window, sc2.dropout) == (
        "gelu", "layernorm", True, 4, 4096, True)
    assert (model_from_hf_config(PHI3_MINI).sliding_window, model_from_hf_config(PHI3_MINI).full_attention_interval) \
        == (2047, 0)
    falcon = model_from_hf_config(FALCON_7B)
    assert (falcon.num_kv_heads, falcon.ffn_hidden_size, falcon.activation, falcon.tied_embeddings) == (
        1, 4 * 4544, "gelu", True)
    assert model_from_hf_config(FALCON_40B).num_kv_heads == 8
    glm = model_from_hf_config(GLM45)
    assert glm.mla is None and (glm.num_kv_heads, glm.first_k_dense_layers, glm.mtp_num_layers) == (8, 3, 1)
    assert model_from_hf_config(QWEN2_57B).num_shared_experts == 8  # 20480 / 2560


def test_kimi_k2_reads_as_deepseek_v3():
    assert model_from_hf_config(KIMI_K2) == model_from_hf_config({**KIMI_K2, "model_type": "deepseek_v3"})


def test_family_errors_name_the_file_keys():
    with pytest.raises(ValueError, match="ffn_config.moe_top_k"):
        model_from_hf_config({**DBRX, "ffn_config": {**DBRX["ffn_config"], "moe_top_k": 17}})
    with pytest.raises(ValueError, match="ffn_config.ffn_hidden_size"):
        model_from_hf_config({**DBRX, "ffn_config": {"moe_num_experts": 16, "moe_top_k": 4}})
    with pytest.raises(ValueError, match="shared_expert_intermediate_size=5000.*ModelSpec"):
        model_from_hf_config({**QWEN15_MOE, "shared_expert_intermediate_size": 5000})


@pytest.mark.parametrize("config, kind", [
    ({"model_type": "t5", "is_encoder_decoder": True}, "encoder-decoder"),
    ({"model_type": "bert"}, "an encoder"),
    ({"model_type": "jamba", "num_hidden_layers": 32}, "state-space"),
    ({"model_type": "llava", "vision_config": {}, "text_config": {}}, "vision-language"),
    ({"model_type": "qwen2_vl", "vision_config": {"depth": 32}}, "vision-language"),
])
def test_unrepresentable_architectures_say_why_and_what_to_do(config, kind):
    with pytest.raises(ValueError) as err:
        model_from_hf_config(config)
    msg = str(err.value)
    assert kind in msg and "cannot represent" in msg and "parplan schema ModelSpec" in msg
    assert "not mapped yet" not in msg


def test_unmapped_decoder_only_type_is_told_apart():
    with pytest.raises(ValueError) as err:
        model_from_hf_config({"model_type": "gpt_neox", "num_hidden_layers": 32})
    msg = str(err.value)
    assert "'gpt_neox' is not mapped yet" in msg and "parplan schema ModelSpec" in msg and "gemma2" in msg
    assert "cannot represent" not in msg


SCOUT_TEXT = dict(model_type="llama4_text", num_hidden_layers=48, hidden_size=5120, num_attention_heads=40,
                  num_key_value_heads=8, head_dim=128, intermediate_size=8192, intermediate_size_mlp=16384,
                  num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1, vocab_size=202048,
                  attention_chunk_size=8192, no_rope_layers=[], tie_word_embeddings=False)
SCOUT_VISION = dict(hidden_size=1408, intermediate_size=5632, num_hidden_layers=34, pixel_shuffle_ratio=0.5,
                    projector_input_dim=4096, projector_output_dim=4096, vision_output_dim=4096)


def test_llama4_chunked_attention_is_a_window_of_half_the_chunk():
    """Three of four layers attend within 8,192-token chunks (no_rope_layers empty: every 4th layer full): a window
    of 4,096, the mean keys a chunked query sees; attention_chunk_size null leaves every layer full."""
    m = model_from_hf_config({"model_type": "llama4", "text_config": SCOUT_TEXT, "vision_config": SCOUT_VISION})
    assert (m.sliding_window, m.full_attention_interval, m.windowed_layers) == (4096, 4, 36)
    full = model_from_hf_config({**SCOUT_TEXT, "attention_chunk_size": None})
    assert full.sliding_window == 0
    types = ["full_attention"] + ["chunked_attention"] * 47  # no interval states it: full attention, warned
    odd = {**SCOUT_TEXT, "layer_types": types}
    assert model_from_hf_config(odd).sliding_window == 0
    assert any("priced with full attention" in line for line in hf_warnings(odd))


def test_llama4_warnings_name_what_is_not_priced():
    config = {"model_type": "llama4", "text_config": SCOUT_TEXT, "vision_config": SCOUT_VISION,
              "tie_word_embeddings": True}
    lines = hf_warnings(config, model_from_hf_config(config))
    assert any("vision_config" in line and "0.87B" in line and "text tower" in line for line in lines)
    assert any("attention_chunk_size=8192" in line and "window of 4096" in line for line in lines)
    assert any("tie_word_embeddings=true" in line and "ignored" in line for line in lines)
    assert not model_from_hf_config(config).tied_embeddings  # text_config's, as transformers ties


def test_quantization_and_parallel_attention_warnings():
    assert any("quant_method fp8" in line and "--precision" in line for line in hf_warnings(KIMI_K2))
    assert any("parallel_attn" in line for line in hf_warnings(FALCON_7B))
    assert hf_warnings(GEMMA_7B) == [] and hf_warnings({**FALCON_7B, "parallel_attn": False}) == []


QWEN3_MOE = dict(model_type="qwen3_moe", num_hidden_layers=48, hidden_size=2048, num_attention_heads=32,
                 num_key_value_heads=4, head_dim=128, intermediate_size=6144, vocab_size=151936, num_experts=128,
                 num_experts_per_tok=8, moe_intermediate_size=768, use_sliding_window=True, sliding_window=4096,
                 max_window_layers=48)


def test_qwen_moe_window_follows_the_files_transformers_version():
    """transformers 4.51.3 (what the published Qwen3-MoE files name) windows layers i >= max_window_layers; 5.24
    windows every Qwen3-MoE layer, and Qwen2-MoE's even layers below max_window_layers."""
    old = model_from_hf_config({**QWEN3_MOE, "transformers_version": "4.51.0"})
    assert old.sliding_window == 0  # max_window_layers = 48 = every layer full
    half = model_from_hf_config({**QWEN3_MOE, "transformers_version": "4.51.0", "max_window_layers": 24,
                                 "num_hidden_layers": 24})
    assert (half.sliding_window, half.full_attention_interval) == (0, 0)
    new = model_from_hf_config({**QWEN3_MOE, "transformers_version": "5.0.0"})
    assert (new.sliding_window, new.full_attention_interval) == (4096, 0)
    assert (model_from_hf_config(QWEN3_MOE).sliding_window) == 4096  # no version: 5.24's rule
    lines = hf_warnings({**QWEN3_MOE, "transformers_version": "4.51.0"}, old)
    assert any("transformers 4.x" in line and "here 0 of 48" in line for line in lines)
    qwen2 = {**QWEN15_MOE, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 24}
    assert model_from_hf_config(qwen2).sliding_window == 0  # 4.39: layers >= 24 of 24: none
    alternate = model_from_hf_config({**qwen2, "transformers_version": "5.1.0"})
    assert (alternate.sliding_window, alternate.full_attention_interval) == (4096, 2)


def test_cli_path_names_the_model_warns_and_locates_errors_once(tmp_path, capsys):
    folder = tmp_path / "gemma-2-9b"
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(json.dumps(GEMMA2_9B))
    assert loading.load_model(str(path)).name == "gemma-2-9b"  # the folder of a config.json
    path.write_text(json.dumps({**GEMMA2_9B, "_name_or_path": "google/gemma-2-9b-it"}))
    assert loading.load_model(str(path)).name == "gemma-2-9b-it"
    other = tmp_path / "my-falcon.json"
    other.write_text(json.dumps(FALCON_7B))
    assert loading.load_model(str(other)).name == "my-falcon"  # any other file: its stem
    assert f"parplan: warning: {other}: parallel_attn=true" in capsys.readouterr().err
    path.write_text(json.dumps({**PHI35_MOE, "num_experts_per_tok": 17}))
    with pytest.raises(UserError) as err:
        loading.load_model(str(path))
    assert str(err.value) == f"{path}: num_experts_per_tok=17 must be between 1 and num_local_experts=16"
    path.write_text(json.dumps({**PHI3_MINI, "hidden_size": "3072"}))
    with pytest.raises(UserError) as err:
        loading.load_model(str(path))
    assert str(err.value).count("config.json") == 1 and "key 'hidden_size' must be an integer" in str(err.value)


def test_gemma3_multimodal_config_reads_its_text_tower():
    """google/gemma-3-27b-it's config.json (model_type gemma3: text_config without vocab_size, and a SigLIP
    vision_config) was refused as a vision-language model, and its text_config alone failed on the missing
    vocab_size (Gemma3TextConfig default 262208): a new-user pass. Gemma 3 27B's language model: 27.01 B (the
    card's 27 B less the 0.4 B vision tower); the vision tower is said, not priced."""
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                              "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
                              "num_key_value_heads": 16, "query_pre_attn_scalar": 168, "sliding_window": 1024},
              "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "model_type": "siglip_vision_model",
                                "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14}}
    spec = model_from_hf_config(config)
    assert spec.vocab_size == 262_208 and spec.tied_embeddings and spec.sliding_window == 1024
    assert total_params(spec) / 1e9 == pytest.approx(27.01, abs=0.01)
    assert any(w.startswith("vision_config: the vision encoder (SigLIP)") for w in hf_warnings(config, spec))
    # gemma-3-4b-it's text_config names no heads, gemma-3-12b-it's no head_dim: Gemma3TextConfig's 8, 4 and 256
    four = model_from_hf_config({**config, "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                                                           "model_type": "gemma3_text", "num_hidden_layers": 34,
                                                           "sliding_window": 1024}})
    assert (four.num_attention_heads, four.num_kv_heads, four.head_dim) == (8, 4, 256)
    assert total_params(four) / 1e9 == pytest.approx(3.88, abs=0.01)  # the 4B card's language model


GRANITE_MOE = {"model_type": "granitemoe", "architectures": ["GraniteMoeForCausalLM"], "attention_bias": False,
               "attention_multiplier": 0.015625, "embedding_multiplier": 12.0, "hidden_size": 1536,
               "intermediate_size": 512, "logits_scaling": 6.0, "max_position_embeddings": 4096,
               "num_attention_heads": 24, "num_experts_per_tok": 8, "num_hidden_layers": 32, "num_key_value_heads": 8,
               "num_local_experts": 40, "residual_multiplier": 0.22, "tie_word_embeddings": True, "vocab_size": 49155}


def test_granite_moe_is_read():
    """ibm-granite/granite-3.0-3b-a800m (model_type granitemoe) was refused as 'not mapped yet' (a new-user pass).
    Hand count: per layer attention 1536 x (1536 + 512 + 512 + 1536) = 6,291,456, 40 experts x 3 x 512 x 1536 =
    94,371,840, router 40 x 1536 = 61,440, two norms 3,072; x 32 layers plus the tied 49155 x 1536 embedding and the
    final norm: 3,298,793,472 (the card's 3.3 B)."""
    spec = model_from_hf_config(GRANITE_MOE)
    assert total_params(spec) == 32 * (6_291_456 + 94_371_840 + 61_440 + 3_072) + 49155 * 1536 + 1536 == 3_298_793_472
    assert (spec.num_experts, spec.top_k, spec.moe_ffn_hidden_size, spec.num_shared_experts) == (40, 8, 512, 0)
    shared = model_from_hf_config({**GRANITE_MOE, "model_type": "granitemoeshared", "shared_intermediate_size": 1024})
    assert shared.num_shared_experts == 2
    with pytest.raises(ValueError, match="shared_intermediate_size=1000"):
        model_from_hf_config({**GRANITE_MOE, "model_type": "granitemoeshared", "shared_intermediate_size": 1000})


MISTRAL_TEXT = dict(model_type="mistral", num_hidden_layers=40, hidden_size=5120, num_attention_heads=32,
                    num_key_value_heads=8, head_dim=128, intermediate_size=32768, vocab_size=131072,
                    tie_word_embeddings=False)


@pytest.mark.parametrize("wrapper", [
    {"model_type": "mistral3", "vision_config": {"hidden_size": 1024}, "text_config": MISTRAL_TEXT},
    {"model_type": "internvl_chat", "vision_config": {"hidden_size": 1024}, "llm_config": MISTRAL_TEXT},
    {"model_type": "qwen2_5_vl", "vision_config": {"depth": 32}, **{**MISTRAL_TEXT, "model_type": "qwen2_5_vl"}},
    {"model_type": "qwen2_5_vl", "vision_config": {"depth": 32},  # transformers 5: the tower's own type
     "text_config": {**MISTRAL_TEXT, "model_type": "qwen2_5_vl_text"}},
])
def test_a_vision_language_wrapper_of_a_mapped_language_model_reads_that_model(wrapper):
    """Mistral Small 3.1 (mistral3, text_config a Mistral), InternVL (llm_config) and Qwen2.5-VL (the language
    model's keys at the top level) were refused, though their language model is a mapped family: its config alone
    counted the same 23.57 B (a new-user pass). The language model is read, and the unpriced vision tower said."""
    from costmodels.params import total_params  # noqa: PLC0415
    from planner.files.hf_notes import hf_warnings  # noqa: PLC0415

    spec = model_from_hf_config(wrapper)
    alone = model_from_hf_config({**MISTRAL_TEXT, "model_type": "qwen2" if "qwen" in wrapper["model_type"]
                                  else "mistral"})
    assert total_params(spec) == total_params(alone) and total_params(spec) / 1e9 == pytest.approx(23.57, abs=0.01)
    assert any("is a vision-language model: only its language model" in w for w in hf_warnings(wrapper, spec))


@pytest.mark.parametrize("config, kind", [
    ({"model_type": "minimax_text_01", "attn_type_list": [0, 0, 0, 1]}, "state-space or hybrid"),
    ({"model_type": "some_new_hybrid", "mamba_d_state": 128}, "state-space or hybrid"),
    ({"model_type": "other", "layer_types": ["linear_attention", "full_attention"]}, "state-space or hybrid"),
    ({"model_type": "nemotron-nas", "block_configs": [{"attention": {"no_op": True}}]}, "layers differ in shape"),
])
def test_hybrids_and_uneven_layers_are_named_by_their_keys(config, kind):
    """MiniMax's own model_types (lightning attention: 0 in attn_type_list), Phi-4-mini-flash's Mamba keys and
    Nemotron-Ultra's per-layer block_configs were told "if it is a decoder-only transformer, write a ModelSpec"
    (a new-user pass): what the file itself says about its layers names the architecture."""
    with pytest.raises(ValueError) as err:
        model_from_hf_config(config)
    assert kind in str(err.value) and "not mapped yet" not in str(err.value)


GRANITE4_MICRO = {"model_type": "granitemoehybrid", "hidden_size": 2560, "intermediate_size": 8192,
                  "shared_intermediate_size": 8192, "num_local_experts": 0, "num_experts_per_tok": 0,
                  "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8,
                  "layer_types": ["attention"] * 40, "position_embedding_type": "rope", "vocab_size": 100352,
                  "tie_word_embeddings": True}


def test_granite4_with_attention_layers_only_is_a_dense_granite():
    """granite-4.0-micro (granitemoehybrid, every layer "attention", no experts) was refused as a Mamba hybrid by
    its model_type (a new-user pass). Hand count: attention 2560 x (2560 + 512 + 512 + 2560) = 15,728,640, the
    shared SwiGLU MLP 3 x 2560 x 8192 = 62,914,560, two norms 5,120; x 40, plus the tied 100,352 x 2,560 embedding
    and the final norm: 3,402,836,480. One Mamba layer makes it the hybrid it is, refused."""
    spec = model_from_hf_config(GRANITE4_MICRO)
    assert total_params(spec) == 40 * (15_728_640 + 62_914_560 + 5_120) + 100_352 * 2560 + 2560 == 3_402_836_480
    with pytest.raises(ValueError, match="state-space or hybrid"):
        model_from_hf_config({**GRANITE4_MICRO, "layer_types": ["attention"] * 39 + ["mamba"]})


def test_deepseek_sparse_attention_keys_are_said_unpriced():
    """A deepseek_v3 config carrying V3.2's indexer keys (index_topk, index_n_heads) was read as dense MLA with
    nothing said (a new-user pass): the sparse attention and the indexer's weights are named as not priced."""
    from planner.files.hf_notes import hf_warnings  # noqa: PLC0415

    v3 = {"model_type": "deepseek_v3", "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
          "intermediate_size": 2048, "moe_intermediate_size": 256, "n_routed_experts": 8, "n_shared_experts": 1,
          "num_experts_per_tok": 2, "first_k_dense_replace": 1, "q_lora_rank": 256, "kv_lora_rank": 128,
          "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64, "vocab_size": 4096,
          "max_position_embeddings": 4096, "n_group": 1, "topk_group": 1}
    assert not any("index_topk" in w for w in hf_warnings(v3, model_from_hf_config(v3)))
    sparse = {**v3, "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128}
    assert any(w.startswith("index_topk=2048: DeepSeek Sparse Attention") for w in
               hf_warnings(sparse, model_from_hf_config(sparse)))
