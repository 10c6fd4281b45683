"""The layout space: every combination of degrees and choices Megatron-LM accepts for a problem.

Rules mirror costmodels.layout (Megatron's argument checks, benchmarks/data/launch_formats.md);
stage splits are left open here (the search chooses them). Three choices are fixed by dominance
under parplan's cost model, and `DOMINATED` says why:
- sp is on whenever tp > 1 (same communication volume, less memory, less element-wise work);
- GPipe is never listed (same time as 1F1B, more micro-batches in flight);
- ZeRO > 0 is skipped when nothing shards it (dp * cp = 1 and one expert data-parallel rank).
Interleaving (vpp > 1) needs the micro-batch count divisible by pp, as Megatron's interleaved
schedule asserts. Virtual stages are limited to 1..8 (max_vpp), so that the solver's integer
objective is exact (planner.search.tables).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout, a2a_heads_ok, tp_fits
from costmodels.model_spec import ModelSpec
from costmodels.timing import Context
from costmodels.train_spec import TrainSpec

RECOMPUTE = ("none", "selective", "full")
VPP_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8)
DOMINATED = [
    "sp=0 with tp>1: same communication bytes as sp=1, more activation memory and element-wise time",
    "schedule=gpipe: same step time as 1f1b under the cost model, more micro-batches in flight",
    "zero>0 with dp*cp=1 (and edp=1): nothing to shard over",
    "a slower cp_comm: context-parallel time is the same for every layer, so the fastest algorithm for "
    "(tp, cp, mbs, recompute) wins for every stage split (costmodels.timing.cp_layer_s)",
    "zero=3 with pp>1: pipelining keeps a stage's weights gathered and gradients unsharded for the whole step, "
    "so it costs exactly what zero=1 costs (costmodels.memory.memory_zero, costmodels.sharding)",
]


class _LayOnly:
    """A stand-in Context holding only a layout, for Context properties that read nothing else."""

    __slots__ = ("lay",)

    def __init__(self, lay: object):
        self.lay = lay


@dataclass(frozen=True, slots=True)
class Candidate:
    """A layout without its stage split: the same field names as costmodels.layout.Layout, as a
    plain dataclass (building tens of thousands of validated Layouts would dominate the search)."""

    tp: int
    sp: bool
    cp: int
    cp_comm: str
    ep: int
    etp: int
    pp: int
    vpp: int
    dp: int
    zero: int
    mbs: int
    recompute: str
    schedule: str
    num_microbatches: int
    stage_layers: None = None
    shard_group: Optional[int] = None
    # the split a framework's partitioner imposes (DeepSpeed's partition_method); None: the search chooses
    fixed_stages: Optional[tuple[int, ...]] = None

    # properties a FieldMemo records as one read (their value), not as the fields inside (planner.search.memo)
    ATOMIC = frozenset({"zero3_per_microbatch"})

    @property
    def zero3_per_microbatch(self) -> bool:
        """costmodels.timing.Context.zero3_per_microbatch of this candidate (the same code): whether its
        ZeRO-3 collectives run per layer and micro-batch."""
        return Context.zero3_per_microbatch.fget(_LayOnly(self))

    @property
    def model_parallel_size(self) -> int:
        """tp * cp * pp."""
        return self.tp * self.cp * self.pp

    @property
    def dense_shards(self) -> int:
        """Ranks the dense states are sharded over (costmodels.layout.Layout.dense_shards)."""
        return self.shard_group or self.dp * self.cp

    @property
    def replicas(self) -> int:
        """HSDP replicas of each dense shard."""
        return self.dp * self.cp // self.dense_shards

    def to_layout(self, stage_layers: list[int]) -> Layout:
        """The validated Layout with this stage split."""
        fields = {k: getattr(self, k) for k in self.__slots__
                  if k not in ("stage_layers", "num_microbatches", "fixed_stages")}
        return Layout(**fields, stage_layers=list(stage_layers))


@dataclass(frozen=True, slots=True)
class Refused:
    """`count` candidates with this pp, vpp and dp that a framework refuses whatever their other choices,
    counted instead of built (enumerate_counted)."""

    count: int
    pp: int
    vpp: int
    dp: int


# (tp, cp, cp_comm, pp, ep, etp, zero) -> True where every candidate with these choices is refused
Refuses = Callable[[int, int, str, int, int, int, int], bool]


@dataclass(frozen=True)
class SpaceOptions:
    """Limits of the search space (defaults cover what practitioners run)."""

    tp_across_nodes: bool = False
    max_cp: int = 64
    max_mbs: int = 64
    max_vpp: int = 8
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = RECOMPUTE
    hsdp: bool = True
    cp_comm: tuple[str, ...] = ("p2p",)  # context-parallel algorithms tried when cp > 1
    # (tp, cp, mbs, recompute) -> the fastest of cp_comm there (planner.search.frameworks.cp_chooser); None: all
    cp_choice: Optional[Callable[[int, int, int, str], str]] = None
    # (num_layers, pp, vpp) -> the only stage splits a framework can run (planner.search.frameworks); None: any split
    stage_splits: Optional[Callable[[int, int, int], tuple[tuple[int, ...], ...]]] = None


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def tp_choices(model: ModelSpec, cluster: ClusterSpec, opts: SpaceOptions) -> list[int]:
    """tp dividing heads and ffn, kv heads a multiple or divisor of tp, inside a node unless allowed."""
    limit = cluster.num_gpus if opts.tp_across_nodes else cluster.gpus_per_node
    return [t for t in divisors(limit) if cluster.num_gpus % t == 0 and tp_fits(model, t)]


def expert_choices(model: ModelSpec, world: int, tp: int, pp: int) -> list[tuple[int, int]]:
    """(ep, etp) pairs: ep divides the experts, etp is 1 or tp, etp*ep*pp divides the world."""
    if not model.is_moe:
        return [(1, 1)]
    out = []
    for etp in sorted({1, tp}):
        if model.moe_ffn_hidden_size % etp:
            continue
        out += [(ep, etp) for ep in divisors(model.num_experts) if world % (etp * ep * pp) == 0]
    return out


def vpp_choices(num_layers: int, pp: int, opts: SpaceOptions) -> list[int]:
    """Virtual stages: 1, or v > 1 with pp > 1 and at least one layer per virtual stage (layers >= v * pp).
    v need not divide the layers: a stage's chunks may differ by one layer (costmodels.pipeline)."""
    if pp == 1:
        return [1]
    return [v for v in VPP_CHOICES if v <= opts.max_vpp and (v == 1 or num_layers >= v * pp)]


