"""Expert-parallel token dispatch: how many copies of each token cross NVLink and the network.

Notation (SI units throughout):
    n       ranks in the expert-parallel group, r of them per node, N = n / r nodes
    E       routed experts, spread evenly: E / n per rank, E / N per node
    k       experts per token (top_k), distinct, chosen uniformly (a balanced router)
    T       tokens one rank dispatches per micro-batch; X1 = T * h * 2 bytes, one copy of each
    q(m)    probability that a token routes to none of m given experts:
            C(E - m, k) / C(E, k) = prod_{i<k} (E - m - i) / (E - i)
    G, M    group-limited routing (ModelSpec.moe_router_num_groups, moe_router_group_topk): experts in G groups of
            E / G consecutive ids, each token choosing M groups and its k experts among their A = M E / G

Three dispatchers:
- allgather (Megatron --moe-token-dispatcher-type allgather, MoEAllGatherTokenDispatcher): every rank of the
  tp x ep group gathers the whole group's tokens (gather_from_sequence_parallel_region over tp_ep_group: "this
  allgather spans the communication domain of TP*EP") and keeps the rows of its local experts; the combine is the
  reduce-scatter of the same bytes. A rank receives (g - 1) T h 2 bytes however few of them its experts need.
- alltoall (Megatron's --moe-token-dispatcher-type alltoall, torch all_to_all_single): one copy per
  (token, expert) pair, so a rank sends k * X1 bytes, (n - 1) / n of it to other ranks and
  (n - r) / n of it across nodes.
- deepep (DeepEP normal kernels, used by NeMo AutoModel and Megatron --moe-enable-deepep): one copy
  per (token, destination rank) inside a node and one per (token, destination node) across nodes,
  forwarded inside the receiving node over NVLink. DeepEP README ("normal kernels ... asymmetric-
  domain bandwidth forwarding, from NVLink domain to RDMA domain") and its get_dispatch_layout,
  which returns is_token_in_rank [tokens, ranks] and num_tokens_per_rdma_rank: a token counts once
  per rank and once per RDMA rank (node), however many of its experts live there.
  Copies that leave the node: (N - 1) * (1 - q(E / N)) per token. Copies that cross NVLink: to each
  of the r - 1 other ranks of the sending node, and inside each receiving node from the GPU the
  network delivered to (the sender's same-index GPU) to the other r - 1: N (r - 1) (1 - q(E / n)).
The combine sends the same copies back (DeepEP reduces inside a node before the network).
Known deviations: the copy counts are a balanced router's; a real router's busiest rank receives more, which
costmodels.moe_timing.microbatch_dispatch_s prices by scaling the bytes by its load factor
(costmodels.moe_balance); DeepEP's FP8 dispatch (half the dispatch bytes) is not modelled.

Group-limited routing (Megatron-Core moe_utils.group_limited_topk: "Node-limited routing: Set
'moe_router_num_groups' equal to number of nodes in EP group"; DeepSeek-V3 report section 2.1.2, "each token will
be sent to at most M nodes", M = 4 of 8): Megatron picks a token's M groups by the sum of each group's top k / M
scores, then its k experts among theirs, so every chosen group receives about k / M of them. A unit (a rank or a
node) holding w whole groups is hit when one of them is chosen: hit = 1 - C(G - w, M) / C(G, M); a unit holding
u experts inside one group when its group is chosen and one of the group's k / M draws lands on it:
hit = (M / G) (1 - q_{E/G}(u; k / M)) (the draw count interpolated between its floor and ceiling when M does not
divide k). G = 1 gives 1 - q(u) above. DeepEP's copies become (N - 1) hit(E / N) across nodes and N (r - 1) hit(E / n)
over NVLink; the all-to-all still sends k copies. Checked against a simulation of group_limited_topk with
independent normal scores (tests/test_moe_dispatch.py): within 1% for whole groups (DeepSeek-V3 on 8 nodes: 3.47
network copies per token simulated, 3.5 here, 4.63 unrestricted), within 4% inside groups (the even split
overstates the spread a little, most at k / M = 1). Routing inside groups can reach more ranks than unrestricted
routing (G 32, M 8: one expert per chosen group). Groups that do not align with ranks or nodes (neither holds
whole groups nor lies inside one) are priced unrestricted.
"""

