"""Megatron-LM exporter: `launch_megatron.sh` runs `torchrun ... pretrain_gpt.py` with the plan.

Source: benchmarks/data/launch_formats.md, section "Megatron-LM" (flag names, the rules Megatron
enforces, the CUDA_DEVICE_MAX_CONNECTIONS requirement) and section "torchrun" (static launch).
Two facts read from megatron.training.arguments 0.19.2 refine the brief: Megatron-FSDP asserts that
CUDA_DEVICE_MAX_CONNECTIONS is not 1 and needs `--ckpt-format fsdp_dtensor`; with --bf16 Megatron
keeps fp32 main gradients unless `--grad-reduce-in-bf16` is given (Megatron-FSDP: only with
`--megatron-fsdp-main-grads-dtype fp32`; its default is the weights' dtype).
`megatron_arg_groups` is the argument builder the SLURM exporter reuses.
"""

from __future__ import annotations

from costmodels.memory import memory_train

from costmodels.pipeline import rank_chunks
from costmodels.layer_comm import tp_overlap_applies
from costmodels.moe_timing import ep_overlap_applies
from planner.exporters.common import (
    ExportPlan, ExportRefused, Raw, bash_array, command, script,
)

TARGET = "Megatron-LM (megatron-core 0.19, pretrain_gpt.py under torchrun)"
SCRIPT = "launch_megatron.sh"

from planner.frameworks.megatron import layer_freq
from planner.frameworks.megatron.attention_flags import activation_flag, attention_args
from planner.frameworks.megatron.names import FP8_RECIPE, NORM, PARALLEL, POSITION, PRECISION, ZERO_FSDP


def fsdp(plan: ExportPlan) -> bool:
    """ZeRO 2/3 is expressed with Megatron-FSDP."""
    return plan.layout.zero >= 2


def needs_single_connection(plan: ExportPlan) -> bool:
    """CUDA_DEVICE_MAX_CONNECTIONS=1: TP or CP > 1 (Hopper and older), but never with Megatron-FSDP."""
    lay = plan.layout
    return (lay.tp > 1 or lay.cp > 1) and not fsdp(plan)


def refusal(plan: ExportPlan) -> None:
    """Raise ExportRefused for what Megatron's flags cannot say."""
    if plan.train.precision in ("fp32", "tf32"):  # costmodels.hardware_spec.FULL_PRECISIONS: not written yet
        raise ExportRefused(f"megatron: precision={plan.train.precision}: parplan writes 16-bit and fp8 launches only")
    if plan.train.precision == "fp8" and plan.train.fp8_recipe not in FP8_RECIPE:
        raise ExportRefused(f"megatron: fp8_recipe={plan.train.fp8_recipe}: Megatron runs {', '.join(FP8_RECIPE)} "
                            "(megatron-core 0.19.2 enums.Fp8Recipe, --fp4-format); rowwise is torchao's (torchtitan)")
    if not plan.train.master_weights:
        raise ExportRefused("megatron: master_weights=false has no Megatron flag (Megatron keeps fp32 main "
                            "weights with --bf16/--fp16)")
    if plan.layout.shard_group:
        raise ExportRefused(f"megatron: shard_group={plan.layout.shard_group} (hybrid sharding) is not written "
                            "for Megatron-FSDP by parplan; torchtitan expresses it")
    train = plan.train
    if train.offload_params != "none" or train.offload_optimizer == "nvme":
        raise ExportRefused(f"megatron: offload_params={train.offload_params}, offload_optimizer="
                            f"{train.offload_optimizer}: Megatron offloads only optimizer states, to the CPU "
                            "(--optimizer-cpu-offload)")
    _refuse_ep_overlap(plan)
    if train.offload_optimizer == "cpu" and plan.layout.zero != 1:
        raise ExportRefused(f"megatron: offload_optimizer=cpu with zero={plan.layout.zero}: Megatron's "
                            "--optimizer-cpu-offload runs with the distributed optimizer (zero=1)")


