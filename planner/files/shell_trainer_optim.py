"""The Trainer's `--optim` (transformers 5.24.0 training_args.py OptimizerNames, lines 113-158; trainer_optimizer.py
builds each) as the optimizer-state bytes per parameter costmodels.train_spec prices: TrainSpec.optimizer (adam: two
moments; sgd: one) and the moments' dtypes exp_avg_dtype / exp_avg_sq_dtype (1, 2 or 4 bytes each), beside the
fp32 master copy, which every choice keeps.

- 8-bit states (trainer_optimizer.py _get_bitsandbytes_optimizer, line 257: optim_bits 8 when the name has "8bit";
  bitsandbytes' blockwise int8, plus a 4-byte scale per block of values) are priced at 1 byte each, the "fp8" state
  dtype; torchao's adamw_torch_8bit likewise, adamw_torch_4bit too (0.5 byte: an upper bound).
- One-state optimizers (Lion, Adagrad, RMSprop) are priced as sgd's one moment. SGD (torch.optim.SGD, momentum 0
  unless --optim_args sets it) and Adafactor (factored second moment, no first moment: _get_adafactor) keep less
  than that one fp32 state: priced at 4 bytes, an upper bound.
- AdEMAMix keeps three states: its 8-bit form is priced exactly (2 + 1 bytes), its 32-bit form as Adam's 8 bytes,
  4 bytes per parameter under (said).
- paged_* variants keep the same states in CUDA unified memory, which can page out under pressure: priced on the
  GPU, an upper bound. GaLore, APOLLO, LOMO and schedule-free optimizers are priced as Adam (said).
With a DeepSpeed JSON that has an `optimizer` section DeepSpeed's optimizer runs and --optim is not used
(integrations/deepspeed.py deepspeed_optim_sched, lines 576-587).

Step temporaries (the stack's MemorySemantics.optimizer_temp_bytes: torch's foreach AdamW holds sqrt(exp_avg_sq)
for every parameter at once): only adamw_torch (foreach) keeps them. The fused AdamW (adamw_torch_fused, the
Trainer's default with torch >= 2.8: training_args.py default_optim) and bitsandbytes' / torchao's optimizers step
each tensor in place: none.
"""

from __future__ import annotations

from typing import Optional

from costmodels.train_spec import TrainSpec

# name -> (optimizer, exp_avg_dtype, exp_avg_sq_dtype, what the price is)
STATES = {
    "adamw_bnb_8bit": ("adam", "fp8", "fp8", "exact"), "adamw_8bit": ("adam", "fp8", "fp8", "exact"),
    "paged_adamw_8bit": ("adam", "fp8", "fp8", "paged"), "adamw_torch_8bit": ("adam", "fp8", "fp8", "exact"),
    "adamw_torch_4bit": ("adam", "fp8", "fp8", "upper bound: 4-bit states priced at 1 byte"),
    "ademamix_8bit": ("adam", "bf16", "fp8", "three 8-bit states, 3 bytes"),
    "paged_ademamix_8bit": ("adam", "bf16", "fp8", "three 8-bit states, 3 bytes; paged"),
    "ademamix": ("adam", "fp32", "fp32", "lower bound: its third fp32 state, 4 bytes, is not counted"),
    "paged_ademamix_32bit": ("adam", "fp32", "fp32", "lower bound: its third fp32 state, 4 bytes, is not counted"),
    "lion_32bit": ("sgd", "fp32", "fp32", "exact"), "paged_lion_32bit": ("sgd", "fp32", "fp32", "paged"),
    "lion_8bit": ("sgd", "fp8", "fp32", "exact"), "paged_lion_8bit": ("sgd", "fp8", "fp32", "paged"),
    "adagrad": ("sgd", "fp32", "fp32", "exact"), "rmsprop": ("sgd", "fp32", "fp32", "exact"),
    "rmsprop_bnb": ("sgd", "fp32", "fp32", "exact"), "rmsprop_bnb_32bit": ("sgd", "fp32", "fp32", "exact"),
    "rmsprop_bnb_8bit": ("sgd", "fp8", "fp32", "exact"),
    "sgd": ("sgd", "fp32", "fp32", "upper bound: torch SGD keeps no momentum unless --optim_args sets one"),
    "adafactor": ("sgd", "fp32", "fp32", "upper bound: Adafactor's factored statistics are a few bytes per row"),
}
ADAM_32 = ("adamw_torch", "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused", "adamw_anyprecision",
           "stable_adamw", "grokadamw", "paged_adamw_32bit")
