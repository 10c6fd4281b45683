"""Every Megatron-LM flag that can change memory or step time, and what parplan does with it.

One table, four verdicts:
- PRICED: read into a spec field (the value names it) and priced by costmodels;
- MODEL: read into the ModelSpec by planner.frameworks.megatron.flags.model_data (shape flags);
- HARMLESS: no effect on per-GPU memory, and on step time none parplan's model has (the reason says why);
- WARNED: changes memory or time in a way parplan does not price: `check` prints one warning line naming
  it (planner.frameworks.megatron.flags.unpriced_warnings) and lists it under `warnings` in `check --json`.
A flag in no list is not one Megatron defines with a memory or time effect parplan knows of.

Source: megatron-core 0.16.1's config dataclasses (TransformerConfig, ModelParallelConfig,
DistributedDataParallelConfig, OptimizerConfig; their field names, vendored in
tests/data/megatron_core_0.16.1_config_fields.txt), which Megatron-LM's argparse
(megatron/training/arguments.py) exposes as `--field-name`, except FIELD_FLAGS below; plus the legacy
flags Megatron-LM and Megatron-DeepSpeed scripts still carry (LEGACY).
"""

from __future__ import annotations

# Config fields whose flag is named otherwise, or that no flag sets (None: derived from other flags or
# set by code).
FIELD_FLAGS: dict[str, str | None] = {
    "fp8": "--fp8-format", "fp4": "--fp4-format", "grad_reduce_in_fp32": "--accumulate-allreduce-grads-in-fp32",
    "num_moe_experts": "--num-experts", "fp8_param": "--fp8-param-gather", "fp4_param": "--fp4-param-gather",
    "params_dtype": None, "pipeline_dtype": None, "autocast_dtype": None, "activation_func": None,
"deallocate_pipeline_outputs": None, "fp8_quantizer_factory": None,
    "fp4_quantizer_factory": None, "hetereogenous_dist_checkpoint": None, "cpu_offloading_activations": None,
    "cpu_offloading_weights": None, "cpu_offloading_double_buffering": None, "use_te_activation_func": None,
    "moe_layer_recompute": None, "fsdp_manual_registration": None, "external_cuda_graph": None,
}

