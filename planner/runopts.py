"""Whole-run options of `plan` and `estimate` (costmodels.whole_run): `--tokens` with `--price-per-gpu-hour`,
`--gpu-failure-rate` (per GPU-hour), `--restart-min` and `--checkpoint-gbps` (per node).

Without `--tokens` there is no whole run, and the other options are refused. Every value is checked
here, NaN and infinity included (click's ranges let NaN through), and an error names the option.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import typer
from pydantic import ValidationError

from costmodels.estimate import Estimate
from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from costmodels.whole_run import (DEFAULT_CHECKPOINT_WRITE_GB_PER_S_PER_NODE, DEFAULT_GPU_FAILURE_RATE_PER_HOUR,
                                  DEFAULT_RESTART_S, RunSpec, WholeRun, whole_run)
from planner.errors import UserError

MAX_RESTART_MIN = 7 * 24 * 60  # a week: RunSpec's bound on restart_s

PRICE_OPT = typer.Option(None, "--price-per-gpu-hour", help="With --tokens: USD per GPU-hour; reports the cost.",
                         show_default=False)
FAILURE_RATE_OPT = typer.Option(None, "--gpu-failure-rate", help="With --tokens: job-stopping failures per "
                                f"GPU-hour (default {DEFAULT_GPU_FAILURE_RATE_PER_HOUR:.3g}: Llama 3, 419 "
                                "interruptions in 54 days on 16,384 GPUs).", show_default=False)
RESTART_OPT = typer.Option(None, "--restart-min", help="With --tokens: minutes from a failure to training again "
                           f"(default {DEFAULT_RESTART_S / 60:g}).", show_default=False)
CHECKPOINT_OPT = typer.Option(None, "--checkpoint-gbps", help="With --tokens: checkpoint write rate per node, "
                              "GB/s (default: the cluster's, else "
                              f"{DEFAULT_CHECKPOINT_WRITE_GB_PER_S_PER_NODE:.2f}: Llama 3's 2 TB/s over 2,048 "
                              "nodes).", show_default=False)

OPTION_OF = {"tokens": "--tokens", "price_per_gpu_hour": "--price-per-gpu-hour",
             "gpu_failure_rate_per_hour": "--gpu-failure-rate", "restart_s": "--restart-min",
             "checkpoint_write_gb_per_s_per_node": "--checkpoint-gbps"}


@dataclass(frozen=True)
class RunOptions:
    """What the user set on the command line (None = not given)."""

    tokens: Optional[float] = None
    price_per_gpu_hour: Optional[float] = None
    gpu_failure_rate: Optional[float] = None
    restart_min: Optional[float] = None
    checkpoint_gbps: Optional[float] = None

    def given(self) -> dict[str, float]:
        """RunSpec's fields given, by field name (restart in seconds)."""
        values = {"tokens": self.tokens, "price_per_gpu_hour": self.price_per_gpu_hour,
                  "gpu_failure_rate_per_hour": self.gpu_failure_rate,
                  "restart_s": None if self.restart_min is None else self.restart_min * 60,
                  "checkpoint_write_gb_per_s_per_node": self.checkpoint_gbps}
        return {k: float(v) for k, v in values.items() if v is not None}

    def spec(self) -> Optional[RunSpec]:
        """The RunSpec, None without --tokens; UserError naming the option for a bad value."""
        _check_finite(self)
        given = self.given()
        if "tokens" not in given:
            if given:
                raise UserError(f"{OPTION_OF[next(iter(given))]} needs --tokens (the token budget of the run)")
            return None
        if self.restart_min is not None and not 0 <= self.restart_min <= MAX_RESTART_MIN:
            raise UserError(f"--restart-min: must be between 0 and {MAX_RESTART_MIN} (got {self.restart_min:g})")
        try:
            return RunSpec(**given)
        except ValidationError as exc:
            raise UserError(_describe(exc, self)) from None


def _check_finite(opts: RunOptions) -> None:
    names = {"--tokens": opts.tokens, "--price-per-gpu-hour": opts.price_per_gpu_hour,
             "--gpu-failure-rate": opts.gpu_failure_rate, "--restart-min": opts.restart_min,
             "--checkpoint-gbps": opts.checkpoint_gbps}
    for option, value in names.items():
        if value is not None and not math.isfinite(value):
            raise UserError(f"{option}: must be a finite number (got {value})")


def _describe(exc: ValidationError, opts: RunOptions) -> str:
    """'--gpu-failure-rate: Input should be greater than 0 (got -1)', problems joined on one line."""
    shown = {"restart_s": opts.restart_min}
    lines = []
    for e in exc.errors(include_url=False):
        field = str(e["loc"][0]) if e.get("loc") else "tokens"
        value = shown.get(field, e.get("input"))
        lines.append(f"{OPTION_OF.get(field, field)}: {e['msg']} (got {value!r})")
    return "; ".join(lines)  # one line (the CLI promises one)


def whole_run_of(estimate: Optional[Estimate], model: ModelSpec, cluster: ClusterSpec, train: TrainSpec,
                 run: Optional[RunSpec]) -> Optional[WholeRun]:
    """The whole run of an estimate, None without a RunSpec or an estimate."""
    if run is None or estimate is None:
        return None
    return whole_run(estimate, model, cluster, train, run)
