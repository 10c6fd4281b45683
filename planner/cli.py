"""The `parplan` command line: a thin Typer layer over costmodels and the planner.

Exit codes (docs/design.md section 5): 0 success / fits, 1 does not fit or nothing fits,
2 bad input (one message naming field and value on stderr; `--debug` shows the traceback),
3 an internal error (a bug in parplan: please report it).
"""

from __future__ import annotations

import functools
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from costmodels.estimate import Estimate, estimate
from costmodels.errors import SpecError
from costmodels.layout import Layout, resolve_layout
from costmodels.train_spec import TrainSpec
from planner.search import frameworks as fws
from planner.report import listing
from planner.files import loading
from planner.search import stage_split
from planner import trainopts as to
from planner.errors import UserError, describe_validation_error
from planner.search.explain import time_limit_note, why_nothing_fits, why_winner
from planner.exporters import run_export
from planner.files.native import is_native, load_native
from planner.report.html import render_html
from planner.files.planfile import plan_document, write_atomic
from planner.plan_outputs import PlanOutputs
from planner.safetext import plain, visible
from planner.report.data import build as build_report
from planner.report.render import print_estimate, print_plan
from planner.report.runblock import print_whole_run
from planner.runopts import CHECKPOINT_OPT, FAILURE_RATE_OPT, PRICE_OPT, RESTART_OPT, RunOptions, whole_run_of
from planner.report.terminal import print_report
from planner.schema import json_schema
from planner.search import best_validated, search, validated_filter
from planner.trainopts import (FLASH_OPT, FP8_RECIPE_OPT, FRAMEWORK_OPT, GRAD_DTYPE_OPT, GRAD_OVERLAP_OPT, OPTIMIZER_OPT,
                               STACK_FILE_OPT, STACK_OPT, TP_OVERLAP_OPT, TrainOptions)

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n")[0])
out = Console(width=110)
err = Console(stderr=True)
STATE = {"debug": False}
DEFAULT_PLAN_BATCH = 512


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]parplan: error:[/] {escape(visible(message, keep_newlines=True))}", highlight=False,
              soft_wrap=True)
    raise typer.Exit(code)


