"""Shortcuts inside the search's costing (planner.search.costing.Coster) that must not change a number:

- Coster._context builds costmodels.timing.make_context's devices, links and stack once per problem and sets
  only the layout and its activation shape per call: equal, field for field, to make_context;
- the bounds of a model whose layers are all MoE (Mixtral, Qwen3) price no dense layer (bound_times): bit for
  bit the bound of the full layer times, with no dense layer_time evaluated while bounding.
"""

from __future__ import annotations

import hardware_profiles as hp
import pytest

from costmodels.model_spec import ModelSpec
from costmodels.stage_linear import layer_times
from costmodels.timing import Context, make_context
from costmodels.train_spec import TrainSpec
from planner.search import costing
from planner.search.costing import Coster
from planner.search.space import SpaceOptions, enumerate_layouts
from tests.helpers import cluster, llama_like
from tests.test_stage_linear import MOE

ALL_MOE = ModelSpec.model_validate({**MOE.model_dump(), "name": "tiny-all-moe", "first_k_dense_layers": 0})
SPACE = SpaceOptions(max_mbs=2, max_vpp=2, max_cp=2, cp_comm=("p2p", "a2a", "allgather"))


def _problem(model: ModelSpec, stack: str = "megatron-core"):
    clus = cluster(16, gpu=hp.load_gpu("h100-sxm"))
    train = hp.resolve_train(TrainSpec(global_batch_size=16), stack)
    return Coster(model, clus, train), list(enumerate_layouts(model, clus, train, SPACE))


@pytest.mark.parametrize("model", [llama_like(512, 8, 4, 8, 1024, vocab=4096, seq=1024), MOE, ALL_MOE],
                         ids=["dense", "moe", "all-moe"])
def test_context_equals_make_context(model):
    coster, cands = _problem(model)
    for kind in (Context, costing._SearchContext, costing._FloorContext):
        for cand in cands:
            got, want = coster._context(cand, kind), make_context(coster.model, coster.cluster, coster.train, cand)
            assert type(got) is kind and got.__dict__ == want.__dict__, cand


def test_make_context_runs_once_per_problem(monkeypatch):
    calls = []
    real = costing.make_context
    monkeypatch.setattr(costing, "make_context", lambda *a: calls.append(a) or real(*a))
    coster, cands = _problem(MOE, "fsdp")  # ZeRO-3 per micro-batch too: both time memos
    for cand in cands:
        coster.memory_and_budget(cand)
        coster.layers_bound_s(cand, floor=True)
        coster.layers_bound_s(cand)
        coster.fixed_s(cand)
    assert coster.floor_times.calls > 10 and coster.zero3_times.calls > 10
    assert len(calls) == 1


@pytest.mark.parametrize("stack", ["megatron-core", "fsdp"])
def test_all_moe_bounds_equal_the_full_layer_times_and_price_no_dense_layer(monkeypatch, stack):
    dense_calls = []
    real = costing.layer_time
    monkeypatch.setattr(costing, "layer_time", lambda c, moe: dense_calls.append(c) if not moe else real(c, moe))
    coster, cands = _problem(ALL_MOE, stack)
    L = ALL_MOE.num_layers
    assert ALL_MOE.num_moe_layers == L
    for cand in cands:
        for floor in (True, False):
            kind = costing._FloorContext if floor else costing._SearchContext  # _SearchContext: ZeRO-3's term
            (dense_s, moe_s), head_s = layer_times(coster._context(cand, kind))  # where the candidate runs it
            assert dense_s > 0  # the full layer times price a dense layer the model does not have
            total = (L - L) * dense_s + L * moe_s + head_s  # Coster.layers_bound_s on the full times
            want = (cand.num_microbatches - 1 / cand.vpp) * total / cand.pp + total / cand.vpp
            assert coster.layers_bound_s(cand, floor=floor) == want, (cand, floor)
    assert not dense_calls
    assert coster.floor_times.calls == 0  # the tables' full times: never asked while bounding


def test_a_model_with_dense_layers_bounds_on_the_full_times():
    coster, cands = _problem(MOE)
    assert coster.bound_floor is coster.floor_times and coster.bound_zero3 is coster.zero3_times
    for cand in cands[:50]:
        assert coster.bound_times(cand) == coster.times(cand)


