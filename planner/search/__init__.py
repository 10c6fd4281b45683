"""The search: from a problem to the fastest layouts that fit, and why.

Holds the layout space (`space`), the integer stage tables (`costing`, `tables`), CP-SAT (`cpsat`)
and its brute-force oracle (`brute`), the split of one fixed layout (`stage_split`), the search
driver (`engine`, re-exported here: `search`, `SearchResult`, `best_validated`, `validated_filter`),
the explanations (`explain`) and the framework restrictions (`frameworks`).

May import: costmodels, hardware_profiles, planner.errors, planner.safetext, planner.files.
Never planner.exporters, planner.report or the CLI.
"""

from planner.search.engine import SearchResult, best_validated, search, validated_filter

__all__ = ["SearchResult", "best_validated", "search", "validated_filter"]
