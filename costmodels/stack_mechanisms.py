"""What a software stack runs: which collectives overlap what, bucket sizes, ZeRO-3 prefetch and
resharding, MoE dispatch, what selective recompute means, which FP8 tensors move in FP8.

Every field is read from a framework's argument parser, config classes or source (the module
docstring of costmodels/stack.py names the files; `sources` lists them per profile): booleans, enums
and sizes with units, never a fitted efficiency (those are costmodels/stack_fitted.py's).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from costmodels.moe_dispatch import Dispatcher
from costmodels.stack_fitted import MIN_SCALE, Fp8Recipe


class Mechanisms(BaseModel):
    """The mechanisms one stack runs, as its framework's sources define them."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    tp_comm_overlap: bool = Field(False, description="Default for TrainSpec.tp_comm_overlap: TP collectives "
                                  "hidden behind the layer's GEMMs (Megatron --tp-comm-overlap, torchtitan async "
                                  "TP), with sequence parallelism only.")
    flash_attention: bool = Field(True, description="Default for TrainSpec.flash_attention: the stack's attention "
                                  "is a fused kernel (FlashAttention, cuDNN SDPA); false for Megatron-LM of 2021, "
                                  "which had none (Narayanan et al. SC'21 predates FlashAttention, Dao et al. 2022).")
    tp_overlap_impl: Literal["userbuffers", "micro-pipeline"] = Field(
        "userbuffers", description="How TP overlap runs: userbuffers = Transformer Engine (every TP collective "
        "beside a GEMM, FP8 included); micro-pipeline = PyTorch async TP, which fuses a collective only with "
        "a matmul that consumes or produces it directly, so some stay exposed (costmodels.layer_comm._tp_unfused_s).")
    overlap_grad_reduce: bool = Field(True, description="Default for TrainSpec.overlap_grad_reduce: bucketed "
                                      "gradient reduction runs during the last micro-batch's backward.")
    grad_reduce_bytes: Optional[int] = Field(
        None, ge=2, le=4, description="Bytes per gradient element the data-parallel reduction moves in bf16 and "
        "fp8 training when TrainSpec.grad_dtype is not given: 4 where the framework reduces in fp32 by default "
        "(Megatron: --bf16 turns on accumulate_allreduce_grads_in_fp32 unless --grad-reduce-in-bf16; torchtitan: "
        "FSDP2 MixedPrecisionPolicy reduce_dtype float32); null = the weights' dtype. fp16 training reduces in "
        "fp16 either way (Megatron keeps the fp16 buffer without the flag).")
    overlap_grad_reduce_zero0: bool = Field(True, description="The gradient reduction can overlap at ZeRO 0 "
                                            "(plain data parallelism); false where the framework all-reduces after "
                                            "backward (DeepSpeed: runtime/engine.py allreduce_gradients).")
    overlap_grad_reduce_pp: bool = Field(True, description="The gradient reduction can overlap under pipeline "
                                         "parallelism; false where the framework turns it off (DeepSpeed: "
                                         "engine.py _configure_zero_optimizer disables overlap_comm for a "
                                         "PipelineModule).")
    overlap_param_gather: bool = Field(True, description="ZeRO-1/2: the all-gather of updated weights runs "
                                       "during the next forward (Megatron --overlap-param-gather); else exposed.")
    overlap_p2p: bool = Field(False, description="Interleaved pipelines: stage-to-stage sends run beside the "
                              "next virtual chunk's compute (Megatron --overlap-p2p-communication, on by "
                              "default with virtual stages); false = every send on the critical path.")
    grad_bucket_mparams: float = Field(
        40.0, ge=MIN_SCALE, le=1e6,
        description="Gradient-reduction bucket, millions of "
                    "parameters (Megatron: max(40M, 1M*dp); DeepSpeed reduce_bucket_size 500M).")
    zero3_bucket_mparams: Optional[float] = Field(
        None, ge=MIN_SCALE, le=1e6,
        description="ZeRO-3 gather granularity, "
                    "millions of parameters per collective (DeepSpeed "
                    "stage3_prefetch_bucket_size 50M); null = one transformer "
                    "block per collective (an FSDP unit).")
    zero3_persistence_threshold_mparams: float = Field(
        0.0, ge=0, le=1e3, description="ZeRO-3 tensors smaller than this many millions of parameters are never "
        "partitioned nor gathered (DeepSpeed stage3_param_persistence_threshold, default 1e5 elements = 0.1; "
        "deepspeed/runtime/zero/config.py); 0 = every tensor is gathered (FSDP).")
    zero3_max_live_mparams: Optional[float] = Field(
        None, ge=MIN_SCALE, le=1e6, description="ZeRO-3 parameters, millions, allowed gathered at once (DeepSpeed "
        "stage3_max_live_parameters, default 1e9 = 1000): the prefetcher fetches ahead only while the gathered "
        "total stays under it (partitioned_param_coordinator.fetch_sub_module), so a layer that alone exceeds "
        "half of it is fetched with nothing ahead (exposed); null = no limit (FSDP).")
    zero3_prefetch: int = Field(1, ge=0, le=4, description="ZeRO-3 units gathered ahead of compute; 0 = none "
                                "(every gather exposed).")
    reshard_after_forward: bool = Field(True, description="ZeRO-3 without pipeline: weights freed after forward "
                                        "and gathered again for backward (FSDP FULL_SHARD, ZeRO-3); false = kept "
                                        "(SHARD_GRAD_OP-like).")
    moe_grouped_gemm: bool = Field(True, description="MoE experts run as one grouped GEMM over all local experts "
                                   "(TE grouped GEMM, Megatron --moe-grouped-gemm, torch._grouped_mm); false = one "
                                   "GEMM per expert.")
    ep_dispatcher: Dispatcher = Field(
        "alltoall", description="How expert-parallel dispatch sends tokens: alltoall = one copy per (token, "
        "expert) (Megatron --moe-token-dispatcher-type alltoall); deepep = one copy per destination rank and, "
        "across nodes, per destination node (DeepEP normal kernels): costmodels.moe_dispatch.")
    selective_recompute: Literal["attention-core", "per-op"] = Field(
        "attention-core", description="What recompute=selective means: Megatron's core attention, or "
        "torchtitan's per-op policy (every second matmul and all element-wise ops recomputed).")
    fp8_cast_bytes_per_element: float = Field(6.0, ge=0, le=64, description="HBM bytes moved to quantize one "
                                              "GEMM operand element to FP8 (compute.fp8_cast_elements): "
                                              "dynamic scaling reads it for its amax (2) and again to cast "
                                              "(2), writes the FP8 copy (1) and the transposed copy the "
                                              "other GEMM needs (1); not reduced by element-wise fusion.")
    fp8_tp_gather: list[Fp8Recipe] = Field(
        default_factory=list, description="FP8 recipes under which the sequence-parallel all-gathers (inputs in "
        "forward, output gradients in backward) move FP8 instead of bf16; the reduce-scatters stay bf16 "
        "(torchtitan's Float8ColwiseParallel / Float8RowwiseParallel, tensorwise only).")
    sources: list[str] = Field(default_factory=list, description="Where each mechanism is documented.")
