"""Read a Megatron-LM launch script or argument file back into parplan's vocabulary.

Source: benchmarks/data/launch_formats.md, section "Megatron-LM" (flag names and meanings: the
inverse of planner.frameworks.megatron.export's mapping tables). Megatron's defaults apply to flags left
out: dropout on, gelu, LayerNorm, learned positions, tied embeddings, biases, expert tensor
parallel size = tensor parallel size, an MLP 4h wide (int(8h/3 / 64) * 64 with --swiglu: ffn_width),
and fp32 main gradients with --bf16 unless --grad-reduce-in-bf16 (the weights' dtype under Megatron-FSDP
and torch FSDP2: planner.frameworks.megatron.train.grad_dtype). Used by planner.files.native (parplan
check) and planner.exporters.check_written.
Every bad value raises UserError naming the flag and the value.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Optional

from costmodels.layout import RECOMPUTE_MODULES
from costmodels.model_spec import MAX_LAYERS
from planner.errors import UserError
from planner.frameworks.megatron import cp_comm as cp_comm_flags
from planner.frameworks.megatron import (deepspeed_dialect, entry_points, flag_table, known_flags, layer_freq,
                                        nemo_hydra, world)
from planner.frameworks.megatron.attention_flags import attention_model_data
from planner.frameworks.megatron.names import NORM, POSITION, SWITCHES, ZERO_FSDP
from planner.frameworks.megatron.stages import stage_split
from planner.frameworks.megatron.vocab import vocab_size
from planner.frameworks.megatron.world import torchrun_size  # noqa: F401  (re-exported)
from planner.files.shellread import (
    ShellScript, flag_dict, parse_flags, read_script, split_at_script,
)

NORM_BACK = {v: k for k, v in NORM.items()}
POSITION_BACK = {v: k for k, v in POSITION.items()}
# megatron-core 0.16 GPTModel position_embedding_type: yarn (GPT-OSS, DeepSeek-V3 recipes) and mrope (multimodal
# sections) rotate q and k as rope does, with other frequencies: no weights, the same elementwise cost
ROPE_VARIANTS = {"yarn": "rope", "mrope": "rope"}
FSDP_BACK = {"no_shard": 0, "optim": 1, **{v: k for k, v in ZERO_FSDP.items()}}
INT_FLAG = re.compile(r"[+-]?[0-9]{1,18}")
# argparse nargs="+" (megatron/training/arguments.py; the load-balancing type is a list in TransformerConfig)
LIST_FLAGS = {"--recompute-modules", "--cuda-graph-scope", "--moe-router-load-balancing-type",
              "--cp-comm-type", "--hierarchical-context-parallel-sizes",  # megatron-core 0.19.2: nargs='+'
              "--num-experts",  # Megatron-DeepSpeed: nargs="+", one count per MoE layer
              "--spec"}  # nargs='*': <module> <function> (planner.frameworks.megatron.entry_points reads it)


@dataclass
class MegatronArgs:
    """Flags given to pretrain_gpt.py, the torchrun options before it, and the script's environment."""

    pairs: list = field(default_factory=list)
    torchrun: Optional[list[str]] = None
    env: dict = field(default_factory=dict)
    launcher: Optional[str] = None  # torchrun, deepspeed, python (None: an argument file)
    launcher_opts: list = field(default_factory=list)  # the launcher's own options
    shell: Optional[ShellScript] = None  # the evaluated script: warnings, here-document files, #SBATCH
    yaml: Optional[str] = None  # the --yaml-cfg file the flags were read from (planner.frameworks.megatron.yaml_cfg)

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
            unset = f": {self.yaml} (--yaml-cfg) sets no {flag[2:].replace('-', '_')}" if self.yaml else ""
            raise UserError(f"{flag} is missing (Megatron needs it){unset}{self._broken_lines()}")
        return self.int(flag)

    def _broken_lines(self) -> str:
        """Why flags may have gone missing: line endings bash does not continue (CRLF, or a blank after the
        backslash), which end the command where they stand, in bash as here."""
        text = getattr(self.shell, "text", None) or ""
        if "\r\n" in text:
            return ("; the file has Windows line endings (CRLF): bash reads '\\' before '\\r' as no continuation, so "
                    "the command ends on its first line (convert it: dos2unix)")
        blank = next((n for n, line in enumerate(text.splitlines(), 1) if re.search(r"\\[ \t]+$", line)), None)
        if blank is not None:
            return (f"; line {blank} has a blank after its line-continuation backslash: bash ends the command there, "
                    "and so does parplan")
        return ""


