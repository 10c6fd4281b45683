"""The commands beside planning: calibrate, sweep, and the listings (models, hardware, schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from planner import trainopts as to
from planner.cli_common import (GBS_OPT, GPUS_OPT, JSON_OPT, NODES_OPT, PREC_OPT, SEQ_OPT, check_layout_text, err, fail,
                                out, print_json, user_errors)
from planner.trainopts import FRAMEWORK_OPT, STACK_FILE_OPT, STACK_OPT, TrainOptions


@user_errors
def calibrate_cmd(
    logs: list[Path] = typer.Argument(..., help="Training logs: Megatron-LM (also NeMo 1.x and Megatron-DeepSpeed), "
                                      "Megatron-Bridge, torchtitan or DeepSpeed."),
    model: str = typer.Option(..., "--model", "-m", help="The model the logs trained (preset, spec file, config.json)."),
    cluster: str = typer.Option(..., "--cluster", "-c", help="Cluster preset or spec file the runs ran on."),
    nodes: Optional[int] = NODES_OPT,
    gpus: Optional[int] = GPUS_OPT,
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
    out_file: Optional[Path] = typer.Option(None, "--out", "-o", metavar="FILE",
                                           help="Write the fitted stack profile to this YAML file (its folder "
                                                "must exist)."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
    as_json: bool = JSON_OPT,
) -> None:
    """Fit the stack's free parameters to your own runs' step times (warm-up skipped, median of the rest).

    Prints each run's measured and predicted step time and error before -> after; --out writes a
    profile that --stack-file accepts everywhere."""
    from planner.calibration import command as cal
    from planner.files import loading

    check_layout_text(layout)

    opts = cal.Options(loading.load_model_noted(model, seq_len)[0], loading.load_cluster(cluster, nodes, gpus),
                       cal.layout_keys(layout), global_batch, seq_len, precision,
                       to.chosen_stack(TrainOptions(stack=stack, stack_file=stack_file)),
                       nodes is not None or gpus is not None)
    names = None if params is None else [p.strip() for p in params.split(",")]
    data = cal.calibrate(cal.Request(list(logs), opts, names, out_file, force))
    if as_json:
        return print_json(data)
    cal.show(data, out, err)


@user_errors
def models_cmd(as_json: bool = JSON_OPT) -> None:
    """List the model presets (with their sources in --json)."""
    from planner.report import listing

    rows = listing.model_rows()
    if as_json:
        return print_json(rows)
    out.print(listing.models_table(rows, out.width))


@user_errors
def hardware_cmd(as_json: bool = JSON_OPT) -> None:
    """List GPU profiles, cluster presets, software stacks and frameworks."""
    from planner.report import listing

    stacks, frameworks = to.stack_rows(), listing.framework_rows()
    if as_json:
        return print_json({**listing.hardware_data(), "stacks": stacks, "frameworks": frameworks})
    for table in listing.hardware_tables():
        out.print(table)
    out.print(to.stacks_table(stacks))
    out.print(listing.frameworks_table(frameworks))


@user_errors
def schema_cmd(
    name: Optional[str] = typer.Argument(None, help="Print this definition and the ones it refers to (e.g. "
                                         "Estimate, PlanFile)."),
    as_json: bool = typer.Option(False, "--json", help="Accepted for uniformity: the schema is always JSON."),
) -> None:
    """Print the JSON Schema of spec files and of parplan's JSON output."""
    from planner.schema import json_schema

    schema = json_schema()
    if name is None:
        return print_json(schema)
    defs = schema["$defs"]
    if name not in defs:
        fail(f"schema: no definition {name!r}; known: {', '.join(sorted(defs))}")
    print_json({"$schema": schema["$schema"], "$defs": defs, **defs[name]})


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
                                               "every point (default 512, as plan's; a GPU count with an odd factor f: f x the power of "
                                               "two nearest 512/f). The table's title says the batch used."),
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
    Pareto front of time versus cost, and the cheapest point that meets --deadline and --budget, the fastest of
    those within 1% of it (exit 1 when none does; 130 when interrupted, after printing the points done).

    MFU counts model FLOPs only (PaLM/Korthikanti: no recompute, full attention scores)."""
    from planner.sweep_command import SweepArgs, run_sweep
    args = SweepArgs(model, cluster, nodes, tokens, deadline, budget, price, global_batch, seq_len, precision,
                     time_limit, jobs, as_json, report, force, TrainOptions(stack, stack_file, framework=framework))
    raise typer.Exit(run_sweep(args, out, err))
