"""Megatron's training flags (precision, optimizer, gradient and state dtypes, offload, dispatcher,
allocator) read back into TrainSpec fields.

Source: megatron/training/arguments.py and megatron-core's OptimizerConfig/DistributedDataParallelConfig
(the flag names and defaults: fp32 main gradients with --bf16 unless --grad-reduce-in-bf16), as
planner.frameworks.megatron.flag_table classifies them. Used by planner.files.native and the exporters'
validators. Every bad value raises UserError naming the flag and the value.
"""

from __future__ import annotations

from typing import Optional

from planner.errors import UserError
from planner.frameworks.megatron import deepspeed_dialect
from planner.frameworks.megatron.flags import MegatronArgs, choice, seq_length
from planner.frameworks.megatron.precision import precision as precision_of

def train_data(a: MegatronArgs) -> dict:
    """TrainSpec fields (global batch may be absent: Megatron then uses micro * dp)."""
    precision = precision_of(a)  # fp32 without --bf16/--fp16 (planner.frameworks.megatron.precision)
    optimizer = a.str("--optimizer", "adam")
    if optimizer not in ("adam", "sgd"):
        raise UserError(f"--optimizer {optimizer!r}: parplan models adam and sgd")
    data = {"seq_length": seq_length(a), "precision": precision, "optimizer": optimizer, "grad_dtype": grad_dtype(a),
            "flash_attention": flash_attention(a) and precision != "fp32",
            "tp_comm_overlap": a.has("--tp-comm-overlap"), "overlap_grad_reduce": a.has("--overlap-grad-reduce"),
            "ep_comm_overlap": a.has("--overlap-moe-expert-parallel-comm"),
            **optimizer_dtypes(a), **offload_data(a), **balance_data(a)}
    if a.has("--fp8-recipe"):
        data["fp8_recipe"] = choice(a, "--fp8-recipe", FP8_RECIPES, "delayed")
    if a.has("--fp4-format"):  # megatron-core 0.19.2 TransformerConfig: fp4 Literal['e2m1'], fp4_recipe nvfp4 default
        choice(a, "--fp4-format", {"e2m1": "e2m1"}, "e2m1")
        if a.str("--fp4-recipe", "nvfp4") != "nvfp4":  # custom needs a quantizer factory in code
            raise UserError(f"--fp4-recipe {a.str('--fp4-recipe')}: parplan prices nvfp4 (NVFP4BlockScaling)")
        data["fp8_recipe"] = "nvfp4"
    if precision == "fp8" and a.has("--fp8-param-gather"):
        data["fp8_param_gather"] = True
    if a.has("--cross-entropy-loss-fusion"):
        data["fused_loss"] = True
    if a.int("--num-experts", 0, minimum=0) and not deepspeed_dialect.is_megatron_deepspeed(a):
        data.update(dispatch_data(a))
    if not deepspeed_dialect.is_megatron_deepspeed(a):
        data["overlap_param_gather"] = param_gather(a)
    if expandable_segments(a.env.get("PYTORCH_CUDA_ALLOC_CONF", "")):
        data["expandable_segments"] = True
    if a.has("--global-batch-size"):
        data["global_batch_size"] = a.int("--global-batch-size")
    return data


TRANSFORMER_IMPLS = ("transformer_engine", "local", "inference_optimized")  # TransformerConfig.transformer_impl


def flash_attention(a: MegatronArgs) -> bool:
    """Fused attention (no s x s scores kept): --attention-backend (default auto: Transformer Engine picks flash or
    cuDNN fused) unless unfused or local, and only with Transformer Engine layers (and 16-bit inputs: fp32 training
    is priced unfused, train_data, as Transformer Engine's flash and cuDNN paths take fp16/bf16 only).
    --transformer-impl local (default transformer_engine: megatron-core 0.19.2 transformer_config.py line 1220)
    builds megatron-core's own layer spec, whose core attention is DotProductAttention, unfused whatever the backend
    (megatron/training/models/gpt.py _te_or_local_layer_spec lines 98-130 -> get_gpt_layer_local_spec;
    megatron/core/models/backends.py LocalSpecProvider.core_attention, line 131)."""
    impl = a.str("--transformer-impl", "transformer_engine")
    if impl not in TRANSFORMER_IMPLS:
        raise UserError(f"--transformer-impl {impl!r}: Megatron knows {', '.join(TRANSFORMER_IMPLS)}")
    return impl != "local" and a.str("--attention-backend", "auto") not in ("unfused", "local")


