"""The Megatron-DeepSpeed dialect (BigScience's `bs_*.slurm`, Microsoft's Megatron-DeepSpeed examples):
Megatron's flags plus `--deepspeed --deepspeed_config FILE --zero-stage N`, the DeepSpeed config most
often written by the script itself (`cat <<EOT > $config_json ... EOT`), 2021 Megatron flags.

What it maps to parplan's fields (layout and training dicts of planner.frameworks.megatron.flags):
- the DeepSpeed config: the script's here-document, else the named file beside the script or in the current
  directory (planner.frameworks.megatron.ds_json, which also says what wins when the flags disagree).
- ZeRO stage: the config's `zero_optimization.stage` (what DeepSpeed uses), else `--zero-stage`.
- `bf16.enabled` with stage 0 runs DeepSpeed's BF16_Optimizer (deepspeed/runtime/bf16_optimizer.py,
  0.19.8, lines 166-225): bf16 weights whole, an fp32 gradient buffer as large as the weights
  (`fp32_groups_gradients_flat`, grad_acc_dtype fp32), fp32 master weights and Adam states on this
  rank's 1/dp partition only (`fp32_groups_flat_partition`): ZeRO-1 with fp32 gradients, so zero=1,
  grad_dtype=fp32. BigScience's comment says it too: "bf16 must use z0! it implements its own zero
  stage 1 equivalent". With fp16 DeepSpeed's stage-0 optimizer keeps fp32 master and states whole (zero=0);
  ZeRO stages 1-3 keep gradients in the weights' dtype (grad_dtype left to its default).
- `--checkpoint-activations` (2021 Megatron) / `--deepspeed-activation-checkpointing`: full recompute.
- `--pp-partition-method 'type:transformer|embedding'`: DeepSpeed's partitioner (planner.frameworks.deepspeed.partition).
- attention: unfused (scores stored) unless `--use-flash-attn[-v1|-v2|-triton|-builder]`; DeepSpeed-Ulysses
  `--ds-sequence-parallel-size N`: cp = N with all-to-all (cp_comm a2a).
- micro and global batch, gradient accumulation, precision, offload: the config's, else the flags.
  `--rampup-batch-size` is priced at the final batch (warned).
- stack `megatron-2021` (blocking TP all-reduces, no gradient-reduce overlap: Megatron of 2021).
- model flags in Microsoft's spelling (examples_deepspeed/pretrain_llama2_distributed.sh):
  `--normalization layernorm|rmsnorm` (lower case; Megatron-LM writes LayerNorm / RMSNorm),
  `--use-rotary-position-embeddings` (rope) and `--num-key-value-heads N` (grouped-query attention).
- DeepSpeed-MoE (ds_pretrain_gpt_*_MoE*.sh; Megatron-DeepSpeed megatron/arguments.py and
  megatron/model/transformer.py, deepspeed.moe.layer.MoE): `--num-experts N` (a list; one value for every MoE
  layer), `--topk` (default 1), experts on every `--expert-interval`-th layer (default 2; layer_num % interval
  == 0 counted from 1: period N, offset N - 1), `--moe-expert-parallel-size` (ep, default 1), experts as wide as
  the dense MLP, `--mlp-type residual` (PR-MoE: a dense MLP beside the experts, one shared expert),
  token dropping at `--moe-train-capacity-factor` (default 1.0) unless `--disable-moe-token-dropping`, and a
  load-balancing loss `--moe-loss-coeff` (default 0.1; 0 = unbalanced).
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from planner.errors import UserError
from planner.safetext import clipped
from planner.frameworks.megatron import ds_json
from planner.frameworks.deepspeed.partition import PARTITIONS, ds_split

LEGACY_RECOMPUTE = ("--checkpoint-activations", "--activations-checkpoint-method",
                    "--deepspeed-activation-checkpointing")
LEGACY = LEGACY_RECOMPUTE + ("--DDP-impl",)
# Megatron-DeepSpeed megatron/arguments.py: attention is Megatron's unfused core attention (scores stored,
# fused softmax) unless one of these picks a FlashAttention kernel; 2021 Megatron-LM had none.
FLASH_FLAGS = ("--use-flash-attn", "--use-flash-attn-v1", "--use-flash-attn-v2", "--use-flash-attn-triton",
               "--use-flash-attn-builder")


def is_megatron_deepspeed(a) -> bool:
    return a.has("--deepspeed") or a.has("--deepspeed_config") or a.has("--deepspeed-config")


NORMS = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}


def norm_flag(a) -> Optional[str]:
    """--normalization in Megatron-LM's spelling: Megatron-DeepSpeed's lower-case choices mapped to it."""
    value = a.str("--normalization")
    return NORMS.get(value, value) if value is not None else None


def model_fields(a) -> dict:
    """ModelSpec fields only Megatron-DeepSpeed's flags give: rope from --use-rotary-position-embeddings,
    num_kv_heads from --num-key-value-heads."""
    out = {}
    if a.has("--use-rotary-position-embeddings"):
        out["position_embedding"] = "rope"
    if a.has("--num-key-value-heads"):
        out["num_kv_heads"] = a.int("--num-key-value-heads", minimum=1)
    return out


def _float(a, flag: str, default: float) -> float:
    text = a.str(flag)
    try:
        return default if text is None else float(text)
    except ValueError:
        raise UserError(f"{flag} {text!r}: expected a number") from None


def moe_fields(a, dense_ffn: int) -> dict:
    """ModelSpec's MoE fields from DeepSpeed-MoE's flags (empty for a dense model: --num-experts 1)."""
    values = (a.str("--num-experts") or "1").split()
    if not all(re.fullmatch(r"[0-9]{1,7}", v) for v in values):
        raise UserError(f"--num-experts {' '.join(values)[:60]!r}: expected whole numbers of experts")
    if len(set(values)) > 1:
        raise UserError(f"--num-experts {' '.join(values)[:60]}: parplan prices one expert count for every MoE "
                        "layer")
    experts = int(values[0])
    if experts <= 1:
        return {}
    period = a.int("--expert-interval", 2)
    mlp_type = a.str("--mlp-type", "standard")
    if mlp_type not in ("standard", "residual"):
        raise UserError(f"--mlp-type {mlp_type!r}: Megatron-DeepSpeed knows standard, residual")
    out = {"num_experts": experts, "top_k": a.int("--topk", 1), "moe_ffn_hidden_size": dense_ffn,
           "moe_layer_period": period, "moe_layer_offset": period - 1,
           "num_shared_experts": 1 if mlp_type == "residual" else 0}
    if not a.has("--disable-moe-token-dropping"):
        out["capacity_factor"] = _float(a, "--moe-train-capacity-factor", 1.0)
    return out


def moe_balance(a) -> dict:
    """TrainSpec.moe_load_balancing: DeepSpeed-MoE's gate adds its balancing loss at --moe-loss-coeff."""
    return {"moe_load_balancing": "none" if _float(a, "--moe-loss-coeff", 0.1) == 0.0 else "aux_loss"}