LAUNCHERS = ("torchrun", "deepspeed", "python", "python3")
PRINTERS = ("echo", "printf", "tee", "cat")
TORCH_RUN = ("torch.distributed.run", "torch.distributed.launch")  # `python -m torch.distributed.run` = torchrun


def launches(sh: ShellScript) -> list[tuple[str, list[str], str, list[str], list[str]]]:
    """(launcher, its options, training script, script arguments, the words before the launcher: `srun`, `env X=1`)
    of every command running a script."""
    found = []
    for words in sh.commands:
        if words and words[0] in PRINTERS:  # `echo torchrun ... > cmd.txt` shows a launch, it runs none
            continue
        for i, w in enumerate(words):
            launcher = w.rsplit("/", 1)[-1]
            if launcher not in LAUNCHERS:
                continue
            opts, script, args = split_at_script(words[i + 1:])
            if script in TORCH_RUN:
                launcher, (opts, script, args) = "torchrun", split_at_script(args)
            if script is not None:
                found.append((launcher, opts, script, args, words[:i]))
            break
    return found


def read_megatron(text: str, path=None) -> MegatronArgs:
    """The launch of Megatron's training script (the first whose script is pretrain_*.py or that gives
    --num-layers; else the first torchrun, then python launch), or every flag of an argument file.
    `path`: the script's file, whose folder `source`d files are read from. A NeMo hydra launch is refused
    (nemo_hydra), and so are models other than GPT and BERT (entry_points); flags Megatron would refuse are warned of,
    or refused (known_flags.vet); --yaml-cfg replaces the flags with its YAML's (yaml_cfg). The GPUs a launch
    starts: world.launched (torch's defaults, said)."""
    sh = read_script(text, path, every_branch=False)
    found = launches(sh)
    main = [f for f in found if posixpath.basename(f[2]).startswith("pretrain") or "--num-layers" in f[3]]
    trainings = [f for f in main if posixpath.basename(f[2]).startswith("pretrain")]  # not tools/ with --num-layers
    if len(trainings) > 1:  # two trainings in one script (every_branch=False: an if/else counts once)
        names = ", ".join(posixpath.basename(f[2]) for f in trainings)
        sh.warn(f"{len(trainings)} training launches ({names}): the first is priced; check a script with one launch "
                "for each")
    for launcher, opts, script, args, prefix in main or sorted(found, key=lambda f: f[0] != "torchrun"):
        nemo_hydra.refuse(script, args)
        pairs = parse_flags(args, SWITCHES, LIST_FLAGS)
        entry_points.refuse(script, pairs)
        read = MegatronArgs(pairs, world.launched(launcher, opts, prefix, sh), sh.env, launcher, opts, sh)
        known_flags.vet(read.pairs, sh.warn, deepspeed_dialect.is_megatron_deepspeed(read))
        entry_points.settle(read, script, path)
        return read
    words = [w for cmd in sh.commands for w in cmd] + [w for items in sh.arrays.values() for w in items]
    words += [w for value in sh.scalars.values() if "--num-layers" in value for w in value.split()]
    read = MegatronArgs(parse_flags(words, SWITCHES, LIST_FLAGS), None, sh.env, None, [], sh)
    if sh.commands and all(cmd[0].startswith("--") for cmd in sh.commands if cmd):  # an argument file
        known_flags.vet(read.pairs, sh.warn)
    entry_points.settle(read, None, path)
    return read


