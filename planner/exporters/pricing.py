"""What each written file runs, priced: the stack and layout of the framework that runs the file, its
estimate, and the `parplan check` command line that reproduces it.

A plan is searched under one stack (megatron-core by default), but a DeepSpeed config runs DeepSpeed,
whose memory semantics differ (issue 34 section 7: a DeepSpeed export quoted Megatron-Core's 58 GiB while
`check` of the same file said 88 GiB). So every format is priced again with the stack `check` picks when
it reads that file (planner/files/native.py: a Megatron script -> megatron-core, or nemo with
--tp-comm-overlap; a DeepSpeed JSON -> deepspeed; a torchtitan config -> torchtitan, or torchtitan-eager
without torch.compile), keeping the plan's own stack when it belongs to that framework (a calibrated
profile, nemo, megatron-2021): then the reproduce line names it with --stack. torchrun launches the
user's own train.py, so it keeps the plan's stack (written as PARPLAN_STACK).

The layout is the one the framework runs: torchtitan always shards activations over TP when tp > 1
(ParallelismConfig.enable_sequence_parallel, default True, which the exporter writes), and its ZeRO-1
is FSDP2 without resharding (ZeRO-2 memory; planner/frameworks/torchtitan/export.py).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.hardware_spec import GIB
from costmodels.memory import memory_train
from costmodels.layer_comm import tp_overlap_applies
from planner.files import loading
from planner.files.planfile import VERSION, train_document

# format -> (framework whose stacks run it, the stack check picks by default)
RUNS = {"megatron": ("megatron", "megatron-core"), "slurm": ("megatron", "megatron-core"),
        "deepspeed": ("deepspeed", "deepspeed"), "torchtitan": ("torchtitan", "torchtitan"),
        "torchrun": (None, None)}
# format -> the file `check` reads, and the options it needs beyond --cluster/--nodes
CHECK_FILE = {"megatron": "launch_megatron.sh", "slurm": "launch_slurm.sbatch", "deepspeed": "launch_deepspeed.sh",
              "torchtitan": "launch_torchtitan.sh", "torchrun": "launch_torchrun.sh"}
NEEDS_MODEL = {"deepspeed", "torchtitan", "torchrun"}


def runs_stack(fmt: str, plan):
    """The Stack that runs a file of `fmt`: the plan's when its framework runs the file, else the
    framework's default stack (torchrun: always the plan's)."""
    framework, default = RUNS[fmt]
    stack = plan.train.stack_spec
    if framework is None or stack.framework == framework:
        return stack
    return hp.load_stack(default)


def runs_layout(fmt: str, plan):
    """The layout the framework runs for this plan (torchtitan: sp with tp, ZeRO-1 as ZeRO-2)."""
    lay = plan.layout
    if fmt != "torchtitan":
        return lay
    return lay.model_copy(update={"sp": lay.tp > 1, "zero": 2 if lay.zero == 1 else lay.zero})


def priced_for(fmt: str, plan):
    """The ExportPlan `plan` as the file of `fmt` runs it: its stack and layout, estimated again. A Megatron
    script states its gradient dtype (the exporter writes --accumulate-allreduce-grads-in-fp32 or
    --grad-reduce-in-bf16 from the stack's gradient buffer, costmodels.memory.memory_train), so its data-parallel
    reductions are priced in that dtype too, as `check` of the script prices them."""
    train = plan.train.model_copy(update={"stack": runs_stack(fmt, plan)})
    lay = runs_layout(fmt, plan)
    if RUNS[fmt][0] == "megatron":
        train = memory_train(train, lay)
    result = estimate(plan.model, plan.cluster, train, lay)
    return dataclasses.replace(plan, train=train, layout=result.layout, peak_bytes=result.memory.peak_bytes,
                               step_s=result.time.step_s, estimate=result, fmt=fmt)


def inferred_stack(fmt: str, plan) -> Optional[str]:
    """The stack `check` picks by itself reading the file (torchrun: PARPLAN_TRAIN's, when a shipped one)."""
    if fmt in ("megatron", "slurm"):
        return "nemo" if tp_overlap_applies(plan.train, plan.layout) else "megatron-core"
    if fmt == "torchtitan":  # the exporter writes --compile.enable unless the stack is torchtitan-eager
        return "torchtitan-eager" if plan.train.stack_spec.name == "torchtitan-eager" else "torchtitan"
    if fmt == "torchrun":  # PARPLAN_TRAIN names it (an inline stack: --stack-file)
        stack = plan.train.stack_spec
        return stack.name if stack.name in hp.list_stacks() and hp.load_stack(stack.name) == stack else None
    return RUNS[fmt][1]


def _model_preset(model) -> Optional[str]:
    """The model preset equal to `model`, else None."""
    return model.name if model.name in hp.list_models() and hp.load_model(model.name) == model else None


def _cluster_preset(cluster) -> Optional[str]:
    """The cluster preset equal to `cluster` at its node count, else None."""
    if cluster.name not in hp.list_clusters():
        return None
    return cluster.name if loading.load_cluster(cluster.name, cluster.num_nodes) == cluster else None


def check_command(plan, file_name: Optional[str] = None) -> str:
    """`parplan check FILE ...` that reproduces `plan`'s numbers (a model or cluster that is not a
    preset is named by the Spec line's field, which the user saves to a file)."""
    fmt = plan.fmt
    words = ["parplan", "check", file_name or CHECK_FILE[fmt]]
    if fmt in NEEDS_MODEL:
        words += ["--model", _model_preset(plan.model) or "MODEL.json"]
    cluster = _cluster_preset(plan.cluster)
    words += ["--cluster", cluster or "CLUSTER.json", "--nodes", str(plan.cluster.num_nodes)]
    stack = plan.train.stack_spec
    if stack.name != inferred_stack(fmt, plan):
        words += ["--stack", stack.name] if _shipped(stack) else ["--stack-file", "STACK.yaml"]
    return " ".join(words)


def _shipped(stack) -> bool:
    return stack.name in hp.list_stacks() and hp.load_stack(stack.name) == stack


def spec_files(plan) -> dict[str, tuple[str, int]]:
    """The files check_command names that are not presets, written beside the launch files (MODEL.json, CLUSTER.json,
    STACK.yaml: the plan's specs, which `parplan check` loads from a path): a plan on part of a node (--gpus 4) or
    on a cluster file named CLUSTER.json in every header, and no such file was written."""
    out = {}
    if plan.fmt in NEEDS_MODEL and _model_preset(plan.model) is None:
        out["MODEL.json"] = (json.dumps(plan.model.model_dump(mode="json"), indent=1) + "\n", 0o644)
    if _cluster_preset(plan.cluster) is None:
        out["CLUSTER.json"] = (json.dumps(plan.cluster.model_dump(mode="json"), indent=1) + "\n", 0o644)
    stack = plan.train.stack_spec
    if stack.name != inferred_stack(plan.fmt, plan) and not _shipped(stack):  # JSON is YAML: --stack-file reads it
        out["STACK.yaml"] = (json.dumps(stack.model_dump(mode="json"), indent=1) + "\n", 0o644)
    return out


def memory_line(plan) -> str:
    """Peak per GPU against the GPU's HBM under the stack that runs the file, and the step time."""
    mem, verdict = plan.estimate.memory, "fits" if plan.estimate.fits else "DOES NOT FIT"
    return (f"Priced with stack {plan.train.stack_spec.name} (what runs this file): {verdict}; peak "
            f"{mem.device_bytes / GIB:.2f} GiB per GPU on the device (allocated {mem.peak_bytes / GIB:.2f} GiB) "
            f"of {mem.hbm_bytes / GIB:.2f} GiB HBM (budget {mem.device_budget_bytes / GIB:.2f} GiB); "
            f"step time {plan.step_s:.3f} s")


def misfit(plan) -> str:
    """Why the plan does not fit under this file's stack (one line, the numbers `check` prints)."""
    mem = plan.estimate.memory
    return (f"{plan.fmt}: does not fit under stack {plan.train.stack_spec.name}, which runs these files: "
            f"{mem.device_bytes / GIB:.1f} of {mem.device_budget_bytes / GIB:.1f} GiB per GPU on the device "
            f"(allocated {mem.peak_bytes / GIB:.1f} GiB; {mem.hbm_bytes / GIB:.1f} GiB HBM less a "
            f"{mem.margin_bytes / GIB:.1f} GiB margin)")


def misfit_brief(plan) -> str:
    """'STACK: DEVICE of BUDGET GiB' for a summary over formats."""
    mem = plan.estimate.memory
    return (f"{plan.train.stack_spec.name}: {mem.device_bytes / GIB:.1f} of {mem.device_budget_bytes / GIB:.1f} GiB "
            "per GPU on the device")


def spec_json(plan) -> str:
    """The priced plan as a one-line plan file (model, cluster, train with the stack, layout): what
    `parplan check`, `estimate` and `export` accept in place of MODEL."""
    doc = {"parplan_version": VERSION, "model": plan.model.model_dump(mode="json"),
           "cluster": plan.cluster.model_dump(mode="json"), "train": train_document(plan.train),
           "layout": plan.layout.model_dump(mode="json")}
    return json.dumps(doc, separators=(",", ":"), sort_keys=False)


def priced_lines(plan, check_file: Optional[str] = None) -> list[str]:
    """The header lines that say what was priced: numbers, the command that reproduces them, the spec."""
    return [memory_line(plan), "Reproduce: " + check_command(plan, check_file), "Spec: " + spec_json(plan)]
