"""How many GPUs a Megatron launch runs on: torchrun's counts, and an error naming what is missing when the
script gives no node count and its layout does not fit the cluster's default size.

Sources: torchrun (torch.distributed.run) --nnodes N or MIN:MAX, --nproc-per-node N; megatron-core 0.19.2
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