def legacy(a, layout: dict, train: dict) -> None:
    """2021 Megatron-LM flags (Narayanan et al. SC'21 scripts, Megatron-DeepSpeed): `--checkpoint-activations`
    or `--activations-checkpoint-method uniform|block` turn on full-layer recompute (Megatron-LM v2.x
    megatron/arguments.py: the method set = every layer's input checkpointed; renamed --recompute-method
    in 2022); any of them (or `--DDP-impl`) means the 2021 code, priced with the megatron-2021 stack."""
    if not any(a.has(flag) for flag in LEGACY):
        return
    if any(a.has(flag) for flag in LEGACY_RECOMPUTE) and not a.has("--recompute-granularity"):
        layout["recompute"] = "full"
    train["stack"] = "megatron-2021"
    train["flash_attention"] = any(a.has(flag) for flag in FLASH_FLAGS)


def launcher_size(opts: list[str]) -> tuple[Optional[int], Optional[int]]:
    """(nodes, GPUs per node) from the `deepspeed` launcher's --num_nodes/--num_gpus, when literal."""
    from planner.files.shellread import flag_dict, parse_flags
    flags = flag_dict(parse_flags(opts or []))
    out = []
    for flag in ("--num_nodes", "--num_gpus"):
        value = flags.get(flag) or ""
        if value and not re.fullmatch(r"[0-9]{1,7}", value):
            value = "" if "$" in value else _bad(flag, value)
        out.append(int(value) if value else None)
    return out[0], out[1]


