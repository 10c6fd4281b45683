"""torchrun exporter: `launch_torchrun.sh` for a user's own `train.py`, static or c10d rendezvous.

Source: benchmarks/data/launch_formats.md, section "torchrun" (static flags --nnodes/--nproc-per-node/
--node-rank/--master-addr/--master-port; elastic flags --rdzv-backend c10d/--rdzv-endpoint/--rdzv-id;
integer --nproc-per-node). The plan reaches train.py as clearly named arguments and as
PARPLAN_* environment variables (PARPLAN_LAYOUT uses parplan's --layout syntax).
"""

from __future__ import annotations

import json

from planner.exporters.common import ExportPlan, Raw, bash_array, command, layout_string, script, shq
from planner.exporters.model_notes import model_code_notes
from planner.files.planfile import train_document

TARGET = "torchrun (torch 2.13 torch.distributed.run) with a placeholder train.py"
SCRIPT = "launch_torchrun.sh"


def train_args(plan: ExportPlan) -> list:
    """The plan as named arguments for train.py."""
    lay, train = plan.layout, plan.train
    pairs = [("--model-name", plan.model.name), ("--tensor-parallel", lay.tp), ("--sequence-parallel", int(lay.sp)),
             ("--context-parallel", lay.cp), ("--expert-parallel", lay.ep), ("--expert-tensor-parallel", lay.etp),
             ("--pipeline-parallel", lay.pp), ("--virtual-stages", lay.vpp), ("--data-parallel", lay.dp),
             ("--zero-stage", lay.zero), ("--micro-batch-size", lay.mbs),
             ("--global-batch-size", train.global_batch_size), ("--num-microbatches", lay.num_microbatches),
             ("--seq-length", plan.seq), ("--recompute", lay.recompute), ("--schedule", lay.schedule),
             ("--stage-layers", ",".join(str(n) for n in lay.stage_layers)), ("--precision", train.precision),
             ("--context-parallel-comm", lay.cp_comm), ("--fsdp-sharding-strategy", sharding_strategy(lay))]
    return [w for pair in pairs + recompute_args(lay) for w in pair]


def recompute_args(lay) -> list:
    """The recompute refinements the plan priced, only when it sets them: Megatron's --recompute-num-layers and
    --recompute-method under full recompute, the named modules under selective (colon-separated, as --layout)."""
    out = []
    if lay.recompute_num_layers is not None:
        out += [("--recompute-num-layers", lay.recompute_num_layers), ("--recompute-method", lay.recompute_method)]
    if lay.recompute_modules:
        out.append(("--recompute-modules", ":".join(lay.recompute_modules)))
    return out


def sharding_strategy(lay) -> str:
    """torch.distributed.fsdp.ShardingStrategy of the ZeRO stage (torch/distributed/fsdp/api.py):
    NO_SHARD (DDP), SHARD_GRAD_OP (ZeRO-2; ZeRO-1 has no FSDP strategy and takes it, sharding more),
    FULL_SHARD (ZeRO-3), HYBRID_SHARD (ZeRO-3 inside a shard group)."""
    if lay.zero == 0:
        return "NO_SHARD"
    if lay.zero < 3:
        return "SHARD_GRAD_OP"
    return "HYBRID_SHARD" if lay.replicas > 1 else "FULL_SHARD"


def env_lines(plan: ExportPlan) -> str:
    """The plan as PARPLAN_* variables; PARPLAN_TRAIN is the whole TrainSpec (the stack priced, the optimizer,
    gradient dtype, overlaps) as JSON, which `parplan check` reads back (planner.files.parplan_launch)."""
    lay = plan.layout
    train = json.dumps(train_document(plan.train), separators=(",", ":"))
    items = [("PARPLAN_MODEL", plan.model.name), ("PARPLAN_LAYOUT", layout_string(lay)),
             ("PARPLAN_WORLD_SIZE", plan.world), ("PARPLAN_GLOBAL_BATCH", plan.train.global_batch_size),
             ("PARPLAN_SEQ_LENGTH", plan.seq), ("PARPLAN_PRECISION", plan.train.precision),
             ("PARPLAN_STACK", plan.train.stack_spec.name), ("PARPLAN_TRAIN", train)]
    return "".join(f"export {k}={shq(v)}\n" for k, v in items)


BODY = """\
# EDIT: TRAIN_SCRIPT is your training script; it reads the plan from the arguments below
# (or from the PARPLAN_* environment variables).
TRAIN_SCRIPT="${{TRAIN_SCRIPT:-train.py}}"
NNODES={nodes}
GPUS_PER_NODE={gpus}
# Rendezvous: RDZV=static (default) needs NODE_RANK per node; RDZV=c10d needs only the endpoint.
RDZV="${{RDZV:-static}}"
MASTER_ADDR="${{MASTER_ADDR:-localhost}}"
MASTER_PORT="${{MASTER_PORT:-29500}}"
RDZV_ID="${{RDZV_ID:-parplan}}"
# Per node (world = {nodes} x {gpus} = {world} processes), with node 0's address as MASTER_ADDR:
{per_node}
{env}
"""


def per_node_comments(plan: ExportPlan) -> str:
    shown = min(plan.nodes, 4)
    lines = [f"#   node {i}: NODE_RANK={i} MASTER_ADDR=<node-0> bash {SCRIPT}" for i in range(shown)]
    if plan.nodes > shown:
        lines.append(f"#   ... node {plan.nodes - 1}: NODE_RANK={plan.nodes - 1} MASTER_ADDR=<node-0> bash {SCRIPT}")
    lines.append(f"#   or on every node: RDZV=c10d MASTER_ADDR=<node-0> RDZV_ID=<job id> bash {SCRIPT}")
    return "\n".join(lines)


def render(plan: ExportPlan) -> dict[str, tuple[str, int]]:
    """{file name: (text, mode)}."""
    body = BODY.format(nodes=plan.nodes, gpus=plan.gpus_per_node, world=plan.world,
                       per_node=per_node_comments(plan), env=env_lines(plan))
    body += bash_array("TRAIN_ARGS", pairs(train_args(plan))) + "\n"
    common = ["torchrun", "--nnodes", Raw('"$NNODES"'), "--nproc-per-node", Raw('"$GPUS_PER_NODE"')]
    tail = [Raw('"$TRAIN_SCRIPT"'), Raw('"${TRAIN_ARGS[@]}"')]
    c10d = common + ["--rdzv-backend", "c10d", "--rdzv-endpoint", Raw('"$MASTER_ADDR:$MASTER_PORT"'),
                     "--rdzv-id", Raw('"$RDZV_ID"')] + tail
    static = common + ["--node-rank", Raw('"${NODE_RANK:-0}"'), "--master-addr", Raw('"$MASTER_ADDR"'),
                       "--master-port", Raw('"$MASTER_PORT"')] + tail
    body += ('if [ "$RDZV" = c10d ]; then\n    ' + command(c10d, indent="        ")
             + "else\n    " + command(static, indent="        ") + "fi\n")
    return {SCRIPT: (script(plan, TARGET, body, extra_header=model_code_notes(plan.model)), 0o777)}


def pairs(words: list) -> list:
    return [(words[i], words[i + 1]) for i in range(0, len(words), 2)]
