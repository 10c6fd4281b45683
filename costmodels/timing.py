"""Step time of a layout, per layer: compute, recompute and the communication left exposed.

Notation: M tokens per micro-batch per GPU, h hidden, k top_k, m micro-batches, v vpp, p pp,
kappa the stack's overlap_slowdown (costmodels.overlap), P_l one layer's local parameters.
Per layer and micro-batch (forward; backward = 2x GEMMs and element-wise, 2.5x flash attention):
- compute: costmodels.compute (GEMMs at the fitted efficiency, attention core, memory-bound work);
  the stack scales GEMM efficiency and element-wise bytes (fusion); FP8 GEMMs run at the FP8 peak
  times the recipe's fitted fraction, pay their casts in HBM bytes (inputs and weights in forward
  and in recompute, output gradients in backward), and leave attention and the
  output layer in bf16 (Transformer Engine and torchao keep both in 16 bits);
- tp: 2 all-reduces of M*h*2 bytes in forward and 2 in backward (with SP an all-gather and a
  reduce-scatter each, the same bytes), exposed (Korthikanti et al. section 4.2.2) unless
  tp_comm_overlap with SP (tp_overlap_applies), which runs them beside the layer's GEMMs
  (costmodels.overlap), except those the stack's overlap cannot fuse with a matmul (costmodels.layer_comm:
  PyTorch async TP);
- ep: dispatch + combine per MoE layer, forward and backward: M*k*h*2 bytes all-to-all, or DeepEP's
  one copy per destination rank / node, or the tp x ep group's all-gather (costmodels.moe_dispatch, the run's
  dispatcher, else the stack's ep_dispatcher), and the permutes around it (costmodels.moe_compute); the busiest
  EP rank's expert work and received bytes (TrainSpec.moe_load_balancing, costmodels.moe_balance); exposed,
  unless TrainSpec.ep_comm_overlap, which runs them beside another micro-batch's computation of the same layer
  (ep_overlap_applies; costmodels.overlap);
- cp (Layout.cp_comm; Megatron-Core TransformerConfig.cp_comm_type): p2p = ring exchange of the
  local K/V chunk (cp - 1) times in forward, twice that in backward, beside the attention core
  (costmodels.overlap); a2a = all-to-all of Q, K, V before attention and of its output after, in
  forward and again in backward (Jacobs et al. 2023, DeepSpeed-Ulysses section 3.1), exposed;
  allgather = all-gather of K and V before attention in forward and backward plus a reduce-scatter
  of their gradients (Llama 3 paper section 3.3.2; Megatron: "not async"), exposed;
- ZeRO-3 without pipelining: the layer's gathers and reduce-scatter beside its neighbour's compute
  (costmodels.sharding), booked as `dp_comm_s`;
- recompute: full repeats the forward with its tp and ep communication; selective is the stack's
  (Megatron: attention core; torchtitan per-op: every second GEMM and every element-wise op);
- host-bound layers: kernels launch asynchronously, so a layer takes max(GPU time, host launch
  time `layer_overhead_s`, fitted per stack); the excess is booked as compute.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from costmodels import comm
from costmodels import compute as cmp
from costmodels.activations import ActShape
from costmodels.errors import SpecError
from costmodels.hardware_spec import ClusterSpec
from costmodels.kernels import GENERATIONS, KernelSpec
from costmodels.layer_comm import cp_s, tp_s, zero3_layer_s
from costmodels.layout import Layout
from costmodels.memory import act_shape, full_recompute_split
from costmodels.model_spec import ModelSpec
from costmodels.moe_timing import ep_exposed_s, microbatch_dispatch_s, permute_backward_s, permute_s
from costmodels.params import stage_layer_mix
from costmodels.recompute_time import module_recompute_s, strided_view_s
from costmodels.stack import Stack
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
    dp_comm_s: float = 0.0

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
    dev: cmp.Device  # linear-layer GEMMs (FP8 peak and recipe under fp8)
    dev16: cmp.Device  # attention, output layer and memory-bound work (16-bit)
    links: comm.Links
    stack: Stack

    @property
    def kappa(self) -> float:
        """The stack's compute slowdown while communication overlaps it."""
        return self.stack.overlap_slowdown

    @property
    def zero3_per_microbatch(self) -> bool:
        """ZeRO-3 without pipelining gathers and reduces every micro-batch (module costmodels.sharding)."""
        return self.lay.zero >= 3 and self.lay.pp == 1