PRICED: dict[str, str] = {
    "--bf16": "train.precision", "--fp16": "train.precision", "--fp8-format": "train.precision=fp8",
    "--fp8-recipe": "train.fp8_recipe",
    "--fp4-format": "train.precision=fp8, fp8_recipe=nvfp4", "--fp4-recipe": "train.fp8_recipe (nvfp4 only)",
    "--overlap-moe-expert-parallel-comm": "train.ep_comm_overlap (the all-to-all beside the paired micro-batch, and "
    "its one extra MoE layer of activations)",
    "--accumulate-allreduce-grads-in-fp32": "train.grad_dtype=fp32", "--grad-reduce-in-bf16": "train.grad_dtype=bf16",
    "--main-grads-dtype": "train.grad_dtype (with --use-precision-aware-optimizer)",
    "--use-precision-aware-optimizer": "train.master_dtype, exp_avg_dtype, exp_avg_sq_dtype",
    "--main-params-dtype": "train.master_dtype", "--exp-avg-dtype": "train.exp_avg_dtype",
    "--exp-avg-sq-dtype": "train.exp_avg_sq_dtype", "--fp8-param-gather": "train.fp8_param_gather",
    "--optimizer": "train.optimizer", "--cross-entropy-loss-fusion": "train.fused_loss",
    "--cpu-offloading": "train.activation_offload_layers", "--cpu-offloading-num-layers": "train.activation_offload_layers",
    "--optimizer-cpu-offload": "train.offload_optimizer=cpu", "--optimizer-offload-fraction": "train.offload_optimizer_fraction",
    "--use-distributed-optimizer": "layout.zero=1", "--use-megatron-fsdp": "layout.zero",
    "--use-custom-fsdp": "layout.zero (the flag's older name)",
    "--use-torch-fsdp2": "layout.zero=3 and train.grad_dtype (the weights' dtype)",
    "--torch-fsdp2-no-reshard-after-forward": "layout.zero=2 (weights stay gathered from forward to backward)",
    "--megatron-fsdp-main-grads-dtype": "train.grad_dtype (with --use-megatron-fsdp; default auto: the weights')",
    "--transformer-impl": "train.flash_attention (local: megatron-core's unfused DotProductAttention)",
    "--data-parallel-sharding-strategy": "layout.zero", "--recompute-granularity": "layout.recompute",
    "--recompute-modules": "layout.recompute_modules", "--recompute-method": "layout.recompute_method",
    "--recompute-num-layers": "layout.recompute_num_layers", "--recompute-activations": "layout.recompute=selective",
    "--checkpoint-activations": "layout.recompute=full (legacy)",
    "--activations-checkpoint-method": "layout.recompute_method (legacy)",
    "--activations-checkpoint-num-layers": "layout.recompute_num_layers (legacy)",
    "--moe-token-dispatcher-type": "train.moe_dispatcher, train.ep_dispatcher", "--attention-backend": "train.flash_attention",
    "--tp-comm-overlap": "train.tp_comm_overlap", "--overlap-grad-reduce": "train.overlap_grad_reduce",
    "--overlap-param-gather": "train.overlap_param_gather (absent: the ZeRO-1/2 weight all-gather exposed)",
    "--sequence-parallel": "layout.sp", "--micro-batch-size": "layout.mbs", "--global-batch-size": "train.global_batch_size",
    "--moe-grouped-gemm": "stack moe_grouped_gemm (megatron-core: on; a script without it is still priced with "
    "grouped GEMMs, though SequentialMLP's per-expert loop waits on the host: docs/moe.md)",
    "--moe-expert-capacity-factor": "model.capacity_factor",
    "--moe-pad-expert-input-to-capacity": "model.capacity_factor (the padded expert batch is what is priced)", "--mtp-num-layers": "model.mtp_num_layers",
    "--cp-comm-type": "layout.cp_comm",
    "--moe-router-load-balancing-type": "train.moe_load_balancing (the busiest EP rank's load: costmodels.moe_balance)",
    "--moe-router-force-load-balancing": "train.moe_load_balancing=forced",
    "--moe-permute-fusion": "train.moe_permute_fusion (absent: the unfused permute, priced at its measured kernels)",
    "--moe-router-enable-expert-bias": "train.moe_expert_bias (aux-loss-free balancing)",
    "--deepspeed": "layout.zero (Megatron-DeepSpeed; with --bf16 and stage 0 the BF16 optimizer's ZeRO-1)",
    "--zero-stage": "layout.zero (Megatron-DeepSpeed)",
}

MODEL = {
    "--num-experts", "--moe-ffn-hidden-size", "--moe-layer-freq", "--moe-router-topk", "--moe-router-num-groups",
    "--moe-router-group-topk", "--moe-router-topk-limited-devices",
    "--moe-shared-expert-intermediate-size", "--swiglu", "--multi-latent-attention", "--q-lora-rank",
    "--kv-lora-rank", "--qk-layernorm", "--attention-dropout", "--hidden-dropout",
    # sliding window, sinks and the clamped GLU (planner.frameworks.megatron.attention_flags; megatron-core 0.19.2)
    "--window-size", "--window-attn-skip-freq", "--softmax-type", "--activation-func-clamp-value", "--quick-geglu",
}

