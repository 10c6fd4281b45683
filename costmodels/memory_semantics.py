"""How a framework holds memory beyond the papers' formulas: what a stack allocates, reserves and
keeps on the device (read from each framework's code; fitted numbers name their rows).

Notation: T tokens of one micro-batch on one GPU, V vocabulary, t tp degree, P_opt parameters
whose optimizer states one GPU updates, U parameters of one ZeRO-3/FSDP unit (a layer).

Sources, per field:
- gradient buffer: Megatron-LM keeps fp32 main gradients for bf16/fp16 training
  (`accumulate_allreduce_grads_in_fp32`, docs/source/api-guide/dist_optimizer.md: 18 bytes per
  parameter, 6 + 12/N with the distributed optimizer); FSDP2 and ZeRO keep the weights' dtype.
- loss: torchtitan computes `cross_entropy(pred.flatten(0, 1).float(), labels)` (torchtitan
  components/loss.py): the bf16 logits (2 bytes), their fp32 copy (4) and log_softmax's fp32 output
  (4) live at the forward's end; in backward the fp32 gradient of log_softmax (4) and of its input
  (4) meet the saved output (4): 12 bytes per logit at the peak. Megatron's vocab-parallel cross
  entropy (megatron/core/tensor_parallel/cross_entropy.py) turns the bf16 logits into an fp32
  softmax in place and builds the gradient in that buffer: 2 + 4 = 6. A fused or compiled loss
  (Megatron `--cross-entropy-loss-fusion`, torch.compile of the loss) never materializes fp32
  logits: the bf16 logits and their bf16 gradient, 4.
- optimizer step: torch.optim.AdamW(foreach=True) builds `torch._foreach_sqrt(exp_avg_sq)`, one
  fp32 temporary per parameter it updates (torch/optim/adamw.py, _multi_tensor_adam): 4 bytes x
  P_opt; fused Adam kernels (Apex/TE FusedAdam in Megatron, DeepSpeed FusedAdam) none.
- FSDP2 units in flight (torch/distributed/fsdp/_fully_shard): the current and the prefetched
  unit's unsharded bf16 weights (2 + 2), the current unit's bf16 gradient (2) and its fp32
  reduce-scatter input (reduce_dtype fp32: 4) = 10 bytes x U; the root module (embedding, final
  norm, output layer) is not resharded after forward (`fully_shard` docs: the root's
  reshard_after_forward is treated as False), so its bf16 weights stay gathered into backward.
- stored activations of an eager Hugging Face model (transformers 4.34 models/llama/modeling_llama.py):
  LlamaRMSNorm keeps its fp32 upcast and the bf16 normalised tensor (4 + 2 bytes per element, where a
  fused norm keeps its 2-byte input), LlamaMLP keeps gate, silu(gate), up and their product (4 f-wide
  tensors, where a fused SwiGLU keeps 3).
- routed experts (megatron-core 0.19 transformer/moe/experts.py, TEGroupedMLP.forward): the routing
  probabilities multiply the activation's output inside the expert; for non-gated activations that
  multiply is a separate op, so a GELU expert keeps its activation input, output and the product.
- fragmentation: the caching allocator's reserve over its allocated peak, fitted on published
  runs that report both or on reserved peaks (benchmarks/calibrate_memory.py; rows in the stack);
  with expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) freed pages are
  unmapped and segments grow in place, so the reserve stays within a few percent of the peak.
- device: the CUDA context and libraries (cuBLAS/cuDNN handles and workspaces) and one set of NCCL
  buffers per communicator a rank uses (NCCL_BUFFSIZE 4 MiB per channel and peer, several
  protocols and channels: hundreds of MiB per communicator), fitted on nvidia-smi peaks.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

MIB = 2**20


class KindError(BaseModel):
    """Held-out relative error of one measurement kind (benchmarks/memory_accuracy.py --write)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    rows: int = Field(..., ge=0, le=1_000_000, description="Held-out published peaks.")
    mean: float = Field(..., ge=0, le=100, description="Mean |predicted/measured - 1|.")
    p90: float = Field(..., ge=0, le=100, description="90th percentile |relative error|.")
    bias: float = Field(..., ge=-100, le=100, description="Median signed error (negative: predicted below measured).")


