"""The `parplan sweep` table for people, drawn from the sweep document (`sweep --json`): one row per
point, the Pareto front and the pick marked, then the pick (or why there is none)."""

from __future__ import annotations

from typing import Optional

from rich import box
from rich.console import Console
from rich.table import Table

from planner.report.fit import prose_soft_wrap
from planner.report.render import pct
from planner.safetext import plain


def compact_layout(lay: Optional[dict]) -> str:
    """'tp4 pp4 dp4 z2 mbs1' plus cp/ep/vpp when > 1 and the recompute mode when not none."""
    if not lay:
        return ""
    parts = [f"{k}{lay[k]}" for k in ("tp", "pp", "dp", "cp", "ep", "vpp")
             if k in ("tp", "pp", "dp") or lay.get(k, 1) > 1]
    parts += [f"z{lay['zero']}", f"mbs{lay['mbs']}"]
    if lay.get("recompute", "none") != "none":
        parts.append("sel" if lay["recompute"] == "selective" else lay["recompute"])
    return " ".join(parts)


def money(usd: Optional[float]) -> str:
    """'$1.23M', '$456k', '$789'."""
    return "" if usd is None else "$" + big(usd, 3, "BMk")


def big(x: Optional[float], digits: int = 3, suffixes: str = "GMk") -> str:
    """A large count with `digits` significant digits: '1.23M', '45.6k' (suffixes for 1e9, 1e6, 1e3)."""
    if x is None:
        return ""
    for scale, suffix in zip((1e9, 1e6, 1e3), suffixes):
        if x >= scale:
            return f"{x / scale:.{digits}g}{suffix}"
    return f"{x:.0f}"


def days_text(days: float) -> str:
    """'2,436', '960', '32.2', '0.25'."""
    return f"{days:,.0f}" if days >= 100 else f"{days:.3g}"


def _mark(p: dict) -> str:
    return ("▶" if p["picked"] else "") + ("◆" if p["pareto"] else "") + ("†" if p["cut_short"] else "")


SWEEP_OPTIONAL = ("tokens/s", "goodput", "MFU", "GPUs", "GPU-h")  # left out first when the terminal is narrow


def _cells(p: dict, with_cost: bool, with_goodput: bool) -> dict[str, str]:
    head = {"": _mark(p), "cluster": plain(p["cluster"]), "nodes": str(p["nodes"]), "GPUs": f"{p['gpus']:,}",
            "batch": f"{p['global_batch']:,}"}
    if not p["fits"]:
        return {**head, "layout": "none found in time" if p["status"] == "feasible" else "nothing fits"}
    est = p["estimate"]
    star = "*" if p.get("validated") is False else ""  # as plan's table marks it
    band = "" if p["step_rel_error_p50"] is None else f" ±{pct(p['step_rel_error_p50'])}{star}"
    return {**head, "layout": compact_layout(est["layout"]), "step s": f"{p['step_s']:.3g}{band}",
            "MFU": f"{p['mfu']:.1%}", "tokens/s": big(p["tokens_per_s"], 3), "days": days_text(p["days"]),
            "GPU-h": big(p["gpu_hours"]), "cost": money(p["cost_usd"]),
            "goodput": f"{p['goodput']:.1%}" if p["goodput"] is not None else ""}


def batch_text(batches: list[int], where: str = " (column batch)") -> str:
    """'global batch 512 sequences', or the range when points differ (a GPU count with an odd factor), with
    `where` each point's batch is shown."""
    if len(batches) == 1:
        return f"global batch {batches[0]:,} sequences"
    return f"global batch {batches[0]:,}-{batches[-1]:,} sequences{where}" if batches else "no points"


def sweep_table(doc: dict, width: int | None = None) -> Table:
    """One row per point, in the order planned (clusters, then node counts); at `width` columns the least
    useful columns are left out (planner.report.fit), never cut or wrapped."""
    from planner.report.fit import fit_table

    return fit_table(lambda out: _sweep_table(doc, out), width or 10_000, SWEEP_OPTIONAL)


def _sweep_table(doc: dict, left_out: frozenset) -> Table:
    with_cost = doc["cost_basis"] == "cost_usd"
    with_goodput = any(p["goodput"] is not None for p in doc["points"])
    batches = sorted({p["global_batch"] for p in doc["points"]})
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True,
                  title=f"sweep: {plain(doc['model'])}, {doc['tokens']:.3g} tokens, {batch_text(batches)}")
    cols = ["", "cluster", "nodes", "GPUs", *(["batch"] if len(batches) > 1 else []), "layout", "step s", "MFU",
            "tokens/s", "days", "GPU-h"]
    cols += ["cost"] if with_cost else []
    cols += ["goodput"] if with_goodput else []
    cols = [c for c in cols if c not in left_out]
    for col in cols:
        table.add_column(col, justify="left" if col in ("", "cluster", "layout") else "right", no_wrap=True)
    for p in doc["points"]:
        cells = _cells(p, with_cost, with_goodput)
        table.add_row(*(cells.get(c, "") for c in cols))
    return table


def pick_lines(doc: dict) -> list[str]:
    """The pick and the constraints it meets, or why no point meets them."""
    wanted = []
    if doc["deadline_s"] is not None:
        wanted.append(f"ends within {doc['deadline_s'] / 86400:.3g} days")
    if doc["budget_usd"] is not None:
        wanted.append(f"costs at most {money(doc['budget_usd'])}")
    what = " and ".join(wanted) or "fits"
    basis = "cost" if doc["cost_basis"] == "cost_usd" else "GPU-hours"
    if doc["pick"] is None:
        return [f"no point {what}: {doc['no_pick_reason']}"]
    p = doc["points"][doc["pick"]]
    days = p["days"]
    cost = f", {money(p['cost_usd'])}" if p["cost_usd"] is not None else ""
    # "within 1%": planner.sweep.COST_TIE_REL
    return [f"pick (cheapest by {basis} that {what}, the fastest within 1% of it): {p['cluster']} x {p['nodes']} "
            f"nodes ({p['gpus']:,} GPUs), {p['layout']}: {days:.1f} days, {big(p['gpu_hours'])} GPU-hours{cost}"]


def print_sweep(doc: dict, console: Console) -> None:
    """The table, its legend, notes on points cut short or infeasible, and the pick."""
    console.print(sweep_table(doc, console.width))
    basis = "cost" if doc["cost_basis"] == "cost_usd" else "GPU-hours (no --price-per-gpu-hour)"
    star = " (* not validated)" if any(p.get("validated") is False for p in doc["points"]) else ""
    console.print(f"▶ pick, ◆ Pareto front (days vs {basis}), ± median held-out error of the step time{star}",
                  highlight=False)
    if any(p["cut_short"] for p in doc["points"]):
        console.print(f"† the per-point --time-limit ({doc['time_limit_s']:g} s) cut the search short: the best "
                      "layout found, not proven optimal", highlight=False)
    if any((p.get("run_model") or "").startswith("costmodels.whole_run") for p in doc["points"]):
        console.print("days, GPU-hours and cost include the expected failures, restarts and checkpoints "
                      "(goodput: the useful fraction)", highlight=False)
    for p in doc["points"]:
        if p["reason"] and (not p["fits"] or p["cut_short"]):
            console.print(plain(f"{p['cluster']} x {p['nodes']}: {p['reason']}"), highlight=False,
                          soft_wrap=prose_soft_wrap())
    if doc["interrupted"]:
        console.print(f"interrupted after {doc['completed']} of {doc['total']} points", highlight=False)
    for line in pick_lines(doc):
        console.print(plain(line), highlight=False, soft_wrap=prose_soft_wrap())
