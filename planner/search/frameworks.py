"""`--framework megatron|deepspeed|torchtitan|fsdp|any`: the search space, stack and export format of
the framework a user runs (capability tables: hardware_profiles/frameworks, costmodels.framework).

- `space_options` / `keep`: `plan --framework X` enumerates only what X runs (degrees, ZeRO stages,
  recompute modes, context-parallel algorithms) and keeps only candidates X's table accepts.
- `stack_name`: X's default stack profile, unless `--stack` names one of X's own.
- `require`: `estimate`/`check`/`export --framework X` refuse a layout X cannot run, naming each rule.
- `runners`: with `any`, which frameworks run a layout (the plan table's "runs on").
- `framework_refusals`: why framework X cannot run a layout (its table and its stage partitioner): an
  export in X's format and a `check` of X's own config file refuse what X cannot run.
- `priced_frameworks`: with `any`, each framework in turn with its own stack, so that every layout is
  priced by a framework that runs it (`plan --framework any`).
"""

from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace
from typing import Any, Callable, Optional, get_args

import hardware_profiles as hp
from costmodels.framework import FRAMEWORKS, FrameworkCaps, refusals, runs
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import CpComm, Layout, a2a_heads_ok
from costmodels.model_spec import ModelSpec
from costmodels.timing import cp_layer_s
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.files.ds_partition import PARTITIONS, ds_split
from planner.files.read_configs import stage_options
from planner.search.memo import mark_refusals, mark_split_free, split_free
from planner.search.space import SpaceOptions

ANY = "any"
CHOICES = FRAMEWORKS + (ANY,)
# With `any`, the cp algorithms searched: every one (the search keeps the fastest per layout).
ANY_CP_COMM: tuple[str, ...] = get_args(CpComm)


def load(name: Optional[str]) -> Optional[FrameworkCaps]:
    """The capability table of `name`; None for `any` (or not given)."""
    if name is None or name == ANY:
        return None
    if name not in FRAMEWORKS:
        raise UserError(f"--framework {name!r} is not one of {', '.join(CHOICES)}")
    return hp.load_framework(name)


def space_options(fw: Optional[FrameworkCaps], model: ModelSpec, cluster: ClusterSpec, train: TrainSpec,
                  base: SpaceOptions = SpaceOptions()) -> SpaceOptions:
    """The search space of `fw` (all of it with `any`), keeping one cp algorithm per layout: the
    fastest of those allowed (planner.search.space.DOMINATED)."""
    if fw is None:
        algorithms = ANY_CP_COMM
        base = dataclasses.replace(base, cp_comm=algorithms)
    else:
        algorithms = tuple(fw.cp_comm) or ("p2p",)
        zeros = tuple(z for z in base.zero_stages if z in set(fw.zero) | set(fw.zero_with_pp))
        base = dataclasses.replace(
            base, zero_stages=zeros, recompute=tuple(r for r in base.recompute if r in fw.recompute),
            hsdp=base.hsdp and fw.hsdp, max_cp=base.max_cp if fw.cp_comm else 1,
            cp_comm=algorithms, max_vpp=base.max_vpp if fw.vpp else 1)
    chooser = cp_chooser(model, cluster, train, algorithms) if len(algorithms) > 1 else None
    splits = SPLITTERS.get(fw.stage_split) if fw is not None else None
    return dataclasses.replace(base, cp_choice=chooser, stage_splits=splits)


@functools.lru_cache(maxsize=None)
def deepspeed_splits(num_layers: int, pp: int, vpp: int = 1) -> tuple[tuple[int, ...], ...]:
    """The distinct stage splits DeepSpeed's partition methods make (planner.files.ds_partition),
    stages without layers left out (DeepSpeed has no virtual stages: vpp is 1)."""
    found = {tuple(ds_split(method, num_layers, pp)) for method in PARTITIONS}
    return tuple(sorted(s for s in found if min(s) >= 1))


@functools.lru_cache(maxsize=None)
def torchtitan_splits(num_layers: int, pp: int, vpp: int) -> tuple[tuple[int, ...], ...]:
    """The distinct per-rank splits torchtitan's layers_per_stage and first/last_stage_less_layers
    build for pp ranks of vpp virtual stages (planner.files.read_configs.stage_options)."""
    return tuple(sorted(set(stage_options(num_layers, pp, vpp).values())))


SPLITTERS = {"deepspeed-partition": deepspeed_splits, "torchtitan-layers-per-stage": torchtitan_splits}


