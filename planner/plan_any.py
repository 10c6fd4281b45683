"""`--framework any` planning, shared by `parplan plan` and `planner.api.plan`: every framework searched over
only the layouts it runs, each priced with its own stack (planner.search.frameworks.priced_frameworks), the
plans merged fastest first. Issue 35 part 6: a single search priced every layout as Megatron-Core, so its
winners included layouts only torchtitan runs (ZeRO-2 with pp > 1) at Megatron's price.

The merged answer speaks for every search, not the winner's alone: its status is "optimal" only when each
search finished (a search the time limit cut may hold a faster layout), its statistics and cuts are theirs
together, and the validated alternative is the fastest validated layout any of them found."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Optional

from planner.search import frameworks as fws

PROVEN = ("optimal", "infeasible")  # a search's statuses that prove its part: it looked at all it runs
COUNTS = ("layouts_considered", "filtered_out", "memory_pruned", "bound_pruned", "tabled", "solver_candidates",
          "solver_models")  # SearchStats fields that add up over the searches


def any_mode(fw, opts, base_train) -> bool:
    """True when the search should be `--framework any`'s: no framework and no stack named anywhere."""
    given = opts.stack is not None or opts.stack_file is not None or bool(base_train and base_train.stack)
    return fw is None and not given


def search_any(prob, train, top: int, time_limit: float, validated_only: bool, deadline: Optional[float],
               serial: Optional[Callable] = None, waiting: Callable = contextlib.nullcontext):
    """(result, alternative, reasons, the winner's train, runs_on): each framework searched within the time limit,
    the small searches first and the large ones with what they leave (in worker processes where CPUs allow:
    planner.plan_pool), then merged
    (merge_found). `serial(fw, tr, share)` runs one search here (default: planner.api.search_with_reasons,
    silent); `waiting()` is the context the workers are waited in (the CLI's spinner)."""
    from planner.api import search_with_reasons
    from planner.plan_pool import search_frameworks

    if serial is None:
        def serial(fw, tr, share):
            return search_with_reasons(prob, tr, top, share, validated_only, fw, deadline)
    pairs = fws.priced_frameworks(train, False)
    fws.require_precision([fw for fw, _ in pairs], train)
    found = search_frameworks(prob, pairs, top, time_limit, validated_only, deadline, serial=serial, waiting=waiting)
    return merge_found(found, train, top, moe=prob.model.is_moe)


def merge_found(found: list, train, top: int, *, moe: bool):
    """(result, alternative, reasons, the winner's train, runs_on) from each framework's (fw, train, result,
    alternative, reasons): the `top` plans of all fastest first, with the status and statistics of all the
    searches (merged_result), the fastest validated layout any found (best_validated_of), and the reasons
    of the merged result. runs_on: per plan, the framework that priced it first, then the others that run
    it (`moe`: the model has routed experts). When nothing fits anywhere: the default framework's (`train`'s stack's) reasons, after a line that
    says so and names the other searches the time limit cut (_nothing_found)."""
    from planner.search.explain import time_limit_note, why_winner

    ranked = fws.merge_ranked([(fw, tr, res) for fw, tr, res, _, _ in found], top)
    if not ranked:
        fw, tr, res, _, why = next((f for f in found if f[1].stack_spec.name == train.stack_spec.name), found[0])
        merged = merged_result(res, found, [])
        return merged, None, _nothing_found(found, fw, res) + why, tr, []
    winner_fw = ranked[0][1]
    fw, tr, res, _, _ = next(f for f in found if f[0] is winner_fw)
    merged = merged_result(res, found, [p for p, _, _ in ranked])
    runs_on = [[f.name] + [n for n in fws.runners(p.layout, t, moe=moe) if n != f.name]
               for p, f, t in ranked]
    return merged, best_validated_of(found, merged.plans[0]), time_limit_note(merged) + why_winner(merged), tr, runs_on