from __future__ import annotations

import math
from typing import Literal

from costmodels import comm

Dispatcher = Literal["alltoall", "deepep", "allgather"]


def miss_probability(experts: int, held: float, top_k: int) -> float:
    """q(m): a token's k distinct experts all avoid `held` given experts (hypergeometric), unitless."""
    q = 1.0
    for i in range(top_k):
        left = experts - i
        if left <= 0:
            return 0.0
        q *= max(0.0, (experts - held - i) / left)
    return q


def hit_probability(experts: int, held: float, top_k: int, groups: int = 1, chosen: int = 1) -> float:
    """hit(u): a token routes to at least one of `held` consecutive experts (a rank's or a node's), unitless; under
    group-limited routing (`groups`, `chosen` of them per token) by the module's formula, unrestricted when the
    held experts neither span whole groups nor lie inside one."""
    per_group = experts / groups
    if groups <= 1 or chosen >= groups:
        return 1 - miss_probability(experts, held, top_k)
    chosen = min(chosen, top_k)  # k experts reach at most k of the chosen groups (k < M: Megatron scores them all 0)
    if held >= per_group and float(held / per_group).is_integer():  # whole groups: hit when one is chosen
        whole = int(held / per_group)
        return 1 - math.comb(groups - whole, chosen) / math.comb(groups, chosen)
    if held < per_group and float(per_group / held).is_integer():  # inside one group: its share of k / M draws
        draws = top_k / chosen
        low, high = math.floor(draws), math.ceil(draws)
        miss_low, miss_high = miss_probability(per_group, held, low), miss_probability(per_group, held, high)
        return chosen / groups * (1 - miss_low - (draws - low) * (miss_high - miss_low))
    return 1 - miss_probability(experts, held, top_k)


def copies_per_token(dispatcher: Dispatcher, n: int, r: int, experts: int, top_k: int, groups: int = 1,
                     chosen: int = 1) -> tuple[float, float]:
    """(copies over the network, copies over NVLink) one rank sends per dispatched token, unitless.

    alltoall: (k (n - r) / n, k (r - 1) / n). deepep: ((N - 1) hit(E/N), N (r - 1) hit(E/n)), hit = 1 - q
    without group-limited routing."""
    if n <= 1:
        return 0.0, 0.0
    r = min(r, n)
    if dispatcher == "alltoall":
        return top_k * (n - r) / n, top_k * (r - 1) / n
    nodes = n / r
    out = (nodes - 1) * hit_probability(experts, experts / nodes, top_k, groups, chosen)
    inside = nodes * (r - 1) * hit_probability(experts, experts / n, top_k, groups, chosen)
    return out, inside


def dispatch_s(links: comm.Links, n: int, stride: int, copy_bytes: float, dispatcher: Dispatcher,
               experts: int, top_k: int, groups: int = 1, chosen: int = 1) -> float:
    """One dispatch (or combine) of a micro-batch's tokens, seconds.

    alltoall: comm.all_to_all_s of k * X1 bytes. deepep: comm.exchange_s with the NVLink and network
    copies as factors on X1, each rank's network copies through its own NIC (the same-index GPU of
    every other node receives them)."""
    if n <= 1 or copy_bytes <= 0:
        return 0.0
    if dispatcher == "alltoall" or experts < top_k or top_k < 1:  # no routing to deduplicate
        return comm.all_to_all_s(links, n, stride, copy_bytes * top_k)
    r = comm.ranks_per_node(n, stride, links.gpus_per_node)
    out, inside = copies_per_token("deepep", n, r, experts, top_k, groups, chosen)
    return comm.exchange_s(links, n, r, inside, out, copy_bytes)


def allgather_dispatch_s(links: comm.Links, group: int, copy_bytes: float) -> float:
    """One dispatch (or combine) of the all-gather dispatcher over its tp x ep group of `group` consecutive ranks
    (tp innermost, then ep), seconds: comm.all_gather_s of the group's group * X1 bytes (the combine's
    reduce-scatter costs the same, comm.reduce_scatter_s). Known deviation: with cp > 1 the ep ranks are not
    consecutive; the group is priced as if they were."""
    if group <= 1 or copy_bytes <= 0:
        return 0.0
    return comm.all_gather_s(links, group, 1, group * copy_bytes)
