"""The precision a Megatron launch trains in: --bf16, --fp16, --fp8-format inside either, a Megatron-DeepSpeed
JSON's bf16/fp16 section, else fp32, Megatron's default.

Sources: megatron-core 0.19.2 megatron/training/arguments.py validate_args lines 1170-1183 (params_dtype is
torch.float unless --fp16 or --bf16; both given is refused); megatron/core/optimizer/__init__.py lines 637-685 (with
neither and no distributed optimizer the optimizer is FP32Optimizer: no loss scaler, no separate master weights; the
distributed optimizer shards the fp32 weights themselves). parplan prices fp32 training as the DeepSpeed and Hugging
Face readers do (planner.frameworks.deepspeed.config_json, TrainSpec precision fp32: 4-byte weights, gradients and
activations, Adam moments without a master copy, full-FP32 GEMMs). Used by planner.frameworks.megatron.train.
"""

from __future__ import annotations

from planner.errors import UserError
from planner.frameworks.megatron import deepspeed_dialect, ds_json


def precision(a) -> str:
    """TrainSpec.precision of a MegatronArgs (module docstring); UserError for --bf16 with --fp16, and for
    --fp8-format without a 16-bit precision (parplan prices FP8 GEMMs inside bf16/fp16 training only)."""
    if a.has("--bf16") and a.has("--fp16"):
        raise UserError("--bf16 and --fp16 are both given; Megatron accepts one")
    json_precision = ds_json.precision(a) if deepspeed_dialect.is_megatron_deepspeed(a) else None
    sixteen = "bf16" if a.has("--bf16") else "fp16" if a.has("--fp16") else json_precision
    if a.has("--fp8-format") and a.has("--fp4-format"):  # validate_args refuses both
        raise UserError("--fp4-format and --fp8-format are both given; Megatron accepts one")
    for flag in ("--fp8-format", "--fp4-format"):
        if a.has(flag):
            if sixteen is None:
                raise UserError(f"{flag} {a.str(flag)} without --bf16 or --fp16: parplan prices FP8/FP4 GEMMs "
                                "inside 16-bit mixed-precision training; add --bf16")
            return "fp8"  # --fp4-format: TrainSpec fp8 with fp8_recipe nvfp4 (planner.frameworks.megatron.train)
    return sixteen or "fp32"


def fp32_warnings(a) -> list[str]:
    """One line when the launch trains in fp32 (no --bf16/--fp16): what is priced, and how to price TF32 GEMMs."""
    if precision(a) != "fp32":
        return []
    return ["neither --bf16 nor --fp16 is given: Megatron trains in fp32 (params_dtype float32, its default: "
            "megatron-core 0.19.2 arguments.py validate_args; FP32Optimizer), priced (unless check --precision is "
            "given) as fp32 training: 4-byte weights, gradients and activations, no master copy, unfused attention and "
            "full-FP32 GEMMs (check --precision tf32 prices TF32 tensor-core GEMMs; add --bf16 to the script for "
            "mixed precision)"]

