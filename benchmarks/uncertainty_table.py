"""Write each stack's held-out error per regime into its profile (hardware_profiles/stacks/*.yaml).

Called by `benchmarks/accuracy.py --write`. For every stack: one entry per 'sharding/scale' regime
with held-out rows, one per 'sharding/*' (any scale), '*/*' (the whole stack) and 'all-stacks'
(every held-out row of every stack, the last fallback). Rows excluded from the bands (unknown
hardware) and fitted rows never count. costmodels.uncertainty reads these entries.
"""

from __future__ import annotations

from pathlib import Path

import yaml

STACKS = Path(__file__).resolve().parents[1] / "hardware_profiles" / "stacks"


def _entry(summary: dict) -> dict:
    return {"rows": summary["n"], "mean": round(summary["mean"], 4), "p50": round(summary["median"], 4),
            "p90": round(summary["p90"], 4), "bias": round(summary["bias"], 4)}


def held_out_by_stack(rows, summary) -> dict[str, dict]:
    """{stack: {regime within the stack: entry}} from the accuracy rows."""
    held = [r for r in rows if r.regime and not r.fitted and not r.excluded]
    out: dict[str, dict] = {}
    for r in held:
        stack, sharding, scale = r.regime.split("/")
        for key in (f"{sharding}/{scale}", f"{sharding}/*", "*/*"):
            out.setdefault(stack, {}).setdefault(key, []).append(r)
    every = _entry(summary(held)) if held else None
    return {stack: {**{k: _entry(summary(v)) for k, v in sorted(parts.items())},
                    **({"all-stacks": every} if every else {})} for stack, parts in out.items()}, every


def write_held_out(rows, summary) -> None:
    """Replace the `held_out` mapping of every stack profile."""
    tables, every = held_out_by_stack(rows, summary)
    for path in sorted(STACKS.glob("*.yaml")):
        text = path.read_text()
        head = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        data = yaml.safe_load(text)
        table = tables.get(data.get("family") or data["name"]) or ({"all-stacks": every} if every else {})
        data["held_out"] = table
        path.write_text(head + "\n" + yaml.safe_dump(data, sort_keys=False, width=110))
