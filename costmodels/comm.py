"""Collectives as NCCL runs them, on a two-tier network (scale-up inside a node, scale-out across).

Notation (SI units throughout):
    n       ranks in the group; (n, stride) places it, ranks ordered tp, cp, ep, dp, pp (Megatron)
    g       GPUs per node; r ranks of the group inside one node; N = ceil(n / r) nodes it spans
    X       bytes of one collective: the full (gathered) buffer for all-gather / reduce-scatter,
            the reduced buffer for all-reduce, the bytes each rank sends for all-to-all
    B       plateau bus bandwidth per GPU and direction, bytes/s: eta * wire rate (eta fitted)
    S_half  half-bandwidth size, bytes (fitted per link kind: scale-up, scale-out)
    alpha   per-step latency, s: scale-out alpha when the group crosses nodes, else scale-up alpha
    L       launch overhead per call (kernel launch + sync, one process per GPU), s
    f       nccl-tests bus-bandwidth factor: 2(n-1)/n all-reduce, (n-1)/n all-gather,
            reduce-scatter and all-to-all, 1 send/recv (nccl-tests doc/PERFORMANCE.md)

One call:  t = L + steps * alpha + f * X / B_eff(X),   B_eff(X) = B * X / (X + min(X, S_half)).
Equivalently the bandwidth term is f * (X + min(X, S_half)) / B: above S_half a fixed penalty of
f * S_half / B (pipeline fill of NCCL's Simple protocol), below it half the plateau rate (the
low-latency protocols LL/LL128 that NCCL picks for small sizes). S_half is exactly the size at
which the achieved bus bandwidth is B / 2. Deviation from the plain X / (X + S_half) saturation:
an affine t(X) cannot give both the ~10-17 us floor at 1 KiB and the ~60-130 us intercept of the
16-64 MiB rows (nccl_busbw.md sections 3.1, 4.1, 8); this form fits both (benchmarks/calibrate_nccl.py).
`calls` splits X evenly into that many collectives (buckets), each paying L, steps * alpha and
the half-size penalty.

Placement: a group lies inside one node when n * stride <= g. On a full-mesh node (Infinity Fabric) a
group of r ranks uses r-1 of the g-1 direct links: B_up (r-1)/(g-1) (up_bytes_per_s); a send uses one.
A group crossing nodes uses B = min(B_up, r * B_out) (NCCL spreads its rings over the node's r NICs)
and alpha_out on every step (the slowest hop sets the pace). All-to-all cannot aggregate NICs: one NIC per rank.
Known deviations (errors in benchmarks/calibrate_nccl.py's table): send/recv over NVLink gets the
ring plateau, while NCCL p2p reaches ~180-195 GB/s (H100 2 GPUs, A100 8 pairs; +15-100%); a lone
GPU per node (2x1 A100) is slower than eta_out says (+20-40% busbw); 2-node H20 rows at 1-2 MiB
carry a ~120 us floor the model does not (+45-55%); NCCL's PAT all-gather is not modelled.

Sources: ring algorithms and their bandwidth terms (Thakur, Rabenseifner & Gropp, IJHPCA 2005);
busbw conventions (nccl-tests PERFORMANCE.md); the seed's worked example n = 8, X = 2 GB, B = 25 GB/s
-> 0.14 s; NCCL's double binary tree (NCCL 2.4 blog, "Massively scale your deep learning training
with NCCL 2.4", 2019) with a chain inside each node; NVLS (NVLink SHARP) and the placement statements
in benchmarks/data/nccl_busbw.md sections 4.2, 6.2 and 9. Fitted numbers: benchmarks/calibrate_nccl.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from costmodels.hardware_spec import ClusterSpec

MIB = 2**20
NVLS_REF_RANKS = 8  # nvls_speedup is the NVLS / ring busbw ratio on 8 GPUs (nccl_busbw.md 4.2, 7)


@dataclass(frozen=True)
class Links:
    """Plateau bandwidths (bytes/s, per GPU and direction, eta applied), latencies and NCCL constants."""

    gpus_per_node: int
    up_bytes_per_s: float
    out_bytes_per_s: float
    up_latency_s: float  # alpha per step inside a node
    out_latency_s: float  # alpha per step across nodes
    launch_s: float = 0.0  # L per call
    up_half_bytes: float = 0.0  # S_half of the scale-up link
    out_half_bytes: float = 0.0  # S_half of the scale-out link
    nvls_speedup: float = 1.0  # NVLS / ring all-reduce busbw on 8 GPUs; 1 = no NVLS
    mesh: bool = False  # scale-up is a full mesh of direct links (ClusterSpec.scale_up_topology)


def cluster_links(cluster: ClusterSpec) -> Links:
    """Links of a cluster with its GPU profile's fitted NCCL efficiencies applied."""
    eff = cluster.gpu_profile.efficiency
    return Links(
        gpus_per_node=cluster.gpus_per_node,
        up_bytes_per_s=cluster.scale_up_bytes_per_s * eff.scale_up,
        out_bytes_per_s=cluster.scale_out_bytes_per_s * eff.scale_out,
        up_latency_s=cluster.scale_up_latency_s,
        out_latency_s=cluster.scale_out_latency_s,
        launch_s=eff.launch_us * 1e-6,
        up_half_bytes=eff.up_half_mib * MIB,
        out_half_bytes=eff.out_half_mib * MIB,
        nvls_speedup=eff.nvls_speedup if cluster.scale_up_topology == "switch" else 1.0,  # NVLS needs NVSwitch
        mesh=cluster.scale_up_topology == "mesh",
    )


