"""Step time of a layout: per-stage micro-batch times, pipeline span, exposed communication.

Notation: M tokens per micro-batch per GPU, h hidden, k top_k, m micro-batches, v vpp, p pp.
Per layer and micro-batch (forward; backward = 2x GEMMs and element-wise, 2.5x flash attention):
- compute: costmodels.compute (GEMMs at the fitted efficiency, attention core, memory-bound work);
- tp: 2 all-reduces of M*h*2 bytes in forward and 2 in backward (with SP an all-gather and a
  reduce-scatter each, the same bytes), exposed (Korthikanti et al. section 4.2.2) unless
  tp_comm_overlap, which hides it behind the layer's GEMMs up to their duration;
- ep: all-to-all dispatch + combine of M*k*h*2 bytes per MoE layer, forward and backward;
- cp: ring exchange of the local K/V chunk (cp - 1) times in forward, twice that in backward,
  hidden behind the attention core up to its duration;
- full recompute repeats the forward, its tp and ep communication included;
- host-bound layers: kernels launch asynchronously, so a layer takes max(GPU time, host launch
  time `layer_overhead_s`, fitted); small layers (small h, short micro-batches, large tp) are
  host-bound in eager PyTorch, and the excess is booked as compute.
Per step: pipeline span (costmodels.pipeline) + p2p sends + exposed data-parallel traffic
+ optimizer step (memory-bound) + fitted overhead.
Data parallel: ZeRO 0 all-reduces the gradients; ZeRO 1-2 reduce-scatter gradients and
all-gather updated 16-bit weights (Megatron distributed optimizer); ZeRO-3 all-gathers weights
in forward and backward and reduce-scatters gradients for every micro-batch, prefetched behind
compute. With overlap_grad_reduce the step-end traffic hides behind the last micro-batch's
backward (Megatron --overlap-grad-reduce); without it (vTrain's runs) it is fully exposed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from costmodels import comm
from costmodels import compute as cmp
from costmodels.activations import ActShape
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.memory import act_shape, expert_dp
from costmodels.model_spec import ModelSpec
from costmodels.params import local_stage_params, stage_layer_mix
from costmodels.pipeline import bubble_s, p2p_transfers, pipeline_span_s
from costmodels.train_spec import TrainSpec

ADAM_BYTES_PER_PARAM = 28  # read+write fp32 master, m, v (24), write 16-bit weight (2), read grad (2)
SGD_BYTES_PER_PARAM = 20


@dataclass(frozen=True)
class MicroTime:
    """Forward + backward of one micro-batch on one stage, seconds, split by kind."""

    compute_s: float = 0.0
    recompute_s: float = 0.0
    tp_comm_s: float = 0.0
    cp_comm_s: float = 0.0
    ep_comm_s: float = 0.0

    @property
    def total_s(self) -> float:
        """Sum of the parts."""
        return sum(getattr(self, f.name) for f in fields(self))

    def __add__(self, other: "MicroTime") -> "MicroTime":
        return MicroTime(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def scaled(self, n: float) -> "MicroTime":
        """Every part times n."""
        return MicroTime(*(getattr(self, f.name) * n for f in fields(self)))


@dataclass(frozen=True)
class Context:
    """Everything a time function needs, resolved once per layout."""

    model: ModelSpec
    train: TrainSpec
    lay: Layout
    cluster: ClusterSpec
    x: ActShape
    dev: cmp.Device
    links: comm.Links


def make_context(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> Context:
    """Bundle a resolved layout with its device and links."""
    gpu = cluster.gpu_profile
    dev = cmp.Device(gpu.peak_flops(train.precision), gpu.hbm_bytes_per_s, gpu.efficiency)
    return Context(model, train, lay, cluster, act_shape(model, train, lay), dev, comm.cluster_links(cluster))


def layer_time(c: Context, moe: bool) -> MicroTime:
    """One layer, one micro-batch, forward + backward (+ recompute)."""
    m, x, dev, flash = c.model, c.x, c.dev, c.train.flash_attention
    lin = cmp.linear_s(m, x, dev, moe)
    core = cmp.attention_core_s(m, x, dev, causal_skip=flash)
    elem = cmp.memory_s(dev, cmp.elementwise_bytes(m, x, flash))
    fwd = lin + core + elem
    compute = fwd + 2 * lin + core * (2.5 if flash else 2.0) + 2 * elem
    tp_pass = 2 * comm.all_reduce_s(c.links, c.lay.tp, 1, x.tokens * m.hidden_size * cmp.ACT_BYTES)
    ep_pass = 2 * comm.all_to_all_s(c.links, c.lay.ep, c.lay.etp, x.tokens * m.top_k * m.hidden_size * 2) if moe else 0.0
    cp_fwd = _cp_exchange_s(c)
    cp = max(0.0, cp_fwd - core) + max(0.0, 2 * cp_fwd - core * (2.5 if flash else 2.0))
    recompute, extra_passes = _recompute(c, fwd, core)
    tp = tp_pass * (2 + extra_passes)
    if c.train.tp_comm_overlap:  # hidden behind the projection and MLP GEMMs of the same passes
        tp = max(0.0, tp - lin * (3 + extra_passes))
    t = MicroTime(compute, recompute, tp, cp, ep_pass * (2 + extra_passes))
    host = c.dev.eff.layer_overhead_s * (1 + extra_passes / 3)
    return t + MicroTime(compute_s=max(0.0, host - t.total_s))


def _recompute(c: Context, fwd_s: float, core_s: float) -> tuple[float, int]:
    """(recompute seconds, extra communication passes) per layer and micro-batch."""
    if c.x.recompute == "full":
        return fwd_s, 1
    if c.x.recompute == "selective":
        return core_s, 0
    return 0.0, 0


def _cp_exchange_s(c: Context) -> float:
    """Forward ring exchange of K and V chunks over the cp group (stride tp)."""
    cp = c.lay.cp
    if cp <= 1:
        return 0.0
    kv = c.model.kv_width / c.lay.tp if c.model.num_kv_heads >= c.lay.tp else c.model.head_dim
    chunk = c.x.tokens * 2 * kv * cmp.ACT_BYTES
    crosses = comm.ranks_per_node(cp, c.lay.tp, c.links.gpus_per_node) < cp
    return (cp - 1) * comm.p2p_s(c.links, crosses, chunk)


def head_time(c: Context) -> MicroTime:
    """Output layer and cross-entropy on the last stage, forward + backward."""
    m, x = c.model, c.x
    logits = cmp.gemm_s(c.dev, x.tokens, m.hidden_size, m.vocab_size / x.tp)
    ce = cmp.memory_s(c.dev, cmp.cross_entropy_bytes(m, x))
    return MicroTime(compute_s=3 * logits + ce)


def stage_time(c: Context, stage: int) -> MicroTime:
    """One micro-batch through pipeline rank `stage`, forward + backward."""
    n_moe, n_dense = stage_layer_mix(c.model, c.lay.stage_layers, stage)
    t = MicroTime()
    if n_dense:
        t = t + layer_time(c, False).scaled(n_dense)
    if n_moe:
        t = t + layer_time(c, True).scaled(n_moe)
    if stage == c.lay.pp - 1:
        t = t + head_time(c)
    return t