def param_gather(a: MegatronArgs) -> bool:
    """TrainSpec.overlap_param_gather: --overlap-param-gather (Megatron's default off: the distributed optimizer's
    weight all-gather then runs after the step, exposed). Megatron accepts it only with the distributed optimizer or
    Megatron-FSDP and beside --overlap-grad-reduce (megatron-core 0.19.2 arguments.py validate_args, lines 990-995);
    either missing exits 2 here too."""
    if not a.has("--overlap-param-gather"):
        return False
    if not (a.has("--use-distributed-optimizer") or a.has("--use-megatron-fsdp") or a.has("--use-custom-fsdp")):
        raise UserError("--overlap-param-gather needs --use-distributed-optimizer (or --use-megatron-fsdp): "
                        "Megatron refuses it otherwise")
    if not a.has("--overlap-grad-reduce"):
        raise UserError("--overlap-param-gather needs --overlap-grad-reduce: Megatron refuses it otherwise")
    return True


FLEX_BACKENDS = {"deepep": "deepep", "hybridep": "hybridep", "ncclep": "ncclep"}  # 0.19.2 TransformerConfig Literal


def dispatch_data(a: MegatronArgs) -> dict:
    """TrainSpec.moe_dispatcher, ep_dispatcher and moe_permute_fusion of a Megatron-Core MoE script. Without
    --moe-token-dispatcher-type Megatron runs its default, allgather (megatron-core TransformerConfig
    moe_token_dispatcher_type, 0.16-0.19.2), which is priced, not the stack's dispatcher. Without
    --moe-permute-fusion the permutes are unfused (Megatron's default), except behind HybridEP
    (--moe-flex-dispatcher-backend hybridep), which permutes inside its own kernels (token_dispatcher.py
    _HybridEPManager: hybrid_ep_dispatch / hybrid_ep_combine; moe_utils' unfused path is never called)."""
    data = {"moe_dispatcher": choice(a, "--moe-token-dispatcher-type", DISPATCHERS, "allgather"),
            "ep_dispatcher": choice(a, "--moe-token-dispatcher-type", EP_DISPATCHERS, "allgather")}
    if a.has("--moe-enable-deepep") and data["ep_dispatcher"] != "deepep":  # TransformerConfig.__post_init__
        raise UserError("--moe-enable-deepep needs --moe-token-dispatcher-type flex: Megatron refuses DeepEP with "
                        f"the {a.str('--moe-token-dispatcher-type', 'allgather')} dispatcher")
    backend = choice(a, "--moe-flex-dispatcher-backend", FLEX_BACKENDS, "deepep")
    hybrid = data["ep_dispatcher"] == "deepep" and backend == "hybridep"
    data["moe_permute_fusion"] = hybrid or a.has("--moe-permute-fusion")
    return data


# Megatron --fp8-recipe -> TrainSpec.fp8_recipe (megatron-core 0.16 enums.Fp8Recipe; delayed and tensorwise
# are both per-tensor scales)
FP8_RECIPES = {"delayed": "tensorwise", "tensorwise": "tensorwise", "mxfp8": "mxfp8", "blockwise": "blockwise"}
# Megatron --moe-token-dispatcher-type -> TrainSpec.moe_dispatcher (what the memory counts). A script names no
# Megatron version, so it is read as today's: every dispatcher, allgather included (index-based permutation
# since megatron-core 0.7), keeps only the permuted expert input; TrainSpec's "allgather" is the 0.6 dispatcher's
# torch.gather copies, which only a row that states that version sets.
DISPATCHERS = {"allgather": "alltoall", "alltoall": "alltoall", "alltoall_seq": "alltoall", "flex": "alltoall"}
# ... and -> TrainSpec.ep_dispatcher (what the time prices: costmodels.moe_dispatch). flex is DeepEP or HybridEP
# (--moe-flex-dispatcher-backend; --moe-enable-deepep is the older spelling of flex + deepep): both send a token once
# per destination rank and node (megatron-core 0.16 fused_a2a.py, HybridEP's README), priced alike.
EP_DISPATCHERS = {"allgather": "allgather", "alltoall": "alltoall", "alltoall_seq": "alltoall", "flex": "deepep"}
DTYPES = ("fp32", "fp16", "bf16", "fp8")