def user_errors(fn):
    """Turn user mistakes into exit 2 with a message; tracebacks only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except (UserError, SpecError) as exc:
            _maybe_trace()
            _fail(str(exc))
        except ValidationError as exc:
            _maybe_trace()
            _fail(describe_validation_error(exc, "input"))
        except Exception as exc:  # a bug in parplan, not the user's input
            _maybe_trace()
            _fail(f"internal error ({type(exc).__name__}: {exc}); rerun with --debug and report it", 3)

    return wrapper


def _maybe_trace() -> None:
    if STATE["debug"]:
        traceback.print_exc()


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    """parplan: plan, estimate and check parallel layouts for training large transformers."""
    STATE["debug"] = debug


def _print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def make_train(base: Optional[TrainSpec], global_batch: Optional[int], seq_len: Optional[int],
               precision: Optional[str], layout: Optional[Layout], world: int,
               opts: TrainOptions = TrainOptions()) -> TrainSpec:
    """TrainSpec from options over a base, its stack resolved (planner.trainopts); without a batch,
    one that gives 4*pp micro-batches (1 at pp=1)."""
    data = {**base.model_dump(), "stack": base.stack} if base else {}
    if global_batch is not None:
        data["global_batch_size"] = global_batch
    if seq_len is not None:
        data["seq_length"] = seq_len
    if precision is not None:
        data["precision"] = precision
    if "global_batch_size" not in data:
        lay = layout or Layout()
        dp = lay.dp or max(world // lay.model_parallel_size, 1)
        data["global_batch_size"] = lay.mbs * dp * (4 * lay.pp if lay.pp > 1 else 1)
        err.print(f"note: --global-batch not given; using {data['global_batch_size']} sequences", highlight=False)
    return to.apply(loading.validate(TrainSpec, data, "train"), opts)


def _problem(model: str, cluster: Optional[str], nodes, gpus) -> loading.Problem:
    if loading.is_plan_file(model):
        prob = loading.load_plan(Path(model))
        resized = loading.resize_cluster(prob.cluster, nodes, gpus)
        if cluster:
            resized = loading.load_cluster(cluster, nodes, gpus)
        return loading.Problem(prob.model, resized, prob.train, prob.layout)
    if not cluster:
        raise UserError("--cluster is required (a preset such as dgx-h100, or a cluster spec file)")
    return loading.Problem(loading.load_model(model), loading.load_cluster(cluster, nodes, gpus), None)


MODEL_ARG = typer.Argument(..., help="Model preset, spec file, Hugging Face config.json, or plan file.")
CLUSTER_OPT = typer.Option(None, "--cluster", "-c", help="Cluster preset or spec file.")
NODES_OPT = typer.Option(None, "--nodes", min=1, help="Number of nodes (overrides the cluster's).")
GPUS_OPT = typer.Option(None, "--gpus", min=1, help="Total GPUs (whole nodes, or part of one node).")
GBS_OPT = typer.Option(None, "--global-batch", min=1, help="Global batch in sequences.")
SEQ_OPT = typer.Option(None, "--seq-len", min=1, help="Sequence length (overrides the model's).")
PREC_OPT = typer.Option(None, "--precision", help="bf16, fp16 or fp8.")
TOKENS_OPT = typer.Option(None, "--tokens", min=1, max=1e18, help="Token budget of the whole run (e.g. 15e12): "
                          "days, GPU-hours, energy, cost, checkpoint interval, goodput.")
JSON_OPT = typer.Option(False, "--json", help="Print JSON (raw bytes and seconds) instead of tables.")


@app.command("estimate")
@user_errors
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
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
    tp_comm_overlap: Optional[bool] = TP_OVERLAP_OPT,
    overlap_grad_reduce: Optional[bool] = GRAD_OVERLAP_OPT,
    flash_attention: Optional[bool] = FLASH_OPT,
    optimizer: Optional[str] = OPTIMIZER_OPT,
    grad_dtype: Optional[str] = GRAD_DTYPE_OPT,
    fp8_recipe: Optional[str] = FP8_RECIPE_OPT,
    framework: str = FRAMEWORK_OPT,
    as_json: bool = JSON_OPT,
    tokens: Optional[float] = TOKENS_OPT,
    price: Optional[float] = PRICE_OPT,
    failure_rate: Optional[float] = FAILURE_RATE_OPT,
    restart_min: Optional[float] = RESTART_OPT,
    checkpoint_gbps: Optional[float] = CHECKPOINT_OPT,
) -> None:
    """Predict per-GPU memory per pipeline stage (and step time with its held-out error band) of one layout.

    MFU and model TFLOP/s count model FLOPs only (PaLM/Korthikanti convention: no recompute,
    attention scores counted in full without causal halving)."""
    run = RunOptions(tokens, price, failure_rate, restart_min, checkpoint_gbps).spec()
    prob = _problem(model, cluster, nodes, gpus)
    lay = loading.parse_layout(layout) if layout else (prob.layout or Layout())
    opts = TrainOptions(stack, stack_file, tp_comm_overlap, overlap_grad_reduce, flash_attention, optimizer,
                        grad_dtype, fp8_recipe, framework)
    train = make_train(prob.train, global_batch, seq_len, precision, lay, prob.cluster.num_gpus, opts)
    lay, chosen = stage_split.complete(prob.model, prob.cluster, train, lay)  # pp need not divide the layers
    result = estimate(prob.model, prob.cluster, train, lay)
    fws.require(fws.load(framework), result.layout, train)
    _show(result, as_json, f"{prob.model.name} on {prob.cluster.num_gpus} x {prob.cluster.gpu_profile.name}, "
                           f"stack {train.stack_spec.name}", chosen,
          whole_run_of(result, prob.model, prob.cluster, train, run))


def _show(result: Estimate, as_json: bool, title: str, chosen_split: bool = False, whole=None) -> None:
    if as_json:
        extra = {"whole_run": whole.model_dump(mode="json")} if whole is not None else {}
        _print_json({**result.model_dump(mode="json"), **extra})
    else:
        print_estimate(result, out, title, chosen_split)
        print_whole_run(whole, out)


@app.command("plan")
@user_errors
def plan_cmd(
    model: str = MODEL_ARG,
    cluster: Optional[str] = CLUSTER_OPT,
    nodes: Optional[int] = NODES_OPT,
    gpus: Optional[int] = GPUS_OPT,
    global_batch: Optional[int] = typer.Option(None, "--global-batch", min=1,
                                               help="Global batch in sequences (default 512)."),
    seq_len: Optional[int] = SEQ_OPT,
    precision: Optional[str] = PREC_OPT,
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
    tp_comm_overlap: Optional[bool] = TP_OVERLAP_OPT,
    overlap_grad_reduce: Optional[bool] = GRAD_OVERLAP_OPT,
    flash_attention: Optional[bool] = FLASH_OPT,
    optimizer: Optional[str] = OPTIMIZER_OPT,
    grad_dtype: Optional[str] = GRAD_DTYPE_OPT,
    fp8_recipe: Optional[str] = FP8_RECIPE_OPT,
    framework: str = FRAMEWORK_OPT,
    top: int = typer.Option(3, "--top", min=1, max=50, help="Return the K best distinct layouts."),
    time_limit: float = typer.Option(30.0, "--time-limit", min=0.1, max=3600, help="CP-SAT time limit, seconds."),
    validated_only: bool = typer.Option(False, "--validated-only", help="Only layouts whose accuracy regime "
                                        "(stack x sharding x scale) is validated by held-out runs."),
    as_json: bool = JSON_OPT,
    save: Optional[Path] = typer.Option(None, "--save", help="Write the winning plan to this JSON file."),
    export_dir: Optional[Path] = typer.Option(None, "--export", help="Write launch files for the winner here."),
    fmt: Optional[str] = typer.Option(None, "--format", help="megatron, deepspeed, torchrun, torchtitan, slurm or "
                                      "all (default: the --framework's, else all)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write a self-contained HTML report here."),
    tokens: Optional[float] = TOKENS_OPT,
    price: Optional[float] = PRICE_OPT,
    failure_rate: Optional[float] = FAILURE_RATE_OPT,
    restart_min: Optional[float] = RESTART_OPT,
    checkpoint_gbps: Optional[float] = CHECKPOINT_OPT,
    force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
) -> None:
    """Search every layout for the fastest that fits; exit 1 when nothing fits. When the winner's
    accuracy regime is not validated, the best validated layout is named beside it.

    MFU counts model FLOPs only (PaLM/Korthikanti: no recompute, full attention scores)."""
    run = RunOptions(tokens, price, failure_rate, restart_min, checkpoint_gbps).spec()
    prob = _problem(model, cluster, nodes, gpus)
    opts = TrainOptions(stack, stack_file, tp_comm_overlap, overlap_grad_reduce, flash_attention, optimizer,
                        grad_dtype, fp8_recipe, framework)
    base = prob.train or TrainSpec(global_batch_size=global_batch or DEFAULT_PLAN_BATCH)
    train = make_train(base, global_batch, seq_len, precision, None, prob.cluster.num_gpus, opts)
    deadline = time.perf_counter() + time_limit  # --time-limit bounds the search, the alternative, the reasons
    outputs = PlanOutputs(save, export_dir, report, force)
    outputs.precheck()  # before the search: a refused path costs nothing
    fw = fws.load(framework)
    fmt = fws.export_format(fw, fmt, "all")
    result, alternative, reasons = _plan_search(prob, train, top, time_limit, validated_only, fw, deadline)
    doc = (plan_document(prob.model, prob.cluster, train, result.plans[0], result.plans[1:], reasons)
           if result.plans else None)
    if doc is not None:
        _report_export(outputs.write(doc, fmt, tokens, run))
    runs_on = [fws.runners(p.layout, train) for p in result.plans]
    whole = whole_run_of(result.plans[0] if result.plans else None, prob.model, prob.cluster, train, run)
    if as_json:
        _print_json({**plan_json(result, reasons, alternative), "framework": framework, "runs_on": runs_on,
                     "whole_run": whole.model_dump(mode="json") if whole else None})
    else:
        print_plan(result, reasons, out, f"{prob.model.name} on {prob.cluster.num_gpus} x "
                   f"{prob.cluster.gpu_profile.name}, global batch {train.global_batch_size} x "
                   f"{train.seq_len(prob.model)} tokens, stack {train.stack_spec.name}"
                   + (f", framework {framework}" if fw else ""), alternative, runs_on)
        print_whole_run(whole, out)
    raise typer.Exit(0 if result.plans else 1)


def _plan_search(prob: loading.Problem, train: TrainSpec, top: int, time_limit: float, validated_only: bool,
                 fw=None, deadline: Optional[float] = None):
    """(result, best validated alternative when the winner is not validated, reasons); with a
    framework (planner.search.frameworks), only the layouts it runs."""
    model, clus = prob.model, prob.cluster
    space = fws.space_options(fw, model, clus, train)
    keep = fws.keep(fw, train, validated_filter(train.stack_spec, clus.num_gpus) if validated_only else None)
    with err.status("searching layouts...", spinner="dots") as status:
        result = search(model, clus, train, top=top, time_limit_s=time_limit, opts=space,
                        progress=lambda msg: status.update(msg), keep=keep, deadline=deadline)
        alternative = None
        winner = result.plans[0].uncertainty if result.plans else None
        if winner is not None and not winner.validated:
            status.update("searching the best layout in a validated regime")
            alternative = best_validated(model, clus, train, result, time_limit, opts=space,
                                         keep=fws.keep(fw, train), deadline=deadline)
    if result.plans:
        return result, alternative, time_limit_note(result) + why_winner(result)
    return result, None, why_nothing_fits(model, clus, train, result, opts=space, validated_only=validated_only,
                                          deadline=deadline)


def plan_json(result, reasons: list[str], alternative: Optional[Estimate] = None) -> dict:
    """The `plan --json` document (DESIGN.md section 6); `validated_alternative` is the best layout in a
    validated regime when the winner's is not (null otherwise, or when none fits)."""
    stats = result.stats
    return {"status": result.status, "plans": [p.model_dump(mode="json") for p in result.plans],
            "search": {"seconds": result.seconds, "layouts_considered": stats.layouts_considered,
                       "filtered_out": stats.filtered_out,
                       "memory_pruned": stats.memory_pruned, "bound_pruned": stats.bound_pruned,
                       "solver_candidates": stats.solver_candidates, "gap": result.gap,
                       "time_limit_reached": stats.truncated or bool(stats.cut), "cut_short": stats.cut},
            "reasons": reasons,
            "validated_alternative": alternative.model_dump(mode="json") if alternative is not None else None}


