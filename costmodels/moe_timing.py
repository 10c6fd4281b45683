"""The MoE layer's token dispatch in time: which dispatcher runs, one dispatch's seconds, the permutes around it,
and what stays exposed under expert-parallel overlap.

Split from costmodels.timing (which calls these per MoE layer; `Context` is its resolved layout). Notation: M tokens
per micro-batch per GPU, u the sequence-parallel share, h hidden, k top_k, kappa the stack's overlap_slowdown.
Bytes and collectives: costmodels.moe_dispatch; permutes: costmodels.moe_compute; the busiest rank's load:
costmodels.moe_balance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from costmodels import compute as cmp
from costmodels import moe_compute, moe_dispatch, strided
from costmodels.layout import Layout
from costmodels.overlap import exposed_s
from costmodels.train_spec import TrainSpec

if TYPE_CHECKING:
    from costmodels.timing import Context


def ep_overlap_applies(train: TrainSpec, lay: Layout) -> bool:
    """Whether the MoE all-to-all hides behind another micro-batch's computation: asked for
    (TrainSpec.ep_comm_overlap) and experts spread over ranks (ep > 1; megatron-core 0.19
    TransformerConfig asserts expert_model_parallel_size > 1 with overlap_moe_expert_parallel_comm)."""
    return train.ep_comm_overlap and lay.ep > 1


def ep_exposed_s(c: Context, ep_s: float, window_s: float) -> float:
    """Exposed seconds of one layer's dispatches and combines (all passes, `ep_s` in total). Under EP overlap
    they run beside the same layer's computation of the micro-batch paired with this one (1F1B: one
    micro-batch's forward beside the previous one's backward; Megatron-Core overlap_moe_expert_parallel_comm,
    DeepSeek-V3 report section 3.2.1, DualPipe), `window_s` long in steady state, slowed by the stack's
    overlap_slowdown (costmodels.overlap). Known deviation: the warm-up and cool-down micro-batches, which have
    no partner, are priced as overlapped too (a share of about pp / m of the step)."""
    if not ep_overlap_applies(c.train, c.lay):
        return ep_s
    return exposed_s(window_s, ep_s, c.kappa)


def dispatcher(c: Context) -> str:
    """The token dispatcher the time model prices: the run's (TrainSpec.ep_dispatcher, read from Megatron's
    --moe-token-dispatcher-type), the all-gather one where the memory's Megatron-Core 0.6 dispatcher is named
    (TrainSpec.moe_dispatcher allgather), else the stack's (Stack.ep_dispatcher)."""
    if c.train.ep_dispatcher:
        return c.train.ep_dispatcher
    return "allgather" if c.x.moe_allgather else c.stack.ep_dispatcher


def microbatch_dispatch_s(c: Context) -> float:
    """One dispatch (or combine) of a micro-batch's tokens, seconds (costmodels.moe_dispatch). All-to-all and DeepEP:
    the busiest EP rank receives x.moe_load times the mean bytes (costmodels.moe_balance) and the exchange ends when
    it has, so the bytes are priced at that rank's; the all-gather moves every token whatever the routing."""
    copy_bytes = dispatch_tokens(c) * c.model.hidden_size * cmp.ACT_BYTES
    if dispatcher(c) == "allgather":
        return moe_dispatch.allgather_dispatch_s(c.links, c.lay.tp * c.lay.ep, copy_bytes)
    copy_bytes *= c.x.moe_load
    return moe_dispatch.dispatch_s(c.links, c.lay.ep, c.lay.etp, copy_bytes, dispatcher(c), c.model.num_experts,
                                   c.model.top_k, c.model.moe_router_num_groups, c.model.routed_groups)


def permute_s(c: Context) -> float:
    """Forward seconds of one MoE layer's token permutes and unpermutes (costmodels.moe_compute.permute_bytes, the
    stack's dispatcher) at the fitted HBM rate; fused, its backward, the mirrored gathers, takes the same again. Not
    scaled by the stack's element-wise fusion: no framework fuses these gathers into a neighbouring kernel. Unfused
    (TrainSpec.moe_permute_fusion false; every dispatcher calls moe_utils.permute / unpermute with
    fused=moe_permute_fusion): the permute and unpermute at their measured bytes."""
    if not c.train.moe_permute_fusion:
        fwd, _, _ = moe_compute.unfused_permute_bytes(c.model, c.x, dispatcher(c))
        return cmp.memory_s(c.dev16, _rest_bytes(c) + fwd)
    return cmp.memory_s(c.dev16, moe_compute.permute_bytes(c.model, c.x, dispatcher(c)))


def permute_backward_s(c: Context) -> float:
    """Backward seconds of the same: permute_s when fused; unfused, the gathers at the HBM rate and the permute's
    atomic index_add at costmodels.strided.atomic_bytes_per_s."""
    if c.train.moe_permute_fusion:
        return permute_s(c)
    _, bwd, atomic = moe_compute.unfused_permute_bytes(c.model, c.x, dispatcher(c))
    rate = strided.atomic_bytes_per_s(c.cluster.gpu_profile, c.dev16.hbm_bytes_per_s * c.dev16.eff.hbm)
    return cmp.memory_s(c.dev16, _rest_bytes(c) + bwd) + atomic / rate


def _rest_bytes(c: Context) -> float:
    """What the unfused path leaves fused: the all-to-all's chunk sort (its permute_bytes less the permute /
    unpermute pair); nothing for the all-gather and DeepEP, whose permute_bytes is that pair alone."""
    if dispatcher(c) != "alltoall":
        return 0.0
    return moe_compute.permute_bytes(c.model, c.x, "alltoall") - moe_compute.fused_pair_bytes(c.model, c.x)


def dispatch_tokens(c: Context) -> float:
    """Tokens one GPU dispatches per micro-batch: its sequence-parallel shard M*u (costmodels.compute
    _moe_gemms: Megatron-Core's MoE layer dispatches the [s/tp, b, h] states it holds under SP)."""
    return c.x.tokens * c.x.u