# Megatron --moe-router-load-balancing-type values (megatron-core 0.16.1 TransformerConfig
# moe_router_load_balancing_type: aux_loss, seq_aux_loss, global_aux_loss, sinkhorn, none; default aux_loss).
BALANCING = ("aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none")


def balance_data(a: MegatronArgs) -> dict:
    """TrainSpec.moe_load_balancing and moe_expert_bias: forced with --moe-router-force-load-balancing (random
    logits win over any loss), else --moe-router-load-balancing-type (a list combines aux-loss kinds: the first
    that is not none; none only when every entry is), default aux_loss; --moe-router-enable-expert-bias."""
    if deepspeed_dialect.is_megatron_deepspeed(a):
        return deepspeed_dialect.moe_balance(a)
    out: dict = {"moe_expert_bias": True} if a.has("--moe-router-enable-expert-bias") else {}
    if a.has("--moe-router-force-load-balancing"):
        return {**out, "moe_load_balancing": "forced"}
    if not a.has("--moe-router-load-balancing-type"):
        return out
    text = a.str("--moe-router-load-balancing-type") or ""
    kinds = [k for k in text.replace(",", " ").split() if k]
    bad = [k for k in kinds if k not in BALANCING]
    if bad or not kinds:
        raise UserError(f"--moe-router-load-balancing-type {text[:60]!r}: expected some of {', '.join(BALANCING)}")
    return {**out, "moe_load_balancing": next((k for k in kinds if k != "none"), "none")}


def balance_warnings(a: MegatronArgs) -> list[str]:
    """One line when an MoE script's router balances by a loss whose coefficient is 0: --moe-aux-loss-coeff absent
    (Megatron's default 0.0: megatron-core 0.19.2 arguments.py line 3369, TransformerConfig.moe_aux_loss_coeff line
    846), said as that default, or every value given 0. Such a router trains unbalanced, yet the load-balancing type
    says aux_loss, which is what is priced."""
    if (deepspeed_dialect.is_megatron_deepspeed(a) or not a.int("--num-experts", 0, minimum=0)
            or a.has("--moe-router-enable-expert-bias")):
        return []
    kind = balance_data(a).get("moe_load_balancing", "aux_loss")
    if kind in ("none", "forced", "sinkhorn"):
        return []
    text = a.str("--moe-aux-loss-coeff", "0") or "0"
    try:
        if any(float(v) != 0.0 for v in text.replace(",", " ").split()):
            return []
    except ValueError:
        return []  # not a number: Megatron refuses it; nothing to say about balance
    given = a.has("--moe-router-load-balancing-type")
    router = f"--moe-router-load-balancing-type {kind}" + ("" if given else " (Megatron's default)")
    coeff = (f"--moe-aux-loss-coeff {text}" if a.has("--moe-aux-loss-coeff") else
             "--moe-aux-loss-coeff is not set in the script, so it is Megatron's default, --moe-aux-loss-coeff 0.0 "
             "(megatron-core 0.19.2 arguments.py line 3369)")
    return [f"{coeff}: with {router} the router is not balanced, but parplan prices it as {kind} (set "
            "--moe-aux-loss-coeff, or give --moe-router-load-balancing-type none to price the imbalance)"]


