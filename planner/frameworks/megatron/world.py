"""How many GPUs a Megatron launch runs on: torchrun's counts, and an error naming what is missing when the
script gives no node count and its layout does not fit the cluster's default size.

Sources: torchrun (torch.distributed.run) --nnodes N or MIN:MAX, --nproc-per-node N (default "1": torch/distributed/
run.py get_args_parser; PET_NPROC_PER_NODE in the environment stands for it); `python pretrain_gpt.py` alone is one
process (Megatron reads WORLD_SIZE, default '1': megatron/training/arguments.py parse_args); megatron-core 0.19.2
megatron/core/parallel_state.py initialize_model_parallel: the world size must be divisible by
tp * pp * cp (line 822) and by etp * ep * pp (line 881), else it raises at start-up. Used by planner.files.native.
"""

from __future__ import annotations

import math
import re
from typing import Optional

from planner.errors import UserError
from planner.files.shellread import flag_dict, parse_flags


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


NPROC = ("--nproc-per-node", "--nproc_per_node")
PROCESS_LAUNCHERS = {"srun", "mpirun", "mpiexec", "jsrun", "aprun", "pdsh", "ssh"}


def launched(launcher: str, opts: list[str], prefix: list[str], sh) -> Optional[list[str]]:
    """The torchrun options the launch runs as (planner.files.native sizes the cluster by them): torchrun's own,
    with torch's default --nproc-per-node 1 added when it gives none (as planner.files.shell_trainer_load does for a
    Trainer launch); `python pretrain_gpt.py` as `--nnodes 1 --nproc-per-node 1` unless the script runs srun, mpirun
    (or the like) or has #SBATCH lines (one process per task then: the allocation's size); None for other
    launchers. Each default taken is said through sh.warn (one line naming the GPUs assumed)."""
    if launcher == "torchrun":
        if any(o.split("=")[0] in NPROC for o in opts) or "PET_NPROC_PER_NODE" in sh.env:
            return opts
        sh.warn("torchrun without --nproc_per_node starts 1 process (1 GPU) per node, torch's default "
                "(torch/distributed/run.py): 1 GPU per node assumed; set --nproc_per_node in the script")
        return [*opts, "--nproc-per-node", "1"]
    if launcher in ("python", "python3") and not _under_launcher(prefix, sh):
        sh.warn(f"{launcher} runs the training script as one process: 1 GPU assumed (Megatron's WORLD_SIZE defaults "
                "to 1); launch it with torchrun --nproc_per_node N to train on more")
        return ["--nnodes", "1", "--nproc-per-node", "1"]
    return None


def _under_launcher(prefix: list[str], sh) -> bool:
    """Whether the python launch may be one of many processes: srun/mpirun before it, anywhere in the script (a
    `srun bash -c "$CMD"`), or #SBATCH options."""
    words = {w.rsplit("/", 1)[-1] for w in prefix} | {cmd[0].rsplit("/", 1)[-1] for cmd in sh.commands if cmd}
    return bool(PROCESS_LAUNCHERS & words or sh.sbatch)


def _count(flag: str, digits: str) -> int:
    """A torchrun count in ASCII digits, at most 7 of them (int() of 5,000 digits raises)."""
    if len(digits) > 7:
        raise UserError(f"torchrun {flag} {digits[:20]}...: a node or GPU count has at most 7 digits")
    return int(digits)


NODE_SOURCES = "torchrun --nnodes, deepspeed --num_nodes, #SBATCH --nodes/-N"


def needed_gpus(lay) -> tuple[int, str]:
    """(the GPU count every world size must be a multiple of, how it is made) for a Layout."""
    dense, expert = lay.tp * lay.cp * lay.pp, lay.etp * lay.ep * lay.pp
    how = f"tp*cp*pp={lay.tp}*{lay.cp}*{lay.pp}={dense}"
    if expert != lay.pp:
        how += f", etp*ep*pp={lay.etp}*{lay.ep}*{lay.pp}={expert}"
    return math.lcm(dense, expert), how


def require_node_count(lay, cluster, where: str) -> None:
    """UserError when no node count was found (script or command line) and the cluster's default size
    cannot hold the layout: say so, instead of a bare GPU count."""
    need, how = needed_gpus(lay)
    if cluster.num_gpus % need == 0:
        return
    raise UserError(f"{where}: the layout needs a multiple of {need} GPUs ({how}), but the script gives no node "
                    f"count ({NODE_SOURCES}) and --nodes is not given, so {cluster.num_nodes} node(s) of "
                    f"{cluster.name} ({cluster.num_gpus} GPUs) were assumed; give --nodes N")


def gpus_said(cluster, nodes_known: bool) -> str:
    """'N GPUs (how they were counted)' for messages: the launch's, or the cluster's size when nothing fixes it."""
    shape = f"{cluster.num_nodes} node(s) x {cluster.gpus_per_node} GPU(s) of {cluster.name}"
    if nodes_known:
        return f"{cluster.num_gpus} GPU(s) ({shape})"
    return f"{cluster.num_gpus} GPU(s) ({shape}: the cluster's size, as no node count is given)"


def require_world(lay, cluster, where: str, nodes_known: bool) -> None:
    """UserError naming the file and the GPU count when the world size is not a multiple of tp*cp*pp and etp*ep*pp
    (parallel_state.initialize_model_parallel raises at start-up, module docstring)."""
    need, how = needed_gpus(lay)
    if cluster.num_gpus % need:
        raise UserError(f"{where}: the layout needs a multiple of {need} GPUs ({how}), but the launch runs on "
                        f"{gpus_said(cluster, nodes_known)}: Megatron refuses to start (parallel_state."
                        "initialize_model_parallel); change the parallel sizes, the launcher's counts or --nodes")


def batch_warning(a, lay, cluster, nodes_known: bool) -> Optional[str]:
    """One line when the script's --global-batch-size is not a multiple of --micro-batch-size x the data-parallel
    size on the GPUs read or assumed: megatron-core 0.19.2 num_microbatches_calculator.py
    ConstantNumMicroBatchesCalculator asserts it (line 381), so the launch would not start. A warning, not an error:
    check's --global-batch/--micro-batch may still replace the script's values; the layout check then refuses."""
    if not a.has("--global-batch-size") or a.has("--rampup-batch-size"):
        return None
    dp = cluster.num_gpus // (lay.tp * lay.cp * lay.pp) or 1
    gbs = a.int("--global-batch-size")
    if gbs % (lay.mbs * dp) == 0:
        return None
    return (f"--global-batch-size {gbs} is not a multiple of --micro-batch-size {lay.mbs} x data-parallel "
            f"size {dp} on {gpus_said(cluster, nodes_known)}; Megatron refuses to start so "
            "(num_microbatches_calculator)")