def _refuse_ep_overlap(plan: ExportPlan) -> None:
    """EP all-to-all overlap with MTP deeper than one layer, which megatron-core 0.19.2 asserts against
    (TransformerConfig.__post_init__); its layout rules (full recompute, pp without vpp) are the capability
    table's (costmodels.framework, hardware_profiles/frameworks/megatron.yaml: planner.exporters.refuse_unrunnable)."""
    mtp = plan.model.mtp_num_layers or 0
    if ep_overlap_applies(plan.train, plan.layout) and mtp > 1:
        raise ExportRefused(f"megatron: ep_comm_overlap with mtp_num_layers={mtp}: megatron-core asserts against "
                            "--overlap-moe-expert-parallel-comm there")


def model_args(plan: ExportPlan) -> list:
    m = plan.model
    args = [("--num-layers", m.num_layers), ("--hidden-size", m.hidden_size),
            ("--ffn-hidden-size", m.ffn_hidden_size), ("--num-attention-heads", m.num_attention_heads)]
    if m.num_kv_heads < m.num_attention_heads:
        args += [("--group-query-attention", None), ("--num-query-groups", m.num_kv_heads)]
    if m.mla is not None:
        args += mla_args(m.mla)
    elif m.head_dim * m.num_attention_heads != m.hidden_size:
        args.append(("--kv-channels", m.head_dim))
    args += [("--seq-length", plan.seq), ("--max-position-embeddings", max(plan.seq, m.seq_length)),
             ("--normalization", NORM[m.norm]), ("--position-embedding-type", POSITION[m.position_embedding])]
    switches = [(m.activation == "swiglu", activation_flag(m)),
                (not m.tied_embeddings, "--untie-embeddings-and-output-weights"),
                (not m.linear_bias, "--disable-bias-linear"), (m.qkv_bias and not m.linear_bias, "--add-qkv-bias"),
                (m.qk_norm, "--qk-layernorm")]
    args += [(flag, None) for on, flag in switches if on]
    if not m.dropout:
        args += [("--attention-dropout", "0.0"), ("--hidden-dropout", "0.0")]
    if not plan.train.flash:
        args.append(("--attention-backend", "unfused"))
    if m.mtp_num_layers:
        args.append(("--mtp-num-layers", m.mtp_num_layers))
    return args + attention_args(m)


def mla_args(mla) -> list:
    """Megatron's multi-latent-attention flags (megatron/training/arguments.py; --qk-head-dim is the
    part without rotary position, --q-lora-rank absent = no query latent)."""
    args = [("--multi-latent-attention", None)]
    if mla.q_lora_rank:
        args.append(("--q-lora-rank", mla.q_lora_rank))
    return args + [("--kv-lora-rank", mla.kv_lora_rank), ("--qk-head-dim", mla.qk_nope_head_dim),
                   ("--qk-pos-emb-head-dim", mla.qk_rope_head_dim), ("--v-head-dim", mla.v_head_dim)]


def moe_args(plan: ExportPlan) -> list:
    """Megatron's MoE flags for the kernels the plan was priced with: one grouped GEMM over the local experts where
    the stack prices it (Stack.moe_grouped_gemm; without --moe-grouped-gemm Megatron runs SequentialMLP, one MLP
    per expert, which waited on the host 4x the grouped path's time in docs/moe.md's measurement), and the fused
    permute parplan prices (costmodels.moe_compute; without --moe-permute-fusion the unpermute is a scatter_add and
    the permute's backward an atomic index_add, 5-6x the fused time: docs/moe.md)."""
    m = plan.model
    if not m.is_moe:
        return []
    args = [("--num-experts", m.num_experts), ("--moe-ffn-hidden-size", m.moe_ffn_hidden_size),
            ("--moe-router-topk", m.top_k), *dispatcher_args(plan.train)]
    if plan.cluster.gpu_profile.tensor_core_gen != "volta":  # validate_args: grouped GEMMs need compute capability 8
        if plan.train.stack_spec.moe_grouped_gemm:
            args.append(("--moe-grouped-gemm", None))
        if plan.train.moe_permute_fusion:
            args.append(("--moe-permute-fusion", None))
    freq = layer_freq.write(m)
    if freq is not None:
        args.append(("--moe-layer-freq", freq))
    if m.num_shared_experts:
        args.append(("--moe-shared-expert-intermediate-size", m.num_shared_experts * m.moe_ffn_hidden_size))
    if m.routed_groups < m.moe_router_num_groups:
        args += [("--moe-router-num-groups", m.moe_router_num_groups), ("--moe-router-group-topk", m.routed_groups)]
    if m.capacity_factor is not None:
        args.append(("--moe-expert-capacity-factor", repr(float(m.capacity_factor))))
    if ep_overlap_applies(plan.train, plan.layout):
        args.append(("--overlap-moe-expert-parallel-comm", None))
    return args + balance_args(plan.train)


