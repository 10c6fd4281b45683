"""Fit a stack profile's free parameters to the measured step times of the user's runs.

Objective: mean |predicted / measured - 1| over the runs (each run weighs the same), minimized by
fitter.multi_start on log-parameters, each clipped to its bounds (the objective of
benchmarks/calibrate.py), the parameters entering one at a time (nested_fit). Only the stack is fitted;
the GPU profile and the collective fit stay.

Which parameters (FREE, in this order; the first min(len, max(1, runs - 1)) unless --params names them):
- gemm_scale: the GEMM speed of the user's GPUs/kernels (clocks, power caps, cuBLAS version) relative
  to the profile's curve; it scales the dominant term of every step, so one run pins it.
- layer_overhead_s: host launch time per layer and micro-batch; it separates small models and many
  micro-batches (launch-bound) from large ones, which a second run with another shape shows.
- step_overhead_s: the fixed cost of a step (optimizer launch, logging, data loader); it separates
  short steps from long ones.
- overlap_slowdown: compute slowed while communication overlaps it; it needs runs with different
  amounts of overlapped communication (dp or tp sizes).
elementwise_scale and attn_scale may be named with --params; they trade off against gemm_scale
unless the runs vary sequence length and fusion, so they are not fitted by default. One parameter
fewer than runs keeps every fit over-determined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from costmodels.stack import Stack
from costmodels.step import step_time
from costmodels.timing import make_context
from planner.calibration.fitter import multi_start
from planner.calibration.runs import Run
from planner.errors import UserError


@dataclass(frozen=True)
class Free:
    """A fitted Stack field and its bounds (units of the field)."""

    field: str
    lo: float
    hi: float


FREE = [Free("gemm_scale", 0.3, 1.5), Free("layer_overhead_s", 1e-6, 0.05), Free("step_overhead_s", 1e-5, 5.0),
        Free("overlap_slowdown", 1e-3, 1.0), Free("elementwise_scale", 0.05, 4.0), Free("attn_scale", 0.2, 2.0)]
DEFAULT_COUNT = 4
STARTS = 2


@dataclass(frozen=True)
class Fitted:
    """The result: the stack before and after, the parameters, each run's predictions."""

    before: Stack
    after: Stack
    params: list[Free]
    predicted_before_s: list[float]
    predicted_after_s: list[float]


def choose(n_runs: int, names: list[str] | None = None) -> list[Free]:
    """The parameters to fit: those named, else the first max(1, runs - 1) of the default four."""
    by_name = {f.field: f for f in FREE}
    if names is not None:
        unknown = [n for n in names if n not in by_name]
        if not names or unknown:
            shown = repr(unknown[0]) if unknown else "(none)"
            raise UserError(f"--params: unknown parameter {shown} (known: {', '.join(by_name)})")
        chosen = [by_name[n] for n in dict.fromkeys(names)]
        if len(chosen) > n_runs:
            raise UserError(f"--params {','.join(f.field for f in chosen)}: {len(chosen)} parameters from {n_runs} "
                            f"run(s); a fit needs at least as many runs as parameters (give more logs or fewer "
                            "parameters)")
        return chosen
    return FREE[:min(DEFAULT_COUNT, max(1, n_runs - 1))]


def current(stack: Stack, free: Free, run: Run) -> float:
    """The stack's value of a field (the GPU profile's overheads where the stack leaves them null)."""
    value = getattr(stack, free.field)
    if value is None:
        value = getattr(run.cluster.gpu_profile.efficiency, free.field)
    return float(value)


def with_values(stack: Stack, params: list[Free], values) -> Stack:
    """`stack` with each parameter set (clipped to its bounds)."""
    return stack.model_copy(update={p.field: float(min(max(v, p.lo), p.hi)) for p, v in zip(params, values)})


def predict_s(run: Run, stack: Stack) -> float:
    """The run's step time predicted with `stack`."""
    train = run.train.model_copy(update={"stack": stack})
    return step_time(make_context(run.model, run.cluster, train, run.layout)).step_s


def mean_error(runs: list[Run], predicted: list[float]) -> float:
    """Mean |predicted / measured - 1|."""
    return float(np.mean([abs(p / r.measured_s - 1) for p, r in zip(predicted, runs)]))


def fit(runs: list[Run], base: Stack, params: list[Free]) -> Fitted:
    """Fit `params` of `base` to the runs; the stack that predicts them best. The parameters enter one at a
    time (nested_fit), so the fit never ends above the best fit of its first parameters found on the way."""
    start = [max(min(current(base, p, runs[0]), p.hi), p.lo) for p in params]
    after = with_values(base, params, np.exp(nested_fit(runs, base, params, np.log(start))))
    before_s = [predict_s(r, base) for r in runs]
    after_s = [predict_s(r, after) for r in runs]
    if mean_error(runs, after_s) > mean_error(runs, before_s):  # never worse than where it started
        after, after_s = base, before_s
    return Fitted(base, after, params, before_s, after_s)


def nested_fit(runs: list[Run], base: Stack, params: list[Free], log_start: np.ndarray) -> np.ndarray:
    """The log-values of `params` that minimize the mean error, found by fitting the first k parameters from the
    best of the first k - 1 (the k-th at its start), k = 1 .. n, keeping a prefix's optimum when a longer fit
    lands above it. The simplex in n dimensions from the start alone can stop above a fit of fewer parameters
    (a workflow pass: three parameters fitted worse than two), which cannot be an optimum: the k-th at its
    start reproduces the shorter fit exactly. The last fit takes STARTS starts, the prefixes one."""
    best_x, best_f = np.empty(0), math.inf
    for k in range(1, len(params) + 1):
        def objective(logx, sub=params[:k]) -> float:
            return mean_error(runs, [predict_s(r, with_values(base, sub, np.exp(logx))) for r in runs])

        x0 = np.append(best_x, log_start[k - 1])
        res = multi_start(objective, x0, STARTS if k == len(params) else 1)
        best_x, best_f = (res.x, res.fun) if res.fun <= best_f else (x0, best_f)
    return best_x


def at_bound(fitted: Fitted) -> list[str]:
    """The fitted parameters that sit at a bound (the runs want more than the bound allows)."""
    out = []
    for p in fitted.params:
        v = getattr(fitted.after, p.field)
        if v is not None and min(abs(math.log(v / p.lo)), abs(math.log(v / p.hi))) < 1e-3:
            out.append(p.field)
    return out