def _bad(flag: str, value: str):
    raise UserError(f"deepspeed {flag} {value[:20]!r}: expected a count (at most 7 ASCII digits)")


def ds_config(a) -> Optional[dict]:
    """The DeepSpeed config the launch names: its here-document, else the file beside the script or in the
    current directory (planner.frameworks.megatron.ds_json); None when neither has it."""
    return ds_json.find(a)[0]


def _stage(a, warn: Callable[[str], None]) -> int:
    """The ZeRO stage: the config's zero_optimization.stage (what DeepSpeed uses; a disagreeing --zero-stage is
    warned of), else --zero-stage (default 0)."""
    stage = ds_json.stage(a)
    if stage is None:
        stage = a.int("--zero-stage", 0, minimum=0)
        if stage > 3:
            raise UserError(f"--zero-stage {stage}: DeepSpeed has stages 0 to 3")
        return stage
    conflict = ds_json.stage_conflict(a, stage)
    if conflict:
        warn(conflict)
    return stage


def apply(a, layout: dict, train: dict, warn: Callable[[str], None], layers: int,
          world: Optional[int] = None) -> None:
    """Adjust the layout and training dicts read by megatron_flags for the Megatron-DeepSpeed dialect.
    `world`: the GPU count (the config's batch keys are resolved on its data-parallel size)."""
    if ds_config(a) is None:
        where = (f"--deepspeed_config {clipped(ds_json.name(a))} is not written by the script nor found beside it "
                 "or in the current directory" if ds_json.name(a) else "no --deepspeed_config is given")
        warn(f"{where}; the ZeRO stage, precision and batch are taken from the flags")
    stage = _stage(a, warn)
    ds_json.merge(a, layout, train, warn, world)
    bf16_optimizer = train.get("precision") == "bf16" and stage == 0  # DeepSpeed's BF16_Optimizer: its own ZeRO-1
    layout["zero"] = 1 if bf16_optimizer else stage
    if bf16_optimizer:
        warn("ZeRO stage 0 with bf16 priced as zero=1: DeepSpeed's BF16_Optimizer keeps fp32 masters, gradients and "
             "optimizer states on each data-parallel rank's 1/dp partition (its own ZeRO-1)")
    train["grad_dtype"] = "fp32" if bf16_optimizer else None  # ZeRO 1-3 keep the weights' dtype
    legacy(a, layout, train)
    if a.has("--rampup-batch-size"):
        warn(f"--rampup-batch-size {a.str('--rampup-batch-size')}: priced at the final global batch")
    _partition(a, layout, layers)
    train["stack"] = "megatron-2021"
    train["flash_attention"] = any(a.has(flag) for flag in FLASH_FLAGS)
    if a.has("--ds-sequence-parallel-size"):  # DeepSpeed-Ulysses: all-to-all of Q, K, V and the output
        layout["cp"], layout["cp_comm"] = a.int("--ds-sequence-parallel-size", 1), "a2a"


def _partition(a, layout: dict, layers: int) -> None:
    method = (a.str("--pp-partition-method") or "").strip("'\"")
    pp = layout.get("pp", 1)
    if not method or pp <= 1 or "stage_layers" in layout:
        return
    if method not in PARTITIONS:
        raise UserError(f"--pp-partition-method {method[:60]!r}: parplan mirrors {', '.join(PARTITIONS)}")
    split = ds_split(method, layers, pp)
    if min(split) < 1:
        raise UserError(f"--pp-partition-method {method!r}: leaves a stage of {pp} without transformer layers")
    layout["stage_layers"] = split
