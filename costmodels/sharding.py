"""Data-parallel collectives of sharded training (ZeRO 1-3, FSDP, HSDP) as the frameworks issue them.

Notation: P_l parameters of one layer on one GPU (after tp/ep/pp), S the shard group (dp*cp ranks,
or `shard_group` under HSDP), R = dp*cp/S replicas, w/g bytes per weight/gradient, B bucket size
(parameters per collective), m micro-batches, f/b forward/backward seconds of a layer.

ZeRO-3 / FSDP without pipelining (FSDP paper, Zhao et al. VLDB 2023, section 3.3 and Figure 4;
ZeRO, Rajbhandari et al. SC'20, section 5.3; DeepSpeed stage3 prefetch): for every micro-batch a
unit (one transformer block, or DeepSpeed's prefetch buckets) is all-gathered before its forward
and, when resharded after forward, again before its backward; its gradients are reduce-scattered
after its backward (and all-reduced across replicas under HSDP). A unit's collectives overlap only
the neighbouring unit's compute (prefetch depth >= 1), so per layer

    exposed = exposed(f, AG) + exposed(b, AG [reshard] + RS + AR_replicas)

(costmodels.overlap), plus, per micro-batch, the first unit's gather (nothing to hide behind) and,
per step, the last unit's reduce-scatter. With prefetch depth 0 every collective is exposed.
ZeRO-3 with pipelining (torch.distributed.pipelining + FSDP2, torchtitan): weights stay gathered
across the micro-batches of a step and gradients are reduced once (no-sync until the last
micro-batch), so the step pays one gather and one reduce-scatter per stage, like ZeRO-1.
Calls: FSDP issues one gather and one reduce-scatter per unit; DeepSpeed packs a layer's tensors
into fetches of at least its prefetch bucket (`fetch_calls`, about 4 per GPT layer) and reduces in
its reduce buckets. Every call pays its launch and (n-1) ring steps (costmodels.comm, `calls`) and,
per stack, a fitted host cost (Stack.zero3_call_overhead_s, applied in costmodels.timing).
"""

from __future__ import annotations

import math

from costmodels import comm
from costmodels.params import ParamCount, attention_matrices


def buckets(n_params: float, bucket_mparams: float | None) -> int:
    """Collectives needed for `n_params` parameters in buckets of `bucket_mparams` millions (None: one)."""
    if not bucket_mparams or n_params <= 0:
        return 1
    return max(1, math.ceil(n_params / (bucket_mparams * 1e6)))


def layer_matrices(model, moe: bool, tp: int, ep: int, etp: int) -> list[float]:
    """Weight tensors of one layer on one GPU, in execution order, as parameter counts: fused QKV and
    two MLP matrices for GELU models (Megatron-style), separate q, k, v, o, gate, up, down for SwiGLU
    models (Hugging Face style; MLA: its five projections); MoE: the router, then each local expert's
    matrices."""
    h = model.hidden_size
    attn = [k * n for k, n in attention_matrices(model, tp, fused_qkv=model.activation != "swiglu")]
    if not moe:
        f = model.ffn_hidden_size / tp
        return attn + ([h * f, h * f, f * h] if model.activation == "swiglu" else [h * f, f * h])
    fe = model.moe_ffn_hidden_size / etp
    expert = [h * fe, h * fe, fe * h] if model.activation == "swiglu" else [h * fe, fe * h]
    return attn + [h * model.num_experts] + expert * (model.num_experts // ep)


def fetch_calls(matrices: list[float], bucket_mparams: float | None, persist_mparams: float = 0.0) -> int:
    """Collectives DeepSpeed's ZeRO-3 issues for these tensors: it packs them in order into a bucket and
    fetches once the bucket holds at least `bucket_mparams` millions (a larger tensor goes alone, never
    split: deepspeed/runtime/zero/partitioned_param_coordinator.py), plus one call for the small rest.
    Tensors under `persist_mparams` millions stay whole on every rank and are never fetched
    (stage3_param_persistence_threshold, deepspeed/runtime/zero/partition_parameters.py ds_persist).
    None: one call for the whole unit (FSDP)."""
    if not bucket_mparams:
        return 1
    calls, held, cap = 0, 0.0, bucket_mparams * 1e6
    for size in (m for m in matrices if m >= persist_mparams * 1e6):
        held += size
        if held >= cap:
            calls, held = calls + 1, 0.0
    return calls + 1


def prefetch_runs(prefetch: int, layer_params: float, max_live_mparams: float | None) -> bool:
    """Whether a unit's gather can run ahead of its compute: prefetch is on and the unit and the next one
    fit together under the live-parameter limit (DeepSpeed stage3_max_live_parameters: fetch_sub_module
    prefetches only up to max_live - available; partitioned_param_coordinator.py). Layers alike, so
    `2 * layer_params` is what prefetching one unit ahead holds."""
    if prefetch == 0:
        return False
    return max_live_mparams is None or 2 * layer_params <= max_live_mparams * 1e6


def dense_group(lay) -> tuple[int, int]:
    """(size, stride) of the group the dense states are sharded over: S ranks at stride tp."""
    return lay.dense_shards, lay.tp


def replica_group(lay) -> tuple[int, int]:
    """(size, stride) of the HSDP replica group: R ranks at stride tp * S."""
    return lay.replicas, lay.tp * lay.dense_shards


def gather_s(links: comm.Links, lay, params: ParamCount, edp: int, weight_bytes: int,
             bucket_mparams: float | None, calls: int | None = None) -> float:
    """All-gather of `params` (dense over the shard group, experts over edp at stride etp*ep), in
    `calls` collectives for the dense part when given (DeepSpeed's packed fetches), else in buckets."""
    size, stride = dense_group(lay)
    t = comm.all_gather_s(links, size, stride, params.dense * weight_bytes,
                          calls=calls or buckets(params.dense, bucket_mparams))
    if params.expert:
        t += comm.all_gather_s(links, edp, lay.etp * lay.ep, params.expert * weight_bytes,
                               calls=buckets(params.expert, bucket_mparams))
    return t


def reduce_s(links: comm.Links, lay, params: ParamCount, edp: int, grad_bytes: int, bucket_mparams: float | None,
             sharded: bool) -> float:
    """Gradient reduction of `params`: reduce-scatter over the shard group plus the all-reduce of the
    shard across HSDP replicas when `sharded` (ZeRO >= 1), else one all-reduce over dp*cp."""
    size, stride = dense_group(lay)
    calls = buckets(params.dense, bucket_mparams)
    nbytes = params.dense * grad_bytes
    if not sharded:
        t = comm.all_reduce_s(links, size * lay.replicas, stride, nbytes, calls=calls)
    else:
        t = comm.reduce_scatter_s(links, size, stride, nbytes, calls=calls)
        r_size, r_stride = replica_group(lay)
        t += comm.all_reduce_s(links, r_size, r_stride, nbytes / size, calls=calls)
    if params.expert:
        e_calls = buckets(params.expert, bucket_mparams)
        op = comm.reduce_scatter_s if sharded else comm.all_reduce_s
        t += op(links, edp, lay.etp * lay.ep, params.expert * grad_bytes, calls=e_calls)
    return t