def enumerate_layouts(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec,
                      opts: SpaceOptions = SpaceOptions()) -> Iterator[Candidate]:
    """Every candidate layout (without stage_layers; dp, schedule and num_microbatches filled)."""
    return _enumerate(model, cluster, train, opts, None)  # no refuses: Candidates only


def enumerate_counted(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, opts: SpaceOptions,
                      refuses: Optional[Refuses]) -> Iterator["Candidate | Refused"]:
    """enumerate_layouts, in the same order, less the candidates `refuses` (a framework's degree and ZeRO rules:
    planner.search.frameworks.refuses) turns down whatever their other choices: those are counted, not built,
    one Refused per pipeline degree and vpp of an (ep, etp, ...) choice, so that the search's statistics stay
    those of the whole space (a third of Megatron's candidates and half of torchtitan's MoE ones)."""
    return _enumerate(model, cluster, train, opts, refuses)


def _enumerate(model, cluster, train, opts, refuses) -> Iterator:
    world, seq, gbs = cluster.num_gpus, train.seq_len(model), train.global_batch_size
    for tp in tp_choices(model, cluster, opts):
        for cp in divisors(world // tp):
            if cp > opts.max_cp or (cp > 1 and seq % (2 * cp)):
                continue
            for pp in divisors(world // (tp * cp)):
                dp = world // (tp * cp * pp)
                if pp > model.num_layers or gbs % dp:
                    continue
                for cp_comm in cp_comm_choices(model, tp, cp, opts):
                    for ep, etp in expert_choices(model, world, tp, pp):
                        yield from _inner(model, world, gbs, opts, (tp, cp, cp_comm, pp, dp, ep, etp),
                                          cluster.gpus_per_node, refuses)


def cp_comm_choices(model: ModelSpec, tp: int, cp: int, opts: SpaceOptions) -> list[str]:
    """Context-parallel algorithms for this tp, cp: at cp = 1 none is used and the candidate keeps
    the default p2p; a2a only where heads, and KV heads unless replicated, divide by tp*cp
    (costmodels.layout)."""
    if cp == 1:
        return ["p2p"]
    return [c for c in opts.cp_comm if c != "a2a" or a2a_heads_ok(model, tp, cp)]


def shard_groups(zero: int, tp: int, cp: int, dp: int, gpus_per_node: int) -> tuple:
    """HSDP choices for ZeRO-3: all dp*cp ranks (None), or the largest group inside one node when it
    is a proper divisor (shard over NVLink, replicate across nodes)."""
    ranks = dp * cp
    if zero < 3 or ranks <= 1:
        return (None,)
    inside = max((s for s in divisors(ranks) if s * tp <= gpus_per_node), default=1)
    return (None, inside) if 1 < inside < ranks else (None,)


def _inner(model, world, gbs, opts, degrees, gpus_per_node, refuses=None) -> Iterator:
    tp, cp, cp_comm, pp, dp, ep, etp = degrees
    edp = world // (etp * ep * pp)
    zeros = [z for z in opts.zero_stages if (z == 0 or dp * cp > 1 or edp > 1) and not (z == 3 and pp > 1)]
    groups = {z: shard_groups(z, tp, cp, dp, gpus_per_node) if opts.hsdp else (None,) for z in zeros}
    out = {z: refuses is not None and refuses(tp, cp, cp_comm, pp, ep, etp, z) for z in zeros}
    mbs_choices = [d for d in divisors(gbs // dp) if d <= opts.max_mbs]
    for vpp in vpp_choices(model.num_layers, pp, opts):
        fixed_choices = fixed_splits(model.num_layers, pp, vpp, opts)
        refused = 0
        for mbs in (d for d in mbs_choices if vpp == 1 or gbs // (d * dp) % pp == 0):
            for zero in zeros:
                for group in groups[zero]:
                    for recompute in opts.recompute:
                        if cp > 1 and opts.cp_choice and opts.cp_choice(tp, cp, mbs, recompute) != cp_comm:
                            continue  # a faster cp algorithm exists for this layout (DOMINATED)
                        if out[zero]:
                            refused += len(fixed_choices)
                            continue
                        for fixed in fixed_choices:
                            yield Candidate(tp, tp > 1, cp, cp_comm, ep, etp, pp, vpp, dp, zero, mbs, recompute,
                                            "interleaved" if vpp > 1 else "1f1b", gbs // (mbs * dp), None, group,
                                            fixed)
        if refused:
            yield Refused(refused, pp, vpp, dp)


def fixed_splits(num_layers: int, pp: int, vpp: int, opts: SpaceOptions) -> tuple:
    """(None,): the search splits the layers; else the splits the framework's partitioner makes
    (each stage at least vpp layers)."""
    if pp == 1 or opts.stage_splits is None:
        return (None,)
    return tuple(s for s in opts.stage_splits(num_layers, pp, vpp) if min(s) >= vpp)