def grad_dtype(a: MegatronArgs) -> Optional[str]:
    """The gradient buffer's dtype, as megatron-core 0.19.2 sets it (None: the 16-bit weights'):
    - Megatron-FSDP (--use-megatron-fsdp): megatron_fsdp_grads;
    - torch FSDP2 (--use-torch-fsdp2): the weights' dtype; its DDP config is TorchFullyShardedDataParallelConfig,
      whose grad_reduce_in_fp32 stays False (megatron/training/training.py lines 1980-1982);
    - --bf16 (DDP): bf16 with --grad-reduce-in-bf16, which wins over --accumulate-allreduce-grads-in-fp32
      (arguments.py lines 1190-1191), else --main-grads-dtype (main_grads), default fp32: validate_args then sets
      accumulate_allreduce_grads_in_fp32 (line 1192);
    - otherwise (--fp16): fp32 with --accumulate-allreduce-grads-in-fp32, else None."""
    main = main_grads(a)
    if a.has("--use-megatron-fsdp"):
        return megatron_fsdp_grads(a)
    if a.has("--use-torch-fsdp2"):
        return "bf16" if a.has("--bf16") else None
    if not a.has("--bf16"):
        return "fp32" if a.has("--accumulate-allreduce-grads-in-fp32") else None
    if a.has("--grad-reduce-in-bf16"):
        return "bf16"
    return main


def main_grads(a: MegatronArgs) -> str:
    """--main-grads-dtype (default fp32), read only with --use-precision-aware-optimizer like the other optimizer
    dtypes (optimizer_dtypes; megatron-core 0.19.2 refuses a non-fp32 value without it, optimizer_config.py lines
    470-481), and refused beside --accumulate-allreduce-grads-in-fp32 with --bf16 (arguments.py lines 1186-1188)."""
    value = a.str("--main-grads-dtype", "fp32")
    if value not in ("fp32", "bf16"):
        raise UserError(f"--main-grads-dtype {value!r}: expected fp32 or bf16")
    if not a.has("--use-precision-aware-optimizer"):
        return "fp32"
    if value != "fp32" and a.has("--bf16") and a.has("--accumulate-allreduce-grads-in-fp32"):
        raise UserError(f"--main-grads-dtype {value} with --accumulate-allreduce-grads-in-fp32: Megatron refuses "
                        "both (megatron-core 0.19.2 arguments.py line 1187)")
    return value


FSDP_GRAD_DTYPES = ("fp32", "bf16", "fp16", "auto")


def megatron_fsdp_grads(a: MegatronArgs) -> str:
    """Megatron-FSDP's main gradients: --megatron-fsdp-main-grads-dtype, default auto = the weights' dtype (bf16
    under FP8 weights), whatever --accumulate-allreduce-grads-in-fp32 says: megatron-core 0.19.2 arguments.py
    line 3524; distributed_data_parallel_config.py megatron_fsdp_main_grads_dtype (None: "main gradients will
    match the dtype of the model compute parameters"); megatron_fsdp/param_and_grad_buffer.py
    _resolve_group_grad_dtype (line 2306); Megatron-FSDP never reads grad_reduce_in_fp32. Earlier releases kept
    fp32 main grads there; the flag's 0.19.2 meaning is read (--use-custom-fsdp, the older name, keeps the DDP
    rule). A different --megatron-fsdp-grad-comm-dtype changes only the wire, which TrainSpec cannot say apart."""
    value = a.str("--megatron-fsdp-main-grads-dtype", "auto")
    if value not in FSDP_GRAD_DTYPES:
        raise UserError(f"--megatron-fsdp-main-grads-dtype {value!r}: expected one of {', '.join(FSDP_GRAD_DTYPES)}")
    if value != "auto":
        return value
    return "fp16" if a.has("--fp16") else "bf16"


def optimizer_dtypes(a: MegatronArgs) -> dict:
    """master_dtype, exp_avg_dtype, exp_avg_sq_dtype from --main-params-dtype, --exp-avg-dtype,
    --exp-avg-sq-dtype; Megatron reads them only with --use-precision-aware-optimizer (else fp32)."""
    if not a.has("--use-precision-aware-optimizer"):
        return {}
    out = {}
    for flag, key, allowed in (("--main-params-dtype", "master_dtype", ("fp32", "fp16")),
                               ("--exp-avg-dtype", "exp_avg_dtype", DTYPES),
                               ("--exp-avg-sq-dtype", "exp_avg_sq_dtype", DTYPES)):
        value = a.str(flag, "fp32")
        if value not in allowed:
            raise UserError(f"{flag} {value!r}: expected one of {', '.join(allowed)}")
        out[key] = value
    return out


