"""DeepSpeed exporter: `ds_config.json`, `hostfile`, `launch_deepspeed.sh`, `PLAN-NOTES.txt`.

Source: benchmarks/data/launch_formats.md, section "DeepSpeed" (keys, the batch rule
train_batch_size == micro * GAS * DP, strict sections, no "auto" values, ZeRO < 2 with pipeline
parallelism, launcher flags with underscores, hostfile lines `host slots=N`).
JSON has no comments, so ds_config.json stays clean and the header goes into the launcher script
and PLAN-NOTES.txt.
"""

from __future__ import annotations

import json
from typing import Optional

from costmodels.train_spec import TrainSpec
from planner.exporters.common import (
    ExportPlan, ExportRefused, Raw, comment_block, command, flag_value, header_lines, layout_string, script,
)
from planner.exporters.model_notes import model_code_notes
from planner.frameworks.deepspeed.partition import PARTITIONS, ds_split

TARGET = "DeepSpeed 0.19 (ds_config.json + deepspeed launcher)"
CONFIG, HOSTFILE, SCRIPT, NOTES = "ds_config.json", "hostfile", "launch_deepspeed.sh", "PLAN-NOTES.txt"

OPTIMIZER = {"adam": "Adam", "sgd": "SGD"}
PRECISION_KEY = {"bf16": "bf16", "fp16": "fp16"}


def refusal(plan: ExportPlan) -> None:
    """Raise ExportRefused for layouts plain DeepSpeed cannot express."""
    lay, why = plan.layout, []
    if plan.train.precision in ("fp32", "tf32"):  # costmodels.hardware_spec.FULL_PRECISIONS: not written yet
        why.append(f"precision={plan.train.precision}: parplan writes bf16/fp16 ds_config.json files only")
    if lay.tp > 1:
        why.append(f"tp={lay.tp}: a DeepSpeed config has no tensor parallelism (that needs Megatron-DeepSpeed; "
                   "use --format megatron)")
    if lay.cp > 1 and lay.cp_comm != "a2a":
        why.append(f"cp={lay.cp} with cp_comm={lay.cp_comm}: DeepSpeed's context parallelism is Ulysses "
                   "(cp_comm=a2a), not ring or all-gather attention")
    if lay.cp > 1 and lay.pp > 1:
        why.append(f"cp={lay.cp} with pp={lay.pp}: Ulysses wraps Hugging Face attention outside the pipeline engine")
    if lay.ep > 1:
        why.append(f"ep={lay.ep}: expert parallelism is set in the model code (deepspeed.moe), not in "
                   "ds_config.json")
    if lay.zero >= 2 and lay.pp > 1:
        why.append(f"zero={lay.zero} with pp={lay.pp}: DeepSpeed's pipeline engine only runs ZeRO stage 0 or 1")
    if lay.pp > 1 and lay.vpp > 1:
        why.append(f"vpp={lay.vpp}: DeepSpeed's pipeline engine has no interleaved schedule")
    if lay.pp > 1 and lay.schedule == "gpipe":
        why.append("schedule=gpipe: DeepSpeed's pipeline engine always runs its 1F1B-style TrainSchedule")
    if lay.pp > 1 and lay.vpp == 1 and partition_method(plan) is None:
        tried = "; ".join(f"{m} gives {ds_split(m, plan.model.num_layers, lay.pp)}" for m in PARTITIONS)
        why.append(f"stage_layers={lay.stage_layers}: no PipelineModule partition_method places the layers "
                   f"so ({tried})")
    if plan.train.precision == "fp8":
        why.append("precision=fp8: ds_config.json has no FP8 training switch (needs Transformer Engine in the model)")
    if lay.shard_group:
        why.append(f"shard_group={lay.shard_group}: hybrid sharding is not written for DeepSpeed (its MiCS/hpZ "
                   "partitions are a different scheme)")
    if plan.model.mtp_num_layers:
        why.append(f"mtp_num_layers={plan.model.mtp_num_layers}: multi-token prediction is model code, not a "
                   "ds_config.json setting")
    why += offload_refusals(plan)
    if why:
        raise ExportRefused("deepspeed: " + "; ".join(why))


