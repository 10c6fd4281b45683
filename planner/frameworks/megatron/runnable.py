"""Launches Megatron would refuse at start-up, or that `check` cannot size, refused with the file and the flags
named (instead of the layout check's field names or a bare GPU count later on).

- the tensor-parallel split of attention (planner.frameworks.megatron.tp_split, megatron-core 0.19.2
  transformer_config.py);
- --overlap-moe-expert-parallel-comm's assertions (planner.frameworks.megatron.ep_overlap_rules);
- no node count anywhere while the cluster's default size cannot hold the layout (planner.frameworks.megatron.world);
- a world size that is not a multiple of tp*cp*pp and etp*ep*pp, and (said, not refused: check's batch options may
  replace them) a --global-batch-size that is not a multiple of --micro-batch-size x dp, each naming the file and the
  GPUs read or assumed (planner.frameworks.megatron.world);
- --fp8-format on a GPU without an FP8 peak (planner.frameworks.megatron.train.require_fp8_peak), unless check's
  --precision replaces the script's precision.
Used by planner.files.native.
"""

from __future__ import annotations

from typing import Optional

from planner.files.native_sizes import note
from planner.frameworks.megatron import ep_overlap_rules, tp_split, world
from planner.frameworks.megatron.train import require_fp8_peak


def require(a, spec, lay, cluster, where: str, from_flags: bool, nodes_known: bool,
            precision: Optional[str]) -> None:
    """Raise UserError for the first of the refusals above that applies; nothing otherwise."""
    tp_split.require(a, spec, lay.tp, from_flags, where)
    ep_overlap_rules.require(a, lay, where)
    if not nodes_known:
        world.require_node_count(lay, cluster, where)
    world.require_world(lay, cluster, where, nodes_known)
    said = world.batch_warning(a, lay, cluster, nodes_known)
    if said:
        note(where, said)
    if precision is None:
        require_fp8_peak(a, cluster, where)
