"""Write each stack's error bands per regime into its profile (hardware_profiles/stacks/*.yaml).

Called by `benchmarks/accuracy.py --write`. The errors behind a band are out-of-sample only: the
validation rows of benchmarks/splits.py predicted with the shipped profiles, and every row that a
leave-one-regime-out fold held out (benchmarks/loro.py) predicted with that fold's refit. The frozen
test rows never enter. For every stack, entries keyed (costmodels.uncertainty.band reads them):
- 'generation/sharding/scale', 'generation/sharding/*', 'generation/*/*': the regime with its GPU
  generation (ampere, hopper, ...), so an A100 layout never borrows an H100 band;
- 'sharding/scale', 'sharding/*', '*/*': any generation, for callers that give no GPU;
- 'all-stacks': every stack's dense errors (the last fallback);
- 'loro:gpu-generation': the dense errors of the folds that left a whole GPU generation out, the band of a
  generation the stack has no rows on (its nearest held-out regime). Those folds band nothing else: the
  shipped profiles are fitted on rows of every generation a regime names;
- the same keys prefixed 'moe:' and 'all-stacks:moe' from the MoE samples alone (a regime ending in '/moe'):
  an MoE estimate is banded by MoE rows, a dense one by dense rows (costmodels.uncertainty).
Rows excluded from the bands (unknown hardware, accuracy.EXCLUDED) never count.

An entry's `p90` (the band an estimate prints) is the split-conformal quantile of its n |errors|: the
ceil(0.9 (n + 1))-th smallest, capped at the largest (`band_quantile`). A new run exchangeable with the n
falls inside it with probability at least 0.9 (Vovk, Gammerman & Shafer 2005; Lei et al. 2018, "Distribution-
free predictive inference for regression", JASA 113, Theorem 2.1). The plug-in order statistic the
accuracy tables print, the (floor(0.9 n) + 1)-th, covers (floor(0.9 n) + 1) / (n + 1) on average: 87.5% at
n = 7 or 15. Below n = 9 (11 at the step bands' level below: conformal_min_rows) the conformal rank exceeds
n: the cap makes the band the largest error seen, which guarantees only n / (n + 1), and in practice less (five
H100 regime rows of one source gave a 5.1% band; five of six published Nemotron-4 and Llama 3 runs beyond 512
H100s fell outside it, -8% to +39%: a report-only pass). Such a band is therefore never narrower than that of
the first broader pool with enough samples for the guarantee (`floor_small`: same generation and sharding at
any scale, the same generation, the stack, every stack), a borrowing the entry's own samples cannot overrule.

The guarantee needs exchangeable errors, and rows of one sweep block or one source are not: they err
together. A new family is covered less than a new row. Left out a whole group (data set and model, or a
leave-one-regime-out fold) at a time, the nominal 0.9 band covers 89.7% of the 2,412 samples (vTrain's h2048
blocks 80% and 84%). The step-time bands therefore take the nominal level STEP_LEVEL: the smallest of 0.90,
0.91, ... whose leave-one-group-out coverage of these samples reaches BAND_LEVEL (benchmarks/band_loo.py
calibrated_level; tests/test_band_quantile.py checks the constant against it). Kept in [0.90, 0.99]: 0.90 is
the target itself, and a level above 0.99 would mean the bands cannot hold new families at all.
"""

from __future__ import annotations

import functools
import math

from benchmarks.stack_yaml import STACKS, read_profile, write_profile
from costmodels.uncertainty import ALL_MOE, MOE_PREFIX, band, parse_regime

BAND_LEVEL = 0.9
STEP_LEVEL = 0.91  # nominal level of the step-time bands (module docstring), in [0.90, 0.99]


def band_quantile(signed: list[float], level: float = BAND_LEVEL) -> float:
    """The split-conformal `level` quantile of |signed| (module docstring), as a fraction."""
    errs = sorted(abs(e) for e in signed)
    return errs[min(len(errs), math.ceil(level * (len(errs) + 1))) - 1]


