"""Megatron-LM's names for parplan's vocabulary: what the exporter writes and the script reader
reads back (planner.frameworks.megatron.export, planner.frameworks.megatron.flags).

Source: Megatron-LM megatron/training/arguments.py (flag names; store_true switches) and
benchmarks/data/launch_formats.md, section "Megatron-LM".
"""

from planner.frameworks.megatron.flag_table import SWITCHES as FLAG_TABLE_SWITCHES

# parplan vocabulary -> Megatron names
NORM = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}
POSITION = {"learned": "learned_absolute", "rope": "rope", "none": "none"}
ZERO_FSDP = {2: "optim_grads", 3: "optim_grads_params"}
PRECISION = {"bf16": [("--bf16", None)], "fp16": [("--fp16", None)],
             "fp8": [("--bf16", None), ("--fp8-format", "hybrid")]}
# TrainSpec.fp8_recipe -> the flags that run it (megatron-core 0.19.2 enums.Fp8Recipe: delayed, tensorwise, mxfp8,
# blockwise; FP4 through --fp4-format e2m1 with TransformerConfig.fp4_recipe nvfp4, in place of --fp8-format)
FP8_RECIPE = {**{r: PRECISION["fp8"] + [("--fp8-recipe", r)] for r in ("tensorwise", "mxfp8", "blockwise")},
              "nvfp4": [("--bf16", None), ("--fp4-format", "e2m1"), ("--fp4-recipe", "nvfp4")]}
PARALLEL = {"tp": "--tensor-model-parallel-size", "pp": "--pipeline-model-parallel-size",
            "cp": "--context-parallel-size", "ep": "--expert-model-parallel-size",
            "etp": "--expert-tensor-parallel-size"}
# flags Megatron defines as store_true (used when reading scripts back)
SWITCHES = {
    "--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
    "--qk-layernorm", "--multi-latent-attention", "--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce",
    "--overlap-param-gather", "--use-megatron-fsdp", "--bf16", "--fp16", "--mock-data", "--tp-comm-overlap",
    "--grad-reduce-in-bf16", "--accumulate-allreduce-grads-in-fp32", "--moe-grouped-gemm",
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
} | FLAG_TABLE_SWITCHES
