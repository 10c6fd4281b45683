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
Two readings need the layout of [parallelism] (config_values.tt_layout): `recompute_fields` (a layer period
k checkpoints n // k of a rank's n blocks) and `amp_precision` (0.1-0.2 without FSDP: fp32 under TP or PP).
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
DEFAULT_AC = {"mode": "selective", "selective_ac_option": "2"}  # torchtitan 0.1-0.2 ActivationCheckpoint defaults


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


def amp_precision(cfg: dict, path: Path, fields: dict, lay: dict, notes: list[str]) -> dict:
    """`fields` (precision's TrainSpec fields) as torchtitan 0.1-0.2 trains without FSDP, given the layout
    fields `lay` of [parallelism] (tp, pp, zero: planner.frameworks.torchtitan.config_values.tt_layout).
    training.mixed_precision_param acts through FSDP2's MixedPrecisionPolicy when FSDP runs (dp_shard * cp > 1,
    zero > 0), else through distributed/utils.py maybe_enable_amp (0.1.0-0.2.2): under tensor or pipeline
    parallelism it warns "Mixed precision training with TP or PP is only supported when FSDP/HSDP/CP is
    enabled" and applies nothing, so the fp32 model trains in fp32 (precision fp32: fp32 weights, gradients,
    moments and activations, fp32 GEMMs: torchtitan does not turn TF32 on); with DDP or one GPU it runs the
    step under torch.autocast(mixed_precision_param): fp32 parameters, gradients and Adam moments (16 bytes
    per parameter, which bf16's 2 + 2 + 12 also counts) with bf16 matmuls, priced as bf16. torchtitan 0.3.0
    wraps every model in fully_shard, one rank or many (models/llama3/parallelize.py apply_fsdp_to_decoder:
    "with shard_degree=1 it is a no-op for the all-gather but still installs the MixedPrecisionPolicy"):
    not for its launch lines. training.dtype "bfloat16" (0.2: the model built in bf16) needs no autocast. DDP over
    more than one replica beside tp/pp/cp/ep is refused, as torchtitan refuses it."""
    if lay.get("zero", 0) > 0:
        return fields
    rep = _table(cfg, "parallelism", path).get("data_parallel_replicate_degree", 1)
    if isinstance(rep, int) and rep > 1 and max(lay.get(k, 1) for k in ("tp", "pp", "cp", "ep")) > 1:
        raise UserError(f"{path}: data_parallel_replicate_degree={rep} without FSDP beside tensor, pipeline, context "
                        "or expert parallelism: torchtitan 0.1-0.2 refuses to start (models/llama3/infra/parallelize.py"
                        ": \"DDP has not supported > 1D parallelism\"); shard instead (data_parallel_shard_degree)")
    if _table(cfg, "training", path).get("dtype", "float32") == "bfloat16":
        return fields
    if lay.get("tp", 1) == 1 and lay.get("pp", 1) == 1:
        if fields["precision"] == "bf16":
            notes.append("no FSDP (data_parallel_shard_degree * context_parallel_degree = 1): torchtitan trains "
                         "under torch.autocast (distributed/utils.py maybe_enable_amp) with fp32 parameters, "
                         "gradients and Adam moments, priced as bf16 (the same 16 bytes per parameter); the bf16 "
                         "weight copies autocast saves for backward and the fp32 residual stream are not priced")
        return fields
    why = ("no FSDP (data_parallel_shard_degree * context_parallel_degree = 1) under tensor or pipeline "
           "parallelism: torchtitan turns mixed precision off (distributed/utils.py maybe_enable_amp: \"Mixed "
           "precision training with TP or PP is only supported when FSDP/HSDP/CP is enabled\") and the model "
           "trains in fp32")
    if fields["precision"] == "bf16":
        notes.append(f"{why}: priced as precision fp32")
        return {**fields, "precision": "fp32"}
    if fields["precision"] == "fp8":
        notes.append(f"{why}: the float8 matmuls run, the weights and the other ops stay fp32; priced as fp8 with "
                     "bf16 weights")
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


def recompute_fields(cfg: dict, path: Path, lay: dict, layers: int, notes: list[str]) -> dict:
    """The Layout recompute fields of [activation_checkpoint], given the layout fields `lay` read from
    [parallelism] (pp, vpp, stage_layers: planner.frameworks.torchtitan.config_values.tt_layout) and the
    model's `layers`: none, full, selective ("op": the op-level policy that saves matmul outputs and recomputes the
    rest, priced as parplan's selective); a memory_budget b is torch's min-cut AC (b <= 0 full, b >= 1 none, else
    priced as selective); a layer period k ("selective" with selective_ac_option "k"):
    torchtitan 0.1-0.2 wraps a transformer block in full checkpointing when a block counter, global to the
    process and counting on across a rank's pipeline chunks, is a multiple of k (0.2.x
    distributed/activation_checkpoint.py _apply_layer_sac, `_layer_sac_count % ac_freq == 0`, k = 0 every
    block; 0.1.0 models/llama3/infra/parallelize.py, ptd_checkpoint_wrapper._count), so a rank holding n
    layers recomputes n // k of them. Priced as full recompute of the first N layers of each chunk
    (recompute_method block, recompute_num_layers N, costmodels.memory.full_recompute_split): the same count
    of whole layers rebuilt one at a time, N set so that the first rank (the one holding the most
    micro-batches in flight) recomputes what it runs; a rank where that differs is named in the note."""
    mode, period = _ac_setting(cfg, path, notes)
    if period is None:
        return {"recompute": mode}
    if period <= 1:
        return {"recompute": "full"}
    pp, vpp = lay.get("pp", 1), lay.get("vpp", 1) or 1
    ranks = list(lay.get("stage_layers") or [layers]) if pp > 1 else [layers]
    runs = [n // period for n in ranks]
    n_layers = runs[0] // vpp
    priced = [min(n_layers, n / vpp) * vpp for n in ranks]
    head = (f"activation_checkpoint.selective_ac_option='{period}': torchtitan checkpoints 1 transformer block in "
            f"{period} in full (distributed/activation_checkpoint.py _apply_layer_sac)")
    if n_layers < 1:
        notes.append(f"{head}; {runs[0]} of the {ranks[0]} layers of the first rank over {vpp} chunks: priced as no "
                     "recompute (the memory's upper bound)")
        return {"recompute": "none"}
    per_stage = ", ".join(f"{r} of {n}" for r, n in zip(runs, ranks))
    off = [f"rank {i} priced {p:g}" for i, (r, p) in enumerate(zip(runs, priced)) if abs(p - r) > 1e-9]
    notes.append(f"{head}: priced as full recompute of {per_stage} layers per {'stage' if pp > 1 else 'rank'} "
                 f"(recompute_method block, recompute_num_layers {n_layers}"
                 + (f" per chunk; {', '.join(off)}" if off else "") + ")")
    return {"recompute": "full", "recompute_method": "block", "recompute_num_layers": n_layers}


def _ac_setting(cfg: dict, path: Path, notes: list[str]) -> tuple[str, Optional[int]]:
    """(mode, layer period or None) of [activation_checkpoint]. torchtitan 0.1-0.2's defaults
    (config/job_config.py ActivationCheckpoint, 0.1.0 config_manager.py: mode "selective",
    selective_ac_option "2") stand in for what the file leaves out, said in a note; torchtitan 0.3's default,
    the per-op policy, comes from planner.frameworks.torchtitan.config_cli, which always sets the mode."""
    sec = _table(cfg, "activation_checkpoint", path)
    mode = sec.get("mode", DEFAULT_AC["mode"])
    if mode not in AC_MODES:
        raise UserError(f"{path}: activation_checkpoint.mode={mode!r:.60}: torchtitan's modes are "
                        f"{', '.join(AC_MODES)}")
    missing = [key for key in DEFAULT_AC if key not in sec and (key == "mode" or mode == "selective")]
    if missing:
        notes.append(f"activation_checkpoint.{' and '.join(missing)} not given: torchtitan 0.1-0.2's "
                     + ", ".join(f"{key} {DEFAULT_AC[key]!r}" for key in missing)
                     + " (config/job_config.py ActivationCheckpoint)")
    if mode == "selective":
        return _selective(sec.get("selective_ac_option", DEFAULT_AC["selective_ac_option"]), path)
    if mode == "memory_budget":
        return _budget(sec.get("memory_budget", 0.5), path, notes), None
    return mode, None


def _selective(option, path: Path) -> tuple[str, Optional[int]]:
    """("selective", None) for "op"; ("full", period) for a layer period (torchtitan: `option.isdigit()`,
    and 0 checkpoints every block, as 1 does)."""
    if option == "op":
        return "selective", None
    text = str(option)
    if not text.isdigit():
        raise UserError(f"{path}: activation_checkpoint.selective_ac_option={option!r:.60} must be 'op' or a "
                        "layer period (a whole number)")
    return "full", int(text)


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