def model_data(a: MegatronArgs) -> dict:
    """ModelSpec fields from the shape flags."""
    heads = a.require_int("--num-attention-heads")
    hidden = a.require_int("--hidden-size")
    data = {"num_layers": _layers(a), "hidden_size": hidden, "num_attention_heads": heads,
            "vocab_size": vocab_size(a), "seq_length": seq_length(a),
            "activation": "swiglu" if a.has("--swiglu") or a.has("--quick-geglu") else "gelu",
            "norm": _norm(a),
            "position_embedding": choice(a, "--position-embedding-type",
                                         {**POSITION_BACK, **ROPE_VARIANTS, "alibi": "none"}, "learned_absolute"),
            "tied_embeddings": not a.has("--untie-embeddings-and-output-weights"),
            "linear_bias": not a.has("--disable-bias-linear"), "qk_norm": a.has("--qk-layernorm"),
            "qkv_bias": a.has("--add-qkv-bias"),
            "dropout": not (_zero(a, "--attention-dropout") and _zero(a, "--hidden-dropout")),
            "mtp_num_layers": a.int("--mtp-num-layers", 0, minimum=0)}
    kind = a.str("--position-embedding-type")
    if kind in ROPE_VARIANTS and a.shell is not None:
        a.shell.warn(f"--position-embedding-type {kind}: priced as rope (no weights, the same cost); a launch "
                     "file parplan writes from it says rope, so keep your own flag and its settings")
    if a.str("--position-embedding-type") == "alibi" and a.shell is not None:  # Megatron-DeepSpeed (BLOOM)
        a.shell.warn("--position-embedding-type alibi: priced as no position embedding (ALiBi has no weights; "
                     "its attention bias is not counted)")
    data.update(deepspeed_dialect.model_fields(a))
    data["seq_length"] = max(data["seq_length"], a.int("--max-position-embeddings", data["seq_length"]))
    data["ffn_hidden_size"] = ffn_width(a)
    if a.has("--kv-channels"):
        data["head_dim"] = a.int("--kv-channels")
    if a.has("--group-query-attention"):
        data["num_kv_heads"] = a.int("--num-query-groups", 1)
    if a.has("--multi-latent-attention"):
        data.pop("head_dim", None)
        data.pop("num_kv_heads", None)
        data["mla"] = mla_data(a)
    return {**data, **moe_data(a, data["num_layers"]), **attention_model_data(a, data["num_layers"])}


def ffn_width(a: MegatronArgs) -> int:
    """The dense MLP width: --ffn-hidden-size, else Megatron's default, 4 x --hidden-size, which --swiglu narrows
    to int((4h * 2 / 3) / 64) * 64 (megatron-core 0.19.2 megatron/training/arguments.py lines 1280-1289,
    validate_args; --quick-geglu keeps 4h: only args.swiglu is tested). Megatron-DeepSpeed scripts are read by the
    same rule: 0.19.2 is preferred (that fork, not on PyPI, was not checked here)."""
    if a.has("--ffn-hidden-size"):
        return a.int("--ffn-hidden-size")
    hidden = a.require_int("--hidden-size")
    if not a.has("--swiglu"):
        return 4 * hidden
    width = int((4 * hidden * 2 / 3) / 64) * 64
    if width < 1:
        raise UserError(f"--swiglu with --hidden-size {hidden} and no --ffn-hidden-size: Megatron's default MLP "
                        f"width int((4 x {hidden} x 2/3) / 64) x 64 is 0; give --ffn-hidden-size")
    return width


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


def _layers(a: MegatronArgs) -> int:
    """--num-layers, bounded before anything is built per layer (the window and MoE layer patterns)."""
    layers = a.require_int("--num-layers")
    if layers > MAX_LAYERS:
        raise UserError(f"--num-layers {layers}: expected 1 to {MAX_LAYERS}")
    return layers


def _norm(a: MegatronArgs) -> str:
    """ModelSpec.norm from --normalization, in Megatron-LM's or Megatron-DeepSpeed's spelling."""
    value = deepspeed_dialect.norm_flag(a) or "LayerNorm"
    if value not in NORM_BACK:
        raise UserError(f"--normalization {a.str('--normalization')!r}: parplan knows {', '.join(NORM_BACK)} "
                        f"(Megatron-DeepSpeed: {', '.join(deepspeed_dialect.NORMS)})")
    return NORM_BACK[value]