def merged_result(res, found: list, plans: list):
    """`res` (the winner's search, or the default one's when nothing fits) holding `plans`, with the status,
    statistics and gap of every search in `found` (merged_status, merged_stats)."""
    stats = merged_stats([(fw.name, f_res.stats) for fw, _, f_res, _, _ in found])
    return dataclasses.replace(res, plans=plans, objectives_s=[p.time.step_s for p in plans], stats=stats,
                               status=merged_status(bool(plans), [f[2].status for f in found]),
                               gap=None if stats.truncated else res.gap)


def merged_status(found_any: bool, statuses: list[str]) -> str:
    """The status of several searches of disjoint layout spaces: "optimal" when a plan was found and every
    search proved its part (optimal, or infeasible: it looked at all it runs); "infeasible" when none found
    a plan and every one proved so; else "feasible". A search the time limit cut may hold a faster layout
    than the winner (or the only one that fits), so its "feasible" makes the whole "feasible": with no plans
    that means "none found in time, not a proof that nothing fits", the engine's own convention
    (planner.search.engine.SearchResult), not the "infeasible" that would claim that proof."""
    proven = all(s in PROVEN for s in statuses)
    if found_any:
        return "optimal" if proven else "feasible"
    return "infeasible" if proven else "feasible"


def merged_stats(all_stats: list):
    """One SearchStats for the (framework name, SearchStats) of several searches: the counts added up, the
    smallest memory bound and the fastest near miss over all, truncated when any was, and each search's cuts
    named by its framework ("torchtitan costing"), so that the time-limit note says which searches the limit
    cut. planner.sweep's points can merge theirs with it and merged_status."""
    from planner.search.engine import SearchStats

    stats = SearchStats(**{k: sum(getattr(s, k) for _, s in all_stats) for k in COUNTS})
    stats.smallest_memory_bound = min((s.smallest_memory_bound for _, s in all_stats if s.smallest_memory_bound),
                                      key=lambda b: b[0], default=None)
    stats.fastest_pruned = min((s.fastest_pruned for _, s in all_stats if s.fastest_pruned),
                               key=lambda f: f[0], default=None)
    stats.truncated = any(s.truncated for _, s in all_stats)
    stats.cut = [f"{name} {what}" for name, s in all_stats for what in s.cut]
    return stats


def best_validated_of(found: list, winner):
    """The fastest layout in a validated regime that any framework's search found (its winner when that is
    validated, else its own validated alternative); None when the merged `winner` is validated itself (there
    is no alternative to name) or no search found one."""
    if winner.uncertainty is None or winner.uncertainty.validated:
        return None
    options = [_validated_winner(res) or alt for _, _, res, alt, _ in found]
    return min((e for e in options if e is not None), key=lambda e: e.time.step_s, default=None)


def _validated_winner(res):
    """The search's winner when its regime is validated, else None."""
    win = res.plans[0] if res.plans else None
    return win if win is not None and win.uncertainty is not None and win.uncertainty.validated else None


def _nothing_found(found: list, shown, shown_res) -> list[str]:
    """When nothing fits anywhere, the line before `shown`'s search's reasons: the other searches the time
    limit cut (then nothing is proven), else that none found a layout; and that the lines below speak for
    `shown`'s layouts alone (the search line counts all the searches')."""
    cuts = [f"{fw.name} {what}" for fw, _, res, _, _ in found if res.status not in PROVEN
            for what in (res.stats.cut or ["search"])]
    below = f"the lines below are the {shown.name} search's, over its {shown_res.stats.layouts_considered:,} layouts"
    if cuts:  # the shown search's own cut counts too: "no framework found one" read as a proof (a new-user pass)
        return [f"time limit reached ({', '.join(cuts)} cut short) before any layout that fits was found: this is "
                f"not a proof that nothing fits (raise --time-limit); {below}"]
    total = sum(res.stats.layouts_considered for _, _, res, _, _ in found)
    return [f"no framework's search found a layout that fits ({total:,} layouts in all); {below}"]
