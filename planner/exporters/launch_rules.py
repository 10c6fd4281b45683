"""The frameworks' rules, one function per target, on already-parsed flags and sections.

Source: benchmarks/data/launch_formats.md: "Rules Megatron enforces (mirror them)" and "Not checked by
Megatron"; DeepSpeed's batch rule, strict sections, "auto", pipeline with ZeRO < 2, launcher flags and
hostfile lines; torchrun's flags (strict spelling, integer --nproc-per-node); torchtitan's degree,
batch and sequence rules and the 0.3.0 CUDA-graph rule. Each function returns a list of problems.
"""

from __future__ import annotations

import re
from typing import Optional

from planner.errors import UserError
from planner.frameworks.megatron import flags as mf
from planner.frameworks.megatron import train as megatron_train
from planner.files.shellread import flag_dict, parse_flags


# ---- Megatron -----------------------------------------------------------------------------------

def megatron_rule_problems(a: mf.MegatronArgs, world: int) -> list[str]:
    """launch_formats.md "Rules Megatron enforces", plus recompute-num-layers vs stage size."""
    out = [f"{flag} is given {n} times" for flag, n in _counts(a.pairs).items() if n > 1]
    try:
        model = mf.model_data(a)
        lay = mf.layout_data(a, model)
        train = megatron_train.train_data(a)
    except UserError as err:
        return out + [str(err)]
    tp, pp, cp, ep, etp = (lay[k] for k in ("tp", "pp", "cp", "ep", "etp"))
    layers, heads = model["num_layers"], model["num_attention_heads"]
    mp = tp * pp * cp
    dp = world // mp if world % mp == 0 else None
    rules = [
        (world % mp == 0, f"world {world} is not divisible by TP*PP*CP = {tp}*{pp}*{cp}"),
        (heads % tp == 0, f"--num-attention-heads {heads} is not divisible by TP {tp}"),
        (train["seq_length"] <= a.int("--max-position-embeddings", 0),
         "--max-position-embeddings is missing or below --seq-length"),
        (cp == 1 or train["seq_length"] % (2 * cp) == 0, f"--seq-length {train['seq_length']} % (2*CP) != 0"),
        (dp is None or "global_batch_size" not in train or train["global_batch_size"] % (lay["mbs"] * dp) == 0,
         f"--global-batch-size {train.get('global_batch_size')} % (micro {lay['mbs']} * DP {dp}) != 0"),
        (not a.has("--sequence-parallel") or tp > 1, "--sequence-parallel needs TP > 1 (Megatron drops it silently)"),
        (a.has("--group-query-attention") or not a.has("--num-query-groups"),
         "--num-query-groups is ignored without --group-query-attention"),
    ]
    out += [msg for ok, msg in rules if not ok]
    out += _gqa(model, tp) + _experts(model, world, tp, pp, ep, etp) + _stages(a, layers, pp, lay)
    return out + _recompute(a, lay) + _ep_overlap(a, lay) + _memory(a, tp, cp) + _data(a)


def _ep_overlap(a: mf.MegatronArgs, lay: dict) -> list[str]:
    """What megatron-core 0.19.2 TransformerConfig.__post_init__ asserts with --overlap-moe-expert-parallel-comm
    (the all-to-all beside another micro-batch's computation; TrainSpec.ep_comm_overlap)."""
    if not a.has("--overlap-moe-expert-parallel-comm"):
        return []
    flag = "--overlap-moe-expert-parallel-comm"
    dispatcher = a.str("--moe-token-dispatcher-type", "allgather")
    rules = [
        (lay["ep"] > 1, f"{flag} needs --expert-model-parallel-size > 1"),
        (dispatcher in ("alltoall", "flex"), f"{flag} needs --moe-token-dispatcher-type alltoall or flex "
                                             f"(got {dispatcher})"),
        (lay["recompute"] != "full" and not a.has("--recompute-method"),
         f"{flag} does not run with full recompute or --recompute-method"),
        (lay["pp"] == 1 or lay["vpp"] > 1, f"{flag} with --pipeline-model-parallel-size {lay['pp']} needs "
                                           "virtual pipeline stages"),
        (not a.has("--moe-shared-expert-overlap"), f"{flag} does not run with --moe-shared-expert-overlap"),
    ]
    return [msg for ok, msg in rules if not ok]


def _counts(pairs) -> dict:
    counts: dict = {}
    for flag, _ in pairs:
        counts[flag] = counts.get(flag, 0) + 1
    return counts


def _gqa(model: dict, tp: int) -> list[str]:
    """megatron-core 0.19.2 transformer_config.py lines 1338-1345: num_query_groups must be a multiple or a divisor
    of tp (a divisor replicates each KV head over tp/groups ranks: attention.py lines 353-358)."""
    groups = model.get("num_kv_heads")
    if groups and groups % tp and tp % groups:
        return [f"--num-query-groups {groups} is neither a multiple nor a divisor of TP {tp}"]
    return []


def _experts(model: dict, world: int, tp: int, pp: int, ep: int, etp: int) -> list[str]:
    experts = model.get("num_experts", 0)
    if not experts:
        return [f"--expert-model-parallel-size {ep} needs --num-experts"] if ep > 1 else []
    out = []
    if experts % ep:
        out.append(f"--num-experts {experts} is not divisible by EP {ep}")
    if world % (etp * ep * pp):
        out.append(f"world {world} is not divisible by ETP*EP*PP = {etp}*{ep}*{pp} (Megatron finds out only at start-up)")
    return out


