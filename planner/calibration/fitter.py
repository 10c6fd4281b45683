"""The fitter shared by `parplan calibrate` and benchmarks/calibrate.py: Nelder-Mead on
log-parameters from a few starting points (the first at the current values, the others jittered by a
seeded normal of sigma 0.3 in log space), the best result kept.

`nelder_mead` is the textbook simplex method (Nelder & Mead 1965, with the reflection, expansion,
contraction and shrink coefficients 1, 2, 1/2, 1/2 and the stopping rules of scipy.optimize's
Nelder-Mead; its first simplex steps at least 5% of each parameter), in numpy so that the product
needs no scipy; benchmarks/calibrate.py passes scipy's implementation to `multi_start` instead and
keeps its published numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

Objective = Callable[[np.ndarray], float]


@dataclass(frozen=True)
class Result:
    """Where a minimizer stopped: the point, its objective value, the evaluations it took."""

    x: np.ndarray
    fun: float
    nfev: int


LOG_STEP = 0.05  # the first simplex's least step along each axis: 5% of the parameter


def _initial_simplex(x0: np.ndarray) -> np.ndarray:
    """x0 and one vertex per axis, 5% of its coordinate along it as scipy does, but at least LOG_STEP: the
    coordinates are log-parameters, and scipy's rule moved a parameter near 1 (log near 0) by almost
    nothing: `parplan calibrate` from gemm_scale 1.004 stepped 0.02%, found the objective flat and stopped
    at a 43% error."""
    sim = [x0]
    for k in range(len(x0)):
        y = x0.copy()
        y[k] = y[k] + max(0.05 * abs(y[k]), LOG_STEP)
        sim.append(y)
    return np.array(sim, dtype=float)


def _converged(sim: np.ndarray, fsim: np.ndarray, xatol: float, fatol: float) -> bool:
    return bool(np.max(np.abs(sim[1:] - sim[0])) <= xatol and np.max(np.abs(fsim[0] - fsim[1:])) <= fatol)


def _step(f: Objective, sim: np.ndarray, fsim: np.ndarray) -> int:
    """One simplex move in place (sorted best first on entry); the evaluations it took."""
    centroid = sim[:-1].mean(axis=0)
    xr = centroid + (centroid - sim[-1])
    fr, calls = f(xr), 1
    if fr < fsim[0]:
        xe = centroid + 2 * (centroid - sim[-1])
        fe = f(xe)
        calls += 1
        sim[-1], fsim[-1] = (xe, fe) if fe < fr else (xr, fr)
    elif fr < fsim[-2]:
        sim[-1], fsim[-1] = xr, fr
    else:
        outside = fr < fsim[-1]
        xc = centroid + 0.5 * ((xr if outside else sim[-1]) - centroid)
        fc = f(xc)
        calls += 1
        if fc <= (fr if outside else fsim[-1]):
            sim[-1], fsim[-1] = xc, fc
        else:
            calls += _shrink(f, sim, fsim)
    return calls


def _shrink(f: Objective, sim: np.ndarray, fsim: np.ndarray) -> int:
    for j in range(1, len(sim)):
        sim[j] = sim[0] + 0.5 * (sim[j] - sim[0])
        fsim[j] = f(sim[j])
    return len(sim) - 1


def nelder_mead(f: Objective, x0, maxiter: int, xatol: float = 1e-3, fatol: float = 1e-5) -> Result:
    """Minimize f from x0 with the simplex method; stops when the simplex is within xatol and its values
    within fatol of the best, or after maxiter iterations."""
    sim = _initial_simplex(np.asarray(x0, dtype=float))
    fsim = np.array([f(x) for x in sim])
    nfev = len(sim)
    for _ in range(maxiter):
        order = np.argsort(fsim, kind="stable")
        sim, fsim = sim[order], fsim[order]
        if _converged(sim, fsim, xatol, fatol):
            break
        nfev += _step(f, sim, fsim)
    best = int(np.argmin(fsim))
    return Result(sim[best].copy(), float(fsim[best]), nfev)


Minimizer = Callable[[Objective, np.ndarray, int], Result]


def numpy_minimizer(f: Objective, x0: np.ndarray, n_params: int) -> Result:
    """nelder_mead with benchmarks/calibrate.py's options (300 iterations per parameter)."""
    return nelder_mead(f, x0, maxiter=300 * n_params, xatol=1e-3, fatol=1e-5)


def multi_start(objective: Objective, x_start, starts: int = 3, minimize: Optional[Minimizer] = None,
                report: Optional[Callable[[int, Result], None]] = None) -> Result:
    """The best of `starts` minimizations: from x_start, then from x_start + N(0, 0.3) (seed 0)."""
    minimize = minimize or numpy_minimizer
    x_start = np.asarray(x_start, dtype=float)
    best, rng = None, np.random.default_rng(0)
    for i in range(starts):
        x0 = x_start + (0 if i == 0 else rng.normal(0, 0.3, len(x_start)))
        res = minimize(objective, x0, len(x_start))
        if report is not None:
            report(i, res)
        if best is None or res.fun < best.fun:
            best = res
    return best
