"""Leave-one-regime-out cross-validation of the time model: hold out a whole regime, refit, predict it.

    python benchmarks/loro.py            # refit every fold (cached), print the table
    python benchmarks/loro.py --fold gpu:ampere --no-cache

A fold removes every fitting row of one regime (a GPU generation, a framework, a model family,
MoE, a scale band) from the objectives of benchmarks/calibrate.py (its subset-fitting entry point
`run_stages(keep=..., refit=...)`), refits, and predicts the fold's fitting and validation rows
(benchmarks/splits.py; the frozen test rows are never opened). Only the stages whose rows the fold
removes, and the stages after them, are refitted, each from its parameters' starting values (the
prior) with one Nelder-Mead start and at most LORO_MAXITER evaluations per parameter: the folds
measure extrapolation, not the last digit of a fit. A stage left with no rows keeps the prior.
Results are cached in data/loro_errors.json with a digest of the shipped profiles, the cost
models and the splits; a stale cache is refitted. Takes about 3-6 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from costmodels.uncertainty import parse_regime  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(__file__).resolve().parent / "data" / "loro_errors.json"
LORO_STARTS = 1
LORO_MAXITER = 80  # Nelder-Mead evaluations per parameter


def _gen(case) -> str:
    from costmodels.uncertainty import gpu_generation

    return gpu_generation(case.cluster.gpu_profile.name)


def _stack(case) -> str:
    return case.train.stack_spec.regime_name


FOLDS = {  # name -> (kind, does a case belong to the held-out regime, does an accuracy Row)
    "gpu:ampere": ("GPU generation", lambda c: _gen(c) == "ampere", lambda r: parse_regime(r.regime)[3] == "ampere"),
    "gpu:hopper": ("GPU generation", lambda c: _gen(c) == "hopper", lambda r: parse_regime(r.regime)[3] == "hopper"),
    "framework:torchtitan": ("framework", lambda c: _stack(c).startswith("torchtitan"),
                             lambda r: r.regime.split("/")[0].startswith("torchtitan")),
    "framework:megatron-core": ("framework", lambda c: _stack(c) in ("megatron-core", "nemo"),
                                lambda r: r.regime.split("/")[0] in ("megatron-core", "nemo")),
    "model:llama": ("model family", lambda c: "llama" in c.model.name, lambda r: "llama" in r.model),
    "model:gpt": ("model family", lambda c: c.model.name.startswith(("gpt-h", "megatron-gpt")),
                  lambda r: r.model.startswith(("gpt-h", "megatron-gpt"))),
    "moe": ("dense vs MoE", lambda c: bool(c.model.num_experts), lambda r: r.moe),
    "scale:>512": ("scale band", lambda c: c.cluster.num_gpus > 512, lambda r: r.gpus > 512),
}


def digest() -> str:
    """What a fold's result depends on: profiles, cost models, splits, data, this script."""
    h = hashlib.sha256()
    paths = [*sorted((ROOT / "hardware_profiles").rglob("*.yaml")), *sorted((ROOT / "costmodels").rglob("*.py")),
             *(ROOT / "benchmarks" / n for n in ("splits.py", "calibrate.py", "kernel_prior.py", "predict.py",
                                                 "measured_data.py", "reference_data.py", "loro.py")),
             *sorted((ROOT / "benchmarks" / "data" / "measured").glob("*.csv")),
             ROOT / "benchmarks" / "data" / "measured" / "production_recipes_h100.json"]
    for p in paths:
        # the held_out bands (provenance.held_out, memory.held_out) are what this script feeds, or what another
        # benchmark writes: they must not invalidate it
        h.update(_without_bands(p).encode() if p.name.endswith(".yaml") else p.read_bytes())
    return h.hexdigest()[:16]


def _without_bands(path: Path) -> str:
    """A profile's text as canonical JSON, every `held_out` mapping left out."""
    import yaml

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "held_out"}
        return [strip(v) for v in node] if isinstance(node, list) else node
    return json.dumps(strip(yaml.safe_load(path.read_text())), sort_keys=True, default=str)


def run_fold(name: str) -> dict:
    """Refit without the fold's regime; {"kind", "refit": [stages], "rows": [row dicts]}."""
    import accuracy
    import calibrate
    import splits
    from predict import Profiles

    kind, in_case, in_row = FOLDS[name]
    keep = lambda c: not in_case(c)  # noqa: E731
    touched, refit = set(), []
    for _, _, split in calibrate.STAGES:
        full_sets, full_layers = splits.fitting_sets(split)
        sub_sets, _ = splits.fitting_sets(split, keep)
        lost = sum(map(len, full_sets)) != sum(map(len, sub_sets)) or (full_layers and not keep(_layer_case(full_layers)))
        lost = lost or any(not keep(a) or not keep(b) for (a, _), (b, _), _ in splits.ratio_sets(split))
        if lost or touched:
            touched.add(split)
            refit.append(split)
    prof = Profiles()
    if refit:
        calibrate.run_stages(prof, keep=keep, refit=lambda s: s in touched, starts=LORO_STARTS,
                             maxiter_per_param=LORO_MAXITER)
        calibrate.apply_copies(prof)
    rows = [r for r in accuracy.collect(prof=prof) if r.regime and not r.excluded and in_row(r)]
    return {"kind": kind, "refit": refit, "rows": [{"dataset": r.dataset, "label": r.label, "regime": r.regime,
                                                    "seq": r.seq, "comm": r.comm,
                                                    "role": r.role, "measured_s": r.measured_s,
                                                    "predicted_s": r.predicted_s} for r in rows]}


def _layer_case(layers):
    from reference_data import Case

    return Case("korthikanti-table4", *layers[0])


def load(refresh: bool = False, folds=None) -> dict:
    """{fold: result}, from the cache when its digest is current, else refitted (and cached)."""
    want = digest()
    cached = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    results = cached.get("folds", {}) if cached.get("digest") == want else {}
    for name in folds or FOLDS:
        if refresh or name not in results:
            print(f"loro: fold {name}", file=sys.stderr)
            results[name] = run_fold(name)
    CACHE.write_text(json.dumps({"digest": want, "folds": results}, indent=1) + "\n")
    return results


def errors(result: dict) -> list[float]:
    """Signed relative errors of a fold's rows."""
    return [r["predicted_s"] / r["measured_s"] - 1 for r in result["rows"]]


def markdown(results: dict) -> str:
    """The table of docs/accuracy.md: one line per fold."""
    from accuracy import _pct, summary_errs

    lines = ["| held out | kind | stages refitted | rows | mean abs err | median | p90 | max | bias (median signed) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        s = summary_errs(errors(res))
        lines.append(f"| {name} | {res['kind']} | {', '.join(res['refit']) or 'none (no fitting row)'} | {s['n']} | "
                     f"{_pct(s['mean'])} | {_pct(s['median'])} | {_pct(s['p90'])} | {_pct(s['max'])} | "
                     f"{s['bias']:+.1%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fold", action="append", choices=sorted(FOLDS), help="run only this fold (repeatable)")
    parser.add_argument("--no-cache", action="store_true", help="refit even when the cache is current")
    args = parser.parse_args()
    print(markdown(load(args.no_cache, args.fold)))


if __name__ == "__main__":
    main()