def dispatcher_args(train) -> list:
    """The token dispatcher the plan was priced with (costmodels.moe_timing.dispatcher: the run's, else the
    stack's): alltoall and allgather by name, DeepEP as Megatron's flex dispatcher with its deepep backend. Always
    written: without the flag Megatron runs allgather (TransformerConfig's default)."""
    priced = train.ep_dispatcher or ("allgather" if train.moe_dispatcher == "allgather" else
                                     train.stack_spec.ep_dispatcher)
    if priced == "deepep":
        return [("--moe-token-dispatcher-type", "flex"), ("--moe-flex-dispatcher-backend", "deepep")]
    return [("--moe-token-dispatcher-type", priced)]


AUX_LOSS_KINDS = ("aux_loss", "seq_aux_loss", "global_aux_loss")


def balance_args(train) -> list:
    """The router's balancing where it differs from Megatron's default (megatron-core 0.16.1 TransformerConfig:
    moe_router_load_balancing_type aux_loss, moe_router_force_load_balancing and moe_router_enable_expert_bias
    False). The expert bias needs --moe-router-score-function sigmoid (TransformerConfig.__post_init__ raises
    otherwise), written with it. An aux-loss kind gets the coefficient TransformerConfig.moe_aux_loss_coeff's
    docstring recommends, 1e-2: Megatron's default, 0.0, would train the router unbalanced."""
    kind = train.moe_load_balancing
    args = [("--moe-router-force-load-balancing", None)] if kind == "forced" else []
    if kind not in ("forced", "aux_loss"):
        args.append(("--moe-router-load-balancing-type", kind))
    if kind in AUX_LOSS_KINDS:
        args.append(("--moe-aux-loss-coeff", "1e-2"))
    if train.moe_expert_bias:
        args += [("--moe-router-enable-expert-bias", None), ("--moe-router-score-function", "sigmoid")]
    return args


def parallel_args(plan: ExportPlan) -> list:
    lay = plan.layout
    keys = ["tp", "pp", "cp"] + (["ep", "etp"] if plan.model.is_moe else [])
    args = [(PARALLEL[k], getattr(lay, k)) for k in keys]
    if lay.sp:
        args.append(("--sequence-parallel", None))
    if lay.cp > 1:
        args.append(("--cp-comm-type", lay.cp_comm))
    return args + stage_args(plan)


