"""A full-mesh node (AMD Infinity Fabric: one direct link to each other GPU) gives a group of r GPUs r-1 of its
g-1 links (costmodels.comm.up_bytes_per_s). Measured (benchmarks/data/kernels/collectives_mi300x.json, from
ml-engineering network/README.md): all-reduce busbw 47.7 GB/s on 2 MI300X, 312.9 on 8. Found by a new-user pass:
tp=2 was priced at the whole 448 GB/s, the same time as on an H100 node, and a 64-node MI300X plan out-ran H100."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import comm

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "kernels" / "collectives_mi300x.json"
GIB = 2**30


def _busbw_gb_per_s(links: comm.Links, ranks: int, nbytes: float = 4 * GIB) -> float:
    t = comm.all_reduce_s(links, ranks, 1, nbytes)
    return 2 * (ranks - 1) / ranks * nbytes / t / 1e9


def _measured() -> dict[int, float]:
    rows = json.loads(DATA.read_text())["rows"]
    return {int(r["shape"].split()[0]): r["value"] for r in rows}


def test_mi300x_all_reduce_by_group_size_within_a_tenth_of_measured():
    links = comm.cluster_links(hp.load_cluster("mi300x-node"))
    measured = _measured()
    assert set(measured) == {2, 8}
    for ranks, busbw in measured.items():
        assert _busbw_gb_per_s(links, ranks) == pytest.approx(busbw, rel=0.10)  # scale_up fitted on these two rows
    assert _busbw_gb_per_s(links, 8) / _busbw_gb_per_s(links, 2) == pytest.approx(7, rel=0.05)  # measured 6.6


def test_a_switch_node_gives_every_group_the_same_plateau():
    links = comm.cluster_links(hp.load_cluster("dgx-h100"))
    assert comm.up_bytes_per_s(links, 2) == comm.up_bytes_per_s(links, 8) == links.up_bytes_per_s


def test_tp2_costs_more_on_a_mesh_than_behind_a_switch_of_the_same_total():
    mesh = comm.cluster_links(hp.load_cluster("mi300x-node"))
    switch = comm.Links(**{**mesh.__dict__, "mesh": False})
    assert comm.all_reduce_s(mesh, 2, 1, GIB) > 5 * comm.all_reduce_s(switch, 2, 1, GIB)
    assert comm.p2p_s(mesh, False, GIB) > 5 * comm.p2p_s(switch, False, GIB)  # one link of seven


@given(st.integers(2, 8))
def test_mesh_plateau_grows_with_the_group_up_to_the_whole_node(ranks):
    links = comm.cluster_links(hp.load_cluster("mi300x-node"))
    assert comm.up_bytes_per_s(links, ranks) <= links.up_bytes_per_s
    assert comm.up_bytes_per_s(links, ranks) == pytest.approx(links.up_bytes_per_s * (ranks - 1) / 7)


def test_fewer_gpus_of_a_mesh_node_keep_only_their_links():
    """`--gpus 2` on mi300x-node: the two GPUs share one Infinity Fabric link (a review: they were priced at 448)."""
    from planner.files.loading import load_cluster

    two, four = (comm.cluster_links(load_cluster("mi300x-node", gpus=g)) for g in (2, 4))
    full = comm.cluster_links(hp.load_cluster("mi300x-node"))
    assert comm.up_bytes_per_s(two, 2) == pytest.approx(comm.up_bytes_per_s(full, 2))
    assert comm.up_bytes_per_s(four, 2) == pytest.approx(comm.up_bytes_per_s(full, 2))
    assert comm.up_bytes_per_s(four, 4) == pytest.approx(comm.up_bytes_per_s(full, 4))
    h100 = load_cluster("dgx-h100", gpus=2)
    assert h100.scale_up_gb_per_s == hp.load_cluster("dgx-h100").scale_up_gb_per_s  # a switch: unchanged