def _report_export(result) -> None:
    for path in result.written:
        err.print(plain(f"wrote {path}"), highlight=False, soft_wrap=True)
    for name, reason in result.refused.items():
        err.print(plain(f"note: {name} not written: {reason}"), highlight=False, soft_wrap=True)


@app.command("export")
@user_errors
def export_cmd(
    plan: Path = typer.Argument(..., help="Plan file written by `plan --save` (or by hand)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="megatron, deepspeed, torchrun, torchtitan, slurm or "
                                      "all (default: the --framework's)."),
    out_dir: Path = typer.Option(..., "--out", help="Folder for the launch files (created if missing)."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing files."),
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
    tp_comm_overlap: Optional[bool] = TP_OVERLAP_OPT,
    overlap_grad_reduce: Optional[bool] = GRAD_OVERLAP_OPT,
    flash_attention: Optional[bool] = FLASH_OPT,
    optimizer: Optional[str] = OPTIMIZER_OPT,
    grad_dtype: Optional[str] = GRAD_DTYPE_OPT,
    fp8_recipe: Optional[str] = FP8_RECIPE_OPT,
    framework: str = FRAMEWORK_OPT,
) -> None:
    """Write launch files for a plan; layouts a target cannot express are refused with the reason."""
    opts = TrainOptions(stack, stack_file, tp_comm_overlap, overlap_grad_reduce, flash_attention, optimizer,
                        grad_dtype, fp8_recipe, framework)
    fw = fws.load(framework)
    if fmt is None and fw is None:
        raise UserError("give --format (megatron, deepspeed, torchrun, torchtitan, slurm or all) or --framework")
    doc = to.apply_to_document(loading.read_mapping(plan), opts)
    if fw is not None:
        prob = loading.problem_from_plan(doc, str(plan))
        if prob.layout is not None:
            lay, _ = stage_split.complete(prob.model, prob.cluster, prob.train, prob.layout)
            fws.require(fw, resolve_layout(prob.model, prob.cluster, prob.train, lay), prob.train)
    _report_export(run_export(doc, fws.export_format(fw, fmt, "all"), out_dir, force))


@app.command("report")
@user_errors
def report_cmd(
    plan: Path = typer.Argument(..., help="Plan file written by `plan --save`."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="HTML file; without it, print to the terminal."),
    tokens: Optional[float] = TOKENS_OPT,
    force: bool = typer.Option(False, "--force", help="Overwrite an existing HTML file."),
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
) -> None:
    """Pictures of a plan: memory per stage, the pipeline timeline, the device mesh, the breakdown,
    the step time with its held-out error band."""
    doc = to.apply_to_document(loading.read_mapping(plan), TrainOptions(stack, stack_file))
    data = build_report(doc, tokens)
    if output is None:
        return print_report(data, out)
    write_atomic(output, render_html(data), force, option="--output")
    err.print(plain(f"wrote {output}"), highlight=False, soft_wrap=True)


@app.command("check")
@user_errors
def check_cmd(
    config: str = typer.Argument(..., help="Plan file, Megatron launch script/args, DeepSpeed JSON or torchtitan TOML."),
    cluster: Optional[str] = CLUSTER_OPT,
    nodes: Optional[int] = NODES_OPT,
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model preset or file (overrides the plan's)."),
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
    tp_comm_overlap: Optional[bool] = TP_OVERLAP_OPT,
    overlap_grad_reduce: Optional[bool] = GRAD_OVERLAP_OPT,
    flash_attention: Optional[bool] = FLASH_OPT,
    optimizer: Optional[str] = OPTIMIZER_OPT,
    grad_dtype: Optional[str] = GRAD_DTYPE_OPT,
    fp8_recipe: Optional[str] = FP8_RECIPE_OPT,
    framework: str = FRAMEWORK_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Does this configuration fit in GPU memory? Exit 0 fits, 1 does not fit, 2 bad input.

    Megatron scripts need --cluster (nodes from torchrun/#SBATCH or --nodes); DeepSpeed JSON and
    torchtitan TOML need --model and --cluster. The stack follows the config (megatron-core, nemo with
    --tp-comm-overlap, deepspeed, torchtitan, torchtitan-eager without compile) unless --stack is given."""
    path = Path(config)
    if not path.exists():
        raise UserError(f"config file {config!r} does not exist")
    if not is_native(path):
        prob = loading.load_plan(path)
        if prob.layout is None:
            raise UserError(f"{config}: a plan file for check needs a 'layout'")
        spec = loading.load_model(model) if model else prob.model
        clus = loading.load_cluster(cluster, nodes) if cluster else loading.resize_cluster(prob.cluster, nodes, None)
    else:
        prob = load_native(path, model, cluster, nodes)
        spec, clus = prob.model, prob.cluster
    opts = TrainOptions(stack, stack_file, tp_comm_overlap, overlap_grad_reduce, flash_attention, optimizer,
                        grad_dtype, fp8_recipe, framework)
    train = to.apply(prob.train, opts)
    lay, chosen = (prob.layout, False) if is_native(path) else stage_split.complete(spec, clus, train, prob.layout)
    result = estimate(spec, clus, train, lay)
    fws.require(fws.load(framework), result.layout, train)
    _show(result, as_json, f"{config} (stack {train.stack_spec.name})", chosen)
    raise typer.Exit(0 if result.fits else 1)


@app.command("calibrate")
@user_errors
def calibrate_cmd(
    logs: list[Path] = typer.Argument(..., help="Training logs: Megatron-LM/NeMo, torchtitan or DeepSpeed."),
    model: str = typer.Option(..., "--model", "-m", help="The model the logs trained (preset, spec file, config.json)."),
    cluster: str = typer.Option(..., "--cluster", "-c", help="Cluster preset or spec file the runs ran on."),
    nodes: Optional[int] = NODES_OPT,
    layout: Optional[str] = typer.Option(None, "--layout", "-l", help="Layout keys the logs do not state "
                                         "(torchtitan, DeepSpeed); over a Megatron log's argument dump."),
    global_batch: Optional[int] = GBS_OPT,
    seq_len: Optional[int] = SEQ_OPT,
    precision: Optional[str] = PREC_OPT,
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
    params: Optional[str] = typer.Option(None, "--params", help="Comma-separated stack fields to fit (default: "
                                         "gemm_scale, layer_overhead_s, step_overhead_s, overlap_slowdown, at most "
                                         "one fewer than the runs)."),
    out_file: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the fitted stack profile here."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
    as_json: bool = JSON_OPT,
) -> None:
    """Fit the stack's free parameters to your own runs' step times (warm-up skipped, median of the rest).

    Prints each run's measured and predicted step time and error before -> after; --out writes a
    profile that --stack-file accepts everywhere."""
    from planner.calibration import command as cal

    opts = cal.Options(loading.load_model(model), loading.load_cluster(cluster, nodes),
                       cal.layout_keys(layout), global_batch, seq_len, precision,
                       to.chosen_stack(TrainOptions(stack=stack, stack_file=stack_file)))
    names = [p.strip() for p in params.split(",") if p.strip()] if params else None
    data = cal.calibrate(cal.Request(list(logs), opts, names, out_file, force))
    if as_json:
        return _print_json(data)
    cal.show(data, out, err)


@app.command("models")
def models_cmd(as_json: bool = JSON_OPT) -> None:
    """List the model presets (with their sources in --json)."""
    rows = listing.model_rows()
    if as_json:
        return _print_json(rows)
    out.print(listing.models_table(rows))


@app.command("hardware")
def hardware_cmd(as_json: bool = JSON_OPT) -> None:
    """List GPU profiles, cluster presets and software stacks."""
    stacks = to.stack_rows()
    if as_json:
        return _print_json({**listing.hardware_data(), "stacks": stacks})
    for table in listing.hardware_tables():
        out.print(table)
    out.print(to.stacks_table(stacks))


@app.command("schema")
def schema_cmd(
    name: Optional[str] = typer.Argument(None, help="Print only this definition (e.g. Estimate, PlanFile)."),
) -> None:
    """Print the JSON Schema of spec files and of parplan's JSON output."""
    schema = json_schema()
    if name is None:
        return _print_json(schema)
    defs = schema["$defs"]
    if name not in defs:
        _fail(f"schema: no definition {name!r}; known: {', '.join(sorted(defs))}")
    _print_json({"$schema": schema["$schema"], "$defs": defs, **defs[name]})


@app.command("sweep")
@user_errors
def sweep_cmd(
    model: str = typer.Argument(..., help="Model preset, spec file, Hugging Face config.json, or plan file."),
    cluster: str = typer.Option(..., "--cluster", "-c", help="Cluster presets or spec files, comma-separated: "
                                "dgx-h100,dgx-b200."),
    nodes: str = typer.Option(..., "--nodes", help="Node counts: 8..256 (powers of two: 8,16,..,256), 8..256:x4, "
                              "8..64:+8, or a list 8,16,64."),
    tokens: float = typer.Option(..., "--tokens", min=1, max=1e18, help="Tokens to train on, e.g. 15e12."),
    deadline: Optional[str] = typer.Option(None, "--deadline", help="Finish within: 30d, 720h, 4w."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Spend at most, USD: 2e6, $2,000,000, 2M "
                                         "(needs --price-per-gpu-hour)."),
    price: Optional[str] = typer.Option(None, "--price-per-gpu-hour", help="USD per GPU-hour: one number, or per "
                                        "cluster/GPU: h100=2.5,b200=4."),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", min=1, help="Global batch in sequences at "
                                               "every point (default 1024; see docs/design.md section 5)."),
    seq_len: Optional[int] = SEQ_OPT,
    precision: Optional[str] = PREC_OPT,
    stack: Optional[str] = STACK_OPT,
    stack_file: Optional[Path] = STACK_FILE_OPT,
    framework: str = FRAMEWORK_OPT,
    time_limit: float = typer.Option(10.0, "--time-limit", min=0.5, max=3600, help="Search time limit per point, s."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, max=1024, help="Worker processes "
                                       "(default: the CPU count)."),
    as_json: bool = JSON_OPT,
    report: Optional[Path] = typer.Option(None, "--report", help="Write a self-contained HTML page with the plots."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --report file."),
) -> None:
    """Plan every (cluster, node count) point: days, GPU-hours and cost of training on --tokens, the
    Pareto front of time versus cost, and the cheapest point that meets --deadline and --budget
    (exit 1 when none does; 130 when interrupted, after printing the points done)."""
    from planner.sweep_command import SweepArgs, run_sweep
    args = SweepArgs(model, cluster, nodes, tokens, deadline, budget, price, global_batch, seq_len, precision,
                     time_limit, jobs, as_json, report, force, TrainOptions(stack, stack_file, framework=framework))
    raise typer.Exit(run_sweep(args, out, err))


def _safe_streams() -> None:
    """Never fail on printing: a name with a lone surrogate, or any non-ASCII text under an ASCII
    locale (LC_ALL=C, PYTHONIOENCODING=ascii), is written with backslash escapes instead."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (e.g. replaced by a test)
            pass


def main() -> None:
    """Console-script entry point."""
    _safe_streams()
    app()


if __name__ == "__main__":
    main()