def kernel_spec(gpu, fp8: bool) -> KernelSpec | None:
    """The GPU's spec-sheet kernel physics (costmodels.kernels), None when its profile lacks the SM
    count or the tensor-core generation."""
    if gpu.sm_count is None or gpu.tensor_core_gen is None:
        return None
    peak = gpu.fp8_tflops if fp8 else gpu.bf16_tflops
    ridge = peak * 1e12 / (gpu.hbm_bytes_per_s * gpu.efficiency.hbm)
    gen = GENERATIONS[gpu.tensor_core_gen]
    return KernelSpec(gen, gpu.sm_count, fp8=fp8, flops_per_byte=ridge, sustained=sustained_derate(gpu, gen))


def sustained_derate(gpu, gen) -> float:
    """The generation's sustained clock ratio (costmodels.kernels.Generation.sustained) where the part runs at the
    power limit it was measured at or above; 1 where its profile's peak already carries a lower limit's clock
    (h100-sxm-500w) or no limit is stated."""
    if gen.sustained_tdp_w <= 0 or gpu.tdp_w is None or gpu.tdp_w < gen.sustained_tdp_w:
        return 1.0
    return gen.sustained


def attn_scale(gpu, stack: Stack) -> float:
    """The stack's fused-attention factor on `gpu`: Stack.attn_scale, or 1 where every stack runs the same
    attention kernel (kernels.Generation.one_attention_kernel: FlashAttention-2 on Ampere)."""
    gen = GENERATIONS.get(gpu.tensor_core_gen) if gpu.tensor_core_gen else None
    return 1.0 if gen is not None and gen.one_attention_kernel else stack.attn_scale


def curve_transfer(gpu) -> tuple[float, float]:
    """(GEMM, attention) factors on a fitted curve copied from another generation's GPU (Efficiency.curve_gen):
    the ratio of the two generations' best measured fractions of peak (costmodels.kernels.Generation.gemm_ceiling,
    attn_ceiling). The curve's losses are taken as the same share of what the kernels reach, not of the spec
    peak: MI300X's spec peak is 1,307 TFLOP/s but its best GEMM 668 (0.511), H100's 795 of 989 (0.803), so
    H100's curve copied as is priced MI300X GEMMs above H200's. (1, 1) for a curve of the GPU's own generation."""
    src, own = gpu.efficiency.curve_gen, gpu.tensor_core_gen
    if src is None or own is None or src == own:
        return 1.0, 1.0
    a, b = GENERATIONS[own], GENERATIONS[src]
    return a.gemm_ceiling / b.gemm_ceiling, a.attn_ceiling / b.attn_ceiling


def _devices(gpu, train: TrainSpec, stack: Stack) -> tuple[cmp.Device, cmp.Device]:
    eff = gpu.efficiency
    gemm, attn = curve_transfer(gpu)
    scaled = eff.model_copy(update={"gemm_max": min(1.0, eff.gemm_max * stack.gemm_scale * gemm),
                                    "attn_max": min(1.0, eff.attn_max * attn_scale(gpu, stack) * attn)})
    half = "bf16" if train.precision == "fp8" else train.precision
    dev16 = cmp.Device(gpu.peak_flops(half), gpu.hbm_bytes_per_s, scaled,
                       kernel_spec(gpu, False) if half in ("bf16", "fp16") else None)
    if train.precision != "fp8":
        return dev16, dev16
    fp8 = scaled.model_copy(update={"gemm_max": scaled.gemm_max * stack.fp8.of(train.fp8_recipe),
                                    "gemm_half_dim": scaled.gemm_half_dim * stack.fp8.half_dim_of(train.fp8_recipe)})
    low = cmp.Device(_low_precision_peak(gpu, train.fp8_recipe), gpu.hbm_bytes_per_s, fp8, kernel_spec(gpu, True))
    return low, dev16


# Tensor-core generations whose MMA applies MX block scales (PTX tcgen05.mma block_scale on SM100; CDNA 4's
# MX-format matrix cores): MXFP8 elsewhere is emulated, which Transformer Engine refuses.
BLOCK_SCALED_GENS = ("blackwell", "blackwell-ultra", "cdna4")


