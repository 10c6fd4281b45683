"""Fit the GPU profiles' efficiency parameters to published measurements, and write them back.

    python benchmarks/calibrate.py            # fit and print; --write updates hardware_profiles/gpus

What fits what (the rest of each data set is held out and reported by benchmarks/accuracy.py):
- a100-80gb: every other row of vTrain single-node and of vTrain multi-node (the odd rows are
  held out), plus Korthikanti Table 4. Narayanan Table 1 is never fitted on: it is pure validation.
  Fitted: gemm_max, gemm_half_dim, hbm, scale_up, scale_out, layer_overhead_s, step_overhead_s.
- h100-sxm: the Megatron-Core H100 table (9 rows): gemm_max, gemm_half_dim, layer_overhead_s
  (a newer software stack) and scale_out (NDR InfiniBand); scale_up, hbm and step_overhead_s are
  carried over from the A100 fit.
- a100-40gb copies a100-80gb; h800 and h200 copy h100-sxm (same compute die); b200 and mi300x
  copy h100-sxm's fractions, unfitted (no public measurement here), and say so in `fitted_on`.
Objective: mean |relative error| of step time, each data set weighted equally; Nelder-Mead on
log-parameters (scipy), several starts.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference_data import korthikanti_layer, megatron_h100, narayanan, vtrain, with_efficiency  # noqa: E402

import hardware_profiles as hp  # noqa: E402
from costmodels.layout import resolve_layout  # noqa: E402
from costmodels.step import step_time  # noqa: E402
from costmodels.timing import layer_time, make_context  # noqa: E402

A100_PARAMS = ["gemm_max", "gemm_half_dim", "hbm", "scale_up", "scale_out", "layer_overhead_s", "step_overhead_s"]
A100_START = [0.75, 300.0, 0.7, 0.7, 0.7, 4e-4, 0.01]
H100_PARAMS = ["gemm_max", "gemm_half_dim", "layer_overhead_s", "scale_out"]
BOUNDS = {"gemm_max": (0.2, 1.0), "hbm": (0.2, 1.0), "scale_up": (0.1, 1.0), "scale_out": (0.1, 1.0),
          "gemm_half_dim": (1.0, 1e5), "layer_overhead_s": (1e-6, 0.05), "step_overhead_s": (1e-5, 5.0)}
PROFILES = Path(__file__).resolve().parents[1] / "hardware_profiles" / "gpus"


def prepared(cases):
    """(case, resolved layout) pairs: layouts are resolved once, efficiencies vary."""
    return [(c, resolve_layout(c.model, c.cluster, c.train, c.layout)) for c in cases]


def predict_s(case, lay, gpu) -> float:
    """Predicted step time of a case with GPU profile `gpu`."""
    cluster = case.cluster.model_copy(update={"gpu": gpu})
    return step_time(make_context(case.model, cluster, case.train, lay)).step_s


def layer_s(row, gpu) -> float:
    """Predicted forward + backward time of one layer (Korthikanti Table 4 row)."""
    _, model, cluster, train, layout, _ = row
    cl = cluster.model_copy(update={"gpu": gpu})
    lay = resolve_layout(model, cl, train, layout)
    return layer_time(make_context(model, cl, train, lay), moe=False).total_s


def mean_abs_err(pairs) -> float:
    """Mean |predicted/measured - 1|."""
    return float(np.mean([abs(p / m - 1) for p, m in pairs]))


def objective_factory(gpu, names, sets, layers):
    def objective(logx):
        eff = {n: _clip(n, math.exp(v)) for n, v in zip(names, logx)}
        g = with_efficiency(gpu, **eff)
        errs = [mean_abs_err([(predict_s(c, lay, g), c.measured_s) for c, lay in s]) for s in sets]
        if layers:
            errs.append(mean_abs_err([(layer_s(r, g), r[-1]) for r in layers]))
        return float(np.mean(errs))

    return objective


def _clip(name: str, value: float) -> float:
    lo, hi = BOUNDS[name]
    return min(max(value, lo), hi)


def fit(gpu, names, start, sets, layers=(), starts: int = 3):
    """Nelder-Mead on log-parameters from a few starting points; returns (params dict, objective)."""
    from scipy.optimize import minimize

    objective = objective_factory(gpu, names, sets, list(layers))
    best = None
    rng = np.random.default_rng(0)
    for i in range(starts):
        x0 = np.log(start) + (0 if i == 0 else rng.normal(0, 0.3, len(start)))
        res = minimize(objective, x0, method="Nelder-Mead", options={"maxiter": 400 * len(names), "xatol": 1e-3,
                                                                        "fatol": 1e-5})
        print(f"  start {i}: objective {res.fun:.4f} after {res.nfev} evaluations", file=sys.stderr)
        if best is None or res.fun < best.fun:
            best = res
    return {n: _clip(n, math.exp(v)) for n, v in zip(names, best.x)}, best.fun


def fit_a100():
    gpu = hp.load_gpu("a100-80gb")
    single = prepared(vtrain(gpu, "single")[0::2][::3])  # every other row, thinned for speed
    multi = prepared(vtrain(gpu, "multi")[0::2])
    params, obj = fit(gpu, A100_PARAMS, A100_START, [single, multi], korthikanti_layer(gpu))
    note = ("fitted by benchmarks/calibrate.py on vTrain single-node (every 6th row) and multi-node (even rows) "
            f"and Korthikanti Table 4; mean |err| on the fitting set {obj:.3f}")
    return params, note


def fit_h100(a100_params):
    gpu = with_efficiency(hp.load_gpu("h100-sxm"), **{k: v for k, v in a100_params.items() if k not in H100_PARAMS})
    sets = [prepared(megatron_h100(gpu))]
    start = [a100_params[k] for k in H100_PARAMS]
    params, obj = fit(gpu, H100_PARAMS, start, sets)
    note = (f"{', '.join(H100_PARAMS)} fitted by benchmarks/calibrate.py on the Megatron-Core H100 table "
            f"(mean |err| {obj:.3f}); the other fractions carried over from a100-80gb")
    return {**a100_params, **params}, note


def write_profile(name: str, params: dict, note: str) -> None:
    """Replace the `efficiency:` block of hardware_profiles/gpus/NAME.yaml, keeping the rest."""
    path = PROFILES / f"{name}.yaml"
    text = path.read_text()
    head = text.split("\nefficiency:")[0].rstrip("\n")
    block = {"efficiency": {**{k: float(f"{v:.6g}") for k, v in params.items()}, "fitted_on": note}}
    path.write_text(head + "\n" + yaml.safe_dump(block, sort_keys=False, width=100))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the fitted numbers into the GPU profiles")
    parser.add_argument("--h100-only", action="store_true", help="keep the shipped a100-80gb fit, refit h100")
    args = parser.parse_args()
    if args.h100_only:
        eff = hp.load_gpu("a100-80gb").efficiency
        a100, a100_note = {k: getattr(eff, k) for k in A100_PARAMS}, eff.fitted_on
    else:
        a100, a100_note = fit_a100()
    print("a100-80gb", a100)
    h100, h100_note = fit_h100(a100)
    print("h100-sxm", h100)
    if not args.write:
        return
    write_profile("a100-80gb", a100, a100_note)
    write_profile("a100-40gb", a100, "copied from a100-80gb (same die and NVLink): " + a100_note)
    write_profile("h100-sxm", h100, h100_note)
    for name in ("h800", "h200"):
        write_profile(name, h100, "copied from h100-sxm (same compute die): " + h100_note)
    for name in ("b200", "mi300x"):
        write_profile(name, h100, "NOT FITTED: no public measurement in shared/reference; h100-sxm's fractions")


if __name__ == "__main__":
    main()
