"""A framework's keep declares the whole choices it refuses (planner.search.frameworks.refuses: costmodels.framework
runs' degree and ZeRO rules), and the search counts the layouts with those choices instead of building them
(planner.search.space.enumerate_counted). It must never refuse a layout runs accepts, and the search must rank
and count exactly what it ranked and counted when it built and rejected each one."""

from __future__ import annotations

import dataclasses

import hardware_profiles as hp
import pytest

from costmodels.framework import FRAMEWORKS, runs
from costmodels.train_spec import TrainSpec
from planner.search import frameworks as fws
from planner.search import search
from planner.search.memo import mark_split_free, refusals_of
from planner.search.space import Candidate, Refused, SpaceOptions, enumerate_counted, enumerate_layouts
from tests.helpers import cluster
from tests.test_search_costing import ALL_MOE
from tests.test_stage_linear import MOE

WIDE = SpaceOptions(max_mbs=2, max_vpp=2, max_cp=2, cp_comm=("p2p", "a2a", "allgather"))


def _problem(name: str, model=MOE, gpus: int = 16):
    clus = cluster(gpus, gpu=hp.load_gpu("h100-sxm"))
    fw = hp.load_framework(name)
    train = hp.resolve_train(TrainSpec(global_batch_size=16), fw.stack)
    return fw, model, clus, train


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_refuses_only_what_runs_refuses(name):
    """Over a space wider than any framework's (every cp algorithm, ZeRO 0-3, etp = tp): where `refuses` says
    no, runs says no too; and it says no somewhere (else it would spare nothing)."""
    fw, model, clus, train = _problem(name)
    refused = fws.refuses(fw, moe=model.is_moe)
    said = 0
    for lay in enumerate_layouts(model, clus, train, WIDE):
        if refused(lay.tp, lay.cp, lay.cp_comm, lay.pp, lay.ep, lay.etp, lay.zero):
            said += 1
            assert not runs(fw, lay, train.precision, train.optimizer, moe=model.is_moe), lay
    assert said > 0


def test_counted_enumeration_is_the_whole_one_less_the_refused():
    fw, model, clus, train = _problem("torchtitan")
    refused = fws.refuses(fw, moe=model.is_moe)
    every = list(enumerate_layouts(model, clus, train, WIDE))
    counted = list(enumerate_counted(model, clus, train, WIDE, refused))
    built = [c for c in counted if type(c) is Candidate]
    assert built == [c for c in every if not refused(c.tp, c.cp, c.cp_comm, c.pp, c.ep, c.etp, c.zero)]
    assert sum(c.count for c in counted if type(c) is Refused) == len(every) - len(built) > 0


@pytest.mark.parametrize("name,model", [("megatron", MOE), ("torchtitan", MOE), ("torchtitan", ALL_MOE),
                                        ("deepspeed", MOE), ("fsdp", ALL_MOE)])
def test_search_with_refusals_ranks_and_counts_as_without(name, model):
    """The same plans, objectives and statistics as a search whose keep declares nothing (every layout built
    and rejected one by one), with fewer candidates built."""
    fw, model, clus, train = _problem(name, model)
    opts = fws.space_options(fw, model, clus, train, WIDE)
    keep = fws.keep(fw, train, moe=model.is_moe)
    assert refusals_of(keep) is not None
    plain = mark_split_free(lambda cand: keep(cand))  # the same predicate, no rule declared
    fast = search(model, clus, train, top=3, time_limit_s=60, opts=opts, keep=keep)
    slow = search(model, clus, train, top=3, time_limit_s=60, opts=opts, keep=plain)
    assert fast.plans and fast.status == slow.status == "optimal"
    assert fast.objectives_s == slow.objectives_s
    assert [p.layout for p in fast.plans] == [p.layout for p in slow.plans]
    assert dataclasses.asdict(fast.stats) == dataclasses.asdict(slow.stats)
    assert fast.stats.filtered_out > 0

    def built(result) -> int:
        return sum(type(c) is Candidate for items in result.coster._layouts.values() for c in items)

    assert built(fast) < built(slow)


def test_the_validated_alternative_keeps_the_rule():
    """best_validated's predicate (keep and a validated regime) declares what keep declared."""
    from planner.search.engine import best_validated

    fw, model, clus, train = _problem("megatron")
    opts = fws.space_options(fw, model, clus, train, WIDE)
    keep = fws.keep(fw, train, moe=model.is_moe)
    result = search(model, clus, train, top=1, time_limit_s=60, opts=opts, keep=keep)
    seen = []
    real = result.coster.layouts

    def layouts(free, refuses=None):
        seen.append(refuses)
        return real(free, refuses)

    result.coster.layouts = layouts
    result.kept, result.plans[0].uncertainty.validated = [], False  # force a search of its own
    result.keep = None
    best_validated(model, clus, train, result, 60, opts=opts, keep=keep)
    assert seen and all(r is refusals_of(keep) for r in seen)
