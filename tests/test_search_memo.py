"""Caches keyed on the fields a cost function reads (planner.search.memo), and the property they protect:
the search's ranked plans, re-estimated with costmodels.estimate, come out in order.

The per-layer cache once keyed on a hand-written (tp, sp, cp, ep, etp, mbs, recompute) that left out
cp_comm: with several context-parallel algorithms allowed, a layout costed with another algorithm's
layer time entered the top K, and its estimate disagreed with its objective (and with the order).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costmodels.estimate import estimate
from costmodels.train_spec import TrainSpec
from planner.search import search
from planner.search.costing import Coster
from costmodels.params import local_layer_params
from costmodels.stage_linear import _param_class, param_key
from costmodels.timing import make_context
from planner.search.memo import FieldMemo, probe
from planner.search.space import Candidate, SpaceOptions, enumerate_layouts
from tests.helpers import cluster, gpt, llama_like

ALL_CP = ("p2p", "a2a", "allgather")


def _cand(**kw) -> Candidate:
    base = dict(tp=1, sp=False, cp=1, cp_comm="p2p", ep=1, etp=1, pp=1, vpp=1, dp=8, zero=1, mbs=1,
                recompute="none", schedule="1f1b", num_microbatches=4)
    return Candidate(**{**base, **kw})


def test_key_grows_with_a_branch_taken_later():
    seen = []

    def cost(lay):
        seen.append(lay.cp)
        return lay.cp if lay.cp == 1 else (lay.cp, lay.cp_comm)

    memo = FieldMemo(cost)
    assert memo(_cand()) == 1 and memo.fields == ("cp",)
    assert memo(_cand(cp=2, cp_comm="p2p")) == (2, "p2p")
    assert memo.fields == ("cp", "cp_comm")
    assert memo(_cand(cp=2, cp_comm="a2a")) == (2, "a2a")  # the hand-written key (cp only) returned (2, "p2p")
    calls = memo.calls
    assert memo(_cand(cp=2, cp_comm="a2a", mbs=4)) == (2, "a2a")  # mbs is never read: a hit
    assert memo.calls == calls


def test_fields_read_inside_properties_and_nested_memos_count():
    inner = FieldMemo(lambda lay: lay.dense_shards)  # a property: reads shard_group, dp, cp
    outer = FieldMemo(lambda lay: inner(lay) + lay.tp)
    assert outer(_cand(dp=8, cp=2)) == 17
    assert set(inner.fields) == {"shard_group", "dp", "cp"}
    assert set(outer.fields) == {"shard_group", "dp", "cp", "tp"}
    assert outer(_cand(dp=8, cp=1)) == 9  # cp is in the outer key although only the inner memo read it


def test_absent_attributes_still_raise():
    memo = FieldMemo(lambda lay: getattr(lay, "recompute_modules", None))
    assert memo(_cand()) is None


def test_coster_layer_times_differ_by_cp_algorithm():
    model = llama_like(512, 8, 8, 4, 1536, vocab=4096, seq=1024)
    clus = cluster(8, per_node=8)
    coster = Coster(model, clus, TrainSpec(global_batch_size=8))
    times = {alg: coster.layer(_cand(cp=4, cp_comm=alg, dp=2)).time_s for alg in ALL_CP}
    assert len(set(times.values())) == len(ALL_CP), times


@st.composite
def cp_problems(draw):
    hidden = draw(st.sampled_from([256, 512]))
    heads = hidden // 64
    layers = draw(st.integers(4, 8))
    seq = draw(st.sampled_from([2048, 4096]))
    if draw(st.booleans()):
        model = gpt(hidden, heads, layers, vocab=4096, seq=seq)
    else:
        model = llama_like(hidden, heads, draw(st.sampled_from([heads, heads // 2])), layers, 3 * hidden,
                           vocab=4096, seq=seq)
    clus = cluster(draw(st.sampled_from([4, 8, 16])), per_node=draw(st.sampled_from([4, 8])))
    train = TrainSpec(global_batch_size=draw(st.sampled_from([8, 16])))
    opts = SpaceOptions(max_mbs=2, max_vpp=2, max_cp=4, zero_stages=(0, 1), cp_comm=ALL_CP)
    return model, clus, train, opts


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(cp_problems())
def test_top_k_reestimated_in_order_with_every_cp_algorithm(problem):
    model, clus, train, opts = problem
    assert any(lay.cp > 1 and lay.cp_comm != "p2p" for lay in enumerate_layouts(model, clus, train, opts))
    result = search(model, clus, train, top=5, time_limit_s=60, opts=opts)
    assert result.status == "optimal"
    steps = [estimate(model, clus, train, plan.layout).time.step_s for plan in result.plans]
    for step, objective_s in zip(steps, result.objectives_s):
        assert step == pytest.approx(objective_s, rel=5e-3)
    assert all(a <= b * (1 + 5e-3) for a, b in zip(steps, steps[1:])), steps


def test_a_framework_split_group_keeps_every_split():
    """Candidates differing only in a fixed split share one bound, but each split is its own plan."""
    model = gpt(256, 4, 8, vocab=4096, seq=1024)
    clus = cluster(8, per_node=8)
    train = TrainSpec(global_batch_size=16)
    splits = ((3, 5), (4, 4), (5, 3))
    opts = SpaceOptions(max_mbs=1, max_vpp=1, zero_stages=(1,), recompute=("none",),
                        stage_splits=lambda L, pp, v: splits if pp == 2 else ())
    every = list(enumerate_layouts(model, clus, train, opts))
    assert sum(lay.fixed_stages is not None for lay in every) >= len(splits)
    result = search(model, clus, train, top=len(every), time_limit_s=60, opts=opts)
    assert result.stats.layouts_considered == len(every)
    assert result.stats.memory_pruned == 0  # a tiny model on 80 GB GPUs: every candidate fits
    found = sorted((p.layout.tp, p.layout.pp, tuple(p.layout.stage_layers)) for p in result.plans)
    want = sorted((lay.tp, lay.pp, lay.fixed_stages or (model.num_layers,)) for lay in every)
    assert found == want


def _reads(fn, lay) -> set[str]:
    """The candidate fields fn(probe) reads."""
    watched = probe(lay)
    fn(watched)
    return set(watched._read)


@pytest.mark.parametrize("name", ["dense", "moe"])
def test_param_key_covers_what_the_stage_parameters_read(name):
    """layout_coefficients memoizes _param_class on the hand-written param_key: every field that
    _param_class reads (the context built first, as layout_coefficients builds it) must be one
    param_key reads, for every candidate of a space with ZeRO 0-3, HSDP, cp, ep and pipelines."""
    from tests.test_stage_linear import MOE

    model = MOE if name == "moe" else llama_like(512, 8, 4, 8, 1536, vocab=4096, seq=1024)
    clus = cluster(16, per_node=8)
    train = TrainSpec(global_batch_size=16)
    opts = SpaceOptions(max_mbs=2, max_vpp=2, max_cp=2, cp_comm=ALL_CP)
    params = {}
    for lay in enumerate_layouts(model, clus, train, opts):
        c = make_context(model, clus, train, lay)
        key = (lay.tp, lay.ep, lay.etp)
        params.setdefault(key, tuple(local_layer_params(model, moe, *key) for moe in (False, True)))
        for stage in {0, lay.pp // 2, lay.pp - 1}:
            cls = 0 if stage == 0 else (2 if stage == lay.pp - 1 else 1)
            needed = _reads(lambda p: _param_class(dataclasses.replace(c, lay=p), stage, params[key]), lay)
            assert needed <= _reads(lambda p: param_key(p, cls), lay), (lay, needed)


@given(layers=st.integers(4, 12), name=st.sampled_from(["deepspeed", "torchtitan"]), hbm=st.sampled_from([0.6, 8.0]),
       top=st.sampled_from([1, 12]))
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_search_over_split_groups_equals_the_oracle(layers, name, hbm, top):
    """The engine bounds a framework's split group once and filters it with the framework's `keep`; its
    top K still equal plain enumeration of every table (planner.search.brute), split for split."""
    import hardware_profiles as hp
    from planner.search import frameworks as fws
    from planner.search.brute import best_split
    from planner.search.tables import objective_seconds

    model = llama_like(256, 4, 2, layers, 512, vocab=4096, seq=512)
    gpu = hp.load_gpu("h100-sxm").model_copy(update={"hbm_gib": hbm})
    clus = cluster(4, gpu=gpu, memory_reserve_gib=0.0)
    fw = hp.load_framework(name)
    train = hp.resolve_train(TrainSpec(global_batch_size=16), fw.stack)
    opts = fws.space_options(fw, model, clus, train, SpaceOptions(max_mbs=2, max_vpp=2, max_cp=1))
    keep = fws.keep(fw, train, moe=False)
    coster = Coster(model, clus, train)
    every = [c for c in enumerate_layouts(model, clus, train, opts) if keep(c)]
    bests = sorted(found[0] for found in (best_split(model, coster.table(c)) for c in every) if found is not None)
    result = search(model, clus, train, top=top, time_limit_s=60, opts=opts, keep=keep)
    assert result.objectives_s == [objective_seconds(v) for v in bests[:top]]
    for plan in result.plans:
        assert fws.split_runs(fw, plan.layout)


def test_predicates_marked_split_free_read_no_split():
    """Every `keep` the search marks split-free (planner.search.memo.mark_split_free: asked once per base,
    not watched by a FieldMemo) reads no fixed_stages on any candidate of a framework's split groups, and
    answers every split as it answers the base; an unmarked predicate is still watched."""
    import hardware_profiles as hp
    from planner.search import frameworks as fws
    from planner.search.engine import validated_filter
    from planner.search.groups import Group, split_groups
    from planner.search.memo import split_free

    model = llama_like(256, 4, 2, 10, 512, vocab=4096, seq=512)
    clus = cluster(8, gpu=hp.load_gpu("h100-sxm"))
    for name in ("megatron", "deepspeed", "torchtitan", "fsdp"):
        fw = hp.load_framework(name)
        train = hp.resolve_train(TrainSpec(global_batch_size=16), fw.stack)
        opts = fws.space_options(fw, model, clus, train, SpaceOptions(max_mbs=2, max_vpp=2, max_cp=2))
        valid = validated_filter(train.stack_spec, clus.num_gpus, "h100-sxm")
        for keep in (fws.keep(fw, train, moe=False), valid, fws.keep(fw, train, valid, moe=False)):
            assert split_free(keep), (name, keep)
            watched = FieldMemo(keep)
            members = 0
            for base, splits, _ in split_groups(Coster(model, clus, train), opts, None):
                for member in Group(base, splits).members:
                    assert watched(member) == keep(base)
                    members += 1
            assert "fixed_stages" not in watched.read and members
    assert not split_free(lambda cand: cand.fixed_stages is None)
