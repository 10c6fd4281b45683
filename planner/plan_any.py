"""`--framework any` planning, shared by `parplan plan` and `planner.api.plan`: every framework searched over
only the layouts it runs, each priced with its own stack (planner.search.frameworks.priced_frameworks), the
plans merged fastest first. Issue 35 part 6: a single search priced every layout as Megatron-Core, so its
winners included layouts only torchtitan runs (ZeRO-2 with pp > 1) at Megatron's price."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Optional

from planner.search import frameworks as fws


def any_mode(fw, opts, base_train) -> bool:
    """True when the search should be `--framework any`'s: no framework and no stack named anywhere."""
    given = opts.stack is not None or opts.stack_file is not None or bool(base_train and base_train.stack)
    return fw is None and not given


def search_any(prob, train, top: int, time_limit: float, validated_only: bool, deadline: Optional[float],
               serial: Optional[Callable] = None, waiting: Callable = contextlib.nullcontext):
    """(result, alternative, reasons, the winner's train, runs_on): each framework searched in turn with an
    equal share of the time limit (in worker processes where CPUs allow: planner.plan_pool). `serial(fw, tr,
    share)` runs one search here (default: planner.api.search_with_reasons, silent); `waiting()` is the context
    the workers are waited in (the CLI's spinner). runs_on: per plan, the framework that priced it first, then
    the others that run it."""
    from planner.api import search_with_reasons
    from planner.plan_pool import search_frameworks

    if serial is None:
        def serial(fw, tr, share):
            return search_with_reasons(prob, tr, top, share, validated_only, fw, deadline)
    pairs = fws.priced_frameworks(train, False)
    found = search_frameworks(prob, pairs, top, time_limit, validated_only, deadline, serial=serial, waiting=waiting)
    ranked = fws.merge_ranked([(fw, tr, res) for fw, tr, res, _, _ in found], top)
    if not ranked:  # nothing fits anywhere: the reasons of the default framework's search
        fw, tr, res, alt, why = next((f for f in found if f[1].stack_spec.name == train.stack_spec.name), found[0])
        return res, alt, why, tr, []
    winner_fw = ranked[0][1]
    fw, tr, res, alt, why = next(f for f in found if f[0] is winner_fw)
    merged = dataclasses.replace(res, plans=[p for p, _, _ in ranked],
                                 objectives_s=[p.time.step_s for p, _, _ in ranked])
    merged.stats.layouts_considered = sum(f[2].stats.layouts_considered for f in found)
    runs_on = [[f.name] + [n for n in fws.runners(p.layout, t) if n != f.name] for p, f, t in ranked]
    return merged, alt, why, tr, runs_on
