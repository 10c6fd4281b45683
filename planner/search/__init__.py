"""The search: from a problem to the fastest layouts that fit, and why.

Holds the layout space (`space`), the integer stage tables (`costing`, `tables`; costs cached on the
fields each cost function reads, `memo`), CP-SAT (`cpsat`)
and its brute-force oracle (`brute`), the split of one fixed layout (`stage_split`), the search
driver (`engine`, re-exported here: `search`, `SearchResult`, `best_validated`, `validated_filter`),
the explanations (`explain`) and the framework restrictions (`frameworks`).

May import: costmodels, hardware_profiles, planner.errors, planner.safetext, planner.files.
Never planner.exporters, planner.report or the CLI.
"""

__all__ = ["SearchResult", "best_validated", "search", "validated_filter"]


def __getattr__(name: str):
    """The engine's names, imported when first asked for (PEP 562): `planner.search.frameworks` and the
    other light modules must not pull in OR-Tools and pandas (~0.5 s) for commands that never search."""
    if name in __all__:
        from planner.search import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'planner.search' has no attribute {name!r}")
