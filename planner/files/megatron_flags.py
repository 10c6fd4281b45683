"""Read a Megatron-LM launch script or argument file back into parplan's vocabulary.

Source: benchmarks/data/launch_formats.md, section "Megatron-LM" (flag names and meanings: the
inverse of planner.exporters.megatron's mapping tables). Megatron's defaults apply to flags left
out: dropout on, gelu, LayerNorm, learned positions, tied embeddings, biases, expert tensor
parallel size = tensor parallel size, and fp32 main gradients with --bf16 unless
--grad-reduce-in-bf16. Used by planner.files.native (parplan check) and planner.exporters.check_written.
Every bad value raises UserError naming the flag and the value.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Optional

from planner.errors import UserError
from planner.files import megatron_flag_table as flag_table
from planner.files.megatron_names import NORM, POSITION, SWITCHES, ZERO_FSDP
from planner.files.megatron_vocab import vocab_size
from planner.files.shellread import (
    ShellScript, flag_dict, parse_flags, read_script, split_at_script,
)

NORM_BACK = {v: k for k, v in NORM.items()}
POSITION_BACK = {v: k for k, v in POSITION.items()}
FSDP_BACK = {"no_shard": 0, "optim": 1, **{v: k for k, v in ZERO_FSDP.items()}}
INT_FLAG = re.compile(r"[+-]?[0-9]{1,18}")
LIST_FLAGS = {"--recompute-modules", "--cuda-graph-scope"}  # argparse nargs="+" (megatron/training/arguments.py)
VIRTUAL_FLAGS = ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                 "--pipeline-model-parallel-layout")


@dataclass
class MegatronArgs:
    """Flags given to pretrain_gpt.py, the torchrun options before it, and the script's environment."""

    pairs: list = field(default_factory=list)
    torchrun: Optional[list[str]] = None
    env: dict = field(default_factory=dict)
    launcher: Optional[str] = None  # torchrun, deepspeed, python (None: an argument file)
    launcher_opts: list = field(default_factory=list)  # the launcher's own options
    shell: Optional[ShellScript] = None  # the evaluated script: warnings, here-document files, #SBATCH

    @property
    def flags(self) -> dict:
        return flag_dict(self.pairs)

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def str(self, flag: str, default: Optional[str] = None) -> Optional[str]:
        value = self.flags.get(flag, default)
        return default if value is None and flag not in self.flags else value

    def int(self, flag: str, default: Optional[int] = None, minimum: int = 1) -> Optional[int]:
        if flag not in self.flags:
            return default
        value = self.flags[flag]
        if not isinstance(value, str) or not INT_FLAG.fullmatch(value):  # int() would take '٤', '4_0', 5,000 digits
            shown = repr(value) if value is None or len(value) <= 40 else repr(value[:37] + "...")
            raise UserError(f"{flag} {shown}: expected a whole number (at most 18 ASCII digits)")
        number = int(value)
        if number < minimum:
            raise UserError(f"{flag} {number}: must be at least {minimum}")
        return number

    def require_int(self, flag: str) -> int:
        if flag not in self.flags:
            raise UserError(f"{flag} is missing (Megatron needs it)")
        return self.int(flag)


LAUNCHERS = ("torchrun", "deepspeed", "python", "python3")
TORCH_RUN = ("torch.distributed.run", "torch.distributed.launch")  # `python -m torch.distributed.run` = torchrun


def launches(sh: ShellScript) -> list[tuple[str, list[str], str, list[str]]]:
    """(launcher, its options, training script, script arguments) of every command running a script."""
    found = []
    for words in sh.commands:
        for i, w in enumerate(words):
            launcher = w.rsplit("/", 1)[-1]
            if launcher not in LAUNCHERS:
                continue
            opts, script, args = split_at_script(words[i + 1:])
            if script in TORCH_RUN:
                launcher, (opts, script, args) = "torchrun", split_at_script(args)
            if script is not None:
                found.append((launcher, opts, script, args))
            break
    return found


