"""megatron-core's start-up assertions on --overlap-moe-expert-parallel-comm (megatron-core 0.16.1
transformer/transformer_config.py __post_init__): a launch that breaks one never trains, so `check` refuses it
naming the flag and the rule, as Megatron would, instead of pricing the overlap (a new-user pass: full recompute
and pp=4 without virtual stages were priced at 0.03 s of all-to-all, where `estimate` said Megatron refuses).
"""

from __future__ import annotations

from planner.errors import UserError

FLAG = "--overlap-moe-expert-parallel-comm"


def broken(a, lay) -> list[str]:
    """The assertions of megatron-core that the launch `a` (flag reader) with layout `lay` breaks."""
    if not a.has(FLAG):
        return []
    dispatcher = a.str("--moe-token-dispatcher-type") or "allgather"
    mtp = a.int("--mtp-num-layers", 0, minimum=0)
    rules = [
        (lay.pp > 1 and lay.vpp == 1, "with pipeline parallelism it needs virtual stages (--num-layers-per-"
                                      "virtual-pipeline-stage or --virtual-pipeline-model-parallel-size)"),
        (lay.ep <= 1, "it needs expert parallelism (--expert-model-parallel-size > 1)"),
        (dispatcher not in ("alltoall", "flex"), f"it needs --moe-token-dispatcher-type alltoall or flex (got "
                                                 f"{dispatcher})"),
        (lay.recompute == "full", "it refuses full recomputation (--recompute-granularity full)"),
        (lay.recompute_num_layers is not None, "it refuses --recompute-num-layers / --recompute-method"),
        (a.has("--moe-shared-expert-overlap"), "it refuses --moe-shared-expert-overlap beside it"),
        (mtp > 1, f"it supports one MTP layer at most (--mtp-num-layers {mtp})"),
        (mtp == 1 and lay.pp == 1, "with an MTP layer it needs pipeline parallelism"),
    ]
    return [why for bad, why in rules if bad]


def require(a, lay, where: str) -> None:
    """UserError naming every rule of broken() the launch breaks."""
    why = broken(a, lay)
    if why:
        raise UserError(f"{where}: {FLAG}: megatron-core refuses to start (transformer_config.py): "
                        + "; ".join(why) + f"; drop {FLAG} or change the layout")