def choice(a: MegatronArgs, flag: str, table: dict, default: str) -> str:
    value = a.str(flag, default)
    if value not in table:
        raise UserError(f"{flag} {value!r}: parplan knows {', '.join(table)}")
    return table[value]


def _zero(a: MegatronArgs, flag: str) -> bool:
    try:
        return a.has(flag) and float(a.str(flag)) == 0.0
    except (TypeError, ValueError):
        raise UserError(f"{flag} {a.str(flag)!r}: expected a number") from None


def _router_groups(a: MegatronArgs) -> dict:
    """Group-limited routing as megatron-core 0.16 TransformerConfig.__post_init__ sets it: --moe-router-group-topk
    needs --moe-router-num-groups (without the first, the second restricts nothing); the deprecated
    --moe-router-topk-limited-devices D, alone, becomes D groups of the EP size."""
    if a.has("--moe-router-group-topk"):
        if a.has("--moe-router-topk-limited-devices"):
            raise UserError("--moe-router-topk-limited-devices with --moe-router-group-topk: Megatron refuses the "
                            "pair (the first is deprecated and replaced by the second with --moe-router-num-groups)")
        if not a.has("--moe-router-num-groups"):
            raise UserError("--moe-router-group-topk without --moe-router-num-groups: Megatron refuses it ("
                            "\"When using group limited routing, moe_router_num_groups must be specified\")")
        return {"moe_router_num_groups": a.int("--moe-router-num-groups", 1, minimum=1),
                "moe_router_group_topk": a.int("--moe-router-group-topk", minimum=1)}
    if a.has("--moe-router-topk-limited-devices"):
        return {"moe_router_num_groups": a.int("--expert-model-parallel-size", 1, minimum=1),
                "moe_router_group_topk": a.int("--moe-router-topk-limited-devices", minimum=1)}
    return {}


def moe_data(a: MegatronArgs, layers: int) -> dict:
    if deepspeed_dialect.is_megatron_deepspeed(a):
        return deepspeed_dialect.moe_fields(a, ffn_width(a))
    experts = a.int("--num-experts", 0, minimum=0)
    if not experts:
        return {}
    data = {"num_experts": experts, "top_k": a.int("--moe-router-topk", 2)}
    if a.has("--moe-ffn-hidden-size"):
        data["moe_ffn_hidden_size"] = a.int("--moe-ffn-hidden-size")
    data.update(layer_freq.read(a.str("--moe-layer-freq", "1"), layers))
    shared = a.int("--moe-shared-expert-intermediate-size", 0, minimum=0)
    if shared:
        width = data.get("moe_ffn_hidden_size") or ffn_width(a)
        if shared % width:
            raise UserError(f"--moe-shared-expert-intermediate-size {shared}: not a multiple of the expert width {width}")
        data["num_shared_experts"] = shared // width
    data.update(_router_groups(a))
    if a.has("--moe-expert-capacity-factor"):
        try:
            data["capacity_factor"] = float(a.str("--moe-expert-capacity-factor"))
        except (TypeError, ValueError):
            raise UserError(f"--moe-expert-capacity-factor {a.str('--moe-expert-capacity-factor')!r}: "
                            "expected a number") from None
    return data


# ---- layout and training ------------------------------------------------------------------------

def _sequence_parallel(a: MegatronArgs, tp: int, moe: bool) -> bool:
    """--sequence-parallel (only meaningful with tp > 1). Megatron-Core's MoE layer refuses to train with tp > 1
    without it (megatron-core 0.19.2 transformer/moe/moe_layer.py MoELayer.forward raises ValueError, whatever ep
    is), so such a script exits 2; Megatron-DeepSpeed's MoE has no such rule."""
    sp = a.has("--sequence-parallel") and tp > 1
    if moe and tp > 1 and not sp and not deepspeed_dialect.is_megatron_deepspeed(a):
        raise UserError(f"--num-experts with --tensor-model-parallel-size {tp} and no --sequence-parallel: "
                        "Megatron-Core's MoE layer refuses to train so (MoELayer.forward); add --sequence-parallel")
    return sp


