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
  (costmodels.overlap), except those the stack's overlap cannot fuse with a matmul (_tp_unfused_s:
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

from dataclasses import dataclass, fields

from costmodels import comm
from costmodels import compute as cmp
from costmodels import moe_compute, moe_dispatch, sharding
from costmodels.activations import ActShape
from costmodels.errors import SpecError
from costmodels.hardware_spec import ClusterSpec
from costmodels.kernels import GENERATIONS, KernelSpec
from costmodels.layout import Layout
from costmodels.memory import act_shape, expert_dp
from costmodels.model_spec import ModelSpec
from costmodels.overlap import exposed_s
from costmodels.params import kv_local_width, local_layer_params, stage_layer_mix
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
    return KernelSpec(GENERATIONS[gpu.tensor_core_gen], gpu.sm_count, fp8=fp8, flops_per_byte=ridge)


def attn_scale(gpu, stack: Stack) -> float:
    """The stack's fused-attention factor on `gpu`: Stack.attn_scale, or 1 where every stack runs the same
    attention kernel (kernels.Generation.one_attention_kernel: FlashAttention-2 on Ampere)."""
    gen = GENERATIONS.get(gpu.tensor_core_gen) if gpu.tensor_core_gen else None
    return 1.0 if gen is not None and gen.one_attention_kernel else stack.attn_scale


def _devices(gpu, train: TrainSpec, stack: Stack) -> tuple[cmp.Device, cmp.Device]:
    eff = gpu.efficiency
    scaled = eff.model_copy(update={"gemm_max": min(1.0, eff.gemm_max * stack.gemm_scale),
                                    "attn_max": min(1.0, eff.attn_max * attn_scale(gpu, stack))})
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
    m, x, flash = c.model, c.x, c.train.flash_attention
    lin = cmp.linear_s(m, x, c.dev, moe, c.stack.moe_grouped_gemm)
    core = cmp.attention_core_s(m, x, c.dev16, causal_skip=flash)
    elem = cmp.memory_s(c.dev16, cmp.elementwise_bytes(m, x, flash, moe) * c.stack.elementwise_scale
                        * c.train.activation_scale)  # fp32/tf32 training moves 4-byte activations
    return lin, core, elem, _fp8_cast_s(c, moe)


def _recompute(c: Context, lin: float, core: float, elem: float) -> tuple[float, int]:
    """(recompute seconds, extra communication passes) per layer and micro-batch."""
    if c.x.recompute == "full":
        return lin + core + elem, 1
    if c.x.recompute == "selective":
        return (lin / 2 + elem, 0) if c.stack.selective_recompute == "per-op" else (core, 0)
    return 0.0, 0


def _tp_gather_bytes(c: Context) -> float:
    """Bytes per element of a sequence-parallel all-gather: 1 when it moves FP8 (Stack.fp8_tp_gather with
    sequence parallelism), else 2; the reduce-scatters always move 2."""
    fp8 = c.train.precision == "fp8" and c.lay.sp and c.train.fp8_recipe in c.stack.fp8_tp_gather
    return 1.0 if fp8 else cmp.ACT_BYTES


def _tp_bytes(c: Context) -> float:
    """Bytes per activation element of a tensor-parallel all-reduce: the mean of its all-gather and
    reduce-scatter halves (2, or 1.5 with FP8 gathers)."""
    return (_tp_gather_bytes(c) + cmp.ACT_BYTES) / 2


def layer_time(c: Context, moe: bool) -> MicroTime:
    """One layer, one micro-batch, forward + backward (+ recompute), exposed communication included."""
    flash = c.train.flash_attention
    lin, core, elem, (cast_fwd, cast_bwd) = _passes(c, moe)
    bwd_core = core * (2.5 if flash else 2.0)
    perm = _permute_s(c) if moe else 0.0
    compute = 3 * (lin + elem) + cast_fwd + cast_bwd + core + bwd_core + 2 * perm
    recompute, extra = _recompute(c, lin + cast_fwd, core, elem)  # recomputed GEMMs cast their inputs again
    recompute += perm * extra
    tp = _tp_s(c, lin, extra)
    ep = 2 * _dispatch_s(c)
    cp = _cp_s(c, core, bwd_core, extra)
    fwd = lin + core + elem + cast_fwd
    bwd = compute - fwd + recompute
    dp = _zero3_layer_s(c, moe, fwd, bwd) if c.zero3_per_microbatch else 0.0
    ep = _ep_exposed_s(c, ep * (2 + extra), compute + recompute) if moe else 0.0
    t = MicroTime(compute, recompute, tp, cp, ep, dp)
    host = layer_overhead_s(c) * (1 + extra / 3)
    return t + MicroTime(compute_s=max(0.0, host - t.total_s))


def ep_overlap_applies(train: TrainSpec, lay: Layout) -> bool:
    """Whether the MoE all-to-all hides behind another micro-batch's computation: asked for
    (TrainSpec.ep_comm_overlap) and experts spread over ranks (ep > 1; megatron-core 0.19
    TransformerConfig asserts expert_model_parallel_size > 1 with overlap_moe_expert_parallel_comm)."""
    return train.ep_comm_overlap and lay.ep > 1