class MemorySemantics(BaseModel):
    """What a stack allocates beyond weights, gradients, optimizer states and stored activations.
    The defaults are the papers' formulas and nothing more (no fragmentation, context or NCCL
    buffers): the stack profiles carry the numbers read from each framework and the fitted ones."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    grad_buffer_bytes: Optional[int] = Field(None, ge=1, le=8, description="Bytes per parameter of the "
                                             "gradient buffer (Megatron: fp32 main grads, 4); null = the train "
                                             "spec's gradient dtype.")
    pp_grad_accum_bytes: Optional[int] = Field(None, ge=1, le=8, description="Bytes per parameter of the "
                                               "unsharded gradients a sharded (FSDP) pipeline stage accumulates "
                                               "across micro-batches: torch.distributed.pipelining turns gradient "
                                               "sync off until the last micro-batch (stage.py, "
                                               "set_requires_gradient_sync(False)) and FSDP2 then accumulates in "
                                               "its reduce dtype (_fsdp_param.py to_accumulated_grad_if_needed): "
                                               "fp32, 4, in torchtitan; null = the gradient buffer's bytes.")
    loss_bytes_per_logit: float = Field(4.0, ge=0, le=64, description="Bytes per logit (token x vocab/tp) "
                                        "live at the loss's peak without a fused loss: torch eager cross "
                                        "entropy on fp32-upcast logits 12, Megatron vocab-parallel 6; the "
                                        "default 4 is Korthikanti's fp32 logits (4sbV/t).")
    tp_loss_bytes_per_logit: Optional[float] = Field(None, ge=0, le=64, description="Bytes per logit of "
                                                      "the unfused loss when the logits are split over tp > 1, "
                                                      "where the stack runs a different loss (torchtitan: DTensor "
                                                      "loss_parallel, 16); null = loss_bytes_per_logit.")
    fused_loss_bytes_per_logit: float = Field(4.0, ge=0, le=64, description="The same with a fused or "
                                              "compiled loss (bf16 logits and their gradient).")
    fused_loss: bool = Field(False, description="Default for TrainSpec.fused_loss.")
    optimizer_temp_bytes: float = Field(0.0, ge=0, le=64, description="Temporary bytes per parameter the "
                                        "optimizer step allocates (torch foreach AdamW 4; fused Adam 0).")
    norm_saved_bytes: float = Field(2.0, ge=0, le=16, description="Bytes per hidden element a pre-norm keeps "
                                    "for backward besides its output: fused/TE norms their 16-bit input (2); "
                                    "Hugging Face LlamaRMSNorm in eager PyTorch the fp32 upcast and the 16-bit "
                                    "normalised tensor (4 + 2 = 6).")
    fp8_gemm_input_bytes: float = Field(2.0, ge=1, le=2, description="Bytes per element of a tensor kept only "
                                        "as a GEMM's input under precision fp8: Transformer Engine's Linear, "
                                        "LayerNormLinear and GroupedLinear save their FP8-quantized input for the "
                                        "weight gradient (1); torchao Float8Linear saves the high-precision input "
                                        "and re-quantizes in backward (2).")
    fp8_weight_cache_bytes: float = Field(0.0, ge=0, le=4, description="Bytes per weight the stack keeps beside "
                                          "the 16-bit weights under precision fp8: Transformer Engine caches each "
                                          "weight's FP8 copy and, on Hopper, its FP8 transpose from the first "
                                          "micro-batch to the last (te module base get_weight_workspace with "
                                          "is_first_microbatch, which Megatron passes): 2; with FP8 weights "
                                          "(fp8_param_gather) only the transpose, half of it. torchao: 0.")
    glu_saved_widths: float = Field(3.0, ge=2, le=8, description="f-wide 16-bit tensors a SwiGLU MLP keeps: "
                                    "fused activation (Megatron bias_swiglu, torch.compile) gate|up and the "
                                    "product (3); eager down(silu(gate(x)) * up(x)) gate, silu(gate), up and "
                                    "the product (4).")
    expert_plain_widths: float = Field(2.0, ge=2, le=8, description="f-wide 16-bit tensors a routed expert "
                                       "with a non-gated activation (GELU) keeps: its input and output (2); "
                                       "Megatron-Core's TEGroupedMLP weights the activation by the routing "
                                       "probability as a separate multiply, which keeps the activation output "
                                       "while fc2 keeps the product (3).")
    grad_cast_bytes: float = Field(0.0, ge=0, le=16, description="Bytes per parameter of one optimizer group's "
                                   "gradient partition that a ZeRO step (stages 1-3) allocates beside the states: "
                                   "DeepSpeed flattens the group's 16-bit gradient views into one copy (2) and "
                                   "casts it to fp32 (4) before the update, 6 at the cast (deepspeed 0.15.3 "
                                   "runtime/zero/stage_1_and_2.py step, stage3.py _prepare_fp32_grad_for_sub_group); "
                                   "none with every step offloaded (ratio 1). Megatron and torch optimizers: 0.")
    zero3_unit_bytes: float = Field(6.0, ge=0, le=64, description="Bytes per parameter of one ZeRO-3 unit "
                                    "held unsharded at the peak, current and prefetched units together "
                                    "(FSDP2 with fp32 reduce 10; two bf16 weights and a bf16 gradient 6).")
    root_gathered: bool = Field(False, description="ZeRO-3: the embedding and output layer stay gathered "
                                "from forward into backward (FSDP2 root module).")
    whole_experts_outside_fsdp: bool = Field(
        False, description="Routed experts that expert parallelism already holds whole (edp = 1) are left out of "
        "FSDP: their weights, gradients and optimizer states are plain tensors in the parameter dtype, so their "
        "gradients accumulate in that dtype, not in FSDP's fp32 reduce dtype (pp_grad_accum_bytes). NeMo "
        "AutoModel 0.7.0 components/moe/parallelizer.py: fully_shard wraps the experts only when the ep_shard mesh "
        "is larger than 1, and otherwise adds them to the block's ignored_params.")
    fragmentation: float = Field(0.0, ge=0, le=1, description="Reserved over allocated peak, minus 1 "
                                 "(caching-allocator fragmentation), fitted.")
    expandable_segments: bool = Field(False, description="Default for TrainSpec.expandable_segments: the stack's "
                                      "launchers set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.")
    expandable_fragmentation: float = Field(0.02, ge=0, le=1, description="Reserved over allocated peak, minus 1, "
                                            "with expandable segments: the allocator grows one mapped segment per "
                                            "stream in 2 MiB pages and unmaps what it frees, so only holes inside "
                                            "pages in use remain (PyTorch docs, CUDA memory management: "
                                            "expandable_segments). Measured by benchmarks/calibrate_memory.py on the H100 run of "
                                            "benchmarks/gpu/measure_memory.py (base-expandable); physical range 0-0.2.")
    context_mib: float = Field(0.0, ge=0, le=65536, description="CUDA context, libraries and their "
                               "workspaces per process, MiB, fitted or measured.")
    nccl_mib_per_group: float = Field(0.0, ge=0, le=65536, description="NCCL buffers of one communicator "
                                      "a rank uses (tp, cp, ep, pp, dp), MiB, fitted.")
    fitted_on: str = Field("not fitted", description="Which rows fitted fragmentation and the device terms.")
    held_out: dict[str, KindError] = Field(default_factory=dict, description="Held-out error per measurement "
                                           "kind (allocated, reserved, device; 'all-stacks:KIND' over every "
                                           "stack), written by benchmarks/memory_accuracy.py.")
    sources: list[str] = Field(default_factory=list, description="Where each number comes from.")

    def logit_bytes(self, fused: bool, tp: int = 1) -> float:
        """Bytes per logit at the loss peak, with or without a fused loss, logits split `tp` ways."""
        if fused:
            return self.fused_loss_bytes_per_logit
        if tp > 1 and self.tp_loss_bytes_per_logit is not None:
            return self.tp_loss_bytes_per_logit
        return self.loss_bytes_per_logit
