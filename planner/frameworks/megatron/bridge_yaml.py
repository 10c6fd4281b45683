"""A Megatron-Bridge configuration YAML (ConfigContainer.to_yaml), read as the Megatron-LM arguments it sets.

Source: Megatron-Bridge 0.3.1 megatron/bridge/training/utils/config_utils.py (`to_yaml`: `yaml.safe_dump` of
`to_dict`, every dataclass a mapping with its `_target_` class path, every field written, defaults included),
megatron/bridge/training/config.py (ConfigContainer: `model` a model provider, i.e. Megatron Core's
TransformerConfig fields plus seq_length and vocab_size; `train`; `ddp` and `optimizer` Megatron Core's
DistributedDataParallelConfig and OptimizerConfig; `dataset` with sequence_length; `mixed_precision` a mapping or a
recipe name, training/mixed_precision.py; `comm_overlap`), utils/yaml_utils.py (functions, dtypes and enums as
`{_target_: torch.bfloat16, _call_: false}`). The dump Bridge saves (setup.py maybe_log_and_save_config, the
checkpoint's run_config.yaml) is taken after runtime_config_update, so the model already holds the mixed precision
and overlaps applied to it.

Each field is read from the section that owns it (OWNED; the model's only where parplan reads its Megatron flag,
known_flags.READ), a null never overrides a value (but in mixed_precision, which Bridge applies whole), and the
fields are written as the Megatron-LM flags of the same names (flag_table.field_flag). Translated here: the
activation (SwiGLU, gated quick-GELU, squared ReLU), the untied embedding, the virtual pipeline size, the pipeline
layout (a list of stages), dtypes, a mixed-precision recipe name (RECIPES) and the distributed optimizer, which
Bridge takes from ddp or optimizer. Refused by name:
LoRA/PEFT runs and providers that are not GPT decoders (Mamba and hybrid, T5, BERT). The GPU count is torchrun's:
--nodes/--gpus, else the data-parallel size Bridge wrote into comm_overlap at start-up (ConfigContainer
set_data_parallel_size: world size / (tp x pp x cp)) times tp x pp x cp (`stated_gpus`), else the cluster's.
"""

from __future__ import annotations

import shlex

from planner.errors import UserError
from planner.frameworks.megatron import flag_table, known_flags, yaml_cfg

CONTAINER = "megatron.bridge.training.config.ConfigContainer"
OWNED = {  # the fields read outside `model`, by section (Megatron Core's names)
    "train": ("global_batch_size", "micro_batch_size", "train_iters"),
    "ddp": ("use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "grad_reduce_in_fp32",
            "use_megatron_fsdp", "data_parallel_sharding_strategy"),
    "optimizer": ("optimizer", "use_distributed_optimizer", "use_precision_aware_optimizer", "main_grads_dtype",
                  "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype", "optimizer_cpu_offload",
                  "optimizer_offload_fraction"),
    "comm_overlap": ("tp_comm_overlap",),
}
PRECISION_FIELDS = ("bf16", "fp16", "fp8", "fp8_recipe", "fp4", "fp4_recipe")
# dtype mappings as Megatron's --*-dtype choices; Megatron Core's OptimizerConfig keeps FP8 moments as torch.uint8
DTYPES = {"torch.bfloat16": "bf16", "torch.float32": "fp32", "torch.float16": "fp16", "torch.uint8": "fp8"}
# training/mixed_precision.py's registered recipes (also written with hyphens): (dtype, fp8, fp8_recipe, fp4)
RECIPES = {"bf16_mixed": ("bf16", None, None, None), "fp16_mixed": ("fp16", None, None, None),
           **{f"{d}_with_fp8_delayed_scaling_mixed": (d, "hybrid", "delayed", None) for d in ("bf16", "fp16")},
           **{f"{d}_with_mxfp8_mixed": (d, "e4m3", "mxfp8", None) for d in ("bf16", "fp16")},
           **{f"{d}_with_fp8_current_scaling_mixed": (d, "hybrid", "tensorwise", None) for d in ("bf16", "fp16")},
           **{f"{d}_with_fp8_subchannel_scaling_mixed": (d, "hybrid", "blockwise", None) for d in ("bf16", "fp16")},
           "nanov2_bf16_with_fp8_current_scaling_mixed": ("bf16", "hybrid", "blockwise", None),
           "bf16_with_nvfp4_mixed": ("bf16", None, None, "e2m1")}
