"""The plan command: search, reasons, and its outputs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from costmodels.estimate import Estimate
from costmodels.train_spec import TrainSpec
from planner.search import frameworks as fws
from planner.files import loading
from planner.cli_common import (CLUSTER_OPT, DEFAULT_PLAN_BATCH, GPUS_OPT, JSON_OPT, MODEL_ARG, NODES_OPT,
                                PREC_OPT, SEQ_OPT, TOKENS_OPT, err, folder_option, load_problem, make_train, out,
                                print_json, report_export, user_errors)
from planner.files.planfile import plan_document
from planner.files.said import heard_notes
from planner.plan_any import any_mode as plan_any_mode
from planner.plan_outputs import PlanOutputs
from planner.safetext import plain
from planner.report.render import print_plan
from planner.report.runblock import print_whole_run
from planner.runopts import CHECKPOINT_OPT, FAILURE_RATE_OPT, PRICE_OPT, RESTART_OPT, RunOptions, whole_run_of
from planner.trainopts import TrainOptions, with_train_options


@user_errors
@with_train_options
def plan_cmd(
    model: str = MODEL_ARG,
    cluster: Optional[str] = CLUSTER_OPT,
    nodes: Optional[int] = NODES_OPT,
    gpus: Optional[int] = GPUS_OPT,
    global_batch: Optional[int] = typer.Option(None, "--global-batch", min=1,
                                               help="Global batch in sequences (default 512)."),
    seq_len: Optional[int] = SEQ_OPT,
    precision: Optional[str] = PREC_OPT,
    top: int = typer.Option(3, "--top", min=1, max=50, help="Return the K best distinct layouts."),
    time_limit: float = typer.Option(30.0, "--time-limit", min=0.1, max=3600, help="CP-SAT time limit, seconds."),
    validated_only: bool = typer.Option(False, "--validated-only", help="Only layouts whose accuracy regime "
                                        "(stack x sharding x scale) is validated by held-out runs."),
    as_json: bool = JSON_OPT,
    save: Optional[Path] = typer.Option(None, "--save", help="Write the winning plan to this JSON file."),
    export_arg: Optional[str] = typer.Option(None, "--export", help="Write launch files for the winner here."),
    fmt: Optional[str] = typer.Option(None, "--format", help="megatron, deepspeed, torchrun, torchtitan, slurm or "
                                      "all (default: the --framework's, else all)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write a self-contained HTML report here."),
    tokens: Optional[float] = TOKENS_OPT,
    price: Optional[float] = PRICE_OPT,
    failure_rate: Optional[float] = FAILURE_RATE_OPT,
    restart_min: Optional[float] = RESTART_OPT,
    checkpoint_gbps: Optional[float] = CHECKPOINT_OPT,
    force: bool = typer.Option(False, "--force", help="Overwrite existing output files, and --export files whose "
                               "stack the winner does not fit (else exit 1)."),
    opts: TrainOptions = TrainOptions(),  # the training options (with_train_options)
) -> None:
    """Search every layout for the fastest that fits; exit 1 when nothing fits. When the winner's
    accuracy regime is not validated, the best validated layout is named beside it.

    MFU counts model FLOPs only (PaLM/Korthikanti: no recompute, full attention scores)."""
    run = RunOptions(tokens, price, failure_rate, restart_min, checkpoint_gbps).spec()
    export_dir = None if export_arg is None else folder_option(export_arg, "--export")
    if fmt is not None:  # checked before the search (the exporters load only when a format is named)
        from planner.exporters import check_format

        check_format(fmt)
    with heard_notes() as heard:  # a cluster file's warning lines: on stderr, and in --json's "warnings"
        prob = load_problem(model, cluster, nodes, gpus, seq_len)
    base = prob.train or TrainSpec(global_batch_size=global_batch or DEFAULT_PLAN_BATCH)
    train = make_train(base, global_batch, seq_len, precision, None, prob.cluster.num_gpus, opts)
    deadline = time.perf_counter() + time_limit  # --time-limit bounds the search, the alternative, the reasons
    outputs = PlanOutputs(save, export_dir, report, force, tokens)
    outputs.precheck()  # before the search: a refused path costs nothing
    fw = fws.load(opts.framework)
    if fmt is not None and export_dir is None:  # said first: a script expecting files learns why there are none
        err.print(plain(f"warning: --format {fmt[:20]} without --export writes nothing; add --export DIR"),
                  highlight=False, soft_wrap=True)
    fmt = fws.export_format(fw, fmt, "all")
    any_mode = plan_any_mode(fw, opts, prob.train)
    if any_mode:  # --framework any: each framework's layouts, priced with its own stack
        result, alternative, reasons, train, runs_on = plan_any(prob, train, top, time_limit, validated_only, deadline)
    else:
        fws.require_precision([fw] if fw is not None else [], train)  # a named framework (any: plan_any's own)
        result, alternative, reasons = plan_search(prob, train, top, time_limit, validated_only, fw, deadline)
        runs_on = [fws.runners(p.layout, train, moe=prob.model.is_moe) for p in result.plans]
        if fw is None and result.plans:  # a stack named without --framework prices every layout with it
            caps = fws.load(train.stack_spec.framework) if train.stack_spec.framework in fws.FRAMEWORKS else None
            hint = (f" (add --framework {train.stack_spec.framework} to search only its layouts)"
                    if caps is not None and train.precision in caps.precisions else "")
            for line in fws.unrunnable(train, result.plans[0].layout, moe=prob.model.is_moe):
                err.print(plain(f"warning: the winner: {line}{hint}"), highlight=False, soft_wrap=True)
    exported: list[str] = []  # the export's left-out and forced formats, for --json's "warnings"
    if result.plans and outputs.wanted:  # the plan document serves the files alone
        doc = plan_document(prob.model, prob.cluster, train, result.plans[0], result.plans[1:], reasons)
        exported = report_export(outputs.write(doc, fmt, tokens, run))
    whole = whole_run_of(result.plans[0] if result.plans else None, prob.model, prob.cluster, train, run)
    if as_json:
        print_json({**plan_json(result, reasons, alternative), "framework": opts.framework, "runs_on": runs_on,
                     "whole_run": whole.model_dump(mode="json") if whole else None,
                     "warnings": list(prob.model_notes) + heard + cut_short_warning(result) + exported})
    else:
        print_plan(result, reasons, out, f"{prob.model.name} on {prob.cluster.num_gpus} x "
                   f"{prob.cluster.gpu_profile.name}, global batch {train.global_batch_size} x "
                   f"{train.seq_len(prob.model)} tokens, stack {train.stack_spec.name}"
                   + (f", framework {opts.framework}" if fw else (", each framework's layouts priced with its own "
                                                                  "stack" if any_mode else "")), alternative, runs_on)
        print_whole_run(whole, out)
    raise typer.Exit(0 if result.plans else 1)


def plan_search(prob: loading.Problem, train: TrainSpec, top: int, time_limit: float, validated_only: bool,
                 fw=None, deadline: Optional[float] = None):
    """(result, best validated alternative when the winner is not validated, reasons); with a
    framework (planner.search.frameworks), only the layouts it runs (planner.api.search_with_reasons, with a
    spinner on stderr)."""
    from planner.api import search_with_reasons

    with err.status("searching layouts...", spinner="dots") as status:
        return search_with_reasons(prob, train, top, time_limit, validated_only, fw, deadline,
                                   progress=lambda msg: status.update(msg))


def plan_any(prob: loading.Problem, train: TrainSpec, top: int, time_limit: float, validated_only: bool,
             deadline: Optional[float]):
    """`--framework any` (planner.plan_any.search_any) with the CLI's spinners."""
    from planner.plan_any import search_any

    return search_any(prob, train, top, time_limit, validated_only, deadline,
                      serial=lambda fw, tr, share: plan_search(prob, tr, top, share, validated_only, fw, deadline),
                      waiting=lambda: err.status("searching the layouts of each framework...", spinner="dots"))