def conformal_min_rows(level: float) -> int:
    """The smallest n whose conformal rank ceil(level (n + 1)) is at most n: 9 at 0.90, 11 at 0.91."""
    return next(n for n in range(1, 10_000) if math.ceil(level * (n + 1)) <= n)


def printed_band(tables: dict, regime: str):
    """(the entry an estimate in `regime` prints from held_out_by_stack's `tables`, looked up as
    costmodels.uncertainty.band looks it up, or None; the samples of the regime's own entry)."""
    from costmodels.stack import RegimeError

    stack, sharding, scale, gen, moe = parse_regime(regime)
    held = {k: RegimeError(**v) for k, v in tables.get(stack, {}).items()}
    own = held.get(f"{MOE_PREFIX if moe else ''}{gen}/{sharding}/{scale}")
    return band(held, sharding, scale, gen, moe)[0], (own.samples or own.rows) if own else 0


def _entry(signed: list[float], runs: list, summarize, level: float = STEP_LEVEL, seq_of: dict | None = None,
           comm_of: dict | None = None) -> dict:
    """A held_out entry: `rows` counts distinct runs, `samples` the errors the quantiles are taken over, and how
    far the regime reaches: `seq_max` the longest sequence and `comm_max` the largest exposed-communication share
    of a step among the runs (when `seq_of` / `comm_of` know them)."""
    summary = summarize(signed)
    seqs = [seq_of[r] for r in runs if seq_of and seq_of.get(r)]
    comms = [comm_of[r] for r in runs if comm_of and r in comm_of]
    return {"rows": len(set(runs)), "samples": summary["n"], "mean": round(summary["mean"], 4),
            "p50": round(summary["median"], 4), "p90": round(band_quantile(signed, level), 4),
            "bias": round(summary["bias"], 4), **({"seq_max": max(seqs)} if seqs else {}),
            **({"comm_max": round(max(comms), 4)} if comms else {})}


def comm_by_run(rows, loro: dict) -> dict[str, float]:
    """The exposed-communication share of the step predicted for every run behind the bands ('data set:row' ->
    share; a run predicted again by a leave-one-regime-out refit keeps its largest)."""
    out: dict[str, float] = {}
    pairs = [(f"{r.dataset}:{r.label}", r.comm) for r in rows] + \
        [(_run(x), x["comm"]) for res in loro.values() for x in res["rows"] if "comm" in x]
    for run, share in pairs:
        out[run] = max(share, out.get(run, 0.0))
    return out


def seq_by_run(rows, loro: dict) -> dict[str, int]:
    """The sequence length of every run behind the bands ('data set:row' -> tokens)."""
    out = {f"{r.dataset}:{r.label}": r.seq for r in rows if getattr(r, "seq", 0)}
    out.update({_run(x): x["seq"] for res in loro.values() for x in res["rows"] if x.get("seq")})
    return out


def band_samples(rows, loro: dict) -> list[tuple[str, float, str]]:
    """(regime 'stack/sharding/scale/generation[/moe]', signed error, run 'data set:row') of every out-of-sample
    prediction."""
    return [(regime, err, run) for regime, err, _, run in grouped_samples(rows, loro)]


def grouped_samples(rows, loro: dict) -> list[tuple[str, float, str, str]]:
    """(regime, signed error, group, run) of every out-of-sample prediction; the group is 'data set:model' for a
    validation row and 'loro:fold' for a leave-one-regime-out row (the units whose errors move together)."""
    out = [(r.regime, r.err, f"{r.dataset}:{r.model}", f"{r.dataset}:{r.label}") for r in rows
           if r.regime and r.role == "validation" and not r.excluded]
    for name, res in loro.items():
        if not name.startswith("gpu:"):  # a generation left out entirely bands only unseen generations
            out += [(x["regime"], x["predicted_s"] / x["measured_s"] - 1, f"loro:{name}", _run(x))
                    for x in res["rows"]]
    return out


def _run(loro_row: dict) -> str:
    return f"{loro_row['dataset']}:{loro_row['label']}"


