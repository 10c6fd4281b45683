"""Memory accuracy: predicted vs published per-GPU peaks, per measurement kind, fit rows apart.

Usage: python benchmarks/memory_accuracy.py [--write]
Prints, for every case of benchmarks/data/measured/memory_runs.json, the measured and predicted
bytes of its kind (allocated, reserved, device) and whether parplan says it fits; then the
acceptance metrics on held-out rows (benchmarks/memory_splits.py says which rows fitted what).
`--write` also writes the tables into docs/accuracy.md (between memory markers) and each stack's
held-out error per kind into hardware_profiles/stacks/*.yaml (`memory.held_out`), which `check`
prints as its band.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from doc_sections import replace_section  # noqa: E402
from memory_data import MemoryCase, load_memory_cases  # noqa: E402
from memory_splits import is_fitted  # noqa: E402

from benchmarks.stack_yaml import STACKS, read_profile, write_profile  # noqa: E402
from benchmarks.uncertainty_table import band_quantile  # noqa: E402
from costmodels.estimate import estimate  # noqa: E402

GIB = 2**30
KIND_FIELD = {"allocated": "total_bytes", "reserved": "reserved_bytes", "device": "device_bytes"}
DOC = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"
BEGIN, END = "<!-- memory-accuracy:begin -->", "<!-- memory-accuracy:end -->"


def predict(case: MemoryCase) -> tuple[float, bool]:
    """(predicted bytes of the case's kind at its stage, or the maximum over stages; fits)."""
    est = estimate(case.model, case.cluster, case.train, case.layout)
    stages = est.memory.stages if case.stage is None else [est.memory.stages[case.stage]]
    field = KIND_FIELD.get(case.kind, "device_bytes")
    return max(getattr(s, field) for s in stages), est.fits


def rows() -> list[dict]:
    """One dict per case: id, kind, stack, measured, predicted, error, fits, fitted."""
    out = []
    for c in load_memory_cases():
        pred, fits = predict(c)
        err = pred / c.measured_bytes - 1 if c.measured_bytes else None
        out.append(dict(id=c.case_id, kind=c.kind, stack=c.stack, measured=c.measured_bytes, predicted=pred,
                        error=err, fits=fits, fitted=is_fitted(c.case_id), approximate=c.approximate))
    return out


def summary(errors: list[float]) -> dict:
    """n, mean |error|, p90 |error|, max |error|, median signed error."""
    if not errors:
        return dict(n=0, mean=None, p90=None, max=None, bias=None)
    a = sorted(abs(e) for e in errors)
    s = sorted(errors)
    return dict(n=len(a), mean=sum(a) / len(a), p90=a[min(len(a) - 1, int(0.9 * len(a)))], max=a[-1],
                bias=s[len(s) // 2])


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def verdict_check(table: list[dict]) -> tuple[list[str], list[str]]:
    """(OOM rows predicted to fit, rows that ran predicted not to fit)."""
    wrong_oom = [r["id"] for r in table if r["kind"] == "oom" and r["fits"]]
    wrong_ran = [r["id"] for r in table if r["kind"] != "oom" and not r["fits"] and ":" not in r["id"]]
    return wrong_oom, wrong_ran


def render(table: list[dict]) -> str:
    """Markdown: per-row table, then per-kind metrics on held-out and fitted rows, then verdicts."""
    lines = ["| case | kind | stack | measured GiB | predicted GiB | error | fits | fitted |", "|---|---|---|---|---|---|---|---|"]
    for r in table:
        meas = "OOM" if r["measured"] is None else f"{r['measured'] / GIB:.1f}"
        lines.append(f"| {r['id']} | {r['kind']} | {r['stack']} | {meas} | {r['predicted'] / GIB:.1f} | "
                     f"{_pct(r['error']) if r['error'] is not None else '-'} | {'yes' if r['fits'] else 'no'} | "
                     f"{'yes' if r['fitted'] else 'no'} |")
    lines += ["", "| kind | subset | n | mean abs err | p90 | max | bias (median signed) |", "|---|---|---|---|---|---|---|"]
    for kind in KIND_FIELD:
        for subset, pick in (("held out", False), ("fitted", True)):
            s = summary([r["error"] for r in table if r["kind"] == kind and r["fitted"] == pick and r["error"] is not None])
            lines.append(f"| {kind} | {subset} | {s['n']} | {_pct(s['mean'])} | {_pct(s['p90'])} | {_pct(s['max'])} | "
                         f"{_pct(s['bias'])} |")
    wrong_oom, wrong_ran = verdict_check(table)
    ooms = sum(r["kind"] == "oom" for r in table)
    ran = sum(r["kind"] != "oom" and ":" not in r["id"] for r in table)
    lines += ["", f"Verdicts: {ooms - len(wrong_oom)} of {ooms} out-of-memory rows predicted not to fit; "
              f"{ran - len(wrong_ran)} of {ran} rows that ran predicted to fit"
              + (f" (wrong: {', '.join(wrong_oom + wrong_ran)})" if wrong_oom or wrong_ran else "") + "."]
    return "\n".join(lines)


def write_doc(text: str) -> None:
    """Replace the memory section of docs/accuracy.md (appended the first time)."""
    replace_section(DOC, BEGIN, END, text, "## Memory: predicted vs measured peaks (benchmarks/memory_accuracy.py)")


def write_held_out(table: list[dict]) -> None:
    """Each stack's held-out error per kind, and every stack's, into memory.held_out; p90 is the band's
    split-conformal quantile (benchmarks/uncertainty_table.py band_quantile)."""
    held = [r for r in table if not r["fitted"] and r["error"] is not None]
    every = {k: [r["error"] for r in held if r["kind"] == k] for k in KIND_FIELD}
    for path in sorted(STACKS.glob("*.yaml")):
        head, data = read_profile(path)
        mine = {k: [r["error"] for r in held if r["kind"] == k and r["stack"] == data["name"]] for k in KIND_FIELD}
        out = {k: _entry(e) for k, e in mine.items() if e}
        out.update({f"all-stacks:{k}": _entry(e) for k, e in every.items() if e})
        data.setdefault("memory", {})["held_out"] = out
        write_profile(path, head, data)


def _entry(errors: list[float]) -> dict:
    s = summary(errors)
    return {"rows": s["n"], "mean": round(s["mean"], 4), "p90": round(band_quantile(errors), 4),
            "bias": round(s["bias"], 4)}


def main() -> None:
    table = rows()
    text = render(table)
    print(text)
    if "--write" in sys.argv:
        write_doc(text)
        write_held_out(table)
        print(f"\nwrote {DOC} and the stacks' memory.held_out")


if __name__ == "__main__":
    main()