def _low_precision_peak(gpu, recipe: str) -> float:
    """FLOP/s of the linear layers' GEMMs under precision fp8: the FP4 peak for recipe nvfp4 (Blackwell FP4
    tensor cores), else the FP8 peak. Known deviation: NVFP4's casts are priced at the stack's FP8 bytes per
    element (they write half a byte plus 1/16 of a scale instead of one)."""
    if recipe == "mxfp8" and gpu.tensor_core_gen not in (None, *BLOCK_SCALED_GENS):
        raise SpecError(f"fp8_recipe mxfp8 needs block-scaled (MX) tensor cores (Blackwell, CDNA 4): gpu "
                        f"{gpu.name!r} is {gpu.tensor_core_gen}; use tensorwise, rowwise or blockwise")
    if recipe != "nvfp4":
        return gpu.peak_flops("fp8")
    if gpu.fp4_tflops is None:
        raise SpecError(f"fp8_recipe nvfp4 needs FP4 tensor cores: gpu {gpu.name!r} has no fp4_tflops")
    return gpu.fp4_tflops * 1e12


def make_context(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> Context:
    """Bundle a resolved layout with its devices, links and stack."""
    stack = train.stack_spec
    dev, dev16 = _devices(cluster.gpu_profile, train, stack)
    return Context(model, train, lay, cluster, act_shape(model, train, lay), dev, dev16,
                   comm.cluster_links(cluster), stack)


def layer_overhead_s(c: Context) -> float:
    """Host launch time of one layer (stack's value, else the GPU profile's)."""
    s = c.stack.layer_overhead_s
    return c.dev16.eff.layer_overhead_s if s is None else s


def step_overhead_s(c: Context) -> float:
    """Fixed per-step cost (stack's value, else the GPU profile's)."""
    s = c.stack.step_overhead_s
    return c.dev16.eff.step_overhead_s if s is None else s


def _fp8_cast_s(c: Context, moe: bool) -> tuple[float, float]:
    """HBM seconds of one layer's FP8 casts, (forward, backward): compute.fp8_cast_elements times the
    stack's bytes per element. Not scaled by the stack's element-wise fusion: dynamic scaling needs the
    whole tensor's amax before the cast, so no compiler fuses the cast into the op that made it."""
    if c.train.precision != "fp8":
        return 0.0, 0.0
    per_element = c.stack.fp8_cast_bytes_per_element
    elements = cmp.fp8_cast_elements(c.model, c.x, moe, c.stack.moe_grouped_gemm)
    return tuple(cmp.memory_s(c.dev16, n * per_element) for n in elements)


def _passes(c: Context, moe: bool) -> tuple[float, float, float, tuple[float, float]]:
    """Forward seconds of one layer's linear GEMMs, attention core and element-wise work, and the
    (forward, backward) seconds of its FP8 casts."""
    m, x, flash = c.model, c.x, c.train.flash
    lin = cmp.linear_s(m, x, c.dev, moe, c.stack.moe_grouped_gemm)
    core = cmp.attention_core_s(m, x, c.dev16, causal_skip=flash)
    elem = cmp.memory_s(c.dev16, cmp.elementwise_bytes(m, x, flash, moe) * c.stack.elementwise_scale
                        * c.train.activation_scale)  # fp32/tf32 training moves 4-byte activations
    return lin, core, elem + strided_view_s(c, cmp.strided_bytes(m, x, moe)), _fp8_cast_s(c, moe)



def _recompute(c: Context, moe: bool, lin: float, core: float, elem: float) -> tuple[float, int, int]:
    """(recompute seconds, extra TP/CP passes, extra EP passes) per layer and micro-batch: full recompute reruns
    the whole forward; selective reruns half the GEMMs and the element-wise work (per-op stacks) or the named
    modules (costmodels.recompute_time)."""
    if c.x.recompute == "full":
        return lin + core + elem, 1, 1
    if c.x.recompute == "selective":
        if c.stack.selective_recompute == "per-op":
            return lin / 2 + elem, 0, 0
        if c.x.modules == ("core_attn",):  # Megatron's default and every search candidate's: no lookup
            return core, 0, 0
        seconds, ep_passes = module_recompute_s(c, moe, core)
        return seconds, 0, ep_passes
    return 0.0, 0, 0


def layer_time(c: Context, moe: bool) -> MicroTime:
    """One layer, one micro-batch, forward + backward (+ recompute), exposed communication included."""
    flash = c.train.flash
    lin, core, elem, (cast_fwd, cast_bwd) = _passes(c, moe)
    bwd_core = core * (2.5 if flash else 2.0)
    perm, perm_bwd = (permute_s(c), permute_backward_s(c)) if moe else (0.0, 0.0)
    compute = 3 * (lin + elem) + cast_fwd + cast_bwd + core + bwd_core + perm + perm_bwd
    recompute, extra, ep_extra = _recompute(c, moe, lin + cast_fwd, core, elem)  # recomputed GEMMs cast again
    recompute += perm * extra
    tp = tp_s(c, lin, extra)
    ep = 2 * microbatch_dispatch_s(c)
    cp = cp_s(c, core, bwd_core, extra)
    fwd = lin + core + elem + cast_fwd
    bwd = compute - fwd + recompute
    dp = zero3_layer_s(c, moe, fwd, bwd) if c.zero3_per_microbatch else 0.0
    ep = ep_exposed_s(c, ep * (2 + ep_extra), compute + recompute) if moe else 0.0
    t = MicroTime(compute, recompute, tp, cp, ep, dp)
    host = layer_overhead_s(c) * (1 + extra / 3)
    return t + MicroTime(compute_s=max(0.0, host - t.total_s))


def cp_layer_s(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> float:
    """Exposed context-parallel seconds of one layer and micro-batch under `lay` and its cp_comm.

    The same for every layer (dense or MoE) and step time only grows with it, so among algorithms the
    one with the least time is the fastest for every stage split: the planner keeps only that one."""
    c = make_context(model, cluster, train, lay)
    _, core, _, _ = _passes(c, False)
    bwd_core = core * (2.5 if train.flash else 2.0)
    return cp_s(c, core, bwd_core, 1 if lay.recompute == "full" else 0)


def _output_s(c: Context) -> float:
    """Output layer (16-bit GEMM, forward + 2x backward) and cross-entropy, one micro-batch."""
    m, x = c.model, c.x
    logits = cmp.gemm_s(c.dev16, x.tokens, m.hidden_size, m.vocab_size / x.tp)
    return 3 * logits + cmp.memory_s(c.dev16, cmp.cross_entropy_bytes(m, x))


def head_time(c: Context) -> MicroTime:
    """Output layer and cross-entropy on the last stage, forward + backward, with any multi-token
    prediction modules (mtp_time), which Megatron-Core builds on the last stage."""
    return MicroTime(compute_s=_output_s(c)) + mtp_time(c)


def mtp_time(c: Context) -> MicroTime:
    """Multi-token prediction modules (DeepSeek-V3 section 2.2), each: eh_proj (2h -> h, column-split
    over tp), one layer of the last layer's kind, and one more output layer and loss."""
    m, x = c.model, c.x
    if not m.mtp_num_layers:
        return MicroTime()
    proj = 3 * cmp.gemm_s(c.dev16, x.tokens, 2 * m.hidden_size, m.hidden_size / x.tp)
    one = layer_time(c, m.mtp_is_moe) + MicroTime(compute_s=proj + _output_s(c))
    return one.scaled(m.mtp_num_layers)


def stage_time(c: Context, stage: int) -> MicroTime:
    """One micro-batch through pipeline rank `stage`, forward + backward. Under full recompute limited to the first
    N layers of each chunk (Megatron --recompute-method block --recompute-num-layers N; torchtitan's every k-th
    layer), the layers kept whole run without the recompute (costmodels.memory.full_recompute_split), each kind in
    proportion to its share of the rank's layers."""
    n_moe, n_dense = stage_layer_mix(c.model, c.lay.stage_layers, stage, c.lay.vpp, c.lay.chunk_layers)
    whole = full_recompute_split(c.lay, n_moe + n_dense)[0] / max(n_moe + n_dense, 1)
    plain = replace(c, x=replace(c.x, recompute="none")) if whole else c
    t = MicroTime()
    for moe, n in ((False, n_dense), (True, n_moe)):
        if n:
            t = t + layer_time(c, moe).scaled(n * (1 - whole))
            t = t + (layer_time(plain, moe).scaled(n * whole) if whole else MicroTime())
    if stage == c.lay.pp - 1:
        t = t + head_time(c)
    return t