NOT_GPT = ("mamba", "nemotron_h", "hybrid", "t5", "bert")  # provider module names that are no GPT decoder
LAYOUT_CODES = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}


def is_bridge(data) -> bool:
    """A ConfigContainer dump: its own `_target_`, or a `model` whose `_target_` is a Megatron-Bridge provider."""
    if not isinstance(data, dict):
        return False
    model = data.get("model")
    return str(data.get("_target_", "")) == CONTAINER or (
        isinstance(model, dict) and str(model.get("_target_", "")).startswith("megatron.bridge."))


def _target(value) -> str:
    return str(value.get("_target_", "")) if isinstance(value, dict) else str(value or "")


def _section(data: dict, name: str, where: str) -> dict:
    part = data.get(name)
    if part is None:
        return {}
    if not isinstance(part, dict):
        raise UserError(f"{where}: {name} must be a mapping (a Megatron-Bridge ConfigContainer section), "
                        f"got {type(part).__name__}")
    return part


def _refuse(data: dict, model: dict, where: str) -> None:
    """PEFT runs and providers that are no GPT decoder (module docstring)."""
    if data.get("peft") is not None:
        raise UserError(f"{where}: peft {_target(data['peft']) or 'is set'}: a LoRA/PEFT run trains adapters, "
                        "which parplan does not price; remove the peft section to price full training")
    provider = _target(model).lower()
    if any(f".{word}" in provider or f"{word}_" in provider.rsplit(".", 1)[-1] for word in NOT_GPT):
        raise UserError(f"{where}: model._target_ {_target(model)!r}: parplan prices GPT decoders (dense or MoE), "
                        "not Mamba/hybrid, T5 or BERT models")


def _precision(data: dict, where: str) -> dict:
    """The mixed-precision fields Bridge applies over the model: a mapping's, or a recipe name's (RECIPES)."""
    mixed = data.get("mixed_precision")
    if isinstance(mixed, str):
        key = mixed.replace("-", "_")
        if key not in RECIPES:
            raise UserError(f"{where}: mixed_precision {mixed[:60]!r} is not a Megatron-Bridge recipe (known: "
                            f"{', '.join(sorted(RECIPES))})")
        dtype, fp8, recipe, fp4 = RECIPES[key]
        return {"bf16": dtype == "bf16", "fp16": dtype == "fp16", "fp8": fp8, "fp8_recipe": recipe, "fp4": fp4,
                "fp4_recipe": "nvfp4" if fp4 else None}
    part = _section(data, "mixed_precision", where)
    return {k: part[k] for k in PRECISION_FIELDS if k in part}


def _fields(data: dict, where: str) -> dict:
    """Each field from the section that owns it (module docstring); a null never overrides a value, except in
    mixed_precision, which Bridge applies over the model whole (its fp8 None turns the model's FP8 off)."""
    model = _section(data, "model", where)
    _refuse(data, model, where)
    flat = {k: v for k, v in model.items() if isinstance(k, str) and v is not None and _read(k)}
    flat.update(_precision(data, where))
    for section, keys in OWNED.items():
        part = _section(data, section, where)
        flat.update({k: part[k] for k in keys if part.get(k) is not None})
    optimizer, ddp = _section(data, "optimizer", where), _section(data, "ddp", where)
    flat["use_distributed_optimizer"] = bool(optimizer.get("use_distributed_optimizer")
                                             or ddp.get("use_distributed_optimizer"))
    _seq(flat, model, _section(data, "dataset", where), where)
    return flat


# model fields read beside those of known_flags.READ: the router's balance (planner.frameworks.megatron's MoE
# balance reads them; without them the aux-loss coefficient was said to be Megatron's default 0)
BALANCE = ("moe_aux_loss_coeff", "moe_router_load_balancing_type", "moe_router_score_function")


def _read(field: str) -> bool:
    """A model field parplan reads: its Megatron flag is one it prices, or one translated here."""
    flag = flag_table.field_flag(field)
    return field in SPECIAL or field in yaml_cfg.RENAMED or field in BALANCE or (
        flag is not None and flag in known_flags.READ)