def read_megatron(text: str, path=None) -> MegatronArgs:
    """The launch of Megatron's training script (the first whose script is pretrain_*.py or that gives
    --num-layers; else the first torchrun, then python launch), or every flag of an argument file.
    `path`: the script's file, whose folder `source`d files are read from."""
    sh = read_script(text, path, every_branch=False)
    found = launches(sh)
    main = [f for f in found if posixpath.basename(f[2]).startswith("pretrain") or "--num-layers" in f[3]]
    for launcher, opts, _, args in main or sorted(found, key=lambda f: f[0] != "torchrun"):
        return MegatronArgs(parse_flags(args, SWITCHES, LIST_FLAGS), opts if launcher == "torchrun" else None, sh.env,
                            launcher, opts, sh)
    words = [w for cmd in sh.commands for w in cmd] + [w for items in sh.arrays.values() for w in items]
    words += [w for value in sh.scalars.values() if "--num-layers" in value for w in value.split()]
    return MegatronArgs(parse_flags(words, SWITCHES, LIST_FLAGS), None, sh.env, None, [], sh)


def model_data(a: MegatronArgs) -> dict:
    """ModelSpec fields from the shape flags."""
    heads = a.require_int("--num-attention-heads")
    hidden = a.require_int("--hidden-size")
    data = {"num_layers": a.require_int("--num-layers"), "hidden_size": hidden, "num_attention_heads": heads,
            "vocab_size": vocab_size(a), "seq_length": seq_length(a),
            "activation": "swiglu" if a.has("--swiglu") else "gelu",
            "norm": _choice(a, "--normalization", NORM_BACK, "LayerNorm"),
            "position_embedding": _choice(a, "--position-embedding-type", {**POSITION_BACK, "alibi": "none"},
                                          "learned_absolute"),
            "tied_embeddings": not a.has("--untie-embeddings-and-output-weights"),
            "linear_bias": not a.has("--disable-bias-linear"), "qk_norm": a.has("--qk-layernorm"),
            "dropout": not (_zero(a, "--attention-dropout") and _zero(a, "--hidden-dropout")),
            "mtp_num_layers": a.int("--mtp-num-layers", 0, minimum=0)}
    if a.str("--position-embedding-type") == "alibi" and a.shell is not None:  # Megatron-DeepSpeed (BLOOM)
        a.shell.warn("--position-embedding-type alibi: priced as no position embedding (ALiBi has no weights; "
                     "its attention bias is not counted)")
    data["seq_length"] = max(data["seq_length"], a.int("--max-position-embeddings", data["seq_length"]))
    for flag, key in (("--ffn-hidden-size", "ffn_hidden_size"), ("--kv-channels", "head_dim")):
        if a.has(flag):
            data[key] = a.int(flag)
    if a.has("--group-query-attention"):
        data["num_kv_heads"] = a.int("--num-query-groups", 1)
    if a.has("--multi-latent-attention"):
        data.pop("head_dim", None)
        data.pop("num_kv_heads", None)
        data["mla"] = mla_data(a)
    return {**data, **moe_data(a, data["num_layers"])}


def mla_data(a: MegatronArgs) -> dict:
    """ModelSpec.mla from Megatron's flags, with their defaults (megatron/training/arguments.py:
    --kv-lora-rank 32, --qk-head-dim 128, --qk-pos-emb-head-dim 64, --v-head-dim 128; no
    --q-lora-rank = no query latent)."""
    return {"q_lora_rank": a.int("--q-lora-rank", 0, minimum=0), "kv_lora_rank": a.int("--kv-lora-rank", 32),
            "qk_nope_head_dim": a.int("--qk-head-dim", 128), "qk_rope_head_dim": a.int("--qk-pos-emb-head-dim", 64),
            "v_head_dim": a.int("--v-head-dim", 128)}


def seq_length(a: MegatronArgs) -> int:
    seq = a.int("--seq-length")
    if seq is None:
        raise UserError("--seq-length is missing (Megatron needs it for GPT training)")
    return seq


def _choice(a: MegatronArgs, flag: str, table: dict, default: str) -> str:
    value = a.str(flag, default)
    if value not in table:
        raise UserError(f"{flag} {value!r}: parplan knows {', '.join(table)}")
    return table[value]


