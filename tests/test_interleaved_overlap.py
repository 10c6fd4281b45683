"""Data-parallel and pipeline traffic under an interleaved (virtual-stage) schedule.

Megatron-Core syncs each model chunk's gradients when that chunk's last backward ends and gathers
each chunk's parameters before its first forward (core/pipeline_parallel/schedules.py), and it
overlaps stage-to-stage sends with the next chunk's compute (--overlap-p2p-communication, on with
virtual stages). costmodels.step.chunked_exposed_s and pp_comm_s price both; the search's integer
tables (planner.search.tables.Table.dp_term) must price the same thing.
"""

from __future__ import annotations

import math

import pytest
from helpers import cluster, gpt
from hypothesis import given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels.layout import Layout, resolve_layout
from costmodels.step import chunked_exposed_s, pp_comm_s, step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec
from planner.search.tables import OBJ_PER_TIME, Table


def test_one_chunk_is_the_plain_overlap():
    assert chunked_exposed_s(0.5, 1, 4, 0.2) == 0.5 - 0.2
    assert chunked_exposed_s(0.1, 1, 4, 0.2) == 0.0


def test_hand_worked_megatron_177b_reduction():
    # MG-011-like: a 0.31 s reduce-scatter, v = 4 chunks, p = 6, one micro-batch's backward 0.136 s.
    # w = 0.034 s per chunk-step; chunk 0 has 1 step: 0.0775 - 0.034; chunk 3 has 19: far below zero.
    assert math.isclose(chunked_exposed_s(0.31, 4, 6, 0.136), 0.31 / 4 - 0.136 / 4)


@settings(max_examples=200, deadline=None)
@given(comm=st.floats(0, 10), v=st.integers(1, 8), p=st.integers(1, 16), window=st.floats(0, 10))
def test_interleaving_never_exposes_more(comm, v, p, window):
    exposed = chunked_exposed_s(comm, v, p, window)
    assert 0.0 <= exposed <= comm + 1e-12
    assert exposed <= chunked_exposed_s(comm, 1, p, window) + 1e-12


@settings(max_examples=300, deadline=None)
@given(r=st.integers(0, 10**6), g=st.integers(0, 10**6), t=st.integers(1, 10**6), v=st.integers(1, 8),
       p=st.integers(2, 16))
def test_search_tables_price_what_the_step_model_prices(r, g, t, v, p):
    class _Lay:
        pp, vpp, num_microbatches = p, v, p

    table = Table(layout=_Lay(), time=(), memory=(), reduce=(), gather=(), optimizer=(), const=0, cap=0,
                  overlap_reduce=True, overlap_gather=True)
    want = OBJ_PER_TIME * (chunked_exposed_s(r, v, p, 2 * t / 3) + chunked_exposed_s(g, v, p, t / 3))
    got = table.dp_term(r, g, t)
    assert want - 1e-6 * max(1.0, want) <= got <= want + 1 + 1e-6 * max(1.0, want)


def _ctx(stack: str, vpp: int):
    model = gpt(4096, 32, 16, vocab=32000, seq=2048)
    train = hp.resolve_train(TrainSpec(global_batch_size=16), stack)  # 4 micro-batches per replica
    clus = cluster(32, per_node=2, gpu=hp.load_gpu("h100-sxm"))  # dp groups span nodes
    lay = resolve_layout(model, clus, train, Layout(tp=2, pp=4, vpp=vpp, zero=1, mbs=1))
    return make_context(model, clus, train, lay)


def test_megatron_core_hides_sends_behind_the_next_chunk():
    plain, overlapped = _ctx("megatron-2021", 4), _ctx("megatron-core", 4)
    assert not plain.stack.overlap_p2p and overlapped.stack.overlap_p2p
    # p = 4, v = 4, m = 4: 2(vm + p - 1) = 38 sends, of which the 2(p - 1) = 6 of fill and drain stay
    assert pp_comm_s(overlapped) == pytest.approx(pp_comm_s(plain) * 6 / 38)
    assert pp_comm_s(_ctx("megatron-core", 1)) == pp_comm_s(_ctx("megatron-2021", 1))  # no chunks: no overlap


def test_megatron_core_chunks_hide_more_of_the_reduction():
    one, four = step_time(_ctx("megatron-core", 1)), step_time(_ctx("megatron-core", 4))
    assert four.dp_comm_exposed_s < one.dp_comm_exposed_s
