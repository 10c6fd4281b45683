"""The vocabulary a Megatron launch trains with, from its tokenizer flags, padded as Megatron pads it.

Sources:
- Megatron-LM megatron/training/tokenizer/tokenizer.py `build_tokenizer` and `_vocab_size_with_padding`:
  the embedding has `ceil(V / (make_vocab_size_divisible_by * tp)) * make_vocab_size_divisible_by * tp`
  rows (`--make-vocab-size-divisible-by`, default 128, megatron/training/arguments.py).
- Megatron-DeepSpeed (BigScience) `--pad-vocab-size-to N`: exactly N rows (its arguments.py; N must be
  at least V and a multiple of tp).
- Tokenizer sizes: GPT-2 BPE 50257 (openai gpt2 encoder.json), BERT WordPiece uncased 30522 / cased 28996
  (google-research/bert vocab.txt of BERT-Large), Llama 2 SentencePiece 32000 (Llama 2 paper, section 2.1),
  Llama 3 tiktoken 128256 (meta-llama/Meta-Llama-3-8B config.json vocab_size), DeepSeek-V3 129280
  (deepseek-ai/DeepSeek-V3 config.json), Mistral/Mixtral 32000 (mistralai/Mixtral-8x7B-v0.1 config.json),
  BLOOM 250680 (bigscience/bloom config.json).
- a Hugging Face tokenizer named after a model parplan has a preset for (planner.files.other_tools.preset_for:
  Qwen/Qwen3-30B-A3B, openai/gpt-oss-120b, meta-llama/Llama-4-Scout-17B-16E...), or a local path whose name is one
  of those families (FAMILY_PRESETS): the preset's vocab_size, its Hub config.json's. Known deviation: Megatron's
  HuggingFaceTokenizer counts len(tokenizer), which a config may round up (Qwen3: 151936 rows in config.json
  for a tokenizer of about 151,700 tokens), so the embedding can be priced up to 0.2% large.
- an explicit --vocab-size (NullTokenizer, mock data) is padded the same way: megatron-core 0.19.2
  core/tokenizers/utils/build_tokenizer.py gives the NullTokenizer --vocab-size tokens (no extra end-of-document
  token) and pads them (_set_padded_vocab_size, TrainingConfig.pad_vocab_size default true), unless
  --no-pad-vocab-size (or its alias --disable-pad-vocab-size).
"""

from __future__ import annotations

from typing import Optional

import hardware_profiles as hp
from planner.errors import UserError
from planner.frameworks.megatron import deepspeed_dialect

TOKENIZER_VOCAB = {"GPT2BPETokenizer": 50257, "BertWordPieceLowerCase": 30522, "BertWordPieceCase": 28996,
                   "Llama2Tokenizer": 32000, "Llama3Tokenizer": 128256}
HF_TOKENIZERS = {"tokenizer-model", "tokenizer-name-or-path"}
MODEL_VOCAB = (("deepseek-v3", 129280), ("deepseek-r1", 129280), ("llama-3", 128256), ("llama3", 128256),
               ("llama-2", 32000), ("llama2", 32000), ("mixtral", 32000), ("mistral-7b", 32000),
               ("bloom", 250680), ("gpt2", 50257))
FAMILY_PRESETS = (("qwen3", "qwen3-32b"), ("gpt-oss", "gpt-oss-120b"), ("gpt_oss", "gpt-oss-120b"),
                  ("llama-4", "llama4-scout"), ("llama4", "llama4-scout"))  # one tokenizer per family
NAMED_BY_MODEL = {"HuggingFaceTokenizer", "PretrainedFromHF", "TikTokenizer", "SentencePieceTokenizer",
                  "GPTSentencePieceTokenizer", "Llama3Tokenizer", "Llama2Tokenizer"}


def padded(vocab: int, divisible_by: int, tp: int) -> int:
    """Rows of Megatron's embedding: `vocab` rounded up to a multiple of divisible_by * tp
    (_vocab_size_with_padding)."""
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


def known_vocab(tokenizer: Optional[str], model: Optional[str]) -> Optional[int]:
    """Unpadded vocabulary of a tokenizer type, or of the Hugging Face model it names; None if unknown."""
    name = (model or "").lower()
    if tokenizer in NAMED_BY_MODEL and name:
        for key, size in MODEL_VOCAB:
            if key in name:
                return size
        preset = _preset_named(model)
        if preset is not None:
            return hp.load_model(preset).vocab_size
    return TOKENIZER_VOCAB.get(tokenizer or "")


def _preset_named(model: str) -> Optional[str]:
    """The preset whose tokenizer `model` (a Hub name or a local path) names: the model's own, else its family's."""
    from planner.files.other_tools import preset_for  # noqa: PLC0415  (planner.files imports this package)

    preset = preset_for(model)
    name = model.lower()
    return preset or next((p for key, p in FAMILY_PRESETS if key in name), None)


def vocab_size(a) -> int:
    """The padded vocabulary of a MegatronArgs: the tokenizer's (GPT-2's when the script gives a
    --merge-file and no type: only GPT-2 BPE takes one), else --vocab-size, else Megatron-DeepSpeed's
    --pad-vocab-size-to; an error naming both ways out otherwise."""
    tokenizer = a.str("--tokenizer-type")
    if tokenizer is None and a.has("--merge-file"):
        tokenizer = "GPT2BPETokenizer"  # only GPT-2 BPE takes a merge file
    model = a.str("--tokenizer-model") or a.str("--tokenizer-name-or-path")
    base = known_vocab(tokenizer, model) if tokenizer != "NullTokenizer" else None
    if base is None:
        if a.has("--vocab-size"):
            return _maybe_padded(a, a.int("--vocab-size"))
        if a.has("--pad-vocab-size-to"):  # Megatron-DeepSpeed: the embedding's rows, whatever the tokenizer
            return a.int("--pad-vocab-size-to")
        shown = f"--tokenizer-type {tokenizer}" + (f" --tokenizer-model {model[:60]}" if model else "") \
            if tokenizer else "no --tokenizer-type"
        yaml = getattr(a, "yaml", None)  # --yaml-cfg: the flags came from that file's keys
        fix = f"add vocab_size to {yaml}" if yaml else "add --vocab-size to the script"
        raise UserError(f"{shown}: parplan does not know this tokenizer's vocabulary and the script gives no "
                        f"--vocab-size; {fix} or give --model")
    if a.has("--pad-vocab-size-to"):
        target = a.int("--pad-vocab-size-to")
        if target < base:
            raise UserError(f"--pad-vocab-size-to {target}: smaller than the tokenizer's {base} tokens")
        return target
    return _padded_as_flags_say(a, base)


def _maybe_padded(a, vocab: int) -> int:
    """--vocab-size as Megatron-Core pads it (module docstring), as given under --no-pad-vocab-size and in
    Megatron-DeepSpeed scripts (which pad with --pad-vocab-size-to instead)."""
    if a.has("--no-pad-vocab-size") or a.has("--disable-pad-vocab-size") or deepspeed_dialect.is_megatron_deepspeed(a):
        return vocab
    return _padded_as_flags_say(a, vocab)


def _padded_as_flags_say(a, vocab: int) -> int:
    """`padded` at the script's --make-vocab-size-divisible-by (default 128) and --tensor-model-parallel-size."""
    return padded(vocab, a.int("--make-vocab-size-divisible-by", 128), a.int("--tensor-model-parallel-size", 1))
