"""JSON Schema models of `sweep --json`, `calibrate --json` and the error document every command prints under
`--json` (planner.schema gathers them into `parplan schema`). Sweep and calibrate documents may gain keys (extra
allowed); the keys listed here are there on every run (tests/test_schema_outputs.py holds real outputs to them).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from costmodels.estimate import Estimate


class ErrorOutput(BaseModel):
    """What any command prints on stdout under `--json` when it stops on an error (the message is on stderr too)."""

    model_config = ConfigDict(extra="forbid")
    error: str = Field(..., description="The message: the field or file and the value at fault.")
    exit_code: int = Field(..., description="2 bad input, 3 internal error, 130 interrupted (and 141/4 for an "
                           "output that cannot be written).")


class SweepPoint(BaseModel):
    """One (cluster, nodes) point of a sweep: its plan and its whole run."""

    model_config = ConfigDict(extra="allow")
    cluster: str
    gpu: str
    nodes: int
    gpus: int
    global_batch: int
    status: Literal["optimal", "feasible", "infeasible"]
    fits: bool
    cut_short: list[str] = Field(..., description="Search phases the time limit cut.")
    reason: Optional[str] = Field(..., description="Why nothing fits, or the time-limit note; null otherwise.")
    layouts_considered: int
    layout: Optional[str] = Field(None, description="The winner (planner.search.explain.layout_text), a --layout.")
    step_s: Optional[float] = None
    step_rel_error_p50: Optional[float] = Field(None, description="Median held-out error of the step time.")
    mfu: Optional[float] = None
    tokens_per_s: Optional[float] = None
    tokens_per_s_per_gpu: Optional[float] = None
    days: Optional[float] = Field(None, description="Calendar days of the run, with expected failures.")
    gpu_hours: Optional[float] = None
    cost_usd: Optional[float] = Field(None, description="With --price-per-gpu-hour.")
    goodput: Optional[float] = None
    pareto: bool = Field(..., description="On the days-versus-cost Pareto front.")
    picked: bool
    estimate: Optional[Estimate] = Field(None, description="The winner's estimate; null when nothing fits.")


class SweepOutput(BaseModel):
    """`sweep --json`."""

    model_config = ConfigDict(extra="allow")
    model: str
    tokens: float
    deadline_s: Optional[float]
    budget_usd: Optional[float]
    cost_basis: Literal["cost_usd", "gpu_hours"]
    points: list[SweepPoint]
    pareto: list[int] = Field(..., description="Positions in `points` of the Pareto front, fastest first.")
    pick: Optional[int] = Field(..., description="Position of the pick, or null when no point meets the "
                                "deadline and budget.")
    no_pick_reason: Optional[str]
    completed: int
    total: int
    interrupted: bool = Field(..., description="Ctrl-C stopped it: `points` holds the points done (exit 130).")


class FittedParameter(BaseModel):
    """One fitted stack field."""

    model_config = ConfigDict(extra="forbid")
    before: float
    after: float
    lo: float
    hi: float


class CalibrateRun(BaseModel):
    """One training log as calibrate fitted it."""

    model_config = ConfigDict(extra="allow")
    run: str
    path: str
    framework: Literal["megatron", "torchtitan", "deepspeed"]
    measured_s: float = Field(..., description="Median step time of the kept steps.")
    predicted_before_s: float
    predicted_after_s: float
    error_before: float = Field(..., description="predicted / measured - 1 before the fit.")
    error_after: float
    layout: str
    gpus: int
    notes: list[str]


class CalibrateOutput(BaseModel):
    """`calibrate --json`."""

    model_config = ConfigDict(extra="allow")
    stack_base: str
    stack: str = Field(..., description="The fitted stack's name (the --out file's stem, or BASE-calibrated).")
    runs: list[CalibrateRun]
    parameters: dict[str, FittedParameter]
    at_bound: list[str] = Field(..., description="Parameters the fit left at a bound.")
    mean_error_before: float
    mean_error_after: float
    out: Optional[str] = Field(..., description="The --out file written, or null.")
    notes: list[str]
