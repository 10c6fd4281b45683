"""TrainSpec: batch, sequence, precision and optimizer of a training run."""

from __future__ import annotations

import functools
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from costmodels import moe_balance
from costmodels.errors import SpecError
from costmodels.hardware_spec import FULL_PRECISIONS, Precision
from costmodels.model_spec import MAX_SEQ, ModelSpec
from costmodels.moe_balance import BalanceKind
from costmodels.stack import DEFAULT_STACK, Fp8Recipe, Stack

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
StateDtype = Literal["fp32", "bf16", "fp16", "fp8"]


class TrainSpec(BaseModel):
    """What is trained and how: global batch, sequence length, precision, optimizer."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    global_batch_size: int = Field(..., ge=1, le=100_000_000, description="Sequences per optimizer step.")
    seq_length: Optional[int] = Field(
        None, ge=1, le=MAX_SEQ, description="Tokens per sequence; null = the model's seq_length."
    )
    precision: Precision = Field("bf16", description="Compute precision of the GEMMs: bf16, fp16 or fp8 (16-bit "
                                 "weights and activations); fp32 (fp32 everything, full-FP32 GEMMs: PyTorch's "
                                 "default) or tf32 (fp32 storage, TF32 tensor-core GEMMs).")
    grad_dtype: Optional[Literal["fp32", "bf16", "fp16"]] = Field(
        None,
        description="Gradient dtype; null = the weights' 16-bit dtype (16 bytes/param with Adam); fp32 = Megatron's 18.",
    )
    optimizer: Literal["adam", "sgd"] = Field("adam", description="adam (2 fp32 moments) or sgd (1 fp32 momentum).")
    master_weights: bool = Field(True, description="Keep an fp32 master copy of the weights in the optimizer.")
    flash_attention: Optional[bool] = Field(
        None, description="Fused attention that never stores the s x s score matrix (FlashAttention, cuDNN); "
        "null = the stack's default (Stack.flash_attention: false for megatron-2021, whose Megatron-LM ran "
        "scale-mask-softmax on the stored scores).")
    tp_comm_overlap: Optional[bool] = Field(
        None, description="Tensor-parallel communication hidden behind the GEMMs (Megatron --tp-comm-overlap, TE, "
        "torchtitan async TP); applies only with sequence parallelism (costmodels.layer_comm.tp_overlap_applies); "
        "null = the stack's default."
    )
    overlap_grad_reduce: Optional[bool] = Field(
        None, description="Data-parallel gradient reduction overlaps the last backward (Megatron "
        "--overlap-grad-reduce, DeepSpeed overlap_comm); null = the stack's default."
    )
    overlap_param_gather: Optional[bool] = Field(
        None, description="ZeRO-1/2: the all-gather of the updated weights overlaps the next step's first forward "
        "(Megatron --overlap-param-gather, which Megatron accepts only beside --overlap-grad-reduce); null = the "
        "stack's default. Priced only where the gradient reduction overlaps too (TrainSpec.param_gather_overlap)."
    )
    fused_loss: Optional[bool] = Field(
        None, description="Cross entropy fused or compiled (Megatron --cross-entropy-loss-fusion, torch.compile of "
        "the loss): no fp32 copy of the logits; null = the stack's default."
    )
    loss_chunks: int = Field(
        1, ge=1, le=4096, description="The output layer and loss run over this many sequence chunks, one chunk's "
        "logits alive at a time (torchtitan 0.3 ChunkedLossWrapper: num_chunks 8 in every LLM preset); 1 = the "
        "whole micro-batch's logits at once."
    )
    moe_dispatcher: Literal["alltoall", "allgather"] = Field(
        "alltoall", description="MoE token dispatcher whose stored copies the memory counts: allgather = "
        "Megatron-Core 0.6's MoEAllGatherTokenDispatcher (torch.gather permutation; costmodels.activations."
        "allgather_dispatch_bytes); alltoall = only the permuted expert input (all-to-all, DeepEP, and the "
        "index-based permutation of later versions)."
    )
    ep_dispatcher: Optional[Literal["alltoall", "allgather", "deepep"]] = Field(
        None, description="MoE token dispatcher whose communication and permutes the time model prices: alltoall "
        "(one copy per token and expert), allgather (the tp x ep group gathers every token: Megatron "
        "--moe-token-dispatcher-type allgather), deepep (one copy per destination rank and node: DeepEP or HybridEP, "
        "Megatron --moe-token-dispatcher-type flex); null = the stack's (Stack.ep_dispatcher)."
    )
    moe_permute_fusion: bool = Field(
        True, description="The MoE token permute and unpermute run as fused kernels (Megatron --moe-permute-fusion, "
        "Transformer Engine; torchtitan's and DeepEP's own): priced at the HBM rate. false = megatron-core's "
        "unfused path, an index_select whose backward is an atomic index_add and a probability-weighted "
        "scatter_add (costmodels.moe_compute.unfused_permute_bytes; every dispatcher)."
    )
    ep_comm_overlap: bool = Field(
        False, description="MoE all-to-all (dispatch and combine) hidden behind another micro-batch's computation: "
        "Megatron-Core --overlap-moe-expert-parallel-comm (the 1F1B phase runs one micro-batch's forward beside the "
        "previous one's backward), DeepSeek-V3's DualPipe. Priced where ep > 1 (costmodels.moe_timing."
        "ep_overlap_applies). Known deviation: the extra micro-batch Megatron-Core keeps in flight is not counted in "
        "memory (the Megatron reader warns)."
    )
    moe_load_balancing: BalanceKind = Field(
        "aux_loss", description="MoE router load balancing, which sets how many more routed rows the busiest "
        "expert-parallel rank receives than the mean (costmodels.moe_balance): aux_loss (Megatron's default, "
        "--moe-router-load-balancing-type), seq_aux_loss, global_aux_loss, sinkhorn, none (no balancing: the busiest "
        "rank's expert work and received all-to-all bytes grow), forced (--moe-router-force-load-balancing: uniform "
        "random routing, benchmarking only)."
    )
    moe_expert_bias: bool = Field(
        False, description="Aux-loss-free load balancing by a per-expert routing bias (Megatron "
        "--moe-router-enable-expert-bias, DeepSeek-V3; Wang et al. 2024, arXiv 2408.15664): balanced whatever "
        "moe_load_balancing says."
    )
    stack: Optional[Union[str, Stack]] = Field(
        None, description=f"Software stack whose mechanisms and efficiencies the time model uses (a profile name "
        f"under hardware_profiles/stacks or an inline stack); null = {DEFAULT_STACK}."
    )
    fp8_recipe: Fp8Recipe = Field(
        "tensorwise", description="FP8 scaling recipe when precision is fp8: tensorwise (TE delayed scaling, "
        "torchao tensorwise), rowwise, mxfp8 (Blackwell), blockwise (DeepSeek-V3), nvfp4 (Blackwell FP4 tensor cores: the "
        "linear GEMMs at the GPU's fp4_tflops)."
    )

    offload_optimizer: Literal["none", "cpu", "nvme"] = Field(
        "none", description="Where the optimizer states (fp32 master weights and moments) live: none = on the GPU; "
        "cpu = host memory (DeepSpeed ZeRO-Offload offload_optimizer.device cpu, Megatron "
        "--optimizer-cpu-offload); nvme = ZeRO-Infinity's NVMe tier.")
    offload_optimizer_fraction: float = Field(
        1.0, ge=0.0, le=1.0, description="Share of the optimizer states offloaded when offload_optimizer is not "
        "none (Megatron --optimizer-offload-fraction; DeepSpeed offloads all, 1.0).")
    offload_params: Literal["none", "cpu", "nvme"] = Field(
        "none", description="Where ZeRO-3 parameter shards live between uses: none = GPU; cpu / nvme = "
        "DeepSpeed ZeRO-Infinity offload_param.device (needs zero=3).")

    zero_sub_group_mparams: float = Field(
        1000.0, gt=0, le=1e9, description="Millions of elements per ZeRO-3 optimizer sub-group, stepped one after "
        "another (DeepSpeed zero_optimization.sub_group_size, default 1e9 = 1000): bounds the fp32 gradient cast of "
        "the stack's grad_cast_bytes.")

    fp8_param_gather: bool = Field(
        False, description="With precision fp8: the model keeps its weights as FP8 (1 byte) and gathers them in FP8 "
        "(Megatron --fp8-param-gather; the fp32 master copy stays in the optimizer).")
    master_dtype: Literal["fp32", "fp16", "bf16"] = Field(
        "fp32", description="Dtype of the optimizer's master weights when master_weights (Megatron "
        "--use-precision-aware-optimizer --main-params-dtype; fp32 by default).")
    exp_avg_dtype: StateDtype = Field(
        "fp32", description="Dtype of Adam's first moment, or SGD's momentum (Megatron --exp-avg-dtype with "
        "--use-precision-aware-optimizer; fp32 by default).")
    exp_avg_sq_dtype: StateDtype = Field(
        "fp32", description="Dtype of Adam's second moment (Megatron --exp-avg-sq-dtype with "
        "--use-precision-aware-optimizer; fp32 by default).")
    activation_offload_layers: int = Field(
        0, ge=0, le=100_000, description="Transformer layers per pipeline rank whose stored activations are "
        "offloaded to host memory during forward and brought back for backward (Megatron --cpu-offloading "
        "--cpu-offloading-num-layers); 0 = none.")
    expandable_segments: Optional[bool] = Field(
        None, description="PyTorch's caching allocator maps memory in growable segments "
        "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), which removes most fragmentation of the reserve; "
        "null = the stack's default.")

    @property
    def stack_spec(self) -> Stack:
        """The resolved stack; null means a stack with the default mechanisms and the GPU's efficiencies
        (loaders replace a name, and null, by the fitted profile)."""
        if isinstance(self.stack, Stack):
            return self.stack
        if self.stack is None:
            return _default_stack()
        raise SpecError(f"train.stack {self.stack!r} was not resolved to a stack profile")

    def moe_load_factor(self, model: ModelSpec, ep: int) -> float:
        """Routed rows of the busiest of `ep` expert-parallel ranks over the mean (costmodels.moe_balance); 1 for
        a dense model."""
        if not model.num_experts:
            return 1.0
        per_expert = moe_balance.expert_excess(self.moe_load_balancing, self.moe_expert_bias)
        return moe_balance.load_factor(per_expert, model.num_experts, ep, model.capacity_factor)

    @property
    def flash(self) -> bool:
        """Whether attention is fused: the explicit setting, else the stack's."""
        return self.stack_spec.flash_attention if self.flash_attention is None else self.flash_attention

    @property
    def tp_overlap(self) -> bool:
        """Whether TP communication is overlapped: the explicit setting, else the stack's."""
        return self.stack_spec.tp_comm_overlap if self.tp_comm_overlap is None else self.tp_comm_overlap

    @property
    def grad_overlap(self) -> bool:
        """Whether gradient reduction is overlapped: the explicit setting, else the stack's."""
        return self.stack_spec.overlap_grad_reduce if self.overlap_grad_reduce is None else self.overlap_grad_reduce

    @property
    def param_gather_overlap(self) -> bool:
        """Whether ZeRO-1/2's weight all-gather is overlapped: the explicit setting, else the stack's, and only
        with the gradient reduction overlapped (Megatron asserts --overlap-param-gather needs
        --overlap-grad-reduce: megatron/training/arguments.py validate_args)."""
        own = self.stack_spec.overlap_param_gather if self.overlap_param_gather is None else self.overlap_param_gather
        return own and self.grad_overlap

    @property
    def loss_fused(self) -> bool:
        """Whether the loss is fused: the explicit setting, else the stack's."""
        return self.stack_spec.memory.fused_loss if self.fused_loss is None else self.fused_loss

    def seq_len(self, model: ModelSpec) -> int:
        """Effective sequence length in tokens."""
        return self.seq_length if self.seq_length is not None else model.seq_length

    @property
    def full_precision(self) -> bool:
        """fp32 or tf32 training: fp32 weights, gradients, moments and activations, no master copy."""
        return self.precision in FULL_PRECISIONS

    @property
    def grad_reduce_bytes_per_param(self) -> int:
        """Bytes per gradient element on the wire of the data-parallel reduction (reduce-scatter or all-reduce):
        grad_dtype when given; else the stack's reduction dtype in bf16/fp8 training (Mechanisms.grad_reduce_bytes:
        fp32 for Megatron and torchtitan); else 16-bit (4 in fp32/tf32 training)."""
        if self.grad_dtype is not None:
            return DTYPE_BYTES[self.grad_dtype]
        if self.full_precision:
            return 4
        stack = self.stack_spec.grad_reduce_bytes
        return stack if stack is not None and self.precision in ("bf16", "fp8") else 2

    @property
    def weight_bytes_per_param(self) -> int:
        """Bytes of one working weight: 4 in fp32/tf32 training; else 16-bit (fp8 training keeps bf16
        weights) unless fp8_param_gather (Megatron --fp8-param-gather: the model's weights are FP8
        tensors, 1 byte)."""
        if self.full_precision:
            return 4
        return 1 if self.fp8_param_gather and self.precision == "fp8" else 2

    @property
    def activation_scale(self) -> float:
        """Stored activations relative to 16-bit ones (costmodels.activations counts 2 bytes per element):
        2 in fp32/tf32 training. Deviation: the few tensors kept in fp32 anyway (softmax statistics,
        norm statistics) are doubled too."""
        return 2.0 if self.full_precision else 1.0

    @property
    def grad_bytes_per_param(self) -> int:
        """Bytes of one gradient element."""
        return DTYPE_BYTES[self.grad_dtype] if self.grad_dtype else self.weight_bytes_per_param

    @property
    def optimizer_bytes_per_param(self) -> int:
        """Optimizer state bytes per parameter: fp32 master (4) + Adam m, v (8) or SGD momentum (4).

        Source: ZeRO (Rajbhandari et al., SC'20) section 3.1, K = 12 for mixed-precision Adam. Megatron's
        precision-aware optimizer (megatron/core/optimizer/optimizer_config.py: main_params_dtype,
        exp_avg_dtype, exp_avg_sq_dtype; TE FusedAdam) stores each state in its own dtype, e.g. bf16
        moments: 4 + 2 + 2 = 8. fp32/tf32 training has no master copy (the weights are fp32 already):
        K = 8, 16 bytes/param with w = g = 4.
        """
        moments = DTYPE_BYTES[self.exp_avg_dtype]
        if self.optimizer == "adam":
            moments += DTYPE_BYTES[self.exp_avg_sq_dtype]
        master = self.master_weights and not self.full_precision
        return moments + (DTYPE_BYTES[self.master_dtype] if master else 0)

    @property
    def alloc_expandable(self) -> bool:
        """Whether the allocator uses expandable segments: the explicit setting, else the stack's."""
        sem = self.stack_spec.memory
        return sem.expandable_segments if self.expandable_segments is None else self.expandable_segments


@functools.lru_cache(maxsize=1)
def _default_stack() -> Stack:
    """The null stack's Stack, built once (Stack is frozen: one instance serves every TrainSpec; building it
    per access cost 20 us, a million times in a planner test run)."""
    return Stack(name=DEFAULT_STACK, framework="megatron", fitted_on="built-in defaults, not fitted")
