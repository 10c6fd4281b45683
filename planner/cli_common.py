"""What every parplan command shares: the consoles, the error wrapper (exit 2 for user mistakes,
3 for bugs), the common options, and turning arguments into a problem and a TrainSpec."""

from __future__ import annotations

import errno
import functools
import json
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from pydantic import ValidationError
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from costmodels.errors import SpecError
from planner import trainopts as to
from planner.cli_main import STATE, OutputFailed, internal_error_text, is_output_error, json_error
from planner.errors import UserError, describe_validation_error
from planner.safetext import plain, visible
from planner.trainopts import TrainOptions

# The cost model, the file readers and the report are imported in the functions that use them, so that
# `parplan --help` and the listings start without them (tests/test_cli_startup.py).
if TYPE_CHECKING:
    from costmodels.estimate import Estimate
    from costmodels.layout import Layout
    from costmodels.train_spec import TrainSpec
    from planner.files import loading


class _Console(Console):
    """Rich's console, but a closed pipe is an error for planner.cli_main to exit on (141), not
    rich's own exit 1, which `check` would read as "does not fit"."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


class _TerminalConsole(_Console):
    """Drawn at the terminal's width, read at each print (COLUMNS, else the terminal, else 120 for a pipe:
    planner.report.fit), so tables choose their columns to fit instead of being cut."""

    @property
    def size(self) -> ConsoleDimensions:
        from planner.report.fit import terminal_columns

        return ConsoleDimensions(terminal_columns(), self._height or 25)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


out = _TerminalConsole()
err = _Console(stderr=True)
DEFAULT_PLAN_BATCH = 512


def fail(message: str, code: int = 2) -> None:
    """`parplan: error: MESSAGE` on stderr as ONE line (the parts of a multi-line message joined by '; '),
    then exit `code`."""
    one = "; ".join(part.strip() for part in str(message).splitlines() if part.strip())
    err.print(f"[bold red]parplan: error:[/] {escape(visible(one))}", highlight=False, soft_wrap=True)
    json_error(visible(one), code)
    raise typer.Exit(code)


INTERRUPTED = {"plan_cmd": "interrupted: nothing printed (--time-limit SEC bounds the search and prints the best "
                           "layout found by then)"}


def user_errors(fn):
    """Turn user mistakes into exit 2 with a message; tracebacks only with --debug."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:  # Typer turns it into a silent exit 130: say so (and with --json, in JSON)
            fail(INTERRUPTED.get(fn.__name__, "interrupted"), 130)
        except (UserError, SpecError) as exc:
            maybe_trace()
            fail(str(exc), getattr(exc, "exit_code", 2))  # ExportDoesNotFit: 1
        except ValidationError as exc:
            maybe_trace()
            fail(describe_validation_error(exc, "input"))
        except OSError as exc:
            if is_output_error(exc):  # stdout closed or full: planner.cli_main exits 141 or 4
                raise OutputFailed(exc) from exc
            maybe_trace()
            if exc.errno == errno.ENAMETOOLONG:  # a name given for a file (preset or path) the OS cannot look up
                fail(f"{str(exc.filename)[:80]!r}...: a name too long for a file or preset", 2)
            fail(internal_error_text(exc), 3)
        except Exception as exc:  # a bug in parplan, not the user's input
            maybe_trace()
            fail(internal_error_text(exc), 3)

    return wrapper