def stage_args(plan: ExportPlan) -> list:
    """Virtual stages and uneven stages (launch_formats.md: exactly one virtual-stage option). The
    first/last-stage flags need every stage divisible by vpp (TransformerConfig.__post_init__); chunks
    of unequal size (costmodels.pipeline.chunk_layers) only fit --pipeline-model-parallel-layout."""
    lay = plan.layout
    stages = lay.stage_layers
    if lay.pp == 1:
        return []
    if lay.chunk_layers is not None:  # chunks sized otherwise than chunk_layers: only the layout states them
        return [("--pipeline-model-parallel-layout", layout_string(stages, lay.vpp, lay.chunk_layers))]
    even_chunks = all(n % lay.vpp == 0 for n in stages)
    if plan.uniform_stages and even_chunks:
        if lay.vpp > 1:
            return [("--num-layers-per-virtual-pipeline-stage", stages[0] // lay.vpp)]
        return []
    ends = uneven_ends(stages) if even_chunks else None
    if ends is not None:
        first, last = ends
        args = [("--decoder-first-pipeline-num-layers", first)] if first is not None else []
        args += [("--decoder-last-pipeline-num-layers", last)] if last is not None else []
        return args + ([("--num-virtual-stages-per-pipeline-rank", lay.vpp)] if lay.vpp > 1 else [])
    return [("--pipeline-model-parallel-layout", layout_string(stages, lay.vpp))]


def uneven_ends(stages: list[int]):
    """(first, last) flags (None = not needed) when the middle stages are even, else None."""
    if len(set(stages[1:])) == 1:
        return stages[0], None
    if len(set(stages[:-1])) == 1:
        return None, stages[-1]
    if len(stages) > 2 and len(set(stages[1:-1])) == 1:
        return stages[0], stages[-1]
    return None


def layout_string(stages: list[int], vpp: int, chunks: list[int] | None = None) -> str:
    """Megatron's --pipeline-model-parallel-layout: virtual stage v of rank r is entry v*pp + r
    (megatron/core/transformer/pipeline_parallel_layer_layout.py); a rank's chunks as
    costmodels.pipeline.rank_chunks sizes them (Layout.chunk_layers, else larger first)."""
    pp = len(stages)
    sizes = rank_chunks(stages, vpp, chunks)
    chunks = []
    for v in range(vpp):
        for r in range(pp):
            n = sizes[r][v]
            text = f"t*{n}" if n else ""
            if v == 0 and r == 0:
                text = "E" + text
            if v == vpp - 1 and r == pp - 1:
                text += "L"
            chunks.append(text)
    return "|".join(chunks)


def memory_args(plan: ExportPlan) -> list:
    lay, train = plan.layout, plan.train
    args = []
    if lay.zero == 1:
        args.append(("--use-distributed-optimizer", None))
    elif fsdp(plan):
        args += [("--use-megatron-fsdp", None), ("--data-parallel-sharding-strategy", ZERO_FSDP[lay.zero]),
                 ("--ckpt-format", "fsdp_dtensor")]
    if train.grad_overlap:
        args.append(("--overlap-grad-reduce", None))
        if lay.zero >= 1 and train.param_gather_overlap:
            args.append(("--overlap-param-gather", None))
    if lay.recompute == "selective":
        args.append(("--recompute-granularity", "selective"))
        if lay.recompute_modules:
            args.append(("--recompute-modules", tuple(lay.recompute_modules)))
    elif lay.recompute == "full":
        args += [("--recompute-granularity", "full"), ("--recompute-method", lay.recompute_method),
                 ("--recompute-num-layers", lay.recompute_num_layers or 1)]
    if tp_overlap_applies(train, lay):  # Megatron refuses --tp-comm-overlap without --sequence-parallel
        args.append(("--tp-comm-overlap", None))
    if train.offload_optimizer == "cpu":  # megatron/core/optimizer/cpu_offloading (HybridDeviceOptimizer);
        # megatron-core 0.19.2 validate_args asserts --use-precision-aware-optimizer with it (fp32 states by default)
        args += [("--optimizer-cpu-offload", None), ("--use-precision-aware-optimizer", None),
                 ("--optimizer-offload-fraction", repr(float(train.offload_optimizer_fraction)))]
    return args


def training_args(plan: ExportPlan) -> list:
    train = plan.train
    args = [("--micro-batch-size", plan.layout.mbs), ("--global-batch-size", train.global_batch_size)]
    args += FP8_RECIPE[train.fp8_recipe] if train.precision == "fp8" else PRECISION[train.precision]
    # the gradient buffer the plan was priced with (costmodels.memory.memory_train: the stack's fp32 main grads
    # unless grad_dtype says otherwise), so that check on the exported script prices what the plan did
    if memory_train(train, plan.layout).grad_bytes_per_param == 4:
        args.append(("--accumulate-allreduce-grads-in-fp32", None))
        if fsdp(plan):  # Megatron-FSDP ignores that flag: its main grads default to the weights' dtype (0.19.2
            args.append(("--megatron-fsdp-main-grads-dtype", "fp32"))  # arguments.py line 3524; train.grad_dtype)
    elif train.precision != "fp16":
        args.append(("--grad-reduce-in-bf16", None))  # 16-bit gradients
    args += [("--optimizer", train.optimizer), ("--lr", "3.0e-4"), ("--min-lr", "3.0e-5"),
             ("--lr-decay-style", "cosine"), ("--train-iters", plan.train_steps or 100), ("--log-interval", 1),
             ("--eval-iters", 0)]
    return args


def megatron_arg_groups(plan: ExportPlan) -> list[tuple[str, list]]:
    """Named argument groups for pretrain_gpt.py (bash arrays in the scripts)."""
    refusal(plan)
    groups = [("MODEL_ARGS", model_args(plan)), ("MOE_ARGS", moe_args(plan)),
              ("PARALLEL_ARGS", parallel_args(plan)), ("MEMORY_ARGS", memory_args(plan)),
              ("TRAINING_ARGS", training_args(plan)),
              ("TOKENIZER_ARGS", [("--tokenizer-type", "NullTokenizer"), ("--vocab-size", plan.model.vocab_size)]),
              ("NAME_ARGS", [("--wandb-exp-name", plan.model.name)])]
    return [(name, args) for name, args in groups if args]


DATA_BLOCK = """\
# EDIT: data. Empty DATA_PATH runs on synthetic data (--mock-data); set DATA_PATH to a Megatron
# indexed dataset prefix for real data and change TOKENIZER_ARGS to its tokenizer.
DATA_PATH="${DATA_PATH:-}"
if [ -n "$DATA_PATH" ]; then
    DATA_ARGS=(--data-path "$DATA_PATH" --split 949,50,1)
else
    DATA_ARGS=(--mock-data)
fi
"""


def arrays_and_env(plan: ExportPlan) -> tuple[str, list[Raw]]:
    """The shell text defining the argument arrays and environment, and the words expanding them."""
    groups = megatron_arg_groups(plan)
    text = ""
    if needs_single_connection(plan):
        text += "# Megatron: TP or CP > 1 on Hopper or older needs one CUDA connection\n"
        text += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n\n"
    text += "".join(bash_array(name, args) for name, args in groups) + "\n" + DATA_BLOCK
    words = [Raw(f'"${{{name}[@]}}"') for name, _ in groups] + [Raw('"${DATA_ARGS[@]}"')]
    return text, words


def render(plan: ExportPlan) -> dict[str, tuple[str, int]]:
    """{file name: (text, mode)}."""
    arrays, words = arrays_and_env(plan)
    body = (
        '# EDIT: MEGATRON_DIR is the Megatron-LM checkout holding pretrain_gpt.py\n'
        'MEGATRON_DIR="${MEGATRON_DIR:-.}"\n'
        f"NNODES={plan.nodes}\nGPUS_PER_NODE={plan.gpus_per_node}\n\n{arrays}\n"
        f"# Run once per node with NODE_RANK=0..{plan.nodes - 1} and MASTER_ADDR = node 0's address.\n"
    )
    launch = ["torchrun", "--nnodes", Raw('"$NNODES"'), "--nproc-per-node", Raw('"$GPUS_PER_NODE"'),
              "--node-rank", Raw('"${NODE_RANK:-0}"'), "--master-addr", Raw('"${MASTER_ADDR:-localhost}"'),
              "--master-port", Raw('"${MASTER_PORT:-6000}"'), Raw('"$MEGATRON_DIR/pretrain_gpt.py"')] + words
    return {SCRIPT: (script(plan, TARGET, body + command(launch)), 0o777)}