HARMLESS: dict[str, str] = {
    "--bias-activation-fusion": "fused kernel, same saved tensors", "--no-bias-swiglu-fusion": "kernel choice",
    "--bias-dropout-fusion": "fused kernel", "--masked-softmax-fusion": "fused kernel (flash attention stores no scores)",
    "--apply-rope-fusion": "fused kernel", "--gradient-accumulation-fusion": "writes wgrad into the main grad in place",
    "--cross-entropy-fusion-impl": "which fused loss kernel (native or TE): both keep 16-bit logits",
    "--fp8-margin": "scaling detail", "--fp8-interval": "scaling detail", "--fp8-amax-history-len": "a few floats per tensor",
    "--fp8-amax-compute-algo": "scaling detail", "--fp8-wgrad": "GEMM precision of wgrad (time model: fp8 GEMMs)",
    "--moe-aux-loss-coeff": "loss term", "--moe-z-loss-coeff": "loss term", "--moe-input-jitter-eps": "noise on inputs",
    "--moe-router-score-function": "softmax or sigmoid over the same logits", "--moe-router-pre-softmax": "order of ops",
    "--moe-router-topk-scaling-factor": "scalar",
    "--moe-router-bias-update-rate": "scalar",
    "--moe-router-dtype": "router logits already priced in fp32", "--moe-router-fusion": "fused kernel",
    "--moe-per-layer-logging": "logging", "--moe-deepep-num-sms": "SM split", "--moe-hybridep-num-sms": "SM split",
    "--moe-enable-routing-replay": "replays routing decisions", "--moe-apply-probs-on-input": "where probs multiply",
    "--moe-use-legacy-grouped-gemm": "kernel choice", "--moe-router-padding-for-quantization": "pads to 16/32 tokens",
    "--moe-router-padding-for-fp8": "pads to 16 tokens", "--moe-token-drop-policy": "which tokens drop",
    "--moe-shared-expert-gate": "one gate vector",
    "--overlap-param-gather-with-optimizer-step": "scheduling", "--align-param-gather": "scheduling",
    "--gradient-reduce-div-fusion": "fused scaling", "--use-cpu-initialization": "initialisation only",
    "--mtp-loss-scaling-factor": "loss weight", "--disable-bf16-reduced-precision-matmul": "GEMM accumulation mode",
    "--memory-efficient-layer-norm": "Apex norm kernel", "--use-torch-optimizer-for-cpu-offload": "which host optimizer",
    "--pin-cpu-grads": "host memory only", "--pin-cpu-params": "host memory only",
    "--overlap-cpu-optimizer-d2h-h2d": "scheduling of the offload copies", "--wgrad-deferral-limit": "scheduling",
    "--defer-embedding-wgrad-compute": "scheduling of the embedding wgrad", "--tp-comm-bulk-wgrad": "overlap detail",
    "--cuda-graph-warmup-steps": "when graphs are captured", "--fsdp-manual-registration": "NCCL registration",
    "--mtp-standalone": "placement of the MTP layers (priced on the last stage)",
    "--moe-token-dropping": "legacy alias of the capacity factor",
    "--deepspeed-activation-checkpointing": "DeepSpeed's implementation of --checkpoint-activations (same memory)",
    "--store-param-remainders": "see --use-precision-aware-optimizer",
    "--glu-linear-offset": "a constant added inside the fused GLU kernel",
}

WARNED: dict[str, str] = {
    "--fp4-param-gather": "FP4 weights",
    "--fp8-dot-product-attention": "FP8 attention inputs/outputs", "--fp8-multi-head-attention": "FP8 attention block",
    "--activation-func-fp8-input-store": "the activation's input kept in FP8",
    "--keep-fp8-transpose-cache": "FP8 weight transposes kept across steps (Megatron-FSDP)",
    "--disable-parameter-transpose-cache": "FP8 weight transposes not cached",
    "--reuse-grad-buf-for-mxfp8-param-ag": "MXFP8 gather buffer shared with gradients",
    "--first-last-layers-bf16": "some layers in bf16 under FP8", "--num-layers-at-start-in-bf16": "bf16 layers under FP8",
    "--num-layers-at-end-in-bf16": "bf16 layers under FP8",
    "--distribute-saved-activations": "full-recompute inputs split over tp without sequence parallelism",
    "--num-microbatches-with-partial-activation-checkpoints": "recompute on some micro-batches only",
    "--fine-grained-activation-offloading": "activation offload by module", "--offload-modules": "activation offload by module",
    "--min-offloaded-tensor-size": "activation offload threshold",
    "--enable-cuda-graph": "CUDA graph static buffers", "--cuda-graph-impl": "CUDA graph static buffers",
    "--cuda-graph-scope": "CUDA graph static buffers", "--cuda-graph-use-single-mempool": "CUDA graph memory pool",
    "--cuda-graph-retain-backward-graph": "CUDA graph buffers kept for backward", "--external-cuda-graph": "CUDA graphs",
    "--fsdp-double-buffer": "Megatron-FSDP double buffers", "--outer-dp-sharding-strategy": "hybrid FSDP sharding",
    "--num-distributed-optimizer-instances": "distributed optimizer replicated in groups",
    "--moe-shared-expert-overlap": "shared experts on a side stream (extra live activations)",
    "--moe-extended-tp": "experts split over tp", "--moe-latent-size": "MoE latent projection",
    "--moe-enable-deepep": "DeepEP buffers (the dispatch itself is priced)",
    "--moe-flex-dispatcher-backend": "DeepEP/HybridEP buffers (the dispatch itself is priced)",
    "--ep-overlap-early-attn-memory-release": "early release of attention memory",
    "--delay-wgrad-compute": "weight gradients kept for later", "--cache-mla-latents": "MLA latents cached",
    "--moe-layer-recompute": "MoE layers recomputed (legacy)", "--mlp-chunks-for-prefill": "inference",
    "--partition-activations": "activations partitioned over tp (Megatron-DeepSpeed)",
    "--cpu-optimizer": "Megatron-DeepSpeed CPU optimizer",
    "--deepspeed_config": "Megatron-DeepSpeed: the DeepSpeed JSON's settings beyond its ZeRO stage, precision, batch "
    "and offload (check that file too)",
}

