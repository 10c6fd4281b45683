"""The commands on one layout or one plan file: estimate, export, report, check."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.layer_comm import tp_overlap_applies
from costmodels.train_spec import TrainSpec
from planner.search import frameworks as fws
from planner.files import loading
from planner.search import stage_split
from planner import trainopts as to
from planner.cli_common import (CLUSTER_OPT, GBS_OPT, GPUS_OPT, JSON_OPT, MODEL_ARG, NODES_OPT, PREC_OPT, SEQ_OPT,
                                TOKENS_OPT, err, folder_option, layout_option, load_problem, make_train, out, print_json,
                                report_export, show, user_errors)
from planner.errors import UserError
from planner.exporters import run_export
from planner.files import check_overrides as co
from planner.frameworks.deepspeed.auto import ReadNotes
from planner.files.native import config_kind, is_native, load_native
from planner.files.said import heard_notes
from planner.search.explain import short_layout
from planner.report.html import render_html
from planner.files.planfile import write_atomic
from planner.safetext import plain
from planner.report.data import build as build_report, misfit_line, report_json
from planner.runopts import CHECKPOINT_OPT, FAILURE_RATE_OPT, PRICE_OPT, RESTART_OPT, RunOptions, whole_run_of
from planner.report.terminal import print_report
from planner.trainopts import STACK_FILE_OPT, STACK_OPT, TrainOptions, with_train_options


@user_errors
@with_train_options
def estimate_cmd(
    model: str = MODEL_ARG,
    cluster: Optional[str] = CLUSTER_OPT,
    layout: Optional[str] = typer.Option(
        None, "--layout", "-l", help='e.g. "tp=8,pp=4,dp=2,mbs=1,zero=1,recompute=selective,sp=1"'),
    nodes: Optional[int] = NODES_OPT,
    gpus: Optional[int] = GPUS_OPT,
    global_batch: Optional[int] = GBS_OPT,
    seq_len: Optional[int] = SEQ_OPT,
    precision: Optional[str] = PREC_OPT,
    as_json: bool = JSON_OPT,
    tokens: Optional[float] = TOKENS_OPT,
    price: Optional[float] = PRICE_OPT,
    failure_rate: Optional[float] = FAILURE_RATE_OPT,
    restart_min: Optional[float] = RESTART_OPT,
    checkpoint_gbps: Optional[float] = CHECKPOINT_OPT,
    opts: TrainOptions = TrainOptions(),  # the training options (with_train_options)
) -> None:
    """Predict per-GPU memory per pipeline stage (and step time with its held-out error band) of one layout.

    MFU and model TFLOP/s count model FLOPs only (PaLM/Korthikanti convention: no recompute,
    attention scores counted in full without causal halving; a sliding-window layer's query counts the
    window's keys)."""
    run = RunOptions(tokens, price, failure_rate, restart_min, checkpoint_gbps).spec()
    with heard_notes() as heard:  # a cluster file's warning lines: on stderr, and in --json's "warnings"
        prob = load_problem(model, cluster, nodes, gpus, seq_len)
    lay = layout_option(layout, prob.layout or Layout())
    train = make_train(prob.train, global_batch, seq_len, precision, lay, prob.cluster.num_gpus, opts)
    lay, chosen = stage_split.complete(prob.model, prob.cluster, train, lay)  # pp need not divide the layers
    result = estimate(prob.model, prob.cluster, train, lay)
    fws.require(fws.load(opts.framework), result.layout, train, moe=prob.model.is_moe)
    note_unused_tp_overlap(train, result.layout)
    title = (f"{prob.model.name} on {prob.cluster.num_gpus} x {prob.cluster.gpu_profile.name}, batch "
             f"{train.global_batch_size} x {train.seq_len(prob.model)}, stack {train.stack_spec.name}")
    defaulted = [] if layout is not None or prob.layout is not None else [
        f"no --layout given: plain data parallelism over every GPU is priced ({short_layout(result)}); "
        "`parplan plan` searches for the fastest layout that fits"]
    show(result, as_json, title, chosen, whole_run_of(result, prob.model, prob.cluster, train, run),
         warnings=defaulted + fws.unrunnable(train, result.layout, moe=prob.model.is_moe),
         noted=list(prob.model_notes) + heard)


MICRO_OPT = typer.Option(None, "--micro-batch", min=1, help="Micro-batch per GPU (a DeepSpeed JSON's "
                         "train_micro_batch_size_per_gpu \"auto\": the Trainer's per_device_train_batch_size, default 8).")
GAS_OPT = typer.Option(None, "--grad-accum", min=1, help="Gradient accumulation steps (DeepSpeed \"auto\": the "
                       "Trainer's gradient_accumulation_steps, default 1).")
RECOMPUTE_OPT = typer.Option(None, "--recompute", help="none, selective or full over the config's (the Hugging "
                             "Face Trainer's --gradient_checkpointing is full and is not in its DeepSpeed JSON).")
CHECK_PREC_OPT = typer.Option(None, "--precision", help="bf16, fp16, fp8, fp32 or tf32 (DeepSpeed bf16/fp16 "
                              "\"auto\": the Trainer's --bf16/--fp16; neither = fp32).")


def print_read_notes(read: ReadNotes, result) -> None:
    """One stderr line per assumption and per setting read but not priced (the host RAM offload keeps among the
    notes, so --json has it too), and one when offload does not fit in the node's host RAM."""
    mem = result.memory
    if mem.host_bytes_per_node and mem.host_fits:
        of = "" if mem.host_ram_bytes is None else f" of {mem.host_ram_bytes / 2**30:.0f} GiB"
        read.notes.append(f"offload keeps {mem.host_bytes_per_node / 2**30:.1f} GiB in host RAM per node{of}")
    for line in read.assumed:
        err.print(plain(f"assumed: {line}"), highlight=False, soft_wrap=True)
    for line in read.notes:
        err.print(plain(f"note: {line}"), highlight=False, soft_wrap=True)
    if not mem.host_fits:
        err.print(plain(f"does not fit: host RAM: offload keeps {mem.host_bytes_per_node / 2**30:.1f} GiB per node, the "
                        f"node has {mem.host_ram_bytes / 2**30:.1f} GiB (cluster host_ram_gib)"), highlight=False,
                  soft_wrap=True)


def note_unused_tp_overlap(train: TrainSpec, lay: Layout) -> None:
    """A note on stderr when the stack or --tp-comm-overlap asks for TP overlap that sp=0 rules out."""
    if train.tp_overlap and lay.tp > 1 and not tp_overlap_applies(train, lay):
        err.print(f"note: TP communication overlap needs sp=1 (Megatron refuses --tp-comm-overlap without "
                  f"--sequence-parallel; async TP fuses only all-gathers and reduce-scatters): tp={lay.tp} "
                  f"with sp=0 is priced with its all-reduces exposed", highlight=False, soft_wrap=True)


@user_errors
@with_train_options
def export_cmd(
    plan: Path = typer.Argument(..., help="Plan file written by `plan --save` (or by hand)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="megatron, deepspeed, torchrun, torchtitan, slurm or "
                                      "all (default: the --framework's, else that of the framework whose stack "
                                      "priced the plan)."),
    out_arg: str = typer.Option(..., "--out", help="Folder for the launch files (created if missing)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files, and write files whose stack the "
                               "layout does not fit (else exit 1)."),
    as_json: bool = typer.Option(False, "--json", help="Also print what was written, left out and forced as JSON "
                                 "(parplan schema ExportOutput)."),
    tokens: Optional[float] = typer.Option(None, "--tokens", min=1, max=1e18, help="Token budget of the run (e.g. "
                                           "15e12): sets the files' step count (Megatron --train-iters, torchtitan "
                                           "training.steps) to the budget over one step's tokens, and each header "
                                           "says it."),
    opts: TrainOptions = TrainOptions(),  # the training options (with_train_options)
) -> None:
    """Write launch files for a plan, each priced with the stack that runs it (its header says the memory,
    step time and the `check` line that reproduces them). Layouts a target cannot express are refused with
    the reason (exit 2); a layout that does not fit under the target's stack exits 1 unless --force (with
    --format all, such formats are skipped with a note, exit 1 only when none fits)."""
    out_dir = folder_option(out_arg, "--out")
    fw = fws.load(opts.framework)
    doc = to.apply_to_document(loading.read_mapping(plan), opts)
    if fmt is None and fw is None:
        fmt = _priced_format(doc, plan)
    if fw is not None:
        prob = loading.problem_from_plan(doc, str(plan))
        if prob.layout is not None:
            lay, _ = stage_split.complete(prob.model, prob.cluster, prob.train, prob.layout)
            fws.require(fw, resolve_layout(prob.model, prob.cluster, prob.train, lay), prob.train, moe=prob.model.is_moe)
    fmt = fws.export_format(fw, fmt, "all")
    result = run_export(doc, fmt, out_dir, force, tokens=tokens)
    said = report_export(result)
    if as_json:
        print_json({"format": fmt, "out": str(out_dir), "written": [str(p) for p in result.written],
                    "refused": result.refused, "forced": result.forced, "warnings": said})


def _priced_format(doc: dict, plan: Path) -> str:
    """Without --format or --framework: the launch format of the framework whose stack priced the plan (its
    train.stack), said on stderr; a plan without a known stack still needs one of the two options."""
    stack = doc.get("train", {}).get("stack") if isinstance(doc.get("train"), dict) else None
    name = stack.get("framework") if isinstance(stack, dict) else None
    if isinstance(stack, str) and stack in hp.list_stacks():
        name = hp.load_stack(stack).framework
    caps = fws.load(name) if name in fws.FRAMEWORKS else None
    if caps is None:
        raise UserError("give --format (megatron, deepspeed, torchrun, torchtitan, slurm or all) or --framework")
    err.print(plain(f"note: --format not given: {caps.export_format}, the launch files of {caps.name}, whose stack "
                    f"priced this plan (--format all writes every format that runs it)"), highlight=False,
              soft_wrap=True)
    return caps.export_format


@user_errors
def report_cmd(
    plan: Path = typer.Argument(..., help="Plan file written by `plan --save`."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="HTML file; without it, print to the terminal."),
    tokens: Optional[float] = TOKENS_OPT,
    force: bool = typer.Option(False, "--force", help="Overwrite an existing HTML file."),
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print what the pictures draw as JSON instead of the terminal "
                                 "pictures (parplan schema ReportOutput); with -o the HTML is written too."),
    price: Optional[float] = PRICE_OPT,
    failure_rate: Optional[float] = FAILURE_RATE_OPT,
    restart_min: Optional[float] = RESTART_OPT,
    checkpoint_gbps: Optional[float] = CHECKPOINT_OPT,
) -> None:
    """Pictures of a plan: memory per stage, the pipeline timeline, the device mesh, the breakdown,
    the step time with its held-out error band (and with --tokens the whole run: days, GPU-hours, cost)."""
    run = RunOptions(tokens, price, failure_rate, restart_min, checkpoint_gbps).spec()
    doc = to.apply_to_document(loading.read_mapping(plan), TrainOptions(stack, stack_file))
    data = build_report(doc, tokens, run, where=str(plan))
    misfit = misfit_line(data.plan)
    if misfit:
        err.print(plain(f"warning: {misfit}"), highlight=False, soft_wrap=True)
    if output is not None:
        write_atomic(output, render_html(data), force, option="--output")
        err.print(plain(f"wrote {output}"), highlight=False, soft_wrap=True)
    if as_json:
        print_json({**report_json(data), "html": None if output is None else str(output)})
    elif output is None:
        print_report(data, out)


