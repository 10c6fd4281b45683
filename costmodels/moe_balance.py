"""Router load balance: how many more routed rows the busiest expert-parallel rank receives than the mean.

Every EP rank waits for the busiest one at the combine all-to-all of each MoE layer, so a layer runs at the pace of
the rank whose local experts received the most (token, expert) rows. costmodels.timing scales that rank's expert
GEMMs, expert activation, chunk sort and received all-to-all bytes by the load factor 1 + e_rank; attention, router,
shared experts and dense layers do not change.

Per-expert excess e_E (max expert load / mean load - 1, "MaxVio"), by balancing kind, ABOVE the aux-loss-balanced
runs the stacks are fitted on (their typical imbalance is inside the fitted efficiencies, so aux-loss kinds are the
reference, e_E = 0):
- aux_loss, seq_aux_loss, global_aux_loss, sinkhorn: 0 (the reference). Wang et al. 2024, "Auxiliary-Loss-Free Load
  Balancing Strategy for Mixture-of-Experts" (arXiv 2408.15664), quoted from memory: MaxVio_global 0.72 (1B) and
  0.52 (3B) under aux-loss control; that level is what the fitted rows ran with.
- expert bias (aux-loss-free, Megatron --moe-router-enable-expert-bias, DeepSeek-V3): 0. The same paper (from
  memory) gives MaxVio_global 0.04, i.e. better balanced than the reference; pricing it faster than aux-loss runs
  needs a refit with the reference moved to 0.52-0.72, and is not done.
- forced (Megatron --moe-router-force-load-balancing, benchmarking only: the router's logits are replaced by
  standard normal draws, megatron-core 0.16.1 moe_utils.RandomSTE, so top-k is uniform over experts): 0; its
  sampling noise (a rank's rows are a multinomial count, relative spread ~ 1 / sqrt(rows)) is left out.
- none (no balancing loss and no bias): 0.72 above the reference. Range 0.72 - (E / k - 1): the lower end is the
  excess the source's aux-loss-controlled 1B run still had, which a router with no balancing at all does not
  undercut; the upper end is collapse (every token on the same k experts); Shazeer et al. 2017 (Outrageously Large
  Neural Networks, appendix A Table 6, from memory) measured max/mean load 17.8 with no balancing losses. The lower
  end is taken: the value is a floor, not a fit (docs/moe.md reports what it does to GPT-OSS-120B).

From experts to ranks: a rank holds g = E / ep experts. With expert loads independent with relative spread sigma,
the largest of E is about 1 + sigma sqrt(2 ln E) (Gaussian extreme value), a rank's load has spread sigma / sqrt(g),
and the busiest of ep ranks is about 1 + sigma sqrt(2 ln ep) / sqrt(g). So
    e_rank = e_E sqrt(ln ep / ln E) / sqrt(g),
which is e_E at ep = E (one expert per rank), 0 at ep = 1 (no rank to wait for), and never above e_E.
Known deviations: hot experts are persistent, not independent draws (a rank holding two hot experts waits longer);
a capacity factor caps a rank's rows at capacity (tokens beyond it are dropped): the factor is capped there too.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

BalanceKind = Literal["aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none", "forced"]
BALANCE_KINDS: tuple[str, ...] = get_args(BalanceKind)

# Per-expert excess above the aux-loss-balanced reference (module docstring: values, sources, ranges).
EXPERT_EXCESS = {"aux_loss": 0.0, "seq_aux_loss": 0.0, "global_aux_loss": 0.0, "sinkhorn": 0.0,
                 "none": 0.72, "forced": 0.0}


def expert_excess(kind: str, expert_bias: bool = False) -> float:
    """Per-expert excess e_E of the hottest expert over the mean, unitless, above the aux-loss reference: the
    kind's value (EXPERT_EXCESS), or 0 with the aux-loss-free expert bias, which balances whatever the loss kind."""
    return 0.0 if expert_bias else EXPERT_EXCESS[kind]


def rank_excess(per_expert: float, experts: int, ep: int) -> float:
    """Excess rows of the busiest of ep ranks over the mean, unitless: e_E sqrt(ln ep / ln E) / sqrt(E / ep)
    (module docstring), 0 when ep <= 1 or E <= 1."""
    if ep <= 1 or experts <= 1 or per_expert <= 0:
        return 0.0
    ep = min(ep, experts)
    return per_expert * math.sqrt(math.log(ep) / math.log(experts)) / math.sqrt(experts / ep)


def load_factor(per_expert: float, experts: int, ep: int, capacity_factor: float | None = None) -> float:
    """Routed rows of the busiest EP rank over the mean, 1 + e_rank, capped at the capacity factor when tokens are
    dropped beyond it (never below 1)."""
    factor = 1.0 + rank_excess(per_expert, experts, ep)
    return max(1.0, min(factor, capacity_factor)) if capacity_factor else factor
