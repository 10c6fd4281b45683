"""The whole run for people (costmodels.whole_run): days, GPU-hours, energy, cost, checkpoints, failures.
Units converted here only."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.table import Table

from costmodels.whole_run import WholeRun


def duration_text(seconds: float) -> str:
    """'42 s', '4.2 min', '3.09 h'."""
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"


def size_text(nbytes: float) -> str:
    """Decimal bytes as GB or TB (checkpoint sizes, as storage quotes them)."""
    return f"{nbytes / 1e12:.2f} TB" if nbytes >= 1e12 else f"{nbytes / 1e9:.1f} GB"


def money(usd: Optional[float]) -> str:
    """'$48.0 M', '$12,345', or 'no price' (no --price-per-gpu-hour)."""
    if usd is None:
        return "no price (--price-per-gpu-hour)"
    return f"${usd / 1e6:,.1f} M" if usd >= 1e6 else f"${usd:,.0f}"


def energy_text(kwh: Optional[float]) -> str:
    """'16.8 GWh (board power, upper bound)' or 'unknown' without the GPU's tdp_w."""
    if kwh is None:
        return "unknown (the GPU profile gives no tdp_w)"
    value = f"{kwh / 1e6:,.2f} GWh" if kwh >= 1e6 else f"{kwh / 1e3:,.1f} MWh" if kwh >= 1e3 else f"{kwh:,.0f} kWh"
    return value + " (GPUs at full board power: an upper bound, no cooling)"


def whole_run_rows(w: WholeRun) -> list[tuple[str, str]]:
    """(what, value) lines of the whole run, failure-free first."""
    return [
        ("tokens", f"{w.tokens:.3g} in {w.steps:,} steps of {w.step_s:.3g} s"),
        ("failure-free", f"{w.days:,.1f} days, {w.gpu_hours:,.0f} GPU-hours, {money(w.cost_usd)}"),
        ("energy", energy_text(w.energy_kwh)),
        ("checkpoint", f"{size_text(w.checkpoint_bytes)} (weights + optimizer states), written in "
                       f"{duration_text(w.checkpoint_write_s)}"),
        ("failures", f"MTBF {duration_text(w.mtbf_s)} ({w.gpu_failure_rate_per_hour:.3g} per GPU-hour), restart "
                     f"{duration_text(w.restart_s)}, about {w.expected_failures:,.0f} interruptions"),
        ("checkpoint every", f"{duration_text(w.checkpoint_interval_s)} = {w.checkpoint_interval_steps:,} steps "
                             f"(Daly 2006; Young 1974: {duration_text(w.young_interval_s)})"),
        ("goodput", f"{w.goodput:.1%} of the wall time is useful training"),
        ("with failures", f"{w.days_with_failures:,.1f} days, {w.gpu_hours_with_failures:,.0f} GPU-hours, "
                          f"{money(w.cost_with_failures_usd)}"),
    ]


def whole_run_table(w: WholeRun) -> Table:
    """The whole-run block as a two-column table."""
    table = Table(title="Whole run", show_header=False)
    table.add_column("what")
    table.add_column("value", overflow="fold")
    for name, value in whole_run_rows(w):
        table.add_row(name, value)
    return table


def print_whole_run(w: Optional[WholeRun], console: Console) -> None:
    """The whole-run table; nothing without a whole run (no --tokens)."""
    if w is not None:
        console.print(whole_run_table(w))
