"""`plan --framework any` runs its four framework searches in forked workers where CPUs allow
(planner.plan_pool): the same answers as one after the other, in the same order, and what the workers send
back carries no cost caches."""

from __future__ import annotations

import hardware_profiles as hp
from costmodels.train_spec import TrainSpec
from planner.files.loading import Problem
from planner.plan_pool import cheap_first, search_frameworks, search_one
from planner.search import frameworks as fws
from tests.helpers import cluster, llama_like


def _problem():
    model = llama_like(256, 4, 2, 8, 512, vocab=4096, seq=512)
    clus = cluster(8, gpu=hp.load_gpu("h100-sxm"))
    train = TrainSpec(global_batch_size=16)
    return Problem(model, clus, train), fws.priced_frameworks(train, False)


def _answers(found):
    return [(fw.name, tr.stack_spec.name, res.status, [p.model_dump() for p in res.plans], res.objectives_s,
             None if alt is None else alt.model_dump(), why) for fw, tr, res, alt, why in found]


def test_workers_give_the_serial_answers_in_order():
    prob, pairs = _problem()
    serial_runs = []

    def serial(fw, tr, share):
        serial_runs.append(fw.name)
        return search_one(prob, tr, 3, share, False, fw, None)

    alone = search_frameworks(prob, pairs, 3, 120.0, False, None, serial, workers=1)
    cheap = [pairs[i][0].name for i in cheap_first(pairs)]
    assert serial_runs == cheap and cheap[-2:] == ["torchtitan", "megatron"]  # one worker: here, cheap first
    pooled = search_frameworks(prob, pairs, 3, 120.0, False, None, serial, workers=2)
    assert serial_runs == cheap  # two: nothing ran here
    assert _answers(pooled) == _answers(alone)
    assert any(res.plans for _, _, res, _, _ in pooled)
    assert all(res.coster is None and res.kept == [] for _, _, res, _, _ in pooled)


def test_a_search_drops_its_caches_by_reference_counting():
    """A Coster holds no reference cycle (its memos reach it through a weak proxy): with the cyclic collector off,
    dropping the search result frees the caches, which a worker relies on to resume the collector cheaply."""
    import gc
    import weakref

    from planner.api import search_with_reasons

    prob, pairs = _problem()
    fw, tr = pairs[0]
    gc.disable()
    try:
        result, _, _ = search_with_reasons(prob, tr, 3, 60.0, False, fw, None)
        assert result.plans and result.coster.floor_times.calls > 0
        coster = weakref.ref(result.coster)
        del result
        assert coster() is None
    finally:
        gc.enable()


def test_a_worker_task_runs_without_the_cycle_collector_and_restores_it(monkeypatch):
    import gc

    import planner.api

    prob, pairs = _problem()
    fw, tr = pairs[0]
    seen = []
    real = planner.api.search_with_reasons

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(planner.api, "search_with_reasons", spy)
    sent, _, _ = search_one(prob, tr, 3, 60.0, False, fw, None)
    assert seen == [False] and gc.isenabled()
    assert sent.plans and sent.coster is None


def test_the_large_searches_take_what_the_small_ones_leave(monkeypatch):
    """One worker, a 100 s limit, searches that take no time: each search gets an equal share of what is left when
    it starts, cheap first, and the last (Megatron) all of it; fixed equal shares gave every search 25 s."""
    import planner.plan_pool as pool

    prob, pairs = _problem()
    shares = []

    def serial(fw, tr, share):
        shares.append((fw.name, share))
        return search_one(prob, tr, 1, 0.5, False, fw, None)

    monkeypatch.setattr(pool.time, "perf_counter", lambda: 0.0)
    search_frameworks(prob, pairs, 1, 100.0, False, None, serial, workers=1)
    assert [n for n, _ in shares][-1] == "megatron"
    assert [round(t, 2) for _, t in shares] == [25.0, 33.33, 50.0, 100.0]