def cp_chooser(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec,
               algorithms: tuple[str, ...]) -> Callable[[int, int, int, str], str]:
    """(tp, cp, mbs, recompute) -> the algorithm with the least exposed cp time per layer
    (costmodels.timing.cp_layer_s), memoised; algorithms a layout cannot run (a2a heads) are skipped."""

    @functools.lru_cache(maxsize=None)
    def choose(tp: int, cp: int, mbs: int, recompute: str) -> str:
        timed = []
        for alg in algorithms:
            lay = Layout(tp=tp, sp=tp > 1, cp=cp, cp_comm=alg, mbs=mbs, recompute=recompute)
            if alg != "a2a" or a2a_heads_ok(model, tp, cp):
                timed.append((cp_layer_s(model, cluster, train, lay), alg))
        return min(timed)[1]

    return choose


def keep(fw: Optional[FrameworkCaps], train: TrainSpec, then: Optional[Callable[[Any], bool]] = None, *,
         moe: bool) -> Optional[Callable[[Any], bool]]:
    """A search `keep` predicate: candidates `fw` runs (and that `then` accepts); `moe`: the model has routed
    experts (costmodels.framework.refusals)."""
    if fw is None:
        return then

    def accept(cand) -> bool:
        return runs(fw, cand, train.precision, train.optimizer, train.ep_comm_overlap, moe) and \
            (then is None or then(cand))

    if then is None or split_free(then):  # refusals reads no stage split (a partitioner's splits are
        mark_split_free(accept)  # framework_refusals' split_runs, not the table's)
    return mark_refusals(accept, refuses(fw, moe=moe))  # what runs refuses, accept refuses


def refuses(fw: FrameworkCaps, *, moe: bool) -> Callable[[int, int, str, int, int, int, int], bool]:
    """(tp, cp, cp_comm, pp, ep, etp, zero) -> True where `fw` refuses every layout with these choices, whatever
    its others: costmodels.framework.runs itself, asked with those choices and every other one set to a value the
    framework accepts (its recompute, hybrid-shard, precision and optimizer rules are left to the search's keep).
    The search counts such layouts without building them (planner.search.space.enumerate_counted: Megatron's
    ZeRO-2 with pipelining, a torchtitan MoE layout's etp other than tp without ep or 1 with it).
    tests/test_search_refusals.py holds it to runs: it never refuses a layout runs accepts."""
    # the choices refuses is not given, set to ones runs accepts, so that only the given ones can refuse
    neutral = {"vpp": 1, "recompute": fw.recompute[0], "replicas": 1}
    precision, optimizer = fw.precisions[0], fw.optimizers[0]

    @functools.lru_cache(maxsize=None)
    def refused(tp: int, cp: int, cp_comm: str, pp: int, ep: int, etp: int, zero: int) -> bool:
        choices = SimpleNamespace(tp=tp, cp=cp, cp_comm=cp_comm, pp=pp, ep=ep, etp=etp, zero=zero, **neutral)
        return not runs(fw, choices, precision, optimizer, moe=moe)

    return refused


def stack_name(fw: FrameworkCaps, given: Optional[str], given_framework: Optional[str]) -> str:
    """The stack to price `fw`'s layouts with: the given one when it is `fw`'s, else `fw`'s default."""
    if given is None:
        return fw.stack
    if given_framework is not None and given_framework != fw.name:
        raise UserError(f"--stack {given} is a {given_framework} stack, but --framework is {fw.name} "
                        f"(its default stack is {fw.stack})")
    return given


def require(fw: Optional[FrameworkCaps], lay: Layout, train: TrainSpec, *, moe: bool) -> None:
    """UserError naming every rule of `fw` that `lay` breaks (`moe`: the model has routed experts)."""
    if fw is None:
        return
    why = refusals(fw, lay, train.precision, train.optimizer, train.ep_comm_overlap, moe)
    if why:
        raise UserError(f"--framework {fw.name} cannot run this layout: " + "; ".join(why))


def runners(lay: Any, train: TrainSpec, *, moe: bool) -> list[str]:
    """The frameworks whose tables accept `lay` (a resolved Layout), its stage split included."""
    out = []
    for name in FRAMEWORKS:
        fw = hp.load_framework(name)
        if runs(fw, lay, train.precision, train.optimizer, train.ep_comm_overlap, moe) and split_runs(fw, lay):
            out.append(name)
    return out


CHUNK_SIZERS = ("megatron",)  # whose files state each virtual stage's layers (--pipeline-model-parallel-layout)