def _stages(a: mf.MegatronArgs, layers: int, pp: int, lay: dict) -> list[str]:
    vpp, stages = lay["vpp"], lay.get("stage_layers")
    out = []
    if vpp > 1 and pp <= (2 if a.has("--no-overlap-p2p-communication") else 1):
        out.append(f"interleaving (vpp={vpp}) needs a larger PP than {pp}")
    if stages is None and layers % pp:
        out.append(f"--num-layers {layers} is not divisible by PP {pp} and no uneven split is given")
    layout = a.has("--pipeline-model-parallel-layout")  # any layers per virtual stage (PipelineParallelLayerLayout)
    if stages is not None and not layout and any(n % vpp for n in stages):
        out.append(f"stages {stages} are not all divisible by vpp {vpp}")
    return out


def _recompute(a: mf.MegatronArgs, lay: dict) -> list[str]:
    granularity = lay["recompute"]
    method, count = a.str("--recompute-method", None), a.int("--recompute-num-layers")
    if granularity == "selective" and method is not None:
        return ["--recompute-method is not allowed with --recompute-granularity selective"]
    if granularity != "full":
        return []
    out = []
    if method not in ("uniform", "block"):
        out.append(f"--recompute-granularity full needs --recompute-method uniform|block (got {method!r})")
    if count is None:
        out.append("--recompute-granularity full needs --recompute-num-layers")
    smallest = min(lay.get("stage_layers") or [a.int("--num-layers") // lay["pp"]]) // lay["vpp"]
    if count is not None and count > smallest:
        out.append(f"--recompute-num-layers {count} exceeds the {smallest} layers of the smallest stage chunk")
    return out


def _memory(a: mf.MegatronArgs, tp: int, cp: int) -> list[str]:
    out = []
    fsdp = a.has("--use-megatron-fsdp")
    connections = a.env.get("CUDA_DEVICE_MAX_CONNECTIONS")
    if a.has("--overlap-param-gather") and not (a.has("--use-distributed-optimizer") or fsdp):
        out.append("--overlap-param-gather needs --use-distributed-optimizer or --use-megatron-fsdp")
    if a.has("--overlap-param-gather") and not a.has("--overlap-grad-reduce"):
        out.append("--overlap-param-gather needs --overlap-grad-reduce")
    if fsdp and connections == "1":
        out.append("Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1")
    if fsdp and a.str("--ckpt-format", "torch_dist") != "fsdp_dtensor":
        out.append("Megatron-FSDP needs --ckpt-format fsdp_dtensor")
    if not fsdp and (tp > 1 or cp > 1) and connections != "1":
        out.append("TP or CP > 1 needs CUDA_DEVICE_MAX_CONNECTIONS=1 (Hopper and older)")
    if a.has("--fp8-format") and not (a.has("--bf16") or a.has("--fp16")):
        out.append("--fp8-format needs --bf16")
    return out


def _data(a: mf.MegatronArgs) -> list[str]:
    if not (a.has("--mock-data") or a.has("--data-path")):
        return ["neither --mock-data nor --data-path is given"]
    return []


# ---- torchrun -----------------------------------------------------------------------------------

TORCHRUN_FLAGS = {"--nnodes", "--nproc-per-node", "--nproc_per_node", "--node-rank", "--node_rank", "--master-addr",
                  "--master_addr", "--master-port", "--master_port", "--rdzv-backend", "--rdzv_backend",
                  "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--max-restarts",
                  "--max_restarts", "--standalone", "--rdzv-conf", "--rdzv_conf", "-m", "--module"}


def torchrun_problems(opts: list[str], world: Optional[int]) -> list[str]:
    """Strict flag names, integer --nproc-per-node, static or c10d completeness, world size."""
    pairs = parse_flags(opts, {"--standalone"})
    flags = {k.replace("_", "-"): v for k, v in flag_dict(pairs).items()}
    out = [f"torchrun: unknown or abbreviated flag {f}" for f, _ in pairs if f not in TORCHRUN_FLAGS]
    per, nodes = flags.get("--nproc-per-node"), flags.get("--nnodes", "1")
    if per is None or not per.isdigit():
        out.append(f"torchrun: --nproc-per-node {per!r} must be an integer")
    if not re.fullmatch(r"\d+(:\d+)?|\$\w+", str(nodes)):
        out.append(f"torchrun: --nnodes {nodes!r} must be N or N:M")
    backend = flags.get("--rdzv-backend", "static")
    if backend == "c10d":
        if not re.fullmatch(r".+:\d+", str(flags.get("--rdzv-endpoint", ""))):
            out.append(f"torchrun: --rdzv-endpoint {flags.get('--rdzv-endpoint')!r} must be host:port")
        if not flags.get("--rdzv-id"):
            out.append("torchrun: c10d rendezvous needs --rdzv-id")
    elif backend == "static":
        for key in ("--node-rank", "--master-addr", "--master-port"):
            if not flags.get(key):
                out.append(f"torchrun: static launch needs {key}")
    else:
        out.append(f"torchrun: --rdzv-backend {backend!r} is not static or c10d")
    if world and per and per.isdigit() and str(nodes).split(":")[-1].isdigit():
        if int(str(nodes).split(":")[-1]) * int(per) != world:
            out.append(f"torchrun: --nnodes {nodes} x --nproc-per-node {per} is not the plan's {world} GPUs")
    return out