# Legacy and Megatron-DeepSpeed flags not among the config fields.
LEGACY = {"--checkpoint-activations", "--activations-checkpoint-method", "--activations-checkpoint-num-layers",
          "--recompute-activations", "--grad-reduce-in-bf16", "--deepspeed-activation-checkpointing",
          "--partition-activations", "--cpu-optimizer", "--zero-stage", "--deepspeed",
          "--deepspeed_config"}

# store_true flags of this table (so `--flag value-looking-word` is not read as a value).
SWITCHES = {
    "--fp8-param-gather", "--use-precision-aware-optimizer", "--cross-entropy-loss-fusion", "--cpu-offloading",
    "--optimizer-cpu-offload", "--checkpoint-activations", "--recompute-activations", "--moe-permute-fusion",
    "--moe-shared-expert-overlap", "--moe-pad-expert-input-to-capacity", "--distribute-saved-activations",
    "--enable-cuda-graph", "--use-custom-fsdp", "--fp8-dot-product-attention", "--fp8-multi-head-attention",
    "--activation-func-fp8-input-store", "--keep-fp8-transpose-cache", "--disable-parameter-transpose-cache",
    "--moe-router-fusion", "--moe-enable-deepep", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
    "--deepspeed-activation-checkpointing", "--partition-activations", "--cpu-optimizer", "--deepspeed",
    "--defer-embedding-wgrad-compute", "--use-cpu-initialization", "--gradient-accumulation-fusion",
    "--fsdp-double-buffer", "--first-last-layers-bf16", "--moe-use-legacy-grouped-gemm", "--moe-extended-tp",
    "--overlap-param-gather-with-optimizer-step", "--align-param-gather", "--moe-router-force-load-balancing",
    "--moe-router-enable-expert-bias", "--quick-geglu", "--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward",
    "--no-gradient-accumulation-fusion", "--no-pad-vocab-size", "--disable-pad-vocab-size",
}


def field_flag(field: str) -> str | None:
    """The Megatron-LM flag of a config field (FIELD_FLAGS, else '--' + field with '-' for '_')."""
    if field in FIELD_FLAGS:
        return FIELD_FLAGS[field]
    return "--" + field.replace("_", "-")


def verdict(flag: str) -> str | None:
    """'priced', 'model', 'harmless', 'warned', or None for a flag not in the table."""
    for name, table in (("priced", PRICED), ("model", MODEL), ("harmless", HARMLESS), ("warned", WARNED)):
        if flag in table:
            return name
    return None


def unpriced(flags: dict) -> list[str]:
    """One line per WARNED flag given (in the order given), naming it and what parplan leaves out."""
    return [f"{flag} is read but not priced: {WARNED[flag]} (parplan's memory and time leave it out)"
            for flag in flags if flag in WARNED]
