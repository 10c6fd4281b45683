"""Predicted vs published step time, per data set x stack x sharding x scale, fitted and held out apart.

    python benchmarks/accuracy.py            # print the tables
    python benchmarks/accuracy.py --write    # also write docs/accuracy.md and the uncertainty table

Data sets: narayanan2021 (validation only), vtrain-single / vtrain-multi (partly fitted),
korthikanti-table4 (per layer, fitted), and the public measured runs by source (torchtitan-bench,
megatron-readme, automodel-moe, deepseek-v3-report). Which rows were fitted: benchmarks/splits.py.
`--write` also writes the held-out error of every regime (stack x sharding x scale) into the stack
profiles (benchmarks/uncertainty_table.py), which `Estimate.uncertainty` reports.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import splits  # noqa: E402
from predict import layer_s, predict_time, prepared  # noqa: E402
from reference_data import korthikanti_layer, narayanan, vtrain  # noqa: E402

import hardware_profiles as hp  # noqa: E402
from costmodels.uncertainty import comm_share, regime_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "accuracy.md"
FINAL_DOC = ROOT / "docs" / "accuracy-test.md"  # written only by --final --write
FINAL_HEADER = ("# Frozen test split: the time model on rows nobody tuned on\n\nWritten by `python benchmarks/accuracy.py "
                "--final --write` (never by the refit). Do not choose a model change by these numbers: that makes "
                "this a validation set (benchmarks/frozen_split.py).\n\n")
EXCLUDED = {  # rows shown in every table but left out of the error bands, with the reason
    **{f"TT-04{i}": "power limit not stated (hardware unknown)" for i in range(4, 9)},
    "DSV3-001": "whole pre-training average (batch ramp 3,072 -> 15,360, downtime unstated) on HAI-LLM: not one "
                "run's step time (its DualPipe all-to-all overlap is priced, TrainSpec.ep_comm_overlap)",
}


@dataclass(frozen=True)
class Row:
    """One compared run."""

    dataset: str
    label: str
    measured_s: float
    predicted_s: float
    fitted: bool
    regime: str = ""
    excluded: str = ""  # why a row is left out of the error bands (shown, never hidden)
    gpus: int = 0
    role: str = "validation"  # "fit", "validation" (benchmarks/splits.py) or "test" (--final only)
    seq: int = 0  # sequence length, tokens (the regime's reach: costmodels.uncertainty extrapolation)
    comm: float = 0.0  # exposed communication's predicted share of the step (the regime's reach, as seq)
    model: str = ""
    moe: bool = False

    @property
    def err(self) -> float:
        """Signed relative error of the prediction."""
        return self.predicted_s / self.measured_s - 1


def _regime(case, lay) -> str:
    return regime_key(case.train.stack_spec.regime_name, lay, case.cluster.num_gpus, case.cluster.gpu_profile.name,
                      case.model.is_moe)


def collect(final: bool = False, prof=None) -> list[Row]:
    """Every fitting and validation row (benchmarks/splits.py) with the shipped profiles (or `prof`, a
    predict.Profiles); with `final`, the frozen test rows as well (role "test": benchmarks/frozen_split.py,
    opened only here and only then)."""
    frozen = _frozen_test() if final else (lambda dataset, label, block=None: False)
    a100 = hp.load_gpu("a100-80gb")
    rows: list[Row] = []

    def add(c, lay, role, **kw):
        if role is not None:
            t = predict_time(c, lay, prof)
            rows.append(Row(getattr(c, "source", "") or c.dataset, c.label, c.measured_s,
                            t.step_s, role == "fit", _regime(c, lay), gpus=c.cluster.num_gpus,
                            role=role, model=c.model.name, moe=bool(c.model.num_experts),
                            seq=c.train.seq_len(c.model), comm=round(comm_share(t), 4), **kw))

    for c, lay in prepared(narayanan(a100)):
        add(c, lay, "test" if frozen(c.dataset, c.label) else None)
    for which in ("single", "multi"):
        blocks = splits.vtrain_blocks(which)
        for i, (c, lay) in enumerate(prepared(vtrain(a100, which))):
            add(c, lay, "test" if frozen(c.dataset, c.label, blocks[i]) else splits.vtrain_role(which, i))
    for c, lay in prepared(splits.measured()):
        add(c, lay, "test" if frozen(c.source, c.row_id) else splits.measured_role(c.row_id),
            excluded=EXCLUDED.get(c.row_id, ""))
    for r in korthikanti_layer(a100):
        rows.append(Row("korthikanti-table4", r[0], r[-1], layer_s(r, prof), True, role="fit"))
    return rows


def _frozen_test():
    """The frozen test split's membership test (the only place that opens it: `--final`)."""
    import frozen_split  # noqa: PLC0415  (tests/test_accuracy.py: no other module may import it)

    return frozen_split.is_frozen