def offload_data(a: MegatronArgs) -> dict:
    """Activation offload (--cpu-offloading, --cpu-offloading-num-layers, Megatron default 0; megatron-core 0.19.2
    has no --cpu-offloading flag: arguments.py lines 1869-1870 turn it on when --cpu-offloading-num-layers > 0) and
    optimizer offload (--optimizer-cpu-offload, --optimizer-offload-fraction, default 1.0)."""
    out: dict = {}
    if a.has("--cpu-offloading") or a.int("--cpu-offloading-num-layers", 0, minimum=0):
        out["activation_offload_layers"] = a.int("--cpu-offloading-num-layers", 0, minimum=0)
    if a.has("--optimizer-cpu-offload"):
        out["offload_optimizer"] = "cpu"
        fraction = a.str("--optimizer-offload-fraction", "1.0")
        try:
            out["offload_optimizer_fraction"] = float(fraction)
        except (TypeError, ValueError):
            raise UserError(f"--optimizer-offload-fraction {fraction!r}: expected a number from 0 to 1") from None
        if not 0.0 <= out["offload_optimizer_fraction"] <= 1.0:
            raise UserError(f"--optimizer-offload-fraction {fraction!r}: expected a number from 0 to 1")
    return out


def require_fp8_peak(a: MegatronArgs, cluster, where: str) -> None:
    """UserError naming the file and the flag when --fp8-format (the only flag that sets FP8 training: megatron-core
    0.19.2 arguments.py, dest `fp8`) meets a GPU whose profile has no FP8 peak (fp8_tflops null: no FP8 tensor
    cores, e.g. A100). Transformer Engine runs FP8 only from compute capability 8.9 (Ada, Hopper) on."""
    if not a.has("--fp8-format") or cluster.gpu.fp8_tflops is not None:
        return
    raise UserError(f"{where}: --fp8-format {a.str('--fp8-format')}: gpu {cluster.gpu.name!r} of cluster "
                    f"{cluster.name!r} has no fp8 peak (fp8_tflops is null: no FP8 tensor cores), so this run cannot "
                    "train in FP8 there; drop --fp8-format from the script, or give check --precision bf16")


def expandable_segments(conf: str) -> bool:
    """PYTORCH_CUDA_ALLOC_CONF turns on expandable segments ('expandable_segments:True', among commas)."""
    return any(part.replace(" ", "").lower() == "expandable_segments:true" for part in conf.split(","))


def kernel_warnings(a: MegatronArgs) -> list[str]:
    """One line when a Megatron-Core MoE script leaves --moe-grouped-gemm off while parplan prices grouped GEMMs:
    Megatron then runs SequentialMLP (one MLP per local expert, launched from Python), and measured on megatron-core
    0.19.2's MoELayer (docs/moe.md, benchmarks/data/measured/gpu_moe_mcore_h200.json) the per-expert loop left the
    GPU idle 3-15x longer per layer than the grouped path on the same host: host time, which parplan does not price.
    (--moe-permute-fusion left off is priced: TrainSpec.moe_permute_fusion.)"""
    if deepspeed_dialect.is_megatron_deepspeed(a) or not a.int("--num-experts", 0, minimum=0):
        return []
    out = []
    if not a.has("--moe-grouped-gemm"):
        out.append("--moe-grouped-gemm is not set: Megatron runs one MLP per local expert (SequentialMLP), whose "
                   "host time parplan does not price (it prices one grouped GEMM); measured 3-15x the grouped "
                   "path's idle GPU time per layer (docs/moe.md)")
    if not a.has("--moe-token-dispatcher-type") and a.int("--expert-model-parallel-size", 1) > 1:
        out.append("--moe-token-dispatcher-type is not set: Megatron's default, allgather, is priced (every rank "
                   "gathers the tokens of all tp x ep ranks); alltoall or flex send each token only where it goes")
    return out

