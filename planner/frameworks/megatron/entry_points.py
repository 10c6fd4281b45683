"""Which model a Megatron-LM launch trains, from its entry point and its flags. parplan prices decoder transformers
(pretrain_gpt.py, Megatron-DeepSpeed's too), and BERT as a GPT of the same shape with a warning saying what differs;
the other models are refused by name (exit 2), because reading their flags as a GPT's prices another model.

Sources (megatron-core 0.19.2 wheel; the entry scripts themselves live in Megatron-LM's repository, not the wheel):
- Mamba / hybrid: megatron/core/models/mamba/mamba_model.py MambaModel and core/models/hybrid/hybrid_model.py, whose
  layers are Mamba (SSM) mixers, attention, MLP or MoE by a pattern: --hybrid-layer-pattern ("When this flag is used,
  it is the sole indicator that a hybrid model is being run", megatron/training/arguments.py
  _add_experimental_args), --hybrid-override-pattern (deprecated, forwarded to it: validate_args lines 719-731),
  --mtp-hybrid-override-pattern, --is-hybrid-model and the --mamba-* sizes (--mamba-state-dim, --mamba-head-dim,
  --mamba-num-groups, --mamba-num-heads, ...). Megatron-LM's examples/mamba/train.sh runs pretrain_mamba.py with
  --spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec (core/models/hybrid/hybrid_layer_specs.py:
  mamba_stack_spec = hybrid_stack_spec), and older releases with --hybrid-attention-ratio / --hybrid-mlp-ratio.
  --hybrid-context-parallel is not one of them: it is a context-parallel option of any GPT.
- BERT: core/models/bert/bert_model.py BertModel: the same transformer layers under a padding mask (bidirectional,
  lines 171-230), plus BertLMHead (an h x h dense and a LayerNorm, bert_lm_head.py), a Pooler (h x h, pooler.py)
  and a binary head (h x 2; none with --bert-no-binary-head) and 2 token-type embeddings (num_tokentypes).
- T5: core/models/T5 (an encoder and a decoder stack with cross-attention, --encoder-num-layers /
  --decoder-num-layers); multimodal / VLM: core/models/multimodal, core/models/vision; ICT: a BERT biencoder
  (--biencoder-*, --ict-*); RETRO: retrieval cross-attention (no longer in megatron-core 0.19.2).
"""

from __future__ import annotations

import posixpath
import re
from typing import Optional

from planner.errors import UserError
from planner.frameworks.megatron import yaml_cfg

HYBRID = "a Mamba / hybrid state-space model"
REFUSED = {  # entry point -> what it trains
    "pretrain_mamba.py": HYBRID, "pretrain_hybrid.py": HYBRID,
    "pretrain_t5.py": "T5, an encoder-decoder model (an encoder and a decoder stack with cross-attention, "
                      "--encoder-num-layers / --decoder-num-layers)",
    "pretrain_retro.py": "RETRO, a retrieval-augmented model (chunked cross-attention to retrieved neighbours)",
    "pretrain_ict.py": "ICT, a two-tower BERT biencoder for retrieval",
    "pretrain_vlm.py": "a vision-language model (a vision encoder and projection before the language model)",
    "pretrain_vision_classify.py": "a vision transformer", "pretrain_vision_dino.py": "a vision transformer",
    "pretrain_vision_inpaint.py": "a vision transformer",
}
HYBRID_FLAGS = ("--hybrid-layer-pattern", "--hybrid-override-pattern", "--hybrid-attention-ratio", "--hybrid-mlp-ratio",
                "--is-hybrid-model", "--mtp-hybrid-override-pattern", "--disable-mamba-mem-eff-path")
BERT = ("pretrain_bert.py",)


def settle(read, script: Optional[str], path) -> None:
    """After the flags are read (planner.frameworks.megatron.flags.read_megatron): the YAML of --yaml-cfg read in
    their place (yaml_cfg), then the model refused unless a GPT or a BERT, the BERT warning said (read.shell.warn)."""
    yaml_cfg.apply(read, path)
    refuse(script, read.pairs)
    said = bert_warning(script, read.pairs)
    if said and read.shell is not None:
        read.shell.warn(said)


def refuse(script: Optional[str], pairs: list) -> None:
    """UserError naming the entry point or flag when the launch trains a model parplan does not price (the module
    docstring lists them); nothing for a GPT or BERT launch. `script`: the training script (None: an argument file)."""
    name = posixpath.basename(script or "")
    signals = hybrid_signals(name, pairs)
    if signals:
        raise UserError(f"this launch trains {HYBRID} ({'; '.join(signals)}): megatron-core's MambaModel mixes Mamba "
                        "(SSM) layers with attention and MLP layers, and parplan models transformer layers only "
                        "(attention and MLP/MoE), so it cannot price this script")
    what = REFUSED.get(name) or ("a multimodal model (Megatron-LM examples/multimodal)"
                                 if script and "multimodal" in script.split("/")[:-1] else None)
    if what:
        raise UserError(f"{name} trains {what}; parplan models decoder-only (GPT) transformers, and BERT as one, so it "
                        "cannot price this script")


def hybrid_signals(name: str, pairs: list) -> list[str]:
    """What shows a Mamba / hybrid launch: its entry point, a hybrid or --mamba-* flag, a --spec naming a Mamba or
    hybrid layer spec; one item each, as the script wrote it."""
    found = [f"entry point {name}"] if REFUSED.get(name) == HYBRID else []
    for flag, value in pairs:
        spec = flag == "--spec" and re.search(r"mamba|hybrid", value or "", re.IGNORECASE)
        if flag in HYBRID_FLAGS or flag.startswith("--mamba-") or spec:
            shown = flag if value is None else f"{flag} {value if len(value) <= 80 else value[:77] + '...'}"
            if shown not in found:
                found.append(shown)
    return found[:4]


def bert_warning(script: Optional[str], pairs: list) -> Optional[str]:
    """The line said when pretrain_bert.py is priced as a GPT of the same shape (BertModel: module docstring)."""
    name = posixpath.basename(script or "")
    if name not in BERT:
        return None
    binary = any(flag == "--bert-no-binary-head" for flag, _ in pairs)
    heads = "LM-head transform (h x h dense and LayerNorm)" + ("" if binary else ", pooler (h x h), binary head "
                                                                "(h x 2; --bert-no-binary-head drops both)")
    return (f"{name} trains BERT (megatron-core BertModel), priced as a GPT of the same shape: its attention is "
            "bidirectional (a padding mask), so the attention core does about twice the work priced (parplan's "
            f"causal attention skips the masked half); its {heads} and 2 token-type embeddings are not priced")