def summary(rows: list[Row]) -> dict:
    """n, mean, median, p90 and max |error|, signed median (bias), fastest under-prediction."""
    return summary_errs([r.err for r in rows])


def summary_errs(signed: list[float]) -> dict:
    """summary() of signed relative errors."""
    errs = sorted(abs(e) for e in signed)
    if not errs:
        return {"n": 0, "mean": float("nan"), "median": float("nan"), "p90": float("nan"), "max": float("nan"),
                "bias": float("nan"), "min_signed": float("nan")}
    return {"n": len(errs), "mean": statistics.mean(errs), "median": statistics.median(errs),
            "p90": errs[min(len(errs) - 1, int(0.9 * len(errs)))], "max": errs[-1],
            "bias": statistics.median(signed), "min_signed": min(signed)}


def by_dataset(rows: list[Row]) -> dict[str, dict[str, dict]]:
    """{dataset: {"all": summary, "held out": summary, "fitted": summary}}."""
    out: dict[str, dict[str, dict]] = {}
    for name in dict.fromkeys(r.dataset for r in rows):
        mine = [r for r in rows if r.dataset == name]
        out[name] = {"all": summary([r for r in mine if r.role != "test"]),
                     "held out": summary([r for r in mine if r.role == "validation"]),
                     "fitted": summary([r for r in mine if r.fitted]), "test": summary([r for r in mine if r.role == "test"])}
    return out


def by_regime(rows: list[Row]) -> dict[str, dict[str, dict]]:
    """{regime: {"held out": summary, "fitted": summary}} over rows with a regime."""
    out: dict[str, dict[str, dict]] = {}
    for key in sorted({r.regime for r in rows if r.regime}):
        mine = [r for r in rows if r.regime == key and not r.excluded]
        out[key] = {"held out": summary([r for r in mine if r.role == "validation"]),
                    "fitted": summary([r for r in mine if r.fitted]), "test": summary([r for r in mine if r.role == "test"])}
    return out


def done_when(rows: list[Row]) -> dict[str, dict]:
    """The acceptance metrics of the time-model issue, each a summary over the rows it names."""
    held = [r for r in rows if r.role == "validation" and not r.excluded]
    rows = [r for r in rows if r.role != "test"]
    sharded = [r for r in held if r.regime and r.regime.split("/")[1] in ("zero3", "hsdp")]
    return {
        "ZeRO-3 / FSDP / HSDP, held out": summary(sharded),
        "Megatron-Core H100, held out": summary([r for r in held if r.dataset == "megatron-readme"]),
        "A100 Megatron >= 256 GPUs, all": summary([r for r in rows if r.dataset in ("narayanan2021", "vtrain-multi")
                                                   and r.gpus >= 256]),
        "A100 Megatron >= 256 GPUs, held out": summary([r for r in held if r.dataset in ("narayanan2021", "vtrain-multi")
                                                        and r.gpus >= 256]),
        "vtrain-multi, all": summary([r for r in rows if r.dataset == "vtrain-multi"]),
        "vtrain-multi, held out": summary([r for r in held if r.dataset == "vtrain-multi"]),
    }


def _pct(x: float) -> str:
    return "-" if x != x else f"{x:.1%}"


def _line(name: str, subset: str, s: dict) -> str:
    return (f"| {name} | {subset} | {s['n']} | {_pct(s['mean'])} | {_pct(s['median'])} | {_pct(s['p90'])} | "
            f"{_pct(s['max'])} | {s['bias']:+.1%} |")


HEAD = ["| {} | subset | n | mean abs err | median | p90 | max | bias (median signed) |", "|---|---|---|---|---|---|---|---|"]