def _zero(a: MegatronArgs, flag: str) -> bool:
    try:
        return a.has(flag) and float(a.str(flag)) == 0.0
    except (TypeError, ValueError):
        raise UserError(f"{flag} {a.str(flag)!r}: expected a number") from None


def moe_data(a: MegatronArgs, layers: int) -> dict:
    experts = a.int("--num-experts", 0, minimum=0)
    if not experts:
        return {}
    data = {"num_experts": experts, "top_k": a.int("--moe-router-topk", 2)}
    if a.has("--moe-ffn-hidden-size"):
        data["moe_ffn_hidden_size"] = a.int("--moe-ffn-hidden-size")
    data["first_k_dense_layers"] = dense_prefix(a.str("--moe-layer-freq", "1"), layers)
    shared = a.int("--moe-shared-expert-intermediate-size", 0, minimum=0)
    if shared:
        width = data.get("moe_ffn_hidden_size") or a.int("--ffn-hidden-size") or 4 * a.int("--hidden-size")
        if shared % width:
            raise UserError(f"--moe-shared-expert-intermediate-size {shared}: not a multiple of the expert width {width}")
        data["num_shared_experts"] = shared // width
    if a.has("--moe-expert-capacity-factor"):
        try:
            data["capacity_factor"] = float(a.str("--moe-expert-capacity-factor"))
        except (TypeError, ValueError):
            raise UserError(f"--moe-expert-capacity-factor {a.str('--moe-expert-capacity-factor')!r}: "
                            "expected a number") from None
    return data


def dense_prefix(freq: str, layers: int) -> int:
    """First-k-dense from --moe-layer-freq: 1, or a pattern "([0]*k+[1]*n)" (other patterns refused)."""
    text = str(freq).replace(" ", "")
    if text == "1":
        return 0
    m = re.fullmatch(r"\(?\[0\]\*([0-9]{1,9})\+\[1\]\*([0-9]{1,9})\)?", text)
    if not m or int(m.group(1)) + int(m.group(2)) != layers:
        raise UserError(f"--moe-layer-freq {str(freq)[:60]!r}: parplan reads only 1 or '([0]*K+[1]*N)' with K+N = "
                        f"--num-layers ({layers})")
    return int(m.group(1))


# ---- layout and training ------------------------------------------------------------------------

def layout_data(a: MegatronArgs, model: dict) -> dict:
    """Layout fields from the parallel, memory, recompute and batch flags (dp left to be derived)."""
    tp = a.int("--tensor-model-parallel-size", 1)
    pp = a.int("--pipeline-model-parallel-size", 1)
    moe = bool(model.get("num_experts"))
    data = {"tp": tp, "pp": pp, "cp": a.int("--context-parallel-size", 1),
            "ep": a.int("--expert-model-parallel-size", 1),
            "etp": a.int("--expert-tensor-parallel-size", tp) if moe else 1,
            "sp": a.has("--sequence-parallel") and tp > 1, "zero": zero_stage(a),
            "mbs": a.require_int("--micro-batch-size"), "cp_comm": cp_comm(a), **recompute_data(a)}
    stages, vpp = stage_split(a, model["num_layers"], pp)
    data["vpp"] = vpp
    if stages is not None:
        data["stage_layers"] = stages
    return data


def cp_comm(a: MegatronArgs) -> str:
    """`--cp-comm-type` (Megatron default p2p); hierarchical a2a+p2p is not modelled."""
    value = a.str("--cp-comm-type", "p2p")
    if value not in ("p2p", "a2a", "allgather"):
        raise UserError(f"--cp-comm-type {value!r}: parplan models p2p, a2a and allgather (one type for every layer)")
    return value