def up_bytes_per_s(links: Links, ranks: int) -> float:
    """Scale-up plateau of `ranks` GPUs of one node working together, bytes/s per GPU and direction: B_up behind
    a switch; on a full mesh the r-1 direct links to the group's other members, (r-1)/(g-1) of B_up (8 MI300X
    all-reduce at 313 GB/s busbw, 2 of them at 48 over their one 64 GB/s link: benchmarks/data/kernels, from
    ml-engineering network/README.md)."""
    if not links.mesh or links.gpus_per_node <= 1:
        return links.up_bytes_per_s
    return links.up_bytes_per_s * max(ranks - 1, 1) / (links.gpus_per_node - 1)


def ranks_per_node(size: int, stride: int, gpus_per_node: int) -> int:
    """Ranks of a (size, stride) group that share one node."""
    if size * stride <= gpus_per_node:
        return size
    if stride >= gpus_per_node:
        return 1
    return max(gpus_per_node // stride, 1)


def nodes_spanned(size: int, stride: int, gpus_per_node: int) -> int:
    """N: nodes holding ranks of one (size, stride) group."""
    return math.ceil(size / ranks_per_node(size, stride, gpus_per_node))


def group_link(links: Links, size: int, stride: int) -> tuple[float, float]:
    """(plateau bus bandwidth bytes/s, per-step latency s) of a group.

    Inside a node: (B_up, alpha_up). Across nodes: (min(B_up, r * B_out), alpha_out): NCCL spreads
    its rings over the node's r NICs, so busbw approaches the aggregate NIC rate (nccl_busbw.md 3.3:
    DGX A100 ~190 GB/s; 6.2: H100-class 365-396 GB/s).
    """
    r = ranks_per_node(size, stride, links.gpus_per_node)
    up = up_bytes_per_s(links, min(r, size))
    if r >= size:
        return up, links.up_latency_s
    return min(up, r * links.out_bytes_per_s), links.out_latency_s


def group_half_bytes(links: Links, size: int, stride: int) -> float:
    """S_half of the slowest link a group uses: scale-out when it crosses nodes."""
    inside = ranks_per_node(size, stride, links.gpus_per_node) >= size
    return links.up_half_bytes if inside else links.out_half_bytes


def achieved_bytes_per_s(plateau_bytes_per_s: float, half_bytes: float, nbytes: float) -> float:
    """B_eff(X) = B * X / (X + min(X, S_half)), bytes/s: B / 2 up to S_half, then saturating to B."""
    return plateau_bytes_per_s * nbytes / (nbytes + min(nbytes, half_bytes))


def transfer_s(factor: float, nbytes: float, plateau_bytes_per_s: float, half_bytes: float) -> float:
    """Bandwidth term f * X / B_eff(X) = f * (X + min(X, S_half)) / B, seconds."""
    return factor * (nbytes + min(nbytes, half_bytes)) / plateau_bytes_per_s


def _split(calls: int, nbytes: float, one_call_s: Callable[[float], float]) -> float:
    """calls * t(X / calls): X split evenly into `calls` collectives."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    if nbytes <= 0:
        return 0.0
    return calls * one_call_s(nbytes / calls)


def _ring_s(links: Links, size: int, stride: int, nbytes: float, steps: int, factor: float) -> float:
    """L + steps * alpha + f * X / B_eff(X) on the group's slowest link."""
    bw, lat = group_link(links, size, stride)
    return links.launch_s + steps * lat + transfer_s(factor, nbytes, bw, group_half_bytes(links, size, stride))


def all_gather_s(links: Links, size: int, stride: int, nbytes: float, calls: int = 1) -> float:
    """Ring all-gather of X gathered bytes: L + (n-1) alpha + (n-1)/n X / B_eff(X), seconds.

    NCCL runs all-gather and reduce-scatter as rings (nccl_busbw.md 4.2, 5.2: Ring in the 8-GPU runs);
    the PAT and NVLS variants of newer NCCL are not modelled.
    """
    if size <= 1:
        return 0.0
    return _split(calls, nbytes, lambda x: _ring_s(links, size, stride, x, size - 1, (size - 1) / size))


def reduce_scatter_s(links: Links, size: int, stride: int, nbytes: float, calls: int = 1) -> float:
    """Ring reduce-scatter of X (unreduced, full) bytes: the same time as the all-gather of X."""
    return all_gather_s(links, size, stride, nbytes, calls=calls)


def ring_all_reduce_s(links: Links, size: int, stride: int, nbytes: float, calls: int = 1) -> float:
    """Ring all-reduce: L + 2(n-1) alpha + 2(n-1)/n X / B_eff(X), seconds (Thakur et al. 2005)."""
    if size <= 1:
        return 0.0
    steps, factor = 2 * (size - 1), 2 * (size - 1) / size
    return _split(calls, nbytes, lambda x: _ring_s(links, size, stride, x, steps, factor))


def tree_steps(size: int, stride: int, gpus_per_node: int) -> int:
    """Latency steps of NCCL's tree all-reduce: 2 (ceil(log2 N) + r - 1), up and down the double
    binary tree across N nodes and the chain of r ranks inside each node (NCCL 2.4 blog)."""
    r = min(ranks_per_node(size, stride, gpus_per_node), size)
    nodes = nodes_spanned(size, stride, gpus_per_node)
    return 2 * (math.ceil(math.log2(nodes)) + r - 1)


def tree_all_reduce_s(links: Links, size: int, stride: int, nbytes: float, calls: int = 1) -> float:
    """Hierarchical (tree) all-reduce: L + tree_steps * alpha + the slower of its two pipelined
    halves, seconds: inside each node a reduce and a broadcast along a chain of r ranks (every hop
    carries the whole buffer: 2 * X over NVLink, NCCL 2.4 tree design), across the N nodes an
    all-reduce of the node's data spread over its r NICs (2(N-1)/N * X / (r * B_out)). For N = 2 a
    byte crosses the network once instead of the ring's 2(n-1)/n times, the "2-node Tree busbw above
    the NIC limit" of nccl_busbw.md sections 1 and 6.2 (470 vs 366 GB/s at 2 vs 4 H100 nodes).
    That saving needs NVLS inside the node (NVLSTree, H100 and later; nccl#1649): on GPUs without
    it (nvls_speedup <= 1, A100) the tree runs at the ring's bandwidth with its own latency, as
    2 x 8 A100 measure (184 / 188 GB/s at 1 / 4 GiB, the ring's NIC limit of 8 x 24; the chain
    above gives 211 / 214: section 3.3). Inside one node: the ring's bandwidth, the chain's latency.
    Known deviation: with NVLS the inside term stays the chain's (NVLS's reduce inside the node is
    not modelled), so 2 x 8 H100 reach 341 GB/s at 4 GiB here against 470 measured.
    """
    if size <= 1:
        return 0.0
    r, nodes = ranks_per_node(size, stride, links.gpus_per_node), nodes_spanned(size, stride, links.gpus_per_node)
    steps = tree_steps(size, stride, links.gpus_per_node)
    if r >= size or nodes <= 1 or links.nvls_speedup <= 1:
        return _split(calls, nbytes, lambda x: _ring_s(links, size, stride, x, steps, 2 * (size - 1) / size))

    def one(x: float) -> float:
        inside = transfer_s(2.0, x, up_bytes_per_s(links, r), links.up_half_bytes) if r > 1 else 0.0
        across = transfer_s(2 * (nodes - 1) / nodes, x, r * links.out_bytes_per_s, links.out_half_bytes)
        return links.launch_s + steps * links.out_latency_s + max(inside, across)

    return _split(calls, nbytes, one)


def nvls_applies(links: Links, size: int, stride: int) -> bool:
    """NVLS: the GPU supports it (nvls_speedup > 1) and the group lies inside one NVSwitch node."""
    return links.nvls_speedup > 1 and ranks_per_node(size, stride, links.gpus_per_node) >= size > 1


def nvls_all_reduce_s(links: Links, size: int, stride: int, nbytes: float, calls: int = 1) -> float:
    """NVLS all-reduce inside one node: L + 2(n-1) alpha_up + (X + min(X, S_half,up)) / algbw, seconds,
    algbw = nvls_speedup * B_up * n_ref / (2 (n_ref - 1)), n_ref = 8.

    Its algbw is about constant in n (nccl#1455: 258 -> 273 GB/s for 5 -> 8 H100), so its busbw is
    nvls_speedup * B_up * (8/7) (n-1)/n: the fitted ratio to the ring on 8 GPUs, less on fewer
    (B200 6/7 GPUs: 1.15/1.19 measured, 1.17/1.20 here; NCCL keeps Ring on 4-5 GPUs where this
    predicts 1.08-1.12). Latency steps taken equal to the ring's: NCCL runs Ring/LL up to ~1 MiB
    (nccl_busbw.md 5.1). inf when NVLS does not apply.
    """
    if not nvls_applies(links, size, stride):
        return math.inf
    busbw = links.nvls_speedup * links.up_bytes_per_s * NVLS_REF_RANKS / (NVLS_REF_RANKS - 1) * (size - 1) / size
    factor = 2 * (size - 1) / size

    def one(x: float) -> float:
        return links.launch_s + 2 * (size - 1) * links.up_latency_s + transfer_s(factor, x, busbw, links.up_half_bytes)

    return _split(calls, nbytes, one)


def all_reduce_s(links: Links, size: int, stride: int, nbytes: float, calls: int = 1) -> float:
    """All-reduce of X bytes, seconds: the fastest of ring, tree and (inside an NVSwitch node) NVLS,
    as NCCL's tuner picks per size (nccl_busbw.md 9)."""
    if size <= 1 or nbytes <= 0:
        return 0.0
    return min(ring_all_reduce_s(links, size, stride, nbytes, calls=calls),
               tree_all_reduce_s(links, size, stride, nbytes, calls=calls),
               nvls_all_reduce_s(links, size, stride, nbytes, calls=calls))


def all_to_all_s(links: Links, size: int, stride: int, nbytes: float, calls: int = 1) -> float:
    """All-to-all of X bytes per rank, seconds: L + (n-1) alpha + max(inside, outside).

    inside = (r-1)/n X / B_eff,up(X) over scale-up; outside = (n-r)/n X / B_eff,out(X) through the
    rank's own NIC only: all-to-all cannot aggregate a node's NICs (sjeaugey, nccl-tests#267; 2x8 A100
    busbw 37.8 GB/s, nccl_busbw.md 3.3). alpha per peer: alpha_out when the group crosses nodes.
    """
    if size <= 1:
        return 0.0
    r = ranks_per_node(size, stride, links.gpus_per_node)
    return _split(calls, nbytes, lambda x: exchange_s(links, size, r, (r - 1) / size, (size - r) / size, x))


def exchange_s(links: Links, size: int, r: int, inside: float, outside: float, nbytes: float) -> float:
    """One all-to-all-like exchange among `size` ranks, r per node, in which each rank sends
    inside * X bytes over scale-up and outside * X through its own NIC: L + (n-1) alpha +
    max(inside X / B_eff,up(X), outside X / B_eff,out(X)), alpha_out when the group crosses nodes."""
    t_in = transfer_s(inside, nbytes, up_bytes_per_s(links, min(r, size)), links.up_half_bytes)
    if r >= size:
        return links.launch_s + (size - 1) * links.up_latency_s + t_in
    t_out = transfer_s(outside, nbytes, links.out_bytes_per_s, links.out_half_bytes)
    return links.launch_s + (size - 1) * links.out_latency_s + max(t_in, t_out)


def p2p_s(links: Links, crosses_nodes: bool, nbytes: float, calls: int = 1) -> float:
    """Point-to-point send of X bytes: L + alpha + X / B_eff(X) on the link it uses, seconds."""
    if crosses_nodes:
        bw, lat, half = links.out_bytes_per_s, links.out_latency_s, links.out_half_bytes
    else:
        bw, lat, half = up_bytes_per_s(links, 2), links.up_latency_s, links.up_half_bytes  # one link on a mesh
    return _split(calls, nbytes, lambda x: links.launch_s + lat + transfer_s(1.0, x, bw, half))