def _seq(flat: dict, model: dict, dataset: dict, where: str) -> None:
    """The sequence length: the model's, else the dataset's; Bridge refuses the two when they differ."""
    given = dataset.get("sequence_length", dataset.get("seq_length"))
    if given is not None and model.get("seq_length") is not None and given != model["seq_length"]:
        raise UserError(f"{where}: dataset.sequence_length {given!r} differs from model.seq_length "
                        f"{model['seq_length']!r} (Megatron-Bridge refuses the run)")
    if flat.get("seq_length") is None and given is not None:
        flat["seq_length"] = given
    if flat.get("seq_length") is not None:
        flat.setdefault("max_position_embeddings", flat["seq_length"])


def _activation(flat: dict) -> list:
    act = _target(flat.get("activation_func")).rsplit(".", 1)[-1]
    glu = bool(flat.get("gated_linear_unit"))
    flag = {("silu", True): "--swiglu", ("quick_gelu", True): "--quick-geglu"}.get((act, glu))
    return [(flag, None)] if flag else [("--squared-relu", None)] if act == "squared_relu" else []


def _layout(value, where: str) -> str:
    """Megatron's --pipeline-model-parallel-layout string of Bridge's list of stages (a string is that already)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(s, list) for s in value):
        raise UserError(f"{where}: model.pipeline_model_parallel_layout is written as {_target(value) or value!r}, "
                        "which keeps no layout (a dump taken after it was built): give the run's layout as a list "
                        "of stages, or price it with --model and estimate --layout")
    try:
        return "|".join("".join(LAYOUT_CODES[str(x)] for x in stage) for stage in value)
    except KeyError as err:
        raise UserError(f"{where}: model.pipeline_model_parallel_layout: unknown layer kind {err}") from None


def _grads(flat: dict) -> list:
    return [("--grad-reduce-in-bf16", None)] if flat.get("grad_reduce_in_fp32") is False and flat.get("bf16") else []


SPECIAL = {  # fields written here rather than by name
    "activation_func": lambda v, flat, where: _activation(flat),
    "gated_linear_unit": lambda v, flat, where: [],
    "share_embeddings_and_output_weights":
        lambda v, flat, where: [("--untie-embeddings-and-output-weights", None)] if v is False else [],
    "virtual_pipeline_model_parallel_size": lambda v, flat, where: [("--num-virtual-stages-per-pipeline-rank", str(v))],
    "pipeline_model_parallel_layout": lambda v, flat, where: [("--pipeline-model-parallel-layout", _layout(v, where))],
    "window_size": lambda v, flat, where: [("--window-size", ",".join(map(str, v)) if isinstance(v, list) else str(v))],
    "grad_reduce_in_fp32": lambda v, flat, where: _grads(flat),
    "fp4": lambda v, flat, where: [("--fp4-format", str(v))],
}


def _value(value):
    """A dtype mapping as its name (bf16, fp32, ...); other mappings are not flag values (None)."""
    if isinstance(value, dict):
        return DTYPES.get(_target(value))
    return value


def arguments(data: dict, where: str) -> str:
    """The Megatron-LM argument text the ConfigContainer stands for (module docstring)."""
    flat = {k: v if k in ("activation_func", "pipeline_model_parallel_layout") else _value(v)
            for k, v in _fields(data, where).items()}
    pairs: list = []
    for key, value in flat.items():
        if value is None:  # unset, or a mixed-precision recipe's None over the model's value
            continue
        if key in SPECIAL:
            pairs += SPECIAL[key](value, flat, where)
        else:
            pairs += yaml_cfg.pairs({key: value}, where)
    return " ".join(flag if value is None else f"{flag} {shlex.quote(value)}" for flag, value in pairs) + "\n"


def stated_gpus(data: dict) -> tuple[int, str] | None:
    """(GPU count, how) from comm_overlap.data_parallel_size x tp x pp x cp (module docstring), or None."""
    overlap, model = data.get("comm_overlap"), data.get("model")
    dp = overlap.get("data_parallel_size") if isinstance(overlap, dict) else None
    if not isinstance(model, dict) or not isinstance(dp, int) or isinstance(dp, bool) or not 1 <= dp <= 10**6:
        return None
    sizes = [model.get(k) or 1 for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                         "context_parallel_size")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10**6 for n in sizes):
        return None
    tp, pp, cp = sizes
    return dp * tp * pp * cp, f"comm_overlap.data_parallel_size {dp} x tp {tp} x pp {pp} x cp {cp}"
