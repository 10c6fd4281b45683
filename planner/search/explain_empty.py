"""Why no layout could be formed at all (an empty space, not one where nothing fits), in numbers.

planner.search.space._enumerate builds a layout from a model-parallel replica tp x cp x pp (tp from
space.tp_choices; cp dividing world / tp, at most SpaceOptions.max_cp, the sequence divisible by 2 * cp;
pp dividing world / (tp * cp), at most the layers) and dp = world / (tp * cp * pp), which must divide the
global batch: gbs = mbs * dp * num_microbatches with mbs >= 1 whole sequences (docs/design.md section 2,
Megatron-LM's num_microbatches calculator asserts the same divisibility). So on many GPUs a small batch
leaves no layout: every replica gets at least one sequence.
"""

from __future__ import annotations

from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.search.space import SpaceOptions, divisors, tp_choices


def replica_shapes(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec,
                   opts: SpaceOptions) -> list[tuple[int, int, int]]:
    """(tp, cp, pp) replicas the space allows before the batch is looked at (space._enumerate's outer loops)."""
    world, seq = cluster.num_gpus, train.seq_len(model)
    return [(tp, cp, pp) for tp in tp_choices(model, cluster, opts) for cp in divisors(world // tp)
            if cp <= opts.max_cp and (cp == 1 or seq % (2 * cp) == 0)
            for pp in divisors(world // (tp * cp)) if pp <= model.num_layers]


def no_layout_reasons(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, opts: SpaceOptions) -> list[str]:
    """The lines `plan` shows when the search formed no layout: the batch that cannot be split over the
    GPUs (with the replica that comes closest and what would work), else the search's other rules."""
    world, gbs = cluster.num_gpus, train.global_batch_size
    shapes = replica_shapes(model, cluster, train, opts)
    if not shapes or any(gbs % (world // (tp * cp * pp)) == 0 for tp, cp, pp in shapes):
        return [f"no layout can be formed for {model.name} on {world:,} GPUs with global batch {gbs:,}: the "
                "chosen framework's degree, ZeRO and stage-split rules leave none (0 layouts considered; none "
                "was rejected for memory)"]
    tp, cp, pp = max(shapes, key=lambda s: s[0] * s[1] * s[2])
    replica, dp = tp * cp * pp, world // (tp * cp * pp)
    return [f"no layout can be formed: global batch {gbs:,} over {world:,} GPUs: each data-parallel rank needs "
            f"at least one sequence (dp x mbs must divide the global batch), and the fewest data-parallel ranks "
            f"any layout has here is {dp:,} (the largest replica, tp={tp} x cp={cp} x pp={pp} = {replica:,} GPUs: "
            f"{_limits(model, cluster, train, opts)})",
            f"use a global batch that is a multiple of {dp:,} sequences, or at most {replica * gbs:,} GPUs "
            f"({gbs:,} data-parallel rank{'s' if gbs > 1 else ''} of {replica:,} GPUs)"]


def _limits(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, opts: SpaceOptions) -> str:
    """What bounds each degree of a replica, in the model's and cluster's numbers."""
    seq = train.seq_len(model)
    tp_where = "its GPUs" if opts.tp_across_nodes else f"a node's {cluster.gpus_per_node} GPUs"
    cp = (f"cp=1 as sequence length {seq} is odd (cp needs it divisible by 2 x cp)" if seq % 2
          else f"cp up to {opts.max_cp} with the sequence divisible by 2 x cp")
    return (f"tp within {tp_where} and dividing the {model.num_attention_heads} heads, pp at most the "
            f"{model.num_layers} layers, {cp}")