def zero_stage(a: MegatronArgs) -> int:
    """ZeRO stage: Megatron-FSDP's sharding strategy (--use-megatron-fsdp, or its older name
    --use-custom-fsdp); Megatron-DeepSpeed's --deepspeed --zero-stage N, where stage 0 with --bf16 runs
    DeepSpeed's BF16_Optimizer, which partitions the fp32 master weights and Adam states over the
    data-parallel ranks and keeps fp32 gradients (deepspeed/runtime/bf16_optimizer.py; BLOOM's
    tr11-176B-ml.slurm: "bf16 must use z0! it implements its own zero stage 1 equivalent"): ZeRO-1;
    else 1 with the distributed optimizer (sharded over dp x cp: memory.py)."""
    if a.has("--deepspeed"):
        stage = a.int("--zero-stage", 0, minimum=0)
        if stage > 3:
            raise UserError(f"--zero-stage {stage}: DeepSpeed's ZeRO stages are 0 to 3")
        return max(stage, 1 if a.has("--bf16") else 0)
    if a.has("--use-megatron-fsdp") or a.has("--use-custom-fsdp"):
        strategy = a.str("--data-parallel-sharding-strategy", "optim_grads_params")
        if strategy not in FSDP_BACK:
            raise UserError(f"--data-parallel-sharding-strategy {strategy!r}: expected one of {', '.join(FSDP_BACK)}")
        return max(FSDP_BACK[strategy], 1 if a.has("--use-distributed-optimizer") else 0)
    return 1 if a.has("--use-distributed-optimizer") else 0


RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")


def recompute(a: MegatronArgs) -> str:
    """none | selective | full: --recompute-granularity, else the legacy --recompute-activations
    (selective) and --checkpoint-activations (full, Megatron-LM before 2022 and Megatron-DeepSpeed)."""
    granularity = a.str("--recompute-granularity", None)
    if granularity is None and a.has("--checkpoint-activations"):
        return "full"
    if granularity is None and a.has("--recompute-activations"):
        return "selective"
    if granularity in (None, "selective", "full"):
        return granularity or "none"
    raise UserError(f"--recompute-granularity {granularity!r}: expected full or selective")


def recompute_data(a: MegatronArgs) -> dict:
    """Layout recompute fields: the mode, and for full recompute --recompute-method and
    --recompute-num-layers (legacy: --activations-checkpoint-method / -num-layers), for selective
    --recompute-modules (megatron-core 0.16 TransformerConfig.recompute_modules; several modules given
    as one word, comma- or space-separated)."""
    mode = recompute(a)
    data: dict = {"recompute": mode}
    if mode == "full":
        method = a.str("--recompute-method", None) or a.str("--activations-checkpoint-method", None)
        if method not in (None, "uniform", "block"):
            raise UserError(f"--recompute-method {method!r}: expected uniform or block")
        layers = a.int("--recompute-num-layers") or a.int("--activations-checkpoint-num-layers")
        if method is not None:
            data["recompute_method"] = method
        if layers is not None and layers > 1 or method == "block":
            data["recompute_num_layers"] = layers or 1
    if mode == "selective" and a.has("--recompute-modules"):
        data["recompute_modules"] = recompute_modules(a.str("--recompute-modules") or "")
    return data


def recompute_modules(text: str) -> list[str]:
    """The module names of --recompute-modules, each checked against Megatron's list."""
    names = [n for n in re.split(r"[,\s]+", text.strip()) if n]
    bad = [n for n in names if n not in RECOMPUTE_MODULES]
    if bad or not names:
        raise UserError(f"--recompute-modules {text[:60]!r}: expected some of {', '.join(RECOMPUTE_MODULES)}")
    return names


