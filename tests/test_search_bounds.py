"""The search's time floor (planner.search.costing.Coster.floor_times / layers_bound_s(floor=True)): the
layer times without ZeRO-3's per-micro-batch collectives. The costing loop orders and cuts candidates by
it, so it must never exceed the exact layer times (else an optimal layout could be cut), equal them where
ZeRO-3 does not run per micro-batch, and key on fewer fields than the exact times (what makes it cheap)."""

from __future__ import annotations

import hardware_profiles as hp
from costmodels.train_spec import TrainSpec
from planner.search.costing import Coster
from planner.search.space import SpaceOptions, enumerate_layouts
from tests.helpers import cluster, llama_like

ROUNDING = 1e-12  # far below the search's PRUNE_MARGIN (1e-3) and _near_miss's slack (1e-9)


def _space(stack: str):
    model = llama_like(512, 8, 4, 8, 1024, vocab=4096, seq=1024)
    clus = cluster(16, gpu=hp.load_gpu("h100-sxm"))
    train = hp.resolve_train(TrainSpec(global_batch_size=32), stack)
    coster = Coster(model, clus, train)
    return coster, list(enumerate_layouts(model, clus, train, SpaceOptions(max_mbs=2, max_vpp=2, max_cp=2)))


def test_floor_never_exceeds_the_exact_layer_times():
    coster, cands = _space("fsdp")
    zero3 = [c for c in cands if c.zero3_per_microbatch]
    assert zero3, "the space must hold ZeRO-3 candidates"
    below = 0
    for cand in cands:
        (floor, floor_head), (exact, exact_head) = coster.floor_times(cand), coster.times(cand)
        # up to rounding: where the host overhead sets a layer's time, the two sum their parts in another order
        assert all(f <= e * (1 + ROUNDING) for f, e in zip(floor, exact)) and floor_head <= exact_head
        assert coster.layers_bound_s(cand, floor=True) <= coster.layers_bound_s(cand) * (1 + ROUNDING)
        if not cand.zero3_per_microbatch:
            assert (floor, floor_head) == (exact, exact_head)
        below += floor[0] < exact[0]
    assert below > 0  # ZeRO-3's collectives cost time: the floor is strictly lower somewhere


def test_floor_keys_on_no_zero3_field():
    coster, cands = _space("fsdp")
    for cand in cands:
        coster.floor_times(cand)
        coster.times(cand)
    assert not {"dp", "pp", "shard_group", "zero3_per_microbatch"} & set(coster.floor_times.fields)
    assert coster.floor_times.calls < len({(c.tp, c.cp, c.mbs, c.recompute, c.dp, c.pp) for c in cands})


def _framework_problem(name: str):
    from planner.search import frameworks as fws

    model = llama_like(256, 4, 2, 8, 512, vocab=4096, seq=512)
    clus = cluster(8, gpu=hp.load_gpu("h100-sxm"))
    fw = hp.load_framework(name)
    train = hp.resolve_train(TrainSpec(global_batch_size=16), fw.stack)
    return model, clus, train, fws.space_options(fw, model, clus, train, SpaceOptions(max_mbs=2, max_vpp=2)), \
        fws.keep(fw, train, moe=model.is_moe)


def test_a_stricter_search_over_the_kept_candidates_equals_a_fresh_one():
    """search(among=result.kept) (the validated alternative's path) ranks what a fresh search with both
    predicates ranks, for a framework without fixed splits and one whose partitioner fixes them."""
    from planner.search import search

    for name in ("megatron", "torchtitan"):
        model, clus, train, opts, keep = _framework_problem(name)
        first = search(model, clus, train, top=3, time_limit_s=60, opts=opts, keep=keep)
        stricter = lambda cand: cand.pp > 1 or cand.zero == 1  # noqa: E731
        reused = search(model, clus, train, top=3, time_limit_s=60, opts=opts, keep=stricter,
                        coster=first.coster, among=first.kept)
        fresh = search(model, clus, train, top=3, time_limit_s=60, opts=opts,
                       keep=lambda cand: keep(cand) and stricter(cand))
        assert fresh.plans and reused.objectives_s == fresh.objectives_s
        assert [p.layout for p in reused.plans] == [p.layout for p in fresh.plans]
        assert reused.objectives_s != first.objectives_s  # the stricter predicate mattered