def offload_refusals(plan: ExportPlan) -> list[str]:
    """What zero_optimization's offload sections cannot say: a partial optimizer offload, offload below
    the ZeRO stage that shards the states (DeepSpeed offloads the partitioned states: optimizer from
    stage 1, parameters only at stage 3)."""
    train, zero, why = plan.train, plan.layout.zero, []
    if train.offload_optimizer != "none" and train.offload_optimizer_fraction < 1:
        why.append(f"offload_optimizer_fraction={train.offload_optimizer_fraction}: DeepSpeed offloads all "
                   "optimizer states (that fraction is Megatron's --optimizer-offload-fraction)")
    if train.offload_optimizer != "none" and zero == 0:
        why.append(f"offload_optimizer={train.offload_optimizer} with zero=0: ZeRO-Offload needs stage 1 or more")
    if train.offload_params != "none" and zero != 3:
        why.append(f"offload_params={train.offload_params} with zero={zero}: offload_param needs ZeRO stage 3")
    return why


def offload(device: str) -> dict:
    """An offload section: device, and for nvme the folder DeepSpeed swaps to (EDIT)."""
    return {"device": device, "nvme_path": "/local_nvme"} if device == "nvme" else {"device": device}


def partition_method(plan: ExportPlan) -> Optional[str]:
    """The first PARTITIONS method whose split (ds_split) is the plan's stage_layers, or None."""
    lay = plan.layout
    return next((m for m in PARTITIONS if ds_split(m, plan.model.num_layers, lay.pp) == lay.stage_layers), None)


def partition_lines(plan: ExportPlan) -> list[str]:
    """What split DeepSpeed will make, for PLAN-NOTES.txt."""
    lay = plan.layout
    if lay.pp == 1:
        return []
    method = partition_method(plan)
    return [f"pipeline.partition {method!r}: pass partition_method={method!r} to deepspeed.pipe.PipelineModule "
            "(the ds_config key is a record; the engine reads the constructor's). With the layer specs "
            "[embedding, the transformer layers, the output head], DeepSpeed's partition_balanced places "
            f"transformer layers {','.join(map(str, lay.stage_layers))} on stages 0..{lay.pp - 1}; "
            + PARTITIONS[method]]


def ds_config(plan: ExportPlan) -> dict:
    """The DeepSpeed config: numbers only, sections DeepSpeed validates strictly."""
    lay, train = plan.layout, plan.train
    zero: dict = {"stage": lay.zero}
    if lay.zero >= 1:
        zero.update(offload_optimizer=offload(train.offload_optimizer),  # a PipelineModule turns overlap off
                    overlap_comm=train.grad_overlap and lay.pp == 1, contiguous_gradients=True)
    if lay.zero == 3:
        zero["offload_param"] = offload(train.offload_params)
        if train.zero_sub_group_mparams != TrainSpec.model_fields["zero_sub_group_mparams"].default:
            zero["sub_group_size"] = round(train.zero_sub_group_mparams * 1e6)  # the priced fp32 cast's bound
    cfg: dict = {
        "train_batch_size": train.global_batch_size,
        "train_micro_batch_size_per_gpu": lay.mbs,
        "gradient_accumulation_steps": lay.num_microbatches,
        "optimizer": {"type": OPTIMIZER[train.optimizer], "params": {"lr": 3.0e-4}},
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
        PRECISION_KEY[train.precision]: {"enabled": True},
        "steps_per_print": 10,
    }
    if lay.cp > 1:  # Ulysses: deepspeed/runtime/config.py sizes the data-parallel world by it
        cfg["sequence_parallel_size"] = lay.cp
    if lay.recompute != "none":
        cfg["activation_checkpointing"] = {"partition_activations": False, "contiguous_memory_optimization": False,
                                           "cpu_checkpointing": False, "number_checkpoints": None,
                                           "synchronize_checkpoint_boundary": False, "profile": False}
    if lay.pp > 1:
        cfg["pipeline"] = {"stages": lay.pp, "partition": partition_method(plan),
                           "activation_checkpoint_interval": 1 if lay.recompute != "none" else 0}
    return cfg


def hostfile(plan: ExportPlan) -> str:
    head = comment_block(header_lines(plan, TARGET) + [
        "EDIT: node-0 ... are placeholders; put your hosts' names (one line each, slots = GPUs per node)."])
    return head + "".join(f"node-{i} slots={plan.gpus_per_node}\n" for i in range(plan.nodes))