def _etp(a: MegatronArgs, tp: int) -> int:
    """--expert-tensor-parallel-size, default tp. Megatron refuses expert biases (no --disable-bias-linear) unless
    it is 1 (megatron-core 0.19.2 transformer_config.py: "Bias in Moe is only supported when ETP==1")."""
    etp = a.int("--expert-tensor-parallel-size", tp)
    if etp != 1 and not a.has("--disable-bias-linear") and not deepspeed_dialect.is_megatron_deepspeed(a):
        said = "--expert-tensor-parallel-size" if a.has("--expert-tensor-parallel-size") else \
            "--expert-tensor-parallel-size (default: --tensor-model-parallel-size)"
        raise UserError(f"{said} {etp} with expert biases (no --disable-bias-linear): Megatron supports MoE biases "
                        "only at expert tensor parallel size 1; add --expert-tensor-parallel-size 1 or "
                        "--disable-bias-linear")
    return etp


def layout_data(a: MegatronArgs, model: dict) -> dict:
    """Layout fields from the parallel, memory, recompute and batch flags (dp left to be derived)."""
    tp = a.int("--tensor-model-parallel-size", 1)
    pp = a.int("--pipeline-model-parallel-size", 1)
    moe = bool(model.get("num_experts"))
    data = {"tp": tp, "pp": pp, "cp": a.int("--context-parallel-size", 1),
            "ep": _ep(a, moe),
            "etp": _etp(a, tp) if moe else 1,
            "sp": _sequence_parallel(a, tp, moe), "zero": zero_stage(a),
            "mbs": a.require_int("--micro-batch-size"), "cp_comm": cp_comm(a, model["num_layers"]),
            **recompute_data(a)}
    stages, vpp, chunks = stage_split(a, model["num_layers"], pp, not deepspeed_dialect.is_megatron_deepspeed(a))
    data["vpp"] = vpp
    if stages is not None:
        data["stage_layers"] = stages
    if chunks is not None:
        data["chunk_layers"] = chunks
    return data


def _ep(a: MegatronArgs, moe: bool) -> int:
    """Expert parallelism: --expert-model-parallel-size, or Megatron-DeepSpeed's --moe-expert-parallel-size,
    which DeepSpeed ignores for a dense model (--num-experts 1)."""
    if deepspeed_dialect.is_megatron_deepspeed(a):
        return a.int("--moe-expert-parallel-size", 1) if moe else 1
    return a.int("--expert-model-parallel-size", 1)


def cp_comm(a: MegatronArgs, layers: int = 0) -> str:
    """`--cp-comm-type` (Megatron default p2p; one type or one per layer; a2a+p2p) as the one algorithm priced
    for every layer (planner.frameworks.megatron.cp_comm.priced)."""
    return cp_comm_flags.priced(a, layers, a.int("--context-parallel-size", 1))


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
    if a.has("--use-torch-fsdp2"):
        return torch_fsdp2_stage(a)
    if a.has("--use-megatron-fsdp") or a.has("--use-custom-fsdp"):
        strategy = a.str("--data-parallel-sharding-strategy", "optim_grads_params")
        if strategy not in FSDP_BACK:
            raise UserError(f"--data-parallel-sharding-strategy {strategy!r}: expected one of {', '.join(FSDP_BACK)}")
        return max(FSDP_BACK[strategy], 1 if a.has("--use-distributed-optimizer") else 0)
    return 1 if a.has("--use-distributed-optimizer") else 0


# megatron-core 0.19.2 megatron/training/arguments.py lines 997-1013 (validate_args, `if args.use_torch_fsdp2`):
# what Megatron asserts beside --use-torch-fsdp2, as (refused when, what to write)
FSDP2_REFUSALS = (
    (lambda a: a.int("--pipeline-model-parallel-size", 1) > 1, "--pipeline-model-parallel-size 1 (no pipeline)"),
    (lambda a: a.int("--expert-model-parallel-size", 1) > 1, "--expert-model-parallel-size 1 (no expert parallelism)"),
    (lambda a: a.has("--use-distributed-optimizer"), "no --use-distributed-optimizer"),
    (lambda a: not a.has("--no-gradient-accumulation-fusion"), "--no-gradient-accumulation-fusion"),
    (lambda a: not a.has("--untie-embeddings-and-output-weights"), "--untie-embeddings-and-output-weights"),
    (lambda a: a.has("--fp16"), "--bf16, not --fp16"),
)