def maybe_trace() -> None:
    if STATE["debug"]:
        traceback.print_exc()


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def make_train(base: Optional[TrainSpec], global_batch: Optional[int], seq_len: Optional[int],
               precision: Optional[str], layout: Optional[Layout], world: int,
               opts: TrainOptions = TrainOptions()) -> TrainSpec:
    """TrainSpec from options over a base, its stack resolved (planner.trainopts); without a batch,
    one that gives 4*pp micro-batches (1 at pp=1)."""
    from costmodels.layout import Layout
    from costmodels.train_spec import TrainSpec
    from planner.files import loading

    data = {**base.model_dump(), "stack": base.stack} if base else {}
    if global_batch is not None:
        data["global_batch_size"] = global_batch
    if seq_len is not None:
        data["seq_length"] = seq_len
    if precision is not None:
        to.check_choice("precision", precision)
        data["precision"] = precision
    if "global_batch_size" not in data:
        lay = layout or Layout()
        dp = lay.dp or max(world // lay.model_parallel_size, 1)
        data["global_batch_size"] = lay.mbs * dp * (4 * lay.pp if lay.pp > 1 else 1)
        err.print(f"note: --global-batch not given; using {data['global_batch_size']} sequences (mbs x dp"
                  f"{' x 4 pp' if lay.pp > 1 else ''})", highlight=False)
    return to.apply(loading.validate(TrainSpec, data, "train"), opts)


def check_layout_text(text: Optional[str]) -> None:
    """`--layout` as given: not empty, no empty item (`tp=8,,pp=1`), no newline or other control
    character (a pasted line break would otherwise be read as part of a value)."""
    if text is None:
        return
    items = text.split(",")
    if not any(i.strip() for i in items):
        raise UserError(f"--layout {text[:80]!r} names no key=value (e.g. tp=8,pp=4,mbs=1)")
    if not all(i.strip() for i in items) or not text.isprintable():
        raise UserError(f"--layout {text[:80]!r}: expected key=value items separated by single "
                        "commas or blanks on one line, e.g. tp=8,pp=4,mbs=1 or \"tp=8 pp=4 mbs=1\"")


def layout_option(text: Optional[str], default: Layout) -> Layout:
    """The Layout `--layout` gives (checked by `check_layout_text`), else `default`."""
    from planner.files import loading

    check_layout_text(text)
    return default if text is None else loading.parse_layout(text)


def folder_option(value: str, option: str) -> Path:
    """A folder option's path; an empty or blank value (an unset shell variable: --out "$OUTDIR") is refused rather
    than read as the current folder."""
    if not value.strip():
        raise UserError(f"{option}: an empty folder name (an unset variable?); give a folder, or . for this one")
    return Path(value)


def load_problem(model: str, cluster: Optional[str], nodes, gpus, seq_len: Optional[int] = None) -> loading.Problem:
    """The model, cluster (resized by --nodes/--gpus), and a plan file's train and layout; `seq_len` (--seq-len)
    for the Hugging Face reader's notes on the training length."""
    from planner.files import loading

    if loading.is_plan_file(model):
        prob = loading.load_plan(Path(model), seq_len)
        resized = loading.resize_cluster(prob.cluster, nodes, gpus)
        if cluster:
            resized = loading.load_cluster(cluster, nodes, gpus)
        return loading.Problem(prob.model, resized, prob.train, prob.layout, model_notes=prob.model_notes)
    spec, notes = loading.load_model_noted(model, seq_len)  # first: an unreadable MODEL says why
    if not cluster:
        raise UserError("--cluster is required (a preset such as dgx-h100, or a cluster spec file)")
    return loading.Problem(spec, loading.load_cluster(cluster, nodes, gpus), None, model_notes=notes)


MODEL_ARG = typer.Argument(..., help="Model preset, spec file, Hugging Face config.json, or plan file.")
CLUSTER_OPT = typer.Option(None, "--cluster", "-c", help="Cluster preset or spec file.")
NODES_OPT = typer.Option(None, "--nodes", min=1, help="Number of nodes (overrides the cluster's).")
GPUS_OPT = typer.Option(None, "--gpus", min=1, help="Total GPUs (whole nodes, or part of one node).")
GBS_OPT = typer.Option(None, "--global-batch", min=1,
                       help="Global batch in sequences; default: the plan's or launch file's, else one micro-batch "
                            "per data-parallel rank (4 x pp of them with pipelining), said on stderr.")
SEQ_OPT = typer.Option(None, "--seq-len", min=1, help="Sequence length (overrides the model's).")
PREC_OPT = typer.Option(None, "--precision", help="bf16, fp16, fp8, fp32 or tf32; default: the plan file's, else bf16.")
TOKENS_OPT = typer.Option(None, "--tokens", min=1, max=1e18, help="Token budget of the whole run (e.g. 15e12): "
                          "days, GPU-hours, energy, cost, checkpoint interval, goodput.")
JSON_OPT = typer.Option(False, "--json", help="Print JSON (raw bytes and seconds) instead of tables.")


def show(result: Estimate, as_json: bool, title: str, chosen_split: bool = False, whole=None,
         warnings: Optional[list[str]] = None, extra: Optional[dict] = None,
         noted: Optional[list[str]] = None) -> None:
    """The estimate as tables, or as JSON with `extra` top-level keys (check's "assumed" and "notes");
    `warnings` (check: what the config sets that is not priced) also go to stderr, one line each, and
    under "warnings" in the JSON, after `noted` (the model reader's, on stderr already: Problem.model_notes).
    Either given, the JSON has "warnings" (an empty list when there are none)."""
    from planner.report.render import print_estimate
    from planner.report.runblock import print_whole_run

    for line in warnings or []:
        err.print(plain(f"warning: {line}"), highlight=False, soft_wrap=True)
    if as_json:
        more = {"whole_run": whole.model_dump(mode="json")} if whole is not None else {}
        if warnings is not None or noted is not None:
            more["warnings"] = list(noted or []) + list(warnings or [])
        print_json({**result.model_dump(mode="json"), **more, **(extra or {})})
    else:
        print_estimate(result, out, title, chosen_split)
        print_whole_run(whole, out)
        if whole is not None and not result.fits:  # priced, but no such run starts (a new-user pass)
            err.print("note: the whole run above is of a layout that does not fit: it cannot start as it is",
                      highlight=False, soft_wrap=True)


def report_export(result) -> list[str]:
    """What an export wrote, left out and forced, on stderr; the left-out and forced lines returned (for --json's
    "warnings")."""
    for path in result.written:
        err.print(plain(f"wrote {path}"), highlight=False, soft_wrap=True)
    said = [f"{name} not written: {reason}" for name, reason in result.refused.items()]
    for line in said:
        err.print(plain(f"note: {line}"), highlight=False, soft_wrap=True)
    forced = [f"{name} written with --force: {reason}" for name, reason in getattr(result, "forced", {}).items()]
    for line in forced:
        err.print(plain(f"warning: {line}"), highlight=False, soft_wrap=True)
    return said + forced
