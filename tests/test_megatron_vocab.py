"""The vocabulary a Megatron launch's Hugging Face tokenizer names (planner.frameworks.megatron.vocab.known_vocab):
a model parplan has a preset for, or a local tokenizer folder named after its family, no longer stops `check`
with "parplan does not know this tokenizer's vocabulary" (a Qwen3-30B-A3B Megatron script did)."""

from __future__ import annotations

import pytest

from planner.frameworks.megatron.vocab import known_vocab, padded


@pytest.mark.parametrize("model, vocab", [("Qwen/Qwen3-30B-A3B", 151936), ("/data/tokenizers/qwen3-tok", 151936),
                                          ("openai/gpt-oss-20b", 201088),
                                          ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 202048),
                                          ("meta-llama/Meta-Llama-3-8B", 128256)])
def test_hugging_face_tokenizers_of_preset_families(model, vocab):
    assert known_vocab("HuggingFaceTokenizer", model) == vocab


def test_unknown_tokenizers_stay_unknown():
    assert known_vocab("HuggingFaceTokenizer", "/data/tokenizers/my-own-bpe") is None
    assert known_vocab("NullTokenizer", "Qwen/Qwen3-30B-A3B") is None  # the type names no model


def test_padding_is_megatrons():
    assert padded(151936, 128, 8) == 152576  # ceil(151936 / 1024) * 1024