def torch_fsdp2_stage(a: MegatronArgs) -> int:
    """ZeRO stage of --use-torch-fsdp2: PyTorch's fully_shard on every transformer layer, the embedding and the
    root (megatron-core 0.19.2 megatron/core/distributed/torch_fully_sharded_data_parallel.py lines 55-148) shards
    weights, gradients and optimizer states over dp x cp: 3. With --torch-fsdp2-no-reshard-after-forward
    (reshard_after_forward False: megatron/training/training.py line 1981) the gathered weights stay whole from
    forward to backward, priced as 2 (whole weights, sharded gradients and states). What Megatron refuses beside it
    (FSDP2_REFUSALS) raises UserError."""
    needed = [fix for refused, fix in FSDP2_REFUSALS if refused(a)]
    if needed:
        raise UserError(f"--use-torch-fsdp2 needs {'; '.join(needed)}: Megatron refuses it otherwise (megatron-core "
                        "0.19.2 arguments.py lines 997-1013)")
    return 2 if a.has("--torch-fsdp2-no-reshard-after-forward") else 3


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
        _require_method_and_layers(a, method, layers)
        if method is not None:
            data["recompute_method"] = method
        if layers is not None and layers > 1 or method == "block":
            data["recompute_num_layers"] = layers or 1
    if mode == "selective" and a.has("--recompute-modules"):
        data["recompute_modules"] = recompute_modules(a.str("--recompute-modules") or "")
    return data


def _require_method_and_layers(a: MegatronArgs, method: Optional[str], layers: Optional[int]) -> None:
    """--recompute-granularity full without --recompute-method or --recompute-num-layers: Megatron has no default
    for them and refuses to start (megatron-core 0.19.2 transformer_config.py lines 1736-1747,
    TransformerConfig.__post_init__), so UserError rather than a price for every layer. The legacy
    --checkpoint-activations (no granularity) and Megatron-DeepSpeed launches are left as they are read."""
    if a.str("--recompute-granularity") != "full" or deepspeed_dialect.is_megatron_deepspeed(a):
        return
    missing = [flag for flag, value in (("--recompute-method uniform|block", method),
                                        ("--recompute-num-layers N", layers)) if value is None]
    if missing:
        raise UserError(f"--recompute-granularity full needs {' and '.join(missing)}: Megatron has no default for "
                        "them and refuses to start (megatron-core 0.19.2 transformer_config.py lines 1736-1747)")


def recompute_modules(text: str) -> list[str]:
    """The module names of --recompute-modules, each checked against Megatron's list."""
    names = [n for n in re.split(r"[,\s]+", text.strip()) if n]
    bad = [n for n in names if n not in RECOMPUTE_MODULES]
    if bad or not names:
        raise UserError(f"--recompute-modules {text[:60]!r}: expected some of {', '.join(RECOMPUTE_MODULES)}")
    return names


def unpriced_warnings(a: MegatronArgs) -> list[str]:
    """One line per flag given that parplan reads but does not price (megatron_flag_table.WARNED), one when the
    router's balancing loss has a zero coefficient (planner.frameworks.megatron.train.balance_warnings), one per MoE
    kernel switch left off that parplan prices on (train.kernel_warnings), and one per context-parallel type priced
    as another (planner.frameworks.megatron.cp_comm.warnings)."""
    from planner.frameworks.megatron.precision import fp32_warnings
    from planner.frameworks.megatron.train import balance_warnings, kernel_warnings  # train imports this module

    return (fp32_warnings(a) + flag_table.unpriced(a.flags) + balance_warnings(a) + kernel_warnings(a)
            + cp_comm_flags.warnings(a, a.int("--context-parallel-size", 1)))