def _ep_exposed_s(c: Context, ep_s: float, window_s: float) -> float:
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


def _dispatch_s(c: Context) -> float:
    """One dispatch (or combine) of a micro-batch's tokens, seconds (costmodels.moe_dispatch). All-to-all and DeepEP:
    the busiest EP rank receives x.moe_load times the mean bytes (costmodels.moe_balance) and the exchange ends when
    it has, so the bytes are priced at that rank's; the all-gather moves every token whatever the routing."""
    copy_bytes = dispatch_tokens(c) * c.model.hidden_size * cmp.ACT_BYTES
    if dispatcher(c) == "allgather":
        return moe_dispatch.allgather_dispatch_s(c.links, c.lay.tp * c.lay.ep, copy_bytes)
    copy_bytes *= c.x.moe_load
    return moe_dispatch.dispatch_s(c.links, c.lay.ep, c.lay.etp, copy_bytes, dispatcher(c),
                                   c.model.num_experts, c.model.top_k)


def _permute_s(c: Context) -> float:
    """Forward seconds of one MoE layer's token permutes and unpermutes (costmodels.moe_compute.permute_bytes, the
    stack's dispatcher) at the fitted HBM rate; its backward, the mirrored gathers, takes the same again. Not scaled by
    the stack's element-wise fusion: no framework fuses these gathers into a neighbouring kernel."""
    return cmp.memory_s(c.dev16, moe_compute.permute_bytes(c.model, c.x, dispatcher(c)))


def dispatch_tokens(c: Context) -> float:
    """Tokens one GPU dispatches per micro-batch: its sequence-parallel shard M*u (costmodels.compute
    _moe_gemms: Megatron-Core's MoE layer dispatches the [s/tp, b, h] states it holds under SP)."""
    return c.x.tokens * c.x.u


def _tp_s(c: Context, lin_s: float, extra: int) -> float:
    """Exposed tensor-parallel seconds of one layer and micro-batch: 2 all-reduces (SP: 2 all-gathers and
    2 reduce-scatters) in each of forward, backward and a recomputed forward. Under TP overlap the
    collectives the stack can overlap run beside the same passes' linear GEMMs; the rest stay exposed
    (_tp_unfused_s)."""
    tp_pass = 2 * comm.all_reduce_s(c.links, c.lay.tp, 1, c.x.tokens * c.model.hidden_size * _tp_bytes(c))
    total = tp_pass * (2 + extra)
    if not tp_overlap_applies(c.train, c.lay):
        return total
    unfused = _tp_unfused_s(c, tp_pass, extra)
    return exposed_s(lin_s * (3 + extra), total - unfused, c.kappa) + unfused


def tp_overlap_applies(train: TrainSpec, lay: Layout) -> bool:
    """Whether TP communication overlap runs: asked for (TrainSpec.tp_overlap) and sequence parallelism
    on. Both implementations overlap only all-gathers and reduce-scatters: Megatron-LM refuses
    --tp-comm-overlap without --sequence-parallel (megatron/training/arguments.py, "Tensor parallel
    communication/GEMM overlap can happen only when sequence parallelism is enabled"), and PyTorch's
    micro-pipeline pass matches only all_gather_into_tensor and reduce_scatter_tensor
    (torch/_inductor/fx_passes/micro_pipeline_tp.py), so sp = 0's all-reduces stay exposed."""
    return train.tp_overlap and lay.sp and lay.tp > 1


def _tp_unfused_s(c: Context, tp_pass_s: float, extra: int) -> float:
    """Seconds of the TP collectives that the stack's overlap leaves exposed (Stack.tp_overlap_impl).

    userbuffers (Transformer Engine): none. micro-pipeline (PyTorch async TP,
    torch/_inductor/fx_passes/micro_pipeline_tp.py) fuses an all-gather only with the matmuls that
    consume it and a reduce-scatter only with the one matmul that produces it, so
    - the backward reduce-scatter of the attention input gradient stays exposed, and the MLP's under
      SwiGLU: each gradient is a sum of several matmuls (wq, wk, wv, separate in torchtitan's models;
      w1, w3), which _find_producer_matmul does not match (a GELU MLP's one fc1 matmul fuses);
    - all-gathers stay exposed in every pass when an FP8 cast sits between gather and matmul, i.e. when
      the gather moves 16-bit data (rowwise recipe; tensorwise casts before the gather: Stack.fp8_tp_gather).
    A pass's time splits into its gather and reduce-scatter halves by their bytes (1 or 2 per element)."""
    if c.stack.tp_overlap_impl == "userbuffers":
        return 0.0
    gather_bytes = _tp_gather_bytes(c)
    gather_pass_s = tp_pass_s * gather_bytes / (gather_bytes + cmp.ACT_BYTES)
    reduce_pass_s = tp_pass_s - gather_pass_s
    gathers_fuse = c.train.precision != "fp8" or gather_bytes < cmp.ACT_BYTES
    summed = (2 if c.model.activation == "swiglu" else 1) / 2  # of the pass's 2 reduce-scatters
    return reduce_pass_s * summed + (0.0 if gathers_fuse else gather_pass_s * (2 + extra))