def plan_json(result, reasons: list[str], alternative: Optional[Estimate] = None) -> dict:
    """The `plan --json` document (DESIGN.md section 6); `validated_alternative` is the best layout in a
    validated regime when the winner's is not (null otherwise, or when none fits)."""
    stats = result.stats
    return {"status": result.status, "plans": [p.model_dump(mode="json") for p in result.plans],
            "search": {"seconds": result.seconds, "layouts_considered": stats.layouts_considered,
                       "filtered_out": stats.filtered_out,
                       "memory_pruned": stats.memory_pruned, "bound_pruned": stats.bound_pruned,
                       "solver_candidates": stats.solver_candidates, "solver_models": stats.solver_models,
                       "gap": result.gap,
                       "time_limit_reached": stats.truncated or bool(stats.cut), "cut_short": stats.cut},
            "reasons": reasons,
            "validated_alternative": alternative.model_dump(mode="json") if alternative is not None else None}


def cut_short_warning(result) -> list[str]:
    """The time-limit line (planner.search.explain.time_limit_note) when the winner is not proven optimal, for
    --json's "warnings": a script reading only them learns the answer may change with more time or a faster CPU
    (the model reader's lines come first, on stderr already)."""
    from planner.search.explain import time_limit_note  # noqa: PLC0415

    return time_limit_note(result) if result.plans and result.status != "optimal" else []