def split_refusal(fw: FrameworkCaps, lay: Any) -> str:
    """Why `fw`'s partitioner does not build the layout's stage split or virtual-stage sizes, or ''."""
    chunks = getattr(lay, "chunk_layers", None)  # a search Candidate has none: even chunks
    if chunks is not None and fw.name not in CHUNK_SIZERS:
        return (f"chunk_layers={','.join(map(str, chunks))}: only Megatron's --pipeline-model-parallel-layout "
                "sizes virtual stages so")
    splitter = SPLITTERS.get(fw.stage_split)
    if lay.pp == 1 or splitter is None or not lay.stage_layers:
        return ""
    if tuple(lay.stage_layers) in splitter(sum(lay.stage_layers), lay.pp, lay.vpp):
        return ""
    return (f"stage_layers={','.join(map(str, lay.stage_layers))}: {fw.name}'s partitioner "
            f"({fw.stage_split}) does not build this split")


def split_runs(fw: FrameworkCaps, lay: Any) -> bool:
    """The layout's stage split is one `fw`'s partitioner builds (any split where it takes counts)."""
    return not split_refusal(fw, lay)


def export_format(fw: Optional[FrameworkCaps], fmt: Optional[str], default: str) -> str:
    """`--format` as given, else the framework's exporter, else `default`."""
    if fmt is not None:
        return fmt
    return fw.export_format if fw is not None else default


def framework_refusals(name: Optional[str], lay: Any, train: TrainSpec, *, moe: bool) -> list[str]:
    """Every reason framework `name` cannot run `lay` (a resolved Layout): its table's rules and its stage
    partitioner; empty for None (a generic launcher such as torchrun runs what its stack runs)."""
    if name is None or name not in FRAMEWORKS:
        return []
    fw = hp.load_framework(name)
    split = split_refusal(fw, lay)
    return refusals(fw, lay, train.precision, train.optimizer, train.ep_comm_overlap, moe) + ([split] if split else [])


def unrunnable(train: TrainSpec, lay, *, moe: bool) -> list[str]:
    """One warning when the stack's framework cannot run `lay` (estimate and check of a plan file price any
    layout with the stack given): which framework refuses it and why, and which frameworks run it."""
    name = train.stack_spec.framework
    why = framework_refusals(name, lay, train, moe=moe)
    if not why:
        return []
    fw = hp.load_framework(name)
    if fw.precision_why and why == [f"precision={train.precision}: {fw.precision_why}"]:  # runs, but not as exported
        return [f"precision={train.precision}: {fw.precision_why}; these numbers price {name} running it, and "
                "export cannot write it"]
    others = runners(lay, train, moe=moe)
    runs = f"it runs on {', '.join(others)}" if others else "no framework parplan knows runs it"
    return [f"{train.stack_spec.framework} (stack {train.stack_spec.name}) cannot run this layout ({'; '.join(why)}); "
            f"{runs}, so these numbers describe a run that stack does not make"]


def require_precision(fws: list, train: TrainSpec) -> None:
    """UserError when none of the frameworks `fws` (`--framework X`, or every one for `any`) trains in the run's
    precision: their searches would refuse every layout, and the empty result would read as a memory verdict."""
    if not fws or any(train.precision in fw.precisions for fw in fws):
        return
    said = "; ".join(f"{fw.name}: {', '.join(fw.precisions)}" for fw in fws)
    raise UserError(f"--precision {train.precision}: no framework searched trains in it as parplan writes its launches "
                    f"({said}); `parplan estimate ... --precision {train.precision}` prices a layout in it with any "
                    "stack")


def priced_frameworks(train: TrainSpec, stack_given: bool) -> list[tuple[FrameworkCaps, TrainSpec]]:
    """`--framework any`: (framework, train priced with its default stack) for every framework, so a layout
    is costed only by a framework that runs it, with that framework's stack. A stack given by the user
    (--stack/--stack-file) prices everything: then [(its framework, train)], or [] when it names none."""
    if stack_given:
        name = train.stack_spec.framework
        return [(hp.load_framework(name), train)] if name in FRAMEWORKS else []
    out = []
    for name in FRAMEWORKS:
        fw = hp.load_framework(name)
        out.append((fw, hp.resolve_train(train, fw.stack)))
    return out


def merge_ranked(found: list[tuple[FrameworkCaps, TrainSpec, Any]], top: int) -> list[tuple[Any, FrameworkCaps, TrainSpec]]:
    """The `top` fastest plans over every framework's search, as (plan, framework, train), fastest first;
    `found` holds (framework, train, search result) per framework. A layout several frameworks run keeps
    its fastest pricing only."""
    ranked = sorted(((p, fw, tr) for fw, tr, res in found for p in res.plans), key=lambda t: t[0].time.step_s)
    out, seen = [], set()
    for plan, fw, tr in ranked:
        key = plan.layout.model_dump_json()
        if key not in seen:
            seen.add(key)
            out.append((plan, fw, tr))
    return out[:top]
