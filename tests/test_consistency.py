"""Error floors: pairs of measured runs that no subadditive time model can both fit (benchmarks/consistency.py).

Hand-worked bounds and floors, the vTrain pair that sets the multi-node floor (row17: one micro-batch
of 64 sequences measured 9.84 s; row19: four of 16 on the same GPUs and layout, 5.02 s), and the
property that puts parplan's own model inside the class, so that the floors bound it too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import cluster, gpt, llama_like
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels.layout import Layout, LayoutError, resolve_layout
from costmodels.step import step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
cs = pytest.importorskip("consistency")


def run(label: str, mbs: int, m: int, measured_s: float, pp: int = 1, vpp: int = 1, key=("p",)) -> "cs.Run":
    return cs.Run(label, key, mbs, m, pp, vpp, measured_s)


def test_one_stage_bound_is_one_and_the_pair_floor_balances_the_errors():
    small, big = run("s", 2, 8, 1.0), run("b", 4, 4, 2.0)
    (c,) = cs.conflicts([small, big])
    assert c.big is big and c.bound == 1.0
    assert c.floor == pytest.approx(1 / 3)  # P = 4/3 for both: -1/3 on the big run, +1/3 on the small
    assert cs.floors([small, big], [c]) == pytest.approx((1 / 3, 1 / 4))  # mean: all of it on the big run, 1/2 over 2


def test_pipeline_bound_counts_the_fill_slots():
    """p = 2, m = 4, k = 2: R = (4 + 2 * 1) / (4 + 1) = 1.2; 1.2 s against 1 s is allowed, 1.5 s is not."""
    small = run("s", 1, 4, 1.0, pp=2)
    assert cs.slot_bound(small, 2) == pytest.approx(1.2)
    assert not cs.conflicts([small, run("b", 2, 2, 1.2, pp=2)])
    (c,) = cs.conflicts([small, run("b", 2, 2, 1.5, pp=2)])
    assert c.floor == pytest.approx(0.3 / 2.7)
    assert cs.slot_bound(run("s", 1, 4, 1.0, pp=2, vpp=2), 2) == pytest.approx((4 + 2 * 0.5) / (4 + 0.5))
    # torch's interleaving at fewer micro-batches than stages (p = 4, v = 2, 4 -> 2 micro-batches) idles
    # (p - m)(v - 1)/v more: slots(2) = 2 + 1.5 + 1, slots(4) = 4 + 1.5 (costmodels.pipeline)
    assert cs.slot_bound(run("s", 1, 4, 1.0, pp=4, vpp=2), 2) == pytest.approx(2 * 4.5 / 5.5)


def test_only_integer_multiples_of_one_problem_are_compared():
    assert not cs.conflicts([run("s", 2, 6, 1.0), run("b", 3, 4, 9.0)])  # 3 / 2 is no integer
    assert not cs.conflicts([run("s", 2, 8, 1.0), run("b", 4, 4, 9.0, key=("other",))])
    assert not cs.conflicts([run("s", 2, 8, 1.0), run("b", 4, 4, 0.9)])


def test_floor_of_a_chain_takes_every_constraint():
    """b = 1, 2, 4 on one stage: the LP may not satisfy the 4 s run at the expense of only one sibling."""
    runs = [run("a", 1, 4, 1.0), run("b", 2, 2, 1.0), run("c", 4, 1, 4.0)]
    found = cs.conflicts(runs)
    assert {(c.big.label, c.small.label) for c in found} == {("c", "a"), ("c", "b")}
    worst, mean = cs.floors(runs, found)
    assert worst == pytest.approx(3 / 5)  # P = 1.6 for all three
    assert mean == pytest.approx(0.75 / 3)  # P = 1 for all three: only c is off, by 3/4


@pytest.fixture(scope="module")
def sets():
    return cs.data_sets()


def test_vtrain_multi_floor_is_set_by_row17(sets):
    """vtrain-multi rows 17-20: 3.6B GPT on 64 A100, tp8 dp8 pp1, global batch 512, micro-batches of
    64 / 32 / 16 / 8 measured 9.839 / 4.972 / 5.018 / 5.178 s. No subadditive model puts both row17
    and row19 within 32.4%: a vtrain-multi max target below that is out of any such model's reach, so it is
    retired (docs/accuracy.md). Since the split is by model-size block, rows 15-22 sit in the h3072 fitting
    block; the validation block (h12288 x 96, 21 rows) has no conflicting pair, the frozen test block is
    not read here."""
    rows_ = cs.floor_table(sets, cs.all_conflicts(sets))
    table = {(name, subset): (rows, pairs, worst, mean) for name, subset, rows, pairs, worst, mean in rows_}
    rows, pairs, worst, mean = table[("vtrain-multi", "held out")]
    assert rows == 21
    assert table[("vtrain-multi", "all")][0] == 109 - 15 and table[("vtrain-multi", "all")][1] >= 4
    assert table[("vtrain-multi", "all")][2] == pytest.approx((9.8393 - 4.9722) / (9.8393 + 4.9722), abs=2e-3)
    assert table[("vtrain-single", "all")][1] == 0  # the one-node sweep is consistent


STACKS = {name: hp.load_stack(name) for name in ("megatron-2021", "megatron-core", "deepspeed", "torchtitan", "fsdp")}
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pairs(draw):
    layers = draw(st.sampled_from([4, 8]))
    model = (gpt(draw(st.sampled_from([1024, 4096])), 32, layers, seq=2048) if draw(st.booleans())
             else llama_like(4096, 32, 8, layers, 14336, vocab=128256, seq=draw(st.sampled_from([2048, 8192]))))
    gpus = draw(st.sampled_from([8, 16]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if tp * p <= gpus]))
    dp, b, k = gpus // (tp * pp), draw(st.sampled_from([1, 2])), draw(st.sampled_from([2, 3, 4]))
    train = TrainSpec(global_batch_size=dp * b * k * draw(st.sampled_from([1, 2, 4])), 
                      stack=STACKS[draw(st.sampled_from(sorted(STACKS)))])
    lay = Layout(tp=tp, sp=tp > 1, pp=pp, vpp=draw(st.sampled_from([1, 2])) if pp > 1 else 1, mbs=b,
                 zero=draw(st.sampled_from([0, 1, 3])), recompute=draw(st.sampled_from(["none", "selective", "full"])))
    return model, cluster(gpus, gpu=hp.load_gpu("h100-sxm")), train, lay, k


@PROPERTY
@given(pairs())
def test_parplan_is_subadditive_in_the_micro_batch(case):
    """One micro-batch of k * b costs parplan no more than the class allows: T(k b) <= R T(b)."""
    model, clus, train, lay, k = case
    try:
        small = resolve_layout(model, clus, train, lay)
        big = resolve_layout(model, clus, train, lay.model_copy(update={"mbs": lay.mbs * k}))
    except LayoutError:
        return
    t_small = step_time(make_context(model, clus, train, small)).step_s
    t_big = step_time(make_context(model, clus, train, big)).step_s
    bound = cs.slot_bound(cs.Run("s", (), small.mbs, small.num_microbatches, small.pp, small.vpp, t_small), k)
    assert t_big <= bound * t_small * (1 + 1e-9), (lay, k, t_big, t_small, bound)