def _zero3_layer_s(c: Context, moe: bool, fwd_s: float, bwd_s: float) -> float:
    """Exposed ZeRO-3 time of one layer and micro-batch (costmodels.sharding)."""
    lay, st, train = c.lay, c.stack, c.train
    p = local_layer_params(c.model, moe, lay.tp, lay.ep, lay.etp)
    edp = expert_dp(c.cluster, lay)
    fetches, reductions = _zero3_calls(c, moe)
    ag = sharding.gather_s(c.links, lay, p, edp, train.weight_bytes_per_param, st.zero3_bucket_mparams, fetches)
    rs = sharding.reduce_s(c.links, lay, p, edp, train.grad_reduce_bytes_per_param, _zero3_reduce_bucket(st), True)
    back = (ag if st.reshard_after_forward else 0.0) + rs
    host = (fetches * (2 if st.reshard_after_forward else 1) + reductions) * st.zero3_call_overhead_s
    if not sharding.prefetch_runs(st.zero3_prefetch, p.total, st.zero3_max_live_mparams):
        return ag + back + host
    return exposed_s(fwd_s, ag, c.kappa) + exposed_s(bwd_s, back, c.kappa) + host


def _zero3_reduce_bucket(st: Stack) -> float | None:
    """Gradient buckets of ZeRO-3: the stack's reduce bucket where it buckets (DeepSpeed
    reduce_bucket_size), else one reduction per unit (FSDP)."""
    return st.grad_bucket_mparams if st.zero3_bucket_mparams else None


def _zero3_calls(c: Context, moe: bool) -> tuple[int, int]:
    """(fetches, reductions) of one layer and micro-batch: DeepSpeed's packed fetches
    (costmodels.sharding.fetch_calls) and its reduce buckets; one of each per FSDP unit."""
    lay, st = c.lay, c.stack
    fetches = sharding.fetch_calls(sharding.layer_matrices(c.model, moe, lay.tp, lay.ep, lay.etp),
                                   st.zero3_bucket_mparams, st.zero3_persistence_threshold_mparams)
    total = local_layer_params(c.model, moe, lay.tp, lay.ep, lay.etp).total
    return fetches, sharding.buckets(total, _zero3_reduce_bucket(st))


def _cp_s(c: Context, core_s: float, bwd_core_s: float, extra: int) -> float:
    """Exposed context-parallel time of one layer and micro-batch, forward + backward (+ the forward
    again under full recompute, `extra` = 1), by algorithm (module docstring)."""
    if c.lay.cp <= 1:
        return 0.0
    if c.lay.cp_comm == "p2p":
        fwd = _cp_exchange_s(c)
        return exposed_s(core_s, fwd, c.kappa) + exposed_s(bwd_core_s, 2 * fwd, c.kappa)
    if c.lay.cp_comm == "a2a":
        return (2 + extra) * _cp_all_to_all_s(c)
    gather = comm.all_gather_s(c.links, c.lay.cp, c.lay.tp, c.lay.cp * _kv_chunk_bytes(c))
    return (2 + extra) * gather + gather  # the reduce-scatter of dK, dV costs what the gather costs


def cp_layer_s(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> float:
    """Exposed context-parallel seconds of one layer and micro-batch under `lay` and its cp_comm.

    The same for every layer (dense or MoE) and step time only grows with it, so among algorithms the
    one with the least time is the fastest for every stage split: the planner keeps only that one."""
    c = make_context(model, cluster, train, lay)
    _, core, _, _ = _passes(c, False)
    bwd_core = core * (2.5 if train.flash_attention else 2.0)
    return _cp_s(c, core, bwd_core, 1 if lay.recompute == "full" else 0)


def _kv_chunk_bytes(c: Context) -> float:
    """Local K and V of one micro-batch on one rank, bytes (KV heads replicated when fewer than tp)."""
    return c.x.tokens * 2 * kv_local_width(c.model, c.lay.tp) * cmp.ACT_BYTES


def _cp_exchange_s(c: Context) -> float:
    """Forward ring exchange of K and V chunks over the cp group (stride tp)."""
    cp = c.lay.cp
    crosses = comm.ranks_per_node(cp, c.lay.tp, c.links.gpus_per_node) < cp
    return (cp - 1) * comm.p2p_s(c.links, crosses, _kv_chunk_bytes(c))


def _cp_all_to_all_s(c: Context) -> float:
    """One pass of Ulysses: all-to-all of the local Q, K, V (tokens/cp x (q + 2 kv)/tp) before
    attention and of the output (tokens/cp x q/tp) after it, over the cp group (stride tp)."""
    q, ctx = c.model.q_width / c.lay.tp, c.model.ctx_width / c.lay.tp
    qkv = c.x.tokens * q * cmp.ACT_BYTES + _kv_chunk_bytes(c)
    out = c.x.tokens * ctx * cmp.ACT_BYTES
    return sum(comm.all_to_all_s(c.links, c.lay.cp, c.lay.tp, b) for b in (qkv, out))


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
