"""What one CP-SAT solve proves about single candidates is kept for the next (planner.search.settled), a group too
large for a joint model goes one by one at once, and the interleaved sends hide behind a layer the model has
(costmodels.step.shortest_forward_s). None of it may change an answer:

- the top 3 with a shared Settled, and with every group forced one by one, equal the top 3 solved afresh each time
  (objectives, proven), and the shared Settled never solves more models;
- Settled.record keeps an optimum only when its own model found it under the cap and proved it, and a floor
  only from a proof;
- the search's cached sends (Coster.sends_s, with its cached shortest forward) equal pp_comm_s of the candidate's
  context, and a model whose layers are all MoE hides its sends behind an MoE layer, not a dense one it lacks.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass

import hardware_profiles as hp
import pytest
from hypothesis import given

from costmodels.step import pp_comm_s, shortest_forward_s
from costmodels.timing import layer_time, make_context
from costmodels.train_spec import TrainSpec
from planner.search import cpsat
from planner.search.costing import Coster
from planner.search.settled import Settled
from planner.search.space import SpaceOptions, enumerate_layouts
from tests.helpers import cluster
from tests.test_planner import QUICK, Problem, problems
from tests.test_search_costing import ALL_MOE
from tests.test_stage_linear import MOE


def _top3(p: Problem, tables, shared: bool, ceiling=None) -> tuple[list, int]:
    """(objective, proven) of the top 3 and the models solved, each solve with a fresh Settled or one shared
    (with the top-3 ceiling `ceiling`: an objective no lower than the third best's)."""
    excluded, got, models, settled = set(), [], 0, Settled(ceiling=ceiling, top=3)
    for _ in range(3):
        sol = cpsat.solve(p.model, tables, time_limit_s=30, exclude=frozenset(excluded),
                          settled=settled if shared else None)
        if sol is None:
            break
        excluded.add(sol.index)
        got.append((sol.objective, sol.optimal))
        models += sol.models
    return got, models


@QUICK
@given(problems())
def test_settled_and_one_by_one_change_no_answer(p: Problem):
    """The models solved are counted with a joint-model budget no busy machine runs out of: at the shipped 1 s, a
    CI run under load (two test workers beside CP-SAT's threads) solved 11 models where 7 had served, which says
    nothing about sharing (test_a_busy_machine_changes_no_answer covers the budget running out)."""
    tables = p.tables()
    budget = cpsat.GROUP_BUDGET_S
    cpsat.GROUP_BUDGET_S = 60.0
    try:
        fresh, fresh_models = _top3(p, tables, shared=False)
        shared, shared_models = _top3(p, tables, shared=True)
    finally:
        cpsat.GROUP_BUDGET_S = budget
    assert shared == fresh
    assert shared_models <= fresh_models
    cpsat.GROUP_BUDGET_S = 0.0  # no joint model is ever cheap enough to build: every group one by one
    try:
        alone, _ = _top3(p, tables, shared=True)
    finally:
        cpsat.GROUP_BUDGET_S = budget
    assert alone == fresh
    if len(fresh) == 3:  # solved up to a ceiling at or above the third best, loose or tight: the same answers
        for ceiling in (fresh[2][0], 2 * fresh[2][0]):
            assert _top3(p, tables, shared=True, ceiling=ceiling)[0] == fresh


@QUICK
@given(problems())
def test_a_busy_machine_changes_no_answer(p: Problem):
    """A solve under a short budget (a joint model's GROUP_BUDGET_S, a relaxation's RELAX_S) that a busy machine
    cuts returns nothing or an unproven solution: here every other such solve is cut so, deterministically. The
    search then settles the candidates one by one, so the top 3, fresh or sharing what earlier solves proved, is
    the same as on an idle machine."""
    idle, _ = _top3(p, p.tables(), shared=False)
    real, calls = cpsat._run, [0]

    def busy(built, model, tables, time_limit_s, workers):
        found, proven = real(built, model, tables, time_limit_s, workers)
        if time_limit_s > cpsat.GROUP_BUDGET_S:
            return found, proven
        calls[0] += 1
        if calls[0] % 2:
            return None, False
        return (None if found is None else dataclasses.replace(found, optimal=False)), False
    cpsat._run = busy
    try:
        fresh, _ = _top3(p, p.tables(), shared=False)
        shared, _ = _top3(p, p.tables(), shared=True)
    finally:
        cpsat._run = real
    assert [o for o, _ in fresh] == [o for o, _ in idle] and shared == fresh


@dataclass(frozen=True)
class _Sol:
    index: int
    objective: int


def test_record_keeps_only_what_a_model_proved():
    s = Settled()
    s.record(1, _Sol(1, 90), proven=True, cap=100)  # found under the cap, proven: its optimum
    s.record(2, None, proven=True, cap=100)  # nothing under the cap: its optimum is above it
    s.record(3, _Sol(3, 120), proven=True, cap=100)  # above the cap (a relaxation's exact price): a floor only
    s.record(4, _Sol(4, 50), proven=False, cap=100)  # not proven: nothing
    s.record(5, None, proven=True, cap=None)  # no cap and nothing found: nothing fits, no floor to keep
    assert s.exact == {1: _Sol(1, 90)}
    assert s.floor == {2: 101, 3: 101}
    assert (s.bound(2, 40), s.bound(2, 150), s.bound(2, None), s.bound(9, 40)) == (101, 150, None, 40)


def _coster(model):
    clus = cluster(16, gpu=hp.load_gpu("h100-sxm"))
    train = hp.resolve_train(TrainSpec(global_batch_size=16), "megatron-core")
    space = SpaceOptions(max_mbs=2, max_vpp=2, max_cp=2)
    return Coster(model, clus, train), [c for c in enumerate_layouts(model, clus, train, space) if c.pp > 1]


@pytest.mark.parametrize("model", [MOE, ALL_MOE], ids=["moe", "all-moe"])
def test_cached_sends_equal_pp_comm_s(model):
    coster, cands = _coster(model)
    assert any(c.vpp > 1 for c in cands)
    for cand in cands:
        assert coster.sends_s(cand) == pp_comm_s(make_context(coster.model, coster.cluster, coster.train, cand))


@pytest.mark.parametrize("name, kinds", [("mixtral-8x7b", (True,)), ("deepseek-v3-16b", (False, True))])
def test_an_all_moe_model_hides_its_sends_behind_an_moe_layer(name, kinds):
    """Mixtral's dense layer (its ffn_hidden_size, one expert's width) is cheaper than its MoE layer, so the old
    min over both kinds took a layer the model does not have; DeepSeek-V3 16B, whose first layer is dense, keeps
    the cheaper of its two kinds."""
    coster, cands = _coster(hp.load_model(name))
    c = make_context(coster.model, coster.cluster, coster.train, next(x for x in cands if x.vpp > 1))
    times = {moe: layer_time(c, moe).compute_s / 3 for moe in (False, True)}
    assert times[False] < times[True]
    assert shortest_forward_s(c) == min(times[k] for k in kinds)


def test_the_cap_rises_to_the_ceiling_which_falls_to_the_kth_settled_optimum():
    s = Settled(ceiling=500, top=2)
    assert (s.cap(None), s.cap(100), s.cap(700)) == (None, 500, 700)
    s.exact = {1: _Sol(1, 120), 2: _Sol(2, 300)}  # two of K = 2 settled: the second best, 300, is the ceiling now
    assert s.cap(100) == 300
    assert Settled().cap(100) == 100  # top 1: no ceiling
