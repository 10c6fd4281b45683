"""What Axolotl keeps that the Hugging Face Trainer reader would not assume: weights in 16 bits without an fp32
master copy, and a loss that never holds a whole micro-batch's logits.

Sources (axolotl 0.19.0, liger-kernel 0.8.5):
- utils/config/__init__.py resolve_dtype: bf16 (or bfloat16) sets cfg.torch_dtype bfloat16, fp16 float16; the model
  loads in it (loaders/model.py, model_kwargs["torch_dtype"]), and nothing upcasts the trainable weights for a full
  fine-tune (only embeddings and norms go to fp32 under DDP, and back to 16 bits when the attention needs the dtype
  cast: flash attention; loaders/model.py _configure_embedding_dtypes). The Trainer's bf16/fp16 switch then runs
  autocast over those weights: no master copy; gradients in the weights' dtype; torch's AdamW keeps its moments
  zeros_like(param), in the weights' dtype too (bitsandbytes' 32-bit and 8-bit states keep their own width).
  DeepSpeed (its bf16/fp16 optimizer) keeps fp32 masters, so a DeepSpeed run is left as the JSON says. So does
  FSDP: accelerate upcasts the trainable weights to fp32 whenever mixed_precision is not "no" (accelerate 1.15.0
  utils/fsdp_utils.py fsdp2_prepare_model for FSDP2, accelerator.py prepare_model for FSDP1: "FSDP upcast of low
  precision parameters"), and Axolotl's bf16/fp16 sets that mixed precision, so an FSDP run keeps the Trainer
  reader's fp32 master copy, gradients and moments.
- schemas/training.py: the optimizer defaults to adamw_torch_fused.
- liger_fused_linear_cross_entropy (Liger plugin) / cut_cross_entropy: the output layer and loss run over token
  chunks. Liger's ops/fused_linear_cross_entropy.py: inc = ceil(V / H), chunk = min(next_pow2(ceil(BT / inc)), BT),
  chunks = ceil(BT / chunk), BT the micro-batch's tokens. Cut Cross-Entropy holds less still (blockwise logits);
  Liger's count is its upper bound here.
"""

from __future__ import annotations

import dataclasses
import math

from planner.files.loading import Problem
from planner.files.shell_trainer_optim import DEFAULT
from planner.frameworks.deepspeed.auto import ReadNotes

TORCH_ADAMW = {"adamw_torch", "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused"}  # zeros_like(param)
MASTER_NOTE = "; the fp32 master copy is kept"


def apply(prob: Problem, data: dict, deepspeed, read: ReadNotes) -> Problem:
    """`prob` with Axolotl's 16-bit weights (neither DeepSpeed nor FSDP) and its chunked loss, each said in a note."""
    train = prob.train
    update = {}
    if train.precision in ("bf16", "fp16") and not deepspeed and not fsdp(data):
        update.update(_sixteen_bit_states(train, data, read))
    chunks = loss_chunks(prob, data)
    if chunks > 1:
        update["loss_chunks"] = chunks
        which = "liger_fused_linear_cross_entropy" if data.get("liger_fused_linear_cross_entropy") else \
            "cut_cross_entropy"
        read.notes.append(f"{which}: the output layer and loss run over {chunks} token chunks, one chunk's logits "
                          "alive at a time (Liger's ops/fused_linear_cross_entropy.py chunking; Cut Cross-Entropy "
                          "holds less)")
    return prob if not update else dataclasses.replace(prob, train=train.model_copy(update=update))


def fsdp(data: dict) -> bool:
    """The YAML runs FSDP: an `fsdp` list or an `fsdp_config` mapping (Axolotl's schemas/fsdp.py), either version."""
    return bool(data.get("fsdp") or data.get("fsdp_config"))


def _sixteen_bit_states(train, data: dict, read: ReadNotes) -> dict:
    """No master copy, gradients in the weights' dtype, and torch AdamW's moments in it too."""
    dtype = train.precision
    update = {"master_weights": False, "grad_dtype": dtype}
    optimizer = str(data.get("optimizer") or DEFAULT).lower()  # Axolotl's default is the Trainer's
    moments = optimizer in TORCH_ADAMW and train.exp_avg_dtype == "fp32"
    if moments:
        update.update(exp_avg_dtype=dtype, exp_avg_sq_dtype=dtype)
    read.notes[:] = [n.replace(MASTER_NOTE, "") for n in read.notes]
    read.notes.append(f"Axolotl loads the weights in {dtype} (resolve_dtype) and the Trainer updates them there: no "
                      f"fp32 master copy, gradients in {dtype}"
                      + (f", {optimizer}'s moments in {dtype} (torch AdamW keeps them in the weights' dtype)"
                         if moments else ""))
    return update


def loss_chunks(prob: Problem, data: dict) -> int:
    """Liger's chunk count for one micro-batch (module docstring); 1 without a fused loss."""
    if not (data.get("liger_fused_linear_cross_entropy") or data.get("cut_cross_entropy")):
        return 1
    lay, model = prob.layout, prob.model
    tokens = (lay.mbs or 1) * (prob.train.seq_length or model.seq_length) // max(lay.cp, 1)  # TrainSpec.seq_len
    inc = math.ceil(model.vocab_size / model.hidden_size)
    chunk = min(1 << max(0, math.ceil(tokens / inc) - 1).bit_length(), tokens)
    return min(max(1, math.ceil(tokens / chunk)), 4096)


__all__ = ["apply", "fsdp", "loss_chunks"]