@functools.cache  # a pure function of the string; benchmarks/band_loo.py asks it again for every group left out
def _keys(regime: str) -> tuple[str, tuple[str, ...]]:
    """(stack, the held_out keys a sample of `regime` counts in): an MoE sample's are the 'moe:' keys only."""
    stack, sharding, scale, gen, moe = parse_regime(regime)
    keys = (f"{gen}/{sharding}/{scale}", f"{gen}/{sharding}/*", f"{gen}/*/*", f"{sharding}/{scale}", f"{sharding}/*",
            "*/*")
    return stack, tuple(MOE_PREFIX + k for k in keys) if moe else keys


@functools.cache  # as _keys
def _is_moe(regime: str) -> bool:
    return parse_regime(regime)[4]


def held_out_by_stack(samples, loro: dict, summary_errs, level: float = STEP_LEVEL,
                      seq_of: dict | None = None, comm_of: dict | None = None) -> tuple[dict[str, dict], dict | None]:
    """({stack: {key: entry}}, the all-stacks entries) from band_samples(): (regime, error, run) triples; a
    (regime, error) pair is a run of its own."""
    runs = [(s[0], s[1], s[2] if len(s) > 2 else i) for i, s in enumerate(samples)]
    parts: dict[str, dict[str, list]] = {}
    for regime, err, run in runs:
        stack, keys = _keys(regime)
        for key in keys:
            parts.setdefault(stack, {}).setdefault(key, []).append((err, run))
    pools = {"all-stacks": [(e, r) for g, e, r in runs if not _is_moe(g)],
             ALL_MOE: [(e, r) for g, e, r in runs if _is_moe(g)],
             "loro:gpu-generation": [(x["predicted_s"] / x["measured_s"] - 1, _run(x)) for name, res in loro.items()
                                     if name.startswith("gpu:") for x in res["rows"]
                                     if not _is_moe(x["regime"])]}

    def entry(pool: list) -> dict:
        return _entry([e for e, _ in pool], [r for _, r in pool], summary_errs, level, seq_of, comm_of)
    extra = {key: entry(pool) for key, pool in sorted(pools.items()) if pool}
    return {stack: floor_small({**{k: entry(v) for k, v in sorted(keyed.items())}, **extra}, level)
            for stack, keyed in parts.items()}, extra


def parents(key: str) -> list[str]:
    """The broader pools of a held_out key, nearest first (costmodels.uncertainty.band's fallbacks)."""
    moe, bare = key.startswith(MOE_PREFIX), key.removeprefix(MOE_PREFIX)
    parts = bare.split("/")
    if len(parts) == 3:
        chain = [f"{parts[0]}/{parts[1]}/*", f"{parts[0]}/*/*", "*/*"]
    elif len(parts) == 2:
        chain = [f"{parts[0]}/*", "*/*"]
    else:
        return []
    chain = [c for c in chain if c != bare]
    return [MOE_PREFIX + c for c in chain] + [ALL_MOE] if moe else chain + ["all-stacks"]


def floor_small(table: dict, level: float = STEP_LEVEL) -> dict:
    """`table` with the p90 of every entry of fewer samples than conformal_min_rows(level) raised to at least
    that of its nearest broader pool that has enough (module docstring); entries with enough stand as they are."""
    enough = conformal_min_rows(level)
    out = dict(table)
    for key, entry in table.items():
        if entry["samples"] >= enough:
            continue
        pool = next((table[p] for p in parents(key) if p in table and table[p]["samples"] >= enough), None)
        if pool is not None and pool["p90"] > entry["p90"]:
            out[key] = {**entry, "p90": pool["p90"]}
    return out


def write_held_out(samples, loro: dict, summary_errs, seq_of: dict | None = None, comm_of: dict | None = None) -> None:
    """Replace the `held_out` mapping of every stack profile."""
    tables, extra = held_out_by_stack(samples, loro, summary_errs, seq_of=seq_of, comm_of=comm_of)
    for path in sorted(STACKS.glob("*.yaml")):
        head, data = read_profile(path)
        provenance = data.setdefault("provenance", {})
        provenance["held_out"] = tables.get(data.get("family") or data["name"]) or extra
        write_profile(path, head, data)
