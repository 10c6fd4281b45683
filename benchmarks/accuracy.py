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
from predict import layer_s, predict_s, prepared  # noqa: E402
from reference_data import korthikanti_layer, narayanan, vtrain  # noqa: E402

import hardware_profiles as hp  # noqa: E402
from costmodels.uncertainty import regime_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "accuracy.md"
EXCLUDED = {  # rows shown in every table but left out of the error bands, with the reason
    **{f"TT-04{i}": "power limit not stated (hardware unknown)" for i in range(4, 9)},
    "DSV3-001": "whole pre-training average (batch ramp) on HAI-LLM with DualPipe and MLA: not a step time "
                "of an expressible run",
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

    @property
    def err(self) -> float:
        """Signed relative error of the prediction."""
        return self.predicted_s / self.measured_s - 1


def _regime(case, lay) -> str:
    return regime_key(case.train.stack_spec.regime_name, lay, case.cluster.num_gpus)


def collect() -> list[Row]:
    """Every comparison, with the shipped profiles."""
    a100 = hp.load_gpu("a100-80gb")
    rows: list[Row] = []
    for c, lay in prepared(narayanan(a100)):
        rows.append(Row(c.dataset, c.label, c.measured_s, predict_s(c, lay), False, _regime(c, lay),
                        gpus=c.cluster.num_gpus))
    for which in ("single", "multi"):
        for i, (c, lay) in enumerate(prepared(vtrain(a100, which))):
            rows.append(Row(c.dataset, c.label, c.measured_s, predict_s(c, lay), splits.vtrain_fitted(which, i),
                            _regime(c, lay), gpus=c.cluster.num_gpus))
    for c, lay in prepared(splits.measured()):
        rows.append(Row(c.source, c.row_id, c.measured_s, predict_s(c, lay), splits.measured_fitted(c.row_id),
                        _regime(c, lay), EXCLUDED.get(c.row_id, ""), c.gpus))
    for r in korthikanti_layer(a100):
        rows.append(Row("korthikanti-table4", r[0], r[-1], layer_s(r), True))
    return rows


def summary(rows: list[Row]) -> dict:
    """n, mean, median, p90 and max |error|, signed median (bias), fastest under-prediction."""
    errs = sorted(abs(r.err) for r in rows)
    if not errs:
        return {"n": 0, "mean": float("nan"), "median": float("nan"), "p90": float("nan"), "max": float("nan"),
                "bias": float("nan"), "min_signed": float("nan")}
    signed = [r.err for r in rows]
    return {"n": len(errs), "mean": statistics.mean(errs), "median": statistics.median(errs),
            "p90": errs[min(len(errs) - 1, int(0.9 * len(errs)))], "max": errs[-1],
            "bias": statistics.median(signed), "min_signed": min(signed)}


def by_dataset(rows: list[Row]) -> dict[str, dict[str, dict]]:
    """{dataset: {"all": summary, "held out": summary, "fitted": summary}}."""
    out: dict[str, dict[str, dict]] = {}
    for name in dict.fromkeys(r.dataset for r in rows):
        mine = [r for r in rows if r.dataset == name]
        out[name] = {"all": summary(mine), "held out": summary([r for r in mine if not r.fitted]),
                     "fitted": summary([r for r in mine if r.fitted])}
    return out


def by_regime(rows: list[Row]) -> dict[str, dict[str, dict]]:
    """{regime: {"held out": summary, "fitted": summary}} over rows with a regime."""
    out: dict[str, dict[str, dict]] = {}
    for key in sorted({r.regime for r in rows if r.regime}):
        mine = [r for r in rows if r.regime == key and not r.excluded]
        out[key] = {"held out": summary([r for r in mine if not r.fitted]),
                    "fitted": summary([r for r in mine if r.fitted])}
    return out


def done_when(rows: list[Row]) -> dict[str, dict]:
    """The acceptance metrics of the time-model issue, each a summary over the rows it names."""
    held = [r for r in rows if not r.fitted and not r.excluded]
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

Generated by `python benchmarks/accuracy.py --write` with the shipped GPU and stack profiles.
Step time predicted by `costmodels` against published measurements (benchmarks/data). "fitted"
rows were used by `benchmarks/calibrate.py`; "held out" rows never entered an objective (the split
is declared in `benchmarks/splits.py`). Narayanan et al. Table 1 is validation only. Run conditions
and assumptions per data set: `benchmarks/reference_data.py` and `benchmarks/measured_data.py`.
A regime is stack / sharding (ddp, zero1-2, zero3, hsdp) / scale (<=64, <=512, >512 GPUs); the
held-out error of a regime is what `Estimate.uncertainty` reports for a layout that falls in it.

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write docs/accuracy.md and the stacks' held-out errors")
    args = parser.parse_args()
    rows = collect()
    import consistency
    from ordering import all_pairs

    text = markdown(rows, all_pairs(), consistency.markdown(consistency.data_sets()))
    print(text)
    if args.write:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(HEADER + text + "\n" + kept_sections())
        from uncertainty_table import write_held_out

        write_held_out(rows, summary)


if __name__ == "__main__":
    main()