def _memory_on_full_states(coster: Coster, lay) -> float:
    """Coster.memory_and_budget's bound with both layer kinds' states priced by state_bytes and persistent_bytes
    (what it read before the shortcut)."""
    from costmodels import activations as act
    from costmodels.memory import expert_dp
    from costmodels.params import local_layer_params
    from costmodels.stage_linear import persistent_bytes, state_bytes

    m, edp = coster.model, expert_dp(coster.cluster, lay)
    params = [local_layer_params(m, moe, lay.tp, lay.ep, lay.etp) for moe in (False, True)]
    states = [state_bytes(p, lay, edp, coster.train) for p in params]
    kept = [persistent_bytes(p, lay, edp, coster.train) for p in params]
    act_bytes, _, _, _, working = coster.acts(lay)
    dev = coster.device(lay)
    inflight = act.inflight_microbatches(lay.schedule, lay.pp - 1, lay.pp, lay.vpp, lay.num_microbatches)
    dense = dev.reserved(states[0] + act_bytes[0] * inflight, kept[0])
    moe = dev.reserved(states[1] + act_bytes[1] * inflight, kept[1])
    L, n_moe = m.num_layers, m.num_moe_layers
    return ((L - n_moe) * dense + n_moe * moe) / lay.pp + dev.device(working)


@pytest.mark.parametrize("model", [llama_like(512, 8, 4, 8, 1024, vocab=4096, seq=1024), MOE, ALL_MOE],
                         ids=["dense", "moe", "all-moe"])
@pytest.mark.parametrize("stack", ["megatron-core", "fsdp"])
def test_memory_bound_equals_full_states_with_one_evaluation_per_layer_kind(monkeypatch, model, stack):
    """The states memo evaluates (weights, gradients, optimizer) once per layer kind the model has (state_bytes
    and persistent_bytes each evaluated them for both kinds: four times), and the bound is bit for bit the same."""
    calls = []
    real = costing.state_parts
    monkeypatch.setattr(costing, "state_parts", lambda *a: calls.append(a) or real(*a))
    coster, cands = _problem(model, stack)
    for cand in cands:
        assert coster.memory_and_budget(cand)[0] == _memory_on_full_states(coster, cand), cand
    kinds = (model.num_layers > model.num_moe_layers) + (model.num_moe_layers > 0)
    assert len(calls) == kinds * coster.states.calls


def test_the_search_runs_without_the_cycle_collector_and_restores_it():
    """engine.without_cycle_collector: off while candidates are costed (a keep predicate sees it off), back on
    after, and left off where the caller had it off."""
    import gc

    from planner.search import search

    model = llama_like(256, 4, 2, 4, 512, vocab=4096, seq=512)
    clus = cluster(8, gpu=hp.load_gpu("h100-sxm"))
    train = TrainSpec(global_batch_size=16)
    seen = set()

    def keep(cand) -> bool:
        seen.add(gc.isenabled())
        return True

    assert gc.isenabled()
    assert search(model, clus, train, time_limit_s=60, keep=keep).plans
    assert seen == {False} and gc.isenabled()
    gc.disable()
    try:
        search(model, clus, train, time_limit_s=60, keep=keep)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_no_collection_walks_what_the_search_kept_when_it_ends():
    """engine._age_young_objects: the collector resumes with what the search allocated moved to its oldest
    generation (the young count at 0), so no collection starts as the search returns, which would walk every
    cached object the result holds."""
    import gc

    from planner.search import search

    model = llama_like(256, 4, 2, 4, 512, vocab=4096, seq=512)
    clus = cluster(8, gpu=hp.load_gpu("h100-sxm"))
    train = TrainSpec(global_batch_size=16)
    started = []

    def note(phase, info):
        if phase == "start":
            started.append(info["generation"])

    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.callbacks.append(note)
    try:
        result = search(model, clus, train, time_limit_s=60)
    finally:
        gc.callbacks.remove(note)
    assert result.plans and result.coster.floor_times.calls > 0
    assert started == []
    assert gc.get_count()[0] < 700 and gc.get_freeze_count() == 0