def train_args(plan: ExportPlan) -> list:
    """Arguments for the user's training script: the plan in clearly named flags."""
    lay = plan.layout
    return ["--deepspeed", "--deepspeed_config", Raw('"$HERE/ds_config.json"'),
            *flag_value("--model-name", plan.model.name), "--seq-length", plan.seq,
            "--pipeline-stages", lay.pp, "--recompute", lay.recompute,
            "--parplan-layout", layout_string(lay)]


def launcher(plan: ExportPlan) -> str:
    body = (
        'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
        "# EDIT: TRAIN_SCRIPT is your DeepSpeed training script (it must accept --deepspeed_config).\n"
        'TRAIN_SCRIPT="${TRAIN_SCRIPT:-train.py}"\n'
        + (f"# Run on the first host of the hostfile; DeepSpeed starts the other {plan.nodes - 1} over ssh.\n"
           if plan.nodes > 1 else "# One node: run it on the host of the hostfile.\n")
    )
    words = ["deepspeed", "--hostfile", Raw('"$HERE/hostfile"'), "--num_nodes", plan.nodes,
             "--num_gpus", plan.gpus_per_node, "--master_addr", Raw('"${MASTER_ADDR:-node-0}"'),
             "--master_port", Raw('"${MASTER_PORT:-29500}"'), Raw('"$TRAIN_SCRIPT"')] + train_args(plan)
    return script(plan, TARGET, body + command(words), extra_header=model_code_notes(plan.model))


def notes(plan: ExportPlan) -> str:
    lay = plan.layout
    lines = header_lines(plan, TARGET) + [
        "",
        f"{CONFIG}: train_batch_size {plan.train.global_batch_size} = micro {lay.mbs} x gradient accumulation "
        f"{lay.num_microbatches} x data parallel {lay.dp}.",
        f"ZeRO stage {lay.zero}, {offload_note(plan)}; pipeline stages {lay.pp}." if lay.pp > 1
        else f"ZeRO stage {lay.zero}, {offload_note(plan)}; no pipeline section (pp=1).",
        *partition_lines(plan),
        f"recompute={lay.recompute}: " + (
            "activation_checkpointing configures deepspeed.checkpointing, which the model code must call "
            "on every transformer layer (full) or only the attention core (selective)."
            if lay.recompute != "none" else "no activation checkpointing."),
        *ulysses_lines(plan),
        f"{HOSTFILE}: placeholder host names node-0..node-{plan.nodes - 1}; replace them (EDIT).",
        f"{SCRIPT}: the deepspeed launcher command; TRAIN_SCRIPT is your training script (EDIT).",
        "The optimizer learning rate in ds_config.json (3e-4) is a placeholder (EDIT).",
    ]
    return "".join(line + "\n" for line in lines)


def offload_note(plan: ExportPlan) -> str:
    """Where the optimizer states and parameters live, as ds_config.json says."""
    train = plan.train
    if (train.offload_optimizer, train.offload_params) == ("none", "none"):
        return "offload off"
    nvme = " (nvme_path /local_nvme is a placeholder: EDIT)" if "nvme" in (train.offload_optimizer,
                                                                            train.offload_params) else ""
    return f"optimizer states offloaded to {train.offload_optimizer}, parameters to {train.offload_params}{nvme}"


def ulysses_lines(plan: ExportPlan) -> list[str]:
    """How the training script turns on Ulysses (deepspeed/runtime/sequence_parallel/ulysses_sp.py)."""
    cp = plan.layout.cp
    if cp == 1:
        return []
    return [f"cp={cp}, cp_comm=a2a: Ulysses sequence parallelism. sequence_parallel_size={cp} in {CONFIG}; the "
            "training script (EDIT) calls deepspeed.runtime.sequence_parallel.ulysses_sp.UlyssesSPAttentionHF."
            f"register_with_transformers(sequence_parallel_size={cp}, seq_length={plan.seq}, ...) and passes the "
            "returned mpu to deepspeed.initialize, with UlyssesSPDataLoaderAdapter sharding each batch."]


def render(plan: ExportPlan) -> dict[str, tuple[str, int]]:
    """{file name: (text, mode)}; raises ExportRefused."""
    refusal(plan)
    return {CONFIG: (json.dumps(ds_config(plan), indent=2) + "\n", 0o666),
            HOSTFILE: (hostfile(plan), 0o666),
            SCRIPT: (launcher(plan), 0o777),
            NOTES: (notes(plan), 0o666)}