def stage_split(a: MegatronArgs, layers: int, pp: int) -> tuple[Optional[list[int]], int]:
    """(layers per pipeline rank or None for an even split, virtual stages per rank)."""
    given = [f for f in VIRTUAL_FLAGS if a.has(f)]
    if len(given) > 1:
        raise UserError(f"{' and '.join(given)}: Megatron accepts only one of them")
    if a.has("--pipeline-model-parallel-layout"):
        return layout_stages(a.str("--pipeline-model-parallel-layout"), layers, pp)
    vpp = 1
    if a.has("--num-layers-per-virtual-pipeline-stage"):
        per = a.int("--num-layers-per-virtual-pipeline-stage")
        if layers % pp or (layers // pp) % per:
            raise UserError(f"--num-layers-per-virtual-pipeline-stage {per}: layers per pipeline rank "
                            f"({layers}/{pp}) must be a whole multiple of it")
        vpp = layers // pp // per
    elif a.has("--num-virtual-stages-per-pipeline-rank"):
        vpp = a.int("--num-virtual-stages-per-pipeline-rank")
    return uneven_stages(a, layers, pp), vpp


def uneven_stages(a: MegatronArgs, layers: int, pp: int) -> Optional[list[int]]:
    first = a.int("--decoder-first-pipeline-num-layers")
    last = a.int("--decoder-last-pipeline-num-layers")
    if first is None and last is None:
        return None
    rest = layers - (first or 0) - (last or 0)
    middle = pp - (first is not None) - (last is not None)
    if bool(rest) != bool(middle) or (middle and rest % middle) or rest < 0:
        raise UserError(f"--decoder-first-pipeline-num-layers {first}, --decoder-last-pipeline-num-layers {last}: "
                        f"the other {rest} layers do not split evenly over {middle} middle stages (pp={pp})")
    inner = [rest // middle] * middle if middle else []
    return ([first] if first is not None else []) + inner + ([last] if last is not None else [])


MAX_LAYOUT_CHARS = 1_000_000  # an expanded --pipeline-model-parallel-layout: far above any real model's


def _repeat(part: str, times: str, text: str) -> str:
    """`part * times` of a layout string, refused past MAX_LAYOUT_CHARS ('t*99999999999' would fill memory)."""
    if len(times) > 9 or len(part) * int(times) > MAX_LAYOUT_CHARS:
        raise UserError(f"--pipeline-model-parallel-layout {text[:40]!r}: {part[:20]}*{times[:20]} expands past "
                        f"{MAX_LAYOUT_CHARS} characters")
    return part * int(times)


def layout_stages(text: str, layers: int, pp: int) -> tuple[list[int], int]:
    """Per-rank layer counts and vpp from a --pipeline-model-parallel-layout string."""
    flat = text.replace(",", "").replace(" ", "")
    for pattern in (r"\(([^)]+)\)\*([0-9]+)", r"(.)\*([0-9]+)"):
        flat = re.sub(pattern, lambda m: _repeat(m.group(1), m.group(2), text), flat)
    chunks = flat.split("|")
    bad = set(flat) - set("ELtm|")
    if bad or len(chunks) % pp or flat.count("E") != 1 or flat.count("L") != 1 or not chunks[0].startswith("E") \
            or not chunks[-1].endswith("L") or flat.count("t") != layers:
        raise UserError(f"--pipeline-model-parallel-layout {text!r}: needs E first, L last, {layers} t's and a "
                        f"multiple of pp={pp} stages separated by '|'")
    vpp = len(chunks) // pp
    return [sum(chunks[v * pp + r].count("t") for v in range(vpp)) for r in range(pp)], vpp


def train_data(a: MegatronArgs) -> dict:
    """TrainSpec fields (global batch may be absent: Megatron then uses micro * dp)."""
    if a.has("--bf16") and a.has("--fp16"):
        raise UserError("--bf16 and --fp16 are both given; Megatron accepts one")
    if not (a.has("--bf16") or a.has("--fp16")):
        raise UserError("neither --bf16 nor --fp16 is given: parplan models 16-bit mixed-precision training")
    precision = "fp8" if a.has("--fp8-format") else ("bf16" if a.has("--bf16") else "fp16")
    optimizer = a.str("--optimizer", "adam")
    if optimizer not in ("adam", "sgd"):
        raise UserError(f"--optimizer {optimizer!r}: parplan models adam and sgd")
    data = {"seq_length": seq_length(a), "precision": precision, "optimizer": optimizer, "grad_dtype": grad_dtype(a),
            "flash_attention": a.str("--attention-backend", "auto") not in ("unfused", "local"),
            "tp_comm_overlap": a.has("--tp-comm-overlap"), "overlap_grad_reduce": a.has("--overlap-grad-reduce"),
            **optimizer_dtypes(a), **offload_data(a)}
    if a.has("--fp8-recipe"):
        data["fp8_recipe"] = _choice(a, "--fp8-recipe", FP8_RECIPES, "delayed")
    if precision == "fp8" and a.has("--fp8-param-gather"):
        data["fp8_param_gather"] = True
    if a.has("--cross-entropy-loss-fusion"):
        data["fused_loss"] = True
    if a.has("--moe-token-dispatcher-type"):
        data["moe_dispatcher"] = _choice(a, "--moe-token-dispatcher-type", DISPATCHERS, "allgather")
    if expandable_segments(a.env.get("PYTORCH_CUDA_ALLOC_CONF", "")):
        data["expandable_segments"] = True
    if a.has("--global-batch-size"):
        data["global_batch_size"] = a.int("--global-batch-size")
    return data


# Megatron --fp8-recipe -> TrainSpec.fp8_recipe (megatron-core 0.16 enums.Fp8Recipe; delayed and tensorwise
# are both per-tensor scales)
FP8_RECIPES = {"delayed": "tensorwise", "tensorwise": "tensorwise", "mxfp8": "mxfp8", "blockwise": "blockwise"}
# Megatron --moe-token-dispatcher-type -> TrainSpec.moe_dispatcher (what the memory counts). A script names no
# Megatron version, so it is read as today's: every dispatcher, allgather included (index-based permutation
# since megatron-core 0.7), keeps only the permuted expert input; TrainSpec's "allgather" is the 0.6 dispatcher's
# torch.gather copies, which only a row that states that version sets.
DISPATCHERS = {"allgather": "alltoall", "alltoall": "alltoall", "alltoall_seq": "alltoall", "flex": "alltoall"}
DTYPES = ("fp32", "fp16", "bf16", "fp8")


def grad_dtype(a: MegatronArgs) -> Optional[str]:
    """The gradient buffer's dtype: fp32 with --accumulate-allreduce-grads-in-fp32 or by default with
    --bf16 (Megatron's main grads), bf16 with --grad-reduce-in-bf16, or --main-grads-dtype under the
    precision-aware optimizer; None (the stack's) otherwise."""
    if a.has("--use-precision-aware-optimizer") and a.has("--main-grads-dtype"):
        value = a.str("--main-grads-dtype")
        if value not in ("fp32", "bf16"):
            raise UserError(f"--main-grads-dtype {value!r}: expected fp32 or bf16")
        return value
    if a.has("--accumulate-allreduce-grads-in-fp32"):
        return "fp32"
    if a.has("--grad-reduce-in-bf16"):
        return "bf16"
    return "fp32" if a.has("--bf16") else None


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
    """Activation offload (--cpu-offloading, --cpu-offloading-num-layers, Megatron default 0) and
    optimizer offload (--optimizer-cpu-offload, --optimizer-offload-fraction, default 1.0)."""
    out: dict = {}
    if a.has("--cpu-offloading"):
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


def expandable_segments(conf: str) -> bool:
    """PYTORCH_CUDA_ALLOC_CONF turns on expandable segments ('expandable_segments:True', among commas)."""
    return any(part.replace(" ", "").lower() == "expandable_segments:true" for part in conf.split(","))


def unpriced_warnings(a: MegatronArgs) -> list[str]:
    """One line per flag given that parplan reads but does not price (megatron_flag_table.WARNED)."""
    return flag_table.unpriced(a.flags)


def torchrun_size(opts: Optional[list[str]]) -> tuple[Optional[int], Optional[int]]:
    """(nodes, GPUs per node) from torchrun options, when they are literal numbers."""
    if not opts:
        return None, None
    flags = flag_dict(parse_flags(opts))
    nodes = flags.get("--nnodes") or flags.get("--nnode")
    per = flags.get("--nproc-per-node") or flags.get("--nproc_per_node")
    nodes_n = (_count("--nnodes", nodes.split(":")[-1]) if nodes and re.fullmatch(r"[0-9]+(:[0-9]+)?", nodes)
               else None)
    per_n = _count("--nproc-per-node", per) if per and re.fullmatch(r"[0-9]+", per) else None
    return nodes_n, per_n


def _count(flag: str, digits: str) -> int:
    """A torchrun count in ASCII digits, at most 7 of them (int() of 5,000 digits raises)."""
    if len(digits) > 7:
        raise UserError(f"torchrun {flag} {digits[:20]}...: a node or GPU count has at most 7 digits")
    return int(digits)