def read_echo(spec, clus, train: TrainSpec) -> dict:
    """What `check` read from the config (and its overrides), for --json: the model, the cluster's size and GPU,
    and the training settings (batch, sequence, precision, stack, offload), so a misread is visible."""
    return {"model": spec.model_dump(mode="json"),
            "train": {**train.model_dump(mode="json", exclude={"stack"}), "stack": train.stack_spec.name},
            "cluster": {"name": clus.name, "gpu": clus.gpu_profile.name, "num_nodes": clus.num_nodes,
                        "gpus_per_node": clus.gpus_per_node, "num_gpus": clus.num_gpus}}


@user_errors
@with_train_options
def check_cmd(
    config: str = typer.Argument(..., help="Plan file, Megatron launch script/args, DeepSpeed JSON, torchtitan TOML, "
                                 "Accelerate config YAML, or an Axolotl / LLaMA-Factory training YAML (run from "
                                 "the folder the run starts in: its DeepSpeed JSON is found from there)."),
    cluster: Optional[str] = CLUSTER_OPT,
    nodes: Optional[int] = NODES_OPT,
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model preset or file (overrides the plan's)."),
    as_json: bool = JSON_OPT,
    strict: bool = typer.Option(False, "--strict", help="Also exit 1 when it fits only under allocator pressure "
                                "(the caching allocator must release its cache to stay within the GPU)."),
    micro_batch: Optional[int] = MICRO_OPT,
    grad_accum: Optional[int] = GAS_OPT,
    global_batch: Optional[int] = GBS_OPT,
    seq_len: Optional[int] = SEQ_OPT,
    precision: Optional[str] = CHECK_PREC_OPT,
    recompute: Optional[str] = RECOMPUTE_OPT,
    tokens: Optional[float] = TOKENS_OPT,
    price: Optional[float] = PRICE_OPT,
    failure_rate: Optional[float] = FAILURE_RATE_OPT,
    restart_min: Optional[float] = RESTART_OPT,
    checkpoint_gbps: Optional[float] = CHECKPOINT_OPT,
    opts: TrainOptions = TrainOptions(),  # the training options (with_train_options)
) -> None:
    """Does this configuration fit in GPU memory? Exit 0 fits, 1 does not fit, 2 bad input.

    A DeepSpeed JSON's "auto" values (the Hugging Face Trainer's) come from --micro-batch, --grad-accum,
    --global-batch and --precision, else from TrainingArguments' defaults, each default named on stderr
    (and under "assumed" in --json).

    Megatron scripts need --cluster (nodes from torchrun/#SBATCH or --nodes); DeepSpeed JSON and Accelerate
    YAML (accelerate launch --config_file) need --model and --cluster, torchtitan TOML --cluster (and --model
    unless its [model] flavor is a preset, e.g. llama3 8B). The stack follows the config (megatron-core, nemo with
    --tp-comm-overlap, deepspeed, torchtitan, torchtitan-eager without compile, fsdp) unless --stack is given.

    MFU counts model FLOPs only (PaLM/Korthikanti: no recompute, full attention scores)."""
    path = Path(config)
    run = RunOptions(tokens, price, failure_rate, restart_min, checkpoint_gbps).spec()
    over = co.CheckOptions(micro_batch, grad_accum, global_batch, seq_len, precision, recompute)
    read = ReadNotes()
    if not path.exists():
        raise UserError(f"config file {config!r} does not exist")
    with heard_notes() as heard:  # the readers' and cluster files' warning lines: on stderr, and in --json
        if not is_native(path):
            prob = loading.load_plan(path, seq_len, model_replaced=model is not None)
            if prob.layout is None:
                raise UserError(f"{config}: a plan file for check needs a 'layout'")
            spec, noted = loading.load_model_noted(model, seq_len or prob.train.seq_length) if model else \
                (prob.model, prob.model_notes)
            clus = loading.load_cluster(cluster, nodes) if cluster else \
                loading.resize_cluster(prob.cluster, nodes, None)
        else:
            with loading.notes_held():  # the launch file's own length is known only once it is read
                prob = load_native(path, model, cluster, nodes, over.trainer_flags(), read)
            spec, clus, noted = prob.model, prob.cluster, loading.model_notes(model, seq_len or prob.train.seq_length)
            loading.say_notes(noted)
    train, lay = to.apply(co.apply_train(prob.train, over), opts), prob.layout
    if not (is_native(path) and config_kind(path) == "deepspeed"):
        with heard_notes() as batch_heard:  # a batch --grad-accum changes: said, and in --json's warnings
            train, lay = co.apply_batch(train, lay, clus, over)
        heard += batch_heard
    lay = co.apply_recompute(lay, over)
    lay, chosen = (lay, False) if is_native(path) else stage_split.complete(spec, clus, train, lay)
    result = co.estimate_of(config, spec, clus, train, lay)
    fws.require(fws.load(opts.framework), result.layout, train, moe=spec.is_moe)
    note_unused_tp_overlap(train, result.layout)
    print_read_notes(read, result)
    extra_warnings = [] if is_native(path) else fws.unrunnable(train, result.layout, moe=spec.is_moe)
    pressed = strict and result.fits and result.memory.allocator_pressure
    if pressed:  # the JSON's "fits" is the memory model's; the exit code is --strict's (a contract pass)
        extra_warnings.append("--strict: it fits only under allocator pressure (the caching allocator must release "
                              "its cache to stay within the GPU): exit 1")
    show(result, as_json, f"{config} (stack {train.stack_spec.name})", chosen,
         whole_run_of(result, spec, clus, train, run), warnings=list(prob.warnings) + extra_warnings,
         noted=list(noted) + heard,  # heard: on stderr already
         extra={"assumed": read.assumed, "notes": read.notes, "read": read_echo(spec, clus, train),
                **({"strict_fits": not pressed and result.fits} if strict else {})})
    raise typer.Exit(0 if result.fits and not pressed else 1)
