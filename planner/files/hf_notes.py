"""What parplan says about a Hugging Face config.json beside its ModelSpec: the model's name, why a model_type is
refused, the location prefix of an error, and the warnings (what the file sets that is not priced as it runs).

Refusals come in two kinds. A model_type whose architecture parplan's cost model cannot represent (it prices
decoder-only transformers: causal self-attention and MLP layers) names that architecture: encoder-decoder
(`is_encoder_decoder`), encoder-only, state-space or hybrid (Mamba/recurrent layers), vision-language (a
`vision_config`). Any other model_type is a decoder-only family not mapped yet. Both say what to do: describe the
shape in a ModelSpec file (fields: `parplan schema ModelSpec`) and pass that file instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from costmodels.errors import MAX_NAME_CHARS
from planner.files.hf_families import FALCON_PARALLEL, family_config
from planner.files.hf_llama4 import llama4_warnings, text_config, vision_warning
from planner.files.hf_read import read_int, short, transformers_major

ENCODER_DECODER = {"t5", "mt5", "umt5", "longt5", "bart", "mbart", "pegasus", "pegasus_x", "marian", "led", "plbart",
                   "blenderbot", "blenderbot-small", "prophetnet", "fsmt", "m2m_100", "nllb-moe", "switch_transformers",
                   "whisper", "t5gemma", "t5gemma2", "bigbird_pegasus", "encoder-decoder", "speech-encoder-decoder"}
ENCODERS = {"bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "distilbert", "albert", "electra", "deberta",
            "deberta-v2", "modernbert", "camembert", "mpnet", "ernie", "xlm", "big_bird", "longformer", "nomic_bert",
            "rembert", "roformer", "megatron-bert", "funnel", "canine", "esm", "luke", "mra", "nystromformer", "ibert"}
STATE_SPACE = {"mamba", "mamba2", "falcon_mamba", "jamba", "zamba", "zamba2", "bamba", "falcon_h1", "nemotron_h",
               "rwkv", "recurrent_gemma", "lfm2", "lfm2_moe", "qwen3_next", "kimi_linear",
               "minimax", "minimax_text_01", "minimax_m1", "phi4flash", "olmo_hybrid", "xlstm"}
# model_types whose layers differ in shape from one another (Nemotron-NAS / DeciLM block_configs: per-layer attention
# and FFN widths, some layers without attention or FFN): one ModelSpec describes layers that are all alike
HETEROGENEOUS = {"nemotron-nas", "deci", "decilm"}
# keys or layer kinds that say a config's layers are not all attention (Mamba, linear or lightning attention)
HYBRID_KEY_PREFIXES = ("mamba_", "ssm_", "linear_attn", "linear_conv", "lightning_")
HYBRID_LAYER_KINDS = ("mamba", "linear_attention", "linear", "lightning", "ssm", "recurrent", "conv")
FIX = "as a ModelSpec file (fields: `parplan schema ModelSpec`) and pass that file instead of config.json"


def refusal(config: dict, supported: tuple) -> str:
    """Why config's model_type is refused: an architecture the cost model cannot represent (named), or a
    decoder-only family not mapped yet; with what to do."""
    kind = config.get("model_type")
    if kind is not None and not isinstance(kind, str):
        return f"config.json key 'model_type' must be a string (one of {', '.join(supported)}), got {short(kind)}"
    what = _unrepresentable(config, kind)
    if what:
        return (f"Hugging Face model_type {short(kind)} is {what}, which parplan's cost model cannot represent (it "
                f"prices decoder-only transformers: causal self-attention and MLP layers); to price a decoder-only "
                f"approximation, write it {FIX}")
    return (f"Hugging Face model_type {short(kind)} is not mapped yet (mapped: {', '.join(supported)}); if it is a "
            f"decoder-only transformer, write its shape {FIX}")


def _unrepresentable(config: dict, kind: Any) -> str:
    if config.get("is_encoder_decoder") is True or kind in ENCODER_DECODER:
        return "an encoder-decoder model (an encoder stack plus a decoder with cross-attention)"
    if kind in ENCODERS:
        return "an encoder (bidirectional attention over the whole input, no causal decoder)"
    if kind in STATE_SPACE or _hybrid_layers(config):
        return ("a state-space or hybrid model (Mamba, linear-attention or recurrent layers, which have no "
                "counterpart in a transformer layer's cost)")
    if kind in HETEROGENEOUS or "block_configs" in config:
        return ("a model whose layers differ in shape (block_configs: each layer's attention and FFN widths, some "
                "layers without one or the other), where a ModelSpec's layers are all alike: a ModelSpec of the "
                "average layer prices its parameters and FLOPs, not each stage's own")
    if "vision_config" in config:
        return ("a vision-language model (vision_config: a vision encoder and projector in front of the language "
                "model) whose language model parplan does not read: it reads Llama 4's and Gemma 3's, and a "
                "text_config or llm_config object of a mapped model_type")
    return ""


def _hybrid_layers(config: dict) -> bool:
    """Whether the config says some layers are not attention: Mamba/SSM/linear-attention keys, MiniMax's
    attn_type_list with a 0 (lightning attention), or layer_types / layers_block_type naming such layers."""
    if any(isinstance(k, str) and k.startswith(HYBRID_KEY_PREFIXES) for k in config):
        return True
    kinds = config.get("attn_type_list")
    if isinstance(kinds, list) and 0 in kinds:
        return True
    layers = [config.get(k) for k in ("layer_types", "layers_block_type")]
    return any(isinstance(v, list) and any(isinstance(x, str) and x.lower().startswith(HYBRID_LAYER_KINDS) for x in v)
               for v in layers)


def hf_name(config: dict, where: Any = None) -> str:
    """The model's name: the last part of `_name_or_path`; else, for a file named config.json (the Hub's layout),
    its folder's name; else the file's stem; else "hf-model". Printable characters only, at most 200."""
    origin = config.get("_name_or_path")
    name = origin.strip().rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] if isinstance(origin, str) else ""
    path = Path(str(where)) if where is not None else None
    if not name and path is not None and path.is_file():
        name = path.resolve().parent.name if path.name == "config.json" else path.stem
    name = "".join(c for c in name if c.isprintable()).strip()[:MAX_NAME_CHARS]
    return name or "hf-model"


def located(where: Any, err: Any) -> str:
    """`where: message` without saying config.json twice (the reader's messages begin with "config.json")."""
    msg = str(err)
    if not where:
        return msg
    msg = re.sub(r"^config\.json:\s*", "", msg)
    msg = re.sub(r"^config\.json (key|keys|is|model_type)\b", r"\1", msg)
    return f"{where}: {msg}"


def hf_warnings(config: dict, spec: Any = None, seq_len: Optional[int] = None) -> list:
    """One line per thing the file sets that parplan prices otherwise than the checkpoint runs (none for a plain
    Llama config). Call it after model_from_hf_config has accepted the file (`spec`, what it returned). `seq_len`:
    the training length the command was given, if any (then the line says whether it passes the model's context,
    not that the model's length was taken)."""
    lines = list(llama4_warnings(config, read_int)) + vision_warning(config)
    quant = config.get("quantization_config")
    if isinstance(quant, dict) or quant:
        method = quant.get("quant_method") if isinstance(quant, dict) else None
        lines.append(f"quantization_config{f' (quant_method {method})' if isinstance(method, str) else ''}: the "
                     "checkpoint's quantized weight format is not priced; training is priced at the chosen "
                     "--precision (default bf16), the weights dequantized, as training runs them")
    kind = config.get("model_type")
    if spec is not None and spec.mtp_num_layers:
        lines.append(_mtp_line(spec))
    longest = family_config(text_config(config)).get("max_position_embeddings")  # DBRX: its max_seq_len
    if seq_len is not None:
        lines += _beyond_context_line(longest, seq_len)
    elif spec is not None and not (isinstance(longest, int) and longest <= spec.seq_length):  # cut to 4096, or absent
        lines.append(_sequence_line(longest, spec))
    if kind == "falcon" and config.get("parallel_attn", True) is not False:
        lines.append(FALCON_PARALLEL)
    if kind in ("deepseek_v3", "kimi_k2") and any(k in config for k in ("index_topk", "index_n_heads")):
        lines.append(f"index_topk={short(config.get('index_topk'))}: DeepSeek Sparse Attention (V3.2's lightning "
                     "indexer picking the keys each query attends to) is not priced: attention is priced dense over "
                     "the whole sequence, and the indexer's weights are not counted")
    if kind in ("qwen2_moe", "qwen3_moe") and config.get("use_sliding_window") and config.get("sliding_window"):
        old = (transformers_major(config) or 5) < 5
        rule = ("transformers 4.x (the file's transformers_version): layers i >= max_window_layers use the window"
                if old else "transformers 5.24 (transformers_version 5 or absent): " + (
                    "every layer uses the window" if kind == "qwen3_moe"
                    else "layer_types, else even layers below max_window_layers use the window"))
        here = f" (here {spec.windowed_layers} of {spec.num_layers} layers)" if spec is not None else ""
        lines.append(f"use_sliding_window=true: windowed layers as {rule}{here}; the versions disagree, so check the "
                     "one you train with")
    return lines


def _mtp_line(spec: Any) -> str:
    """The multi-token-prediction layers num_nextn_predict_layers adds, which a published parameter count (DeepSeek-V3
    671B, GLM-4.5-Air 106B) leaves out: priced as trained beside the model (Megatron --mtp-num-layers)."""
    from costmodels.params import active_params, total_params  # noqa: PLC0415 - costmodels is loaded by then

    main = spec.model_copy(update={"mtp_num_layers": 0})
    total, active = total_params(spec) - total_params(main), active_params(spec) - active_params(main)
    return (f"num_nextn_predict_layers={spec.mtp_num_layers}: priced as {spec.mtp_num_layers} multi-token-prediction "
            f"layer(s) trained beside the model, +{total / 1e9:.2f} B parameters ({active / 1e9:.2f} B active) over "
            "the main model's count; to price the main model alone, write it as a ModelSpec file with "
            "mtp_num_layers: 0")


def _beyond_context_line(longest: Any, seq_len: int) -> list[str]:
    """The line for a given training length past the config's max_position_embeddings (`longest`), or none: the
    checkpoint was not trained that long, so continuing it there needs a context extension (RoPE scaling), which
    costs no more per token than parplan prices; a mistyped --seq-len is the likelier cause."""
    if not (isinstance(longest, int) and not isinstance(longest, bool)) or seq_len <= longest:
        return []
    return [f"sequence length {seq_len:,} is past max_position_embeddings={longest:,}, the longest context the model "
            "supports: priced as given (extending a checkpoint's context, e.g. with RoPE scaling, costs the same per "
            "token); check --seq-len if that is not the plan"]


def _sequence_line(longest: Any, spec: Any) -> str:
    """The training sequence length the reader took where it is not the config's max_position_embeddings (`longest`):
    a config.json gives only the longest context the model supports, not the length it trains at."""
    given = f"max_position_embeddings={short(longest)} is the longest context it supports" if longest is not None \
        else "no max_position_embeddings"
    return (f"sequence length {spec.seq_length:,} taken as the model's ({given}; a config.json does not say the "
            "training length): --seq-len, a plan's train.seq_length or a launch file's own length replaces it")
