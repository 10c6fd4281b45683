"""Collective communication on a two-tier network (scale-up inside a node, scale-out across).

Notation: n ranks in the group, X bytes (the full buffer: for all-gather/reduce-scatter the
gathered size), B achieved bandwidth per GPU per direction, alpha per-message latency, g GPUs per
node, r = ranks of the group inside one node, b_out the per-GPU NIC bandwidth.

Sources: ring all-reduce 2(n-1)/n * X / B, all-gather and reduce-scatter (n-1)/n * X / B
(Thakur, Rabenseifner & Gropp, IJHPCA 2005; NCCL's "bus bandwidth" convention, nccl-tests
PERFORMANCE.md); the seeds' worked example: n = 8, X = 2 GB, B = 25 GB/s -> 0.14 s.
Latency: NCCL uses rings (2(n-1) steps) or trees (about 2 log2 n steps), whichever is faster;
we take the smaller step count times alpha.
Placement: ranks are ordered tp, cp, ep, dp, pp (Megatron), so a group is (size n, stride);
it lies inside one node when n * stride <= g. A group crossing nodes with r ranks per node moves
its inter-node share through r NICs (every GPU belongs to one such group at a time, so the node's
NICs are shared evenly): B = min(B_up, r * b_out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodels.hardware_spec import ClusterSpec


@dataclass(frozen=True)
class Links:
    """Achieved bandwidths (bytes/s, per GPU and direction) and latencies of a cluster."""

    gpus_per_node: int
    up_bytes_per_s: float
    out_bytes_per_s: float
    up_latency_s: float
    out_latency_s: float


def cluster_links(cluster: ClusterSpec) -> Links:
    """Links with the GPU profile's fitted link efficiencies applied."""
    eff = cluster.gpu_profile.efficiency
    return Links(
        gpus_per_node=cluster.gpus_per_node,
        up_bytes_per_s=cluster.scale_up_bytes_per_s * eff.scale_up,
        out_bytes_per_s=cluster.scale_out_bytes_per_s * eff.scale_out,
        up_latency_s=cluster.scale_up_latency_s,
        out_latency_s=cluster.scale_out_latency_s,
    )


def ranks_per_node(size: int, stride: int, gpus_per_node: int) -> int:
    """Ranks of a (size, stride) group that share one node."""
    if size * stride <= gpus_per_node:
        return size
    if stride >= gpus_per_node:
        return 1
    return max(gpus_per_node // stride, 1)


def group_link(links: Links, size: int, stride: int) -> tuple[float, float]:
    """(bandwidth bytes/s, latency s) a group sees: scale-up inside a node, else min(up, r*b_out)."""
    r = ranks_per_node(size, stride, links.gpus_per_node)
    if r >= size:
        return links.up_bytes_per_s, links.up_latency_s
    return min(links.up_bytes_per_s, r * links.out_bytes_per_s), links.out_latency_s


def _steps(n: int) -> int:
    return min(n - 1, math.ceil(math.log2(n)))


def all_reduce_s(links: Links, size: int, stride: int, nbytes: float) -> float:
    """Ring all-reduce: 2(n-1)/n * X / B + 2 * steps * alpha."""
    if size <= 1 or nbytes <= 0:
        return 0.0
    bw, lat = group_link(links, size, stride)
    return 2 * (size - 1) / size * nbytes / bw + 2 * _steps(size) * lat


def all_gather_s(links: Links, size: int, stride: int, nbytes: float) -> float:
    """All-gather (or reduce-scatter) of a buffer of X gathered bytes: (n-1)/n * X / B + steps * alpha."""
    if size <= 1 or nbytes <= 0:
        return 0.0
    bw, lat = group_link(links, size, stride)
    return (size - 1) / size * nbytes / bw + _steps(size) * lat


reduce_scatter_s = all_gather_s


def all_to_all_s(links: Links, size: int, stride: int, nbytes: float) -> float:
    """All-to-all of X bytes per rank: (r-1)/n of X over scale-up, (n-r)/n over the rank's own NIC."""
    if size <= 1 or nbytes <= 0:
        return 0.0
    r = ranks_per_node(size, stride, links.gpus_per_node)
    inside = (r - 1) / size * nbytes / links.up_bytes_per_s
    if r >= size:
        return inside + links.up_latency_s
    outside = (size - r) / size * nbytes / links.out_bytes_per_s
    return max(inside, outside) + links.out_latency_s


def p2p_s(links: Links, crosses_nodes: bool, nbytes: float) -> float:
    """Point-to-point send of X bytes: X / B + alpha on the link it uses."""
    if nbytes <= 0:
        return 0.0
    if crosses_nodes:
        return nbytes / links.out_bytes_per_s + links.out_latency_s
    return nbytes / links.up_bytes_per_s + links.up_latency_s