def markdown(rows: list[Row], pairs=None, floors: str | None = None) -> str:
    """The tables of docs/accuracy.md."""
    lines = ["## Acceptance metrics", "", HEAD[0].format("rows") + " most negative |", HEAD[1] + "---|"]
    for name, s in done_when(rows).items():
        lines.append(_line(name, "", s) + f" {s['min_signed']:+.1%} |")
    if pairs is not None:
        lines += ["", ordering_text(pairs)]
    if floors is not None:
        lines += ["", floors]
    lines += ["", "## Per data set", "", HEAD[0].format("data set"), HEAD[1]]
    for name, parts in by_dataset(rows).items():
        lines += [_line(name, subset, s) for subset, s in parts.items() if s["n"]]
    lines += ["", "## Per regime (stack / sharding / scale), excluded rows left out", "", HEAD[0].format("regime"), HEAD[1]]
    for key, parts in by_regime(rows).items():
        lines += [_line(key, subset, s) for subset, s in parts.items() if s["n"]]
    lines += ["", "## Every measured row (signed error = predicted / measured - 1)", "",
              "| data set | row | regime | measured s | predicted s | error | fitted | note |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.dataset.startswith(("vtrain", "narayanan", "korthikanti")):
            continue
        lines.append(f"| {r.dataset} | {r.label} | {r.regime} | {r.measured_s:.4g} | {r.predicted_s:.4g} | {r.err:+.1%} | "
                     f"{'yes' if r.fitted else 'no'} | {r.excluded} |")
    lines += ["", "## Worst rows of the A100 sets", "", "| data set | row | measured s | predicted s | error | fitted |",
              "|---|---|---|---|---|---|"]
    for name in ("narayanan2021", "vtrain-single", "vtrain-multi", "korthikanti-table4"):
        for r in sorted((r for r in rows if r.dataset == name), key=lambda r: -abs(r.err))[:3]:
            lines.append(f"| {name} | {r.label} | {r.measured_s:.4g} | {r.predicted_s:.4g} | {r.err:+.1%} | "
                         f"{'yes' if r.fitted else 'no'} |")
    return "\n".join(lines)


MEMORY_HEAD = "## Memory: predicted vs measured peaks"


def kept_sections() -> str:
    """The memory sections other scripts write into docs/accuracy.md (benchmarks/memory_accuracy.py,
    benchmarks/fit_verdicts.py), from the memory heading on, kept as they are."""
    old = DOC.read_text() if DOC.exists() else ""
    return "\n" + old[old.index(MEMORY_HEAD):] if MEMORY_HEAD in old else ""


HEADER = """# Accuracy of the time model

Generated by `python benchmarks/accuracy.py --write` (run by `python -m benchmarks.refit`) with the
shipped GPU and stack profiles. Step time predicted by `costmodels` against published measurements
(benchmarks/data). Every row has one role (benchmarks/splits.py):
- **fitted**: in an objective of `benchmarks/calibrate.py`;
- **held out (validation)**: declared in splits.py, never in an objective, but these errors have been
  used to choose model changes, so they are validation errors, not test errors;
- **test**: the frozen split of benchmarks/frozen_split.py (Narayanan Table 1, the vTrain h2048 x 24
  and h6144 x 40 blocks, torchtitan's H200 file and 70B async-TP block, Megatron-Core's strong
  scaling, AutoModel DeepSeek-V3/Kimi-K2, three Megatron-Bridge production recipes). No fitting or
  model-selection code opens it (tests/test_accuracy.py); only `accuracy.py --final` reports it
  (docs/accuracy-test.md), and its numbers are never tuned on.
vTrain is split by whole model-size blocks (the old alternating rows measured interpolation).
A regime is stack / sharding (ddp, zero1-2, zero3, hsdp) / scale (<=64, <=512, >512 GPUs) /
GPU generation (ampere, hopper, blackwell, volta). The band an estimate prints (`Estimate.uncertainty`) is the
split-conformal quantile (benchmarks/uncertainty_table.py band_quantile) of the out-of-sample errors of its
regime: validation rows and the rows each leave-one-regime-out fold predicted after
refitting without them. Its nominal level, 0.91, is the smallest whose coverage reaches 90% when a whole
group of rows (a data set and model, or a fold) is left out at a time, since rows of one block err together
(benchmarks/band_loo.py: 89.7% at 0.90, 90.5% at 0.91). A GPU generation a stack has no rows on takes
the leave-one-GPU-generation-out band (basis says so). The vTrain-multi max target is retired: rows 17 and 19 (3.6B GPT on 64 A100,
micro-batch 64 against 16) conflict, and no subadditive time model gets both within 32.5%; the
conflicting pairs are listed beside the bands.

"""


def ordering_text(pairs) -> str:
    """One paragraph: how many same-hardware, same-batch pairs (>= 10% apart) the model orders right."""
    from ordering import inversions

    lines = []
    for name, found in pairs.items():
        bad = inversions(found)
        lines.append(f"- {name}: {len(found)} pairs of runs on the same hardware and batch whose measured step "
                     f"times differ by >= 10%; {len(found) - len(bad)} ordered right, {len(bad)} inverted"
                     + (": " + ", ".join(f"{a.label} vs {b.label}" for a, b in bad[:12]) if bad else "."))
    return "Ordering (benchmarks/ordering.py):\n\n" + "\n".join(lines)


def coverage(samples, tables: dict) -> tuple[int, int]:
    """(covered, total): how many (regime, signed error) samples the printed p90 band of their regime
    covers, the band looked up as an estimate looks it up (costmodels.uncertainty.band)."""
    from uncertainty_table import printed_band

    hit = 0
    for regime, err in samples:
        entry, _ = printed_band(tables, regime)
        hit += entry is not None and abs(err) <= entry.p90
    return hit, len(samples)


def _cov_line(name: str, hit_total: tuple[int, int]) -> str:
    hit, total = hit_total
    return f"- {name}: the printed p90 band covers {hit} of {total} ({hit / max(total, 1):.1%})."


def conflict_lines(rows: list[Row], found: dict) -> list[str]:
    """Every conflicting pair (benchmarks/consistency.py) among the rows behind the bands, with its regime:
    no subadditive time model fits both rows of a pair, so a band over them carries that floor."""
    regime = {(r.dataset, r.label): r.regime for r in rows}
    lines = ["| regime | data set | larger micro-batch | smaller micro-batch | measured s | pair floor |",
             "|---|---|---|---|---|---|"]
    for name, pairs in found.items():
        for c in sorted(pairs, key=lambda c: -c.floor):
            key = regime.get((name, c.big.label)) or next((v for (d, lab), v in regime.items() if lab == c.big.label), "")
            lines.append(f"| {key} | {name} | {c.big.label} (mbs {c.big.mbs}) | {c.small.label} (mbs {c.small.mbs}) | "
                         f"{c.big.measured_s:.4g} / {c.small.measured_s:.4g} | {c.floor:.1%} |")
    return lines


def bands_text(rows: list[Row], loro: dict, found: dict | None = None) -> tuple[str, dict]:
    """The leave-one-regime-out table and the coverage of the bands, and the bands themselves."""
    import loro as loro_mod
    from uncertainty_table import band_samples, held_out_by_stack

    tables, _ = held_out_by_stack(band_samples(rows, loro), loro, summary_errs)
    loro_samples = [(x["regime"], x["predicted_s"] / x["measured_s"] - 1) for res in loro.values() for x in res["rows"]]
    val = [(r.regime, r.err) for r in rows if r.role == "validation" and r.regime and not r.excluded]
    lines = ["## Leave-one-regime-out cross-validation (benchmarks/loro.py)", "",
             "Each fold removes a whole regime from every fitting objective, refits the stages it touches "
             "(one start from the priors) and predicts that regime's fitting and validation rows.", "",
             loro_mod.markdown(loro), "", "Coverage of the printed p90 bands (built from validation and "
             "leave-one-regime-out errors; these two sets are in-sample for the bands):", "",
             _cov_line("validation rows", coverage(val, tables)),
             _cov_line("leave-one-regime-out rows", coverage(loro_samples, tables))]
    if found is not None:
        lines += ["", "Conflicting pairs among the rows behind the bands (benchmarks/consistency.py: no time model "
                  "in which a larger micro-batch costs no more than the smaller ones it replaces fits both rows of "
                  "a pair within the pair floor; they stay in the bands):", "", *conflict_lines(rows, found)]
    return "\n".join(lines), tables


def final_text(rows: list[Row], tables: dict) -> str:
    """The frozen test split's errors and band coverage (`--final` only)."""
    test = [r for r in rows if r.role == "test"]
    lines = ["## Frozen test split (benchmarks/frozen_split.py; `accuracy.py --final`)", "",
             HEAD[0].format("data set"), HEAD[1]]
    for name in dict.fromkeys(r.dataset for r in test):
        lines.append(_line(name, "test", summary([r for r in test if r.dataset == name])))
    banded = [r for r in test if r.regime and not r.excluded]
    lines += [_line("every test row", "test", summary(banded)), "",
              _cov_line("test rows", coverage([(r.regime, r.err) for r in banded], tables)), "",
              "| data set | row | regime | measured s | predicted s | error |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.dataset} | {r.label} | {r.regime} | {r.measured_s:.4g} | {r.predicted_s:.4g} | {r.err:+.1%} |"
              for r in test if not r.dataset.startswith("vtrain")]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write docs/accuracy.md and the stacks' held-out errors")
    parser.add_argument("--final", action="store_true", help="also report the frozen test split (benchmarks/"
                        "frozen_split.py); never tune on what it prints")
    args = parser.parse_args()
    rows = collect(final=args.final)
    import consistency
    import loro
    from ordering import all_pairs

    loro_results = loro.load()
    sets = consistency.data_sets()
    bands, tables = bands_text(rows, loro_results, consistency.all_conflicts(sets))
    text = markdown([r for r in rows if r.role != "test"], all_pairs(), consistency.markdown(sets)) + "\n\n" + bands
    final = final_text(rows, tables) if args.final else ""
    print(text + ("\n\n" + final if final else ""))
    if final and args.write:
        FINAL_DOC.write_text(FINAL_HEADER + final + "\n")
    if args.write:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(HEADER + text + "\n" + kept_sections())
        from uncertainty_table import band_samples, comm_by_run, seq_by_run, write_held_out

        write_held_out(band_samples(rows, loro_results), loro_results, summary_errs, seq_by_run(rows, loro_results),
                       comm_by_run(rows, loro_results))


if __name__ == "__main__":
    main()
