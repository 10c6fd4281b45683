"""torchtitan job settings beyond the layout: float8/MX converters, torch.compile, async TP, activation
checkpointing modes and FSDP CPU offload, read into TrainSpec fields and a recompute mode.

Sources: torchtitan 0.2.0 config/job_config.py (Model.converters, registered in components/quantization as
"quantize.linear.float8", "quantize.grouped_mm.float8", "quantize.linear.mx", "quantize.grouped_mm.mx";
older files and the corpus (torchtitan@238fa99) write "float8" / "mx"; [quantize.linear.float8]
recipe_name None = tensorwise, "rowwise", "rowwise_with_gw_hp" (older files: [float8]); Compile.enable
and components ["model", "loss"]; Parallelism.enable_async_tensor_parallel; ActivationCheckpoint.mode
selective (default) | full | memory_budget | none, selective_ac_option "2" (default: every 2nd layer) or
"op", memory_budget 0.5; Training.enable_cpu_offload, mixed_precision_param) and torchtitan 0.3.0
(config/configs.py: CompileConfig.enable_async_tensor_parallel moved under [compile]). torchtitan asserts
that async TP needs torch.compile; parplan prices what the config asks and says so.
Every setting read but not priced is named in `notes`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.frameworks.torchtitan import schedules

FLOAT8_NAMES = ("float8", "quantize.linear.float8")
MX_NAMES = ("mx", "mxfp8", "quantize.linear.mx", "quantize.linear.mxfp8")
MOE_NAMES = ("quantize.grouped_mm.float8", "quantize.grouped_mm.mx")
AC_MODES = ("none", "selective", "full", "memory_budget")


def _table(cfg: dict, dotted: str, path: Path) -> dict:
    """A (possibly nested) TOML table, {} when absent."""
    node = cfg
    for name in dotted.split("."):
        node = node.get(name, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise UserError(f"{path}: [{dotted}] must be a table")
    return node


def _strings(value, key: str, path: Path) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{path}: {key}={value!r:.60} must be a list of names")
    return value


def precision(cfg: dict, path: Path, notes: list[str]) -> dict:
    """precision and fp8_recipe from model.converters and the float8/MX recipe (bf16 when no converter)."""
    converters = _strings(_table(cfg, "model", path).get("converters", []), "model.converters", path)
    fields = {"precision": "bf16"}
    for name in converters:
        if name in FLOAT8_NAMES:
            fields.update(precision="fp8", fp8_recipe=_float8_recipe(cfg, path))
        elif name in MX_NAMES:
            fields.update(precision="fp8", fp8_recipe="mxfp8")
        elif name in MOE_NAMES:
            notes.append(f"model.converters {name!r}: the experts' grouped GEMMs in low precision are not priced "
                         "apart from the dense converter")
        else:
            notes.append(f"model.converters {name!r}: not a converter parplan prices (float8, mx)")
    if fields["precision"] == "fp8":
        _fp8_notes(cfg, path, notes)
    mp = _table(cfg, "training", path).get("mixed_precision_param", "bfloat16")
    if mp == "float32" and fields["precision"] == "bf16":
        fields["precision"] = "fp32"
    elif mp not in ("bfloat16", "float32"):
        raise UserError(f"{path}: training.mixed_precision_param={mp!r:.60} must be bfloat16 or float32")
    return fields


def _float8_recipe(cfg: dict, path: Path) -> str:
    """tensorwise (recipe_name absent or null: dynamic tensorwise scaling) or rowwise (rowwise, and
    rowwise_with_gw_hp, whose weight gradient stays in high precision)."""
    for table in ("float8", "quantize.linear.float8"):
        name = _table(cfg, table, path).get("recipe_name")
        if name is None:
            continue
        if name in ("tensorwise", "rowwise", "rowwise_with_gw_hp"):
            return "tensorwise" if name == "tensorwise" else "rowwise"
        raise UserError(f"{path}: {table}.recipe_name={name!r:.60}: torchtitan's float8 recipes are tensorwise, "
                        "rowwise and rowwise_with_gw_hp")
    return "tensorwise"


def _fp8_notes(cfg: dict, path: Path, notes: list[str]) -> None:
    for table in ("float8", "quantize.linear.float8"):
        sec = _table(cfg, table, path)
        if sec.get("enable_fsdp_float8_all_gather"):
            notes.append(f"{table}.enable_fsdp_float8_all_gather: FSDP gathers fp8 weights; parplan prices "
                         "bf16 gathers")
        if sec.get("filter_fqns"):
            notes.append(f"{table}.filter_fqns={sec['filter_fqns']!r:.60}: those layers stay bf16 (the output "
                         "layer is priced bf16; others are priced fp8)")


def compiled(cfg: dict, path: Path, notes: list[str]) -> tuple[bool, bool]:
    """(model compiled, loss compiled): [compile] enable with "model" / "loss" in components (torchtitan's
    default components are ["model", "loss"]), or training.compile (older files). A compiled loss fuses
    the cross entropy: no fp32 copy of the logits (TrainSpec.fused_loss; benchmarks/memory_data.py reads
    the torchtitan DeepSeek-V3 16B rows, compile components ["loss"], the same way)."""
    section = _table(cfg, "compile", path)
    enable = section.get("enable", _table(cfg, "training", path).get("compile", False))
    if not isinstance(enable, bool):
        raise UserError(f"{path}: compile.enable={enable!r:.60} must be true or false")
    parts = _strings(section.get("components", ["model", "loss"]), "compile.components", path)
    if enable and "model" not in parts:
        notes.append(f"compile.components={parts}: the model runs eager (stack torchtitan-eager), the loss "
                     "compiled (fused cross entropy)")
    refused = schedules.compile_note(_table(cfg, "parallelism", path).get("pipeline_parallel_schedule"),
                                     enable and "model" in parts)
    if refused and _table(cfg, "parallelism", path).get("pipeline_parallel_degree", 1) != 1:
        notes.append(refused)
    return enable and "model" in parts, enable and "loss" in parts


def async_tp(cfg: dict, path: Path, compile_on: bool, notes: list[str]) -> bool:
    """enable_async_tensor_parallel in [parallelism] (0.2) or [compile] (0.3)."""
    on = False
    for table in ("parallelism", "compile"):
        value = _table(cfg, table, path).get("enable_async_tensor_parallel", False)
        if not isinstance(value, bool):
            raise UserError(f"{path}: {table}.enable_async_tensor_parallel={value!r:.60} must be true or false")
        on = on or value
    if on and not compile_on:
        notes.append("enable_async_tensor_parallel without torch.compile of the model: torchtitan refuses it; "
                     "priced as asked")
    return on


def recompute(cfg: dict, path: Path, notes: list[str]) -> str:
    """Layout.recompute of [activation_checkpoint]: none, full, selective ("op": the op-level policy that
    saves matmul outputs and recomputes the rest, priced as parplan's selective); a layer period k keeps
    every k-th layer checkpointed (k = 1 is full; k > 1 priced as none, the memory's upper bound); a
    memory_budget b is torch's min-cut AC (b <= 0 full, b >= 1 none, else priced as selective)."""
    sec = _table(cfg, "activation_checkpoint", path)
    mode = sec.get("mode", "selective")
    if mode not in AC_MODES:
        raise UserError(f"{path}: activation_checkpoint.mode={mode!r:.60}: torchtitan's modes are "
                        f"{', '.join(AC_MODES)}")
    if mode == "selective":
        return _selective(sec.get("selective_ac_option", "2"), path, notes)
    if mode == "memory_budget":
        return _budget(sec.get("memory_budget", 0.5), path, notes)
    return mode


def _selective(option, path: Path, notes: list[str]) -> str:
    if option == "op":
        return "selective"
    text = str(option)
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"{path}: activation_checkpoint.selective_ac_option={option!r:.60} must be 'op' or a "
                        "positive layer period")
    period = int(text)
    if period == 1:
        return "full"
    notes.append(f"activation_checkpoint.selective_ac_option={text!r}: one layer in {period} checkpointed; priced "
                 f"as no recompute (an upper bound on memory: the run keeps {period - 1} of every {period} layers' "
                 "activations)")
    return "none"


def _budget(budget, path: Path, notes: list[str]) -> str:
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 <= budget <= 1:
        raise UserError(f"{path}: activation_checkpoint.memory_budget={budget!r:.60} must be from 0 to 1")
    if budget <= 0:
        return "full"
    if budget >= 1:
        return "none"
    notes.append(f"activation_checkpoint.memory_budget={budget:g}: torch's min-cut AC, priced as selective")
    return "selective"


def cpu_offload(cfg: dict, path: Path) -> dict:
    """training.enable_cpu_offload: FSDP2's CPUOffloadPolicy keeps the sharded parameters, gradients and
    optimizer states on the host and steps the optimizer there (offload of everything: TrainSpec
    offload_optimizer and offload_params cpu)."""
    value = _table(cfg, "training", path).get("enable_cpu_offload", False)
    if not isinstance(value, bool):
        raise UserError(f"{path}: training.enable_cpu_offload={value!r:.60} must be true or false")
    return {"offload_optimizer": "cpu", "offload_params": "cpu"} if value else {}


def loss_chunks(cfg: dict, path: Path, rank_tokens: int) -> dict:
    """TrainSpec.loss_chunks from loss.num_chunks: torchtitan 0.3's ChunkedLossWrapper (its presets' 8, or
    `--loss.num_chunks N`; planner.frameworks.torchtitan.config_cli); 0.1-0.2 files have no such section.
    rank_tokens: the sequence a context-parallel rank holds, which the chunks must divide."""
    value = _table(cfg, "loss", path).get("num_chunks", 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4096:
        raise UserError(f"{path}: loss.num_chunks={value!r:.40}: expected a whole number of chunks from 1 to 4096")
    if rank_tokens % value:  # components/loss.py: "sequence length must be divisible by num_chunks"
        raise UserError(f"{path}: loss.num_chunks={value} does not divide the {rank_tokens} tokens of a "
                        "context-parallel rank's sequence: torchtitan's ChunkedLossWrapper refuses it")
    return {"loss_chunks": value} if value > 1 else {}


def mx_refusal(fields: dict, gpu, precision: Optional[str] = None) -> Optional[str]:
    """Why `gpu` cannot run the MXFP8 recipe that the TrainSpec `fields` read from a config ask for, or None:
    MX block scales are applied by the tensor cores of costmodels.timing.BLOCK_SCALED_GENS (Blackwell, CDNA 4),
    the same test the cost model applies (timing._low_precision_peak), here while the config's file and setting
    are known. `precision`: check's --precision, which replaces the config's (only fp8 keeps the recipe)."""
    from costmodels.timing import BLOCK_SCALED_GENS  # noqa: PLC0415 - the cost model, only when asked

    if fields.get("fp8_recipe") != "mxfp8" or (precision or fields.get("precision")) != "fp8":
        return None
    if gpu.tensor_core_gen in (None, *BLOCK_SCALED_GENS):
        return None
    return (f"MX block scaling needs block-scaled (MX) tensor cores (Blackwell, CDNA 4): gpu {gpu.name!r} is "
            f"{gpu.tensor_core_gen}")


def require_mx_gpu(cfg: dict, fields: dict, gpu, path: Path, precision: Optional[str] = None) -> None:
    """A UserError naming the file and its model.converters when the GPU cannot run their MXFP8 recipe."""
    why = mx_refusal(fields, gpu, precision)
    if why:
        converters = _table(cfg, "model", path).get("converters", [])
        raise UserError(f"{path}: model.converters {json.dumps(converters)}: {why}; use float8 (tensorwise or "
                        "rowwise) or --precision bf16")