BYTES = {"fp32": 4, "bf16": 2, "fp8": 1}


def state_bytes(optimizer: str, exp_avg: str, exp_avg_sq: str) -> int:
    """Bytes of moments per parameter (the fp32 master copy aside)."""
    return BYTES[exp_avg] + (BYTES[exp_avg_sq] if optimizer == "adam" else 0)


DEFAULT = "adamw_torch_fused"  # transformers 5.24.0 training_args.py default_optim (torch >= 2.8)
IN_PLACE = ("adamw_torch_fused", "adamw_torch_npu_fused")
IN_PLACE_MARKS = ("8bit", "4bit", "32bit", "bnb", "paged")  # bitsandbytes and torchao: a kernel per tensor


def apply(train: TrainSpec, flags: dict, ds_optimizer: bool, notes: list, trainer: bool = True) -> TrainSpec:
    """`train` with the optimizer states --optim keeps (the Trainer's default without it), one note naming the flag,
    its value and the price, and no step temporaries where the optimizer steps in place; unchanged when the
    DeepSpeed JSON's own optimizer runs, or for a script that is no Trainer (`trainer` False: Accelerate's
    *_no_trainer.py examples build torch.optim.AdamW, foreach on CUDA, whose temporaries stay priced)."""
    given = (flags.get("--optim") or "").lower()
    if ds_optimizer:
        if given:
            notes.append(f"--optim {given[:30]}: not used, the DeepSpeed JSON's optimizer section runs "
                         "(transformers 5.24.0 integrations/deepspeed.py lines 576-577)")
        return train
    if not given:  # the Trainer's default (torch's AdamW moments), unsaid; a no_trainer script's own foreach AdamW
        return in_place(train, DEFAULT) if trainer else train
    return _states(in_place(train, given), given, notes)


def in_place(train: TrainSpec, name: str) -> TrainSpec:
    """`train` without step temporaries when optimizer `name` steps each tensor in place (module docstring)."""
    if name not in IN_PLACE and not any(mark in name for mark in IN_PLACE_MARKS):
        return train
    stack = train.stack_spec
    if stack.memory.optimizer_temp_bytes == 0:
        return train
    memory = stack.memory.model_copy(update={"optimizer_temp_bytes": 0.0})
    return train.model_copy(update={"stack": stack.model_copy(update={"memory": memory})})


def _states(train: TrainSpec, name: str, notes: list) -> TrainSpec:
    """The moments --optim `name` keeps, with its note."""
    if name in ADAM_32:
        if name.startswith("paged_"):
            notes.append(f"--optim {name}: paged states (CUDA unified memory) priced on the GPU, an upper bound")
        return train
    if name not in STATES:
        notes.append(f"--optim {name[:30]}: its states are not priced; priced as Adam's 8 bytes of fp32 moments "
                     "per parameter beside the fp32 master copy")
        return train
    optimizer, exp_avg, exp_avg_sq, how = STATES[name]
    said = {"exact": "", "paged": "; paged (CUDA unified memory), priced on the GPU, an upper bound"}
    said = said.get(how, f"; {how}")
    notes.append(f"--optim {name}: optimizer states priced at {state_bytes(optimizer, exp_avg, exp_avg_sq)} bytes "
                 f"per parameter (Adam's fp32 moments: 8){said}; the fp32 master copy is kept")
    return train.model_copy(update={"optimizer": optimizer, "exp_avg_dtype": exp_avg, "exp_avg_sq_dtype": exp_avg_sq})


__all__ = ["apply", "state_bytes"]
