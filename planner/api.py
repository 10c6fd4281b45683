"""parplan from Python: `plan`, `estimate` and `check` return the objects the CLI prints (an Estimate, the
ranked plans with the search's reasons, a check verdict with its estimate and warnings), taking the model
and cluster as preset names, files or spec objects. Mistakes raise planner.errors.UserError with the
message the CLI prints (a ValueError-like one line naming the argument and the value).

    >>> from planner import plan, estimate, check
    >>> best = plan("llama3-70b", "dgx-h100", nodes=8)
    >>> best.status, best.plans[0].layout.tp, f"{best.plans[0].time.step_s:.1f} s"
    >>> e = estimate("llama3-70b", "dgx-h100", "tp=8,pp=4,mbs=1,zero=1,recompute=selective,sp=1", nodes=8)
    >>> e.fits, e.memory.peak_bytes / 2**30
    >>> v = check("train_llama.sh", cluster="dgx-h100")   # a Megatron script, DeepSpeed JSON, TOML or plan
    >>> v.fits, v.warnings

Training options are keyword arguments named as the CLI's flags: stack, stack_file, tp_comm_overlap,
overlap_grad_reduce, flash_attention, optimizer, grad_dtype, fp8_recipe, framework. Heavy modules
(OR-Tools, numpy, the cost model) are imported inside the functions: `import planner` stays light.
"""

from __future__ import annotations

import io
import time
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from planner.errors import UserError

if TYPE_CHECKING:
    from costmodels.estimate import Estimate
    from costmodels.hardware_spec import ClusterSpec
    from costmodels.layout import Layout
    from costmodels.model_spec import ModelSpec
    from costmodels.train_spec import TrainSpec
    from planner.search.engine import SearchResult

DEFAULT_GLOBAL_BATCH = 512  # plan's and sweep's default (planner.cli_common.DEFAULT_PLAN_BATCH)
ModelArg = Union[str, Path, "ModelSpec"]
ClusterArg = Union[str, Path, "ClusterSpec"]


@dataclass
class PlanResult:
    """What `parplan plan` prints: the ranked layouts (fastest first), the search's status and statistics,
    the reasons in numbers, and the best layout in a validated regime when the winner's is not."""

    status: str  # optimal | feasible | infeasible
    plans: list  # [Estimate], fastest first; empty when nothing fits
    reasons: list[str]
    alternative: Optional[Any]  # Estimate or None
    search: Any  # planner.search.engine.SearchResult
    model: Any
    cluster: Any
    train: Any

    @property
    def best(self) -> Optional["Estimate"]:
        """The winner, or None when nothing fits."""
        return self.plans[0] if self.plans else None

    def to_json(self) -> dict:
        """The `plan --json` document's status, plans, search and reasons (docs/design.md section 6)."""
        from planner.cli_plan import plan_json

        return plan_json(self.search, self.reasons, self.alternative)

    def show(self, console=None) -> None:
        """Print the tables `parplan plan` prints (to `console`, else a new rich Console)."""
        from rich.console import Console

        from planner.report.render import print_plan

        print_plan(self.search, self.reasons, console or Console(), _title(self.model, self.cluster, self.train),
                   self.alternative)


@dataclass
class CheckResult:
    """What `parplan check` decides: whether the configuration fits (its exit code), the estimate behind it,
    `warnings` (what the config sets that parplan does not price, then what the reader could not decide or
    was overridden: every `warning:` line the CLI prints, `check --json`'s "warnings" first), and the
    DeepSpeed "auto" values assumed (`assumed`) and notes."""

    fits: bool
    estimate: Any  # Estimate
    warnings: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    strict: bool = False

    @property
    def exit_code(self) -> int:
        """`parplan check`'s exit code: 0 fits, 1 does not (with strict: also under allocator pressure)."""
        return 0 if self.fits else 1


def _title(model, cluster, train) -> str:
    return (f"{model.name} on {cluster.num_gpus} x {cluster.gpu_profile.name}, global batch "
            f"{train.global_batch_size} x {train.seq_len(model)} tokens, stack {train.stack_spec.name}")


def _options(options: dict):
    """The training options (planner.trainopts.TrainOptions) from keyword arguments; a UserError naming an
    unknown one."""
    from dataclasses import fields

    from planner.trainopts import TrainOptions

    known = {f.name for f in fields(TrainOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UserError(f"unknown option {unknown[0]!r} (options: {', '.join(sorted(known))})")
    return TrainOptions(**options)


def _model_noted(model: ModelArg, seq_len: Optional[int] = None) -> tuple["ModelSpec", list[str]]:
    """The model and the Hugging Face reader's notes on it (planner.files.loading.load_model_noted, with the
    training length given; none for a spec)."""
    from costmodels.model_spec import ModelSpec
    from planner.files import loading

    if isinstance(model, ModelSpec):
        return model, []
    spec, notes = loading.load_model_noted(str(model), seq_len)
    return spec, list(notes)


def load_model(model: ModelArg) -> "ModelSpec":
    """A ModelSpec from a preset name, a spec file or Hugging Face config.json, or a ModelSpec as is."""
    return _model_noted(model)[0]


def load_cluster(cluster: ClusterArg, nodes: Optional[int] = None, gpus: Optional[int] = None) -> "ClusterSpec":
    """A ClusterSpec from a preset name or spec file, or a ClusterSpec, resized by `nodes`/`gpus`."""
    from costmodels.hardware_spec import ClusterSpec
    from planner.files import loading

    if isinstance(cluster, ClusterSpec):
        return loading.resize_cluster(cluster, nodes, gpus)
    return loading.load_cluster(str(cluster), nodes, gpus)


def _layout(layout: Union[None, str, dict, "Layout"]) -> "Layout":
    """A Layout from 'tp=8,pp=4,...', a dict of its fields, a Layout, or None (every default)."""
    from costmodels.layout import Layout
    from planner.files import loading

    if layout is None or isinstance(layout, Layout):
        return layout or Layout()
    if isinstance(layout, dict):
        return loading.validate(Layout, layout, "layout", from_file=False)
    from planner.cli_common import check_layout_text

    check_layout_text(layout)
    return loading.parse_layout(layout)


def _train(base: Optional["TrainSpec"], global_batch, seq_len, precision, layout, world: int, opts) -> "TrainSpec":
    """The TrainSpec the CLI builds from the same options (planner.cli_common.make_train), without its note
    on stderr: with no batch anywhere, 4 x pp micro-batches per data-parallel rank (1 at pp=1)."""
    from planner.cli_common import make_train

    if global_batch is None and base is None:
        lay = layout or _layout(None)
        dp = lay.dp or max(world // lay.model_parallel_size, 1)
        global_batch = lay.mbs * dp * (4 * lay.pp if lay.pp > 1 else 1)
    return make_train(base, global_batch, seq_len, precision, layout, world, opts)


def _problem(model: ModelArg, cluster: Optional[ClusterArg], nodes, gpus, seq_len: Optional[int] = None):
    """(model, cluster, train or None, layout or None): a plan file given as `model` brings all four."""
    from planner.files import loading

    if isinstance(model, (str, Path)) and loading.is_plan_file(str(model)):
        prob = loading.load_plan(Path(model), seq_len)
        clus = load_cluster(cluster, nodes, gpus) if cluster is not None else \
            loading.resize_cluster(prob.cluster, nodes, gpus)
        return prob.model, clus, prob.train, prob.layout
    if cluster is None:
        raise UserError("cluster is required (a preset such as 'dgx-h100', a cluster spec file, or a ClusterSpec)")
    return _model_noted(model, seq_len)[0], load_cluster(cluster, nodes, gpus), None, None


def estimate(model: ModelArg, cluster: Optional[ClusterArg] = None, layout: Union[None, str, dict, "Layout"] = None,
             *, nodes: Optional[int] = None, gpus: Optional[int] = None, global_batch: Optional[int] = None,
             seq_len: Optional[int] = None, precision: Optional[str] = None, **options) -> "Estimate":
    """Per-GPU memory per pipeline stage, step time with its held-out error band, and throughput of one
    layout: the Estimate `parplan estimate --json` prints (`.model_dump(mode="json")` is that JSON).

    Without `global_batch`, 4 x pp micro-batches per data-parallel rank (1 at pp=1), as the CLI.

        >>> e = estimate("llama3-8b", "dgx-h100", "tp=2,mbs=1", global_batch=64)
        >>> e.fits, round(e.memory.peak_bytes / 2**30, 1), e.time.step_s
    """
    from costmodels.estimate import estimate as run_estimate
    from planner.search import frameworks as fws
    from planner.search import stage_split

    opts = _options(options)
    spec, clus, base, saved = _problem(model, cluster, nodes, gpus, seq_len)
    lay = _layout(layout) if layout is not None else (saved or _layout(None))
    train = _train(base, global_batch, seq_len, precision, lay, clus.num_gpus, opts)
    lay, _ = stage_split.complete(spec, clus, train, lay)
    result = run_estimate(spec, clus, train, lay)
    fws.require(fws.load(opts.framework), result.layout, train, moe=spec.is_moe)
    return result


def plan(model: ModelArg, cluster: Optional[ClusterArg] = None, *, nodes: Optional[int] = None,
         gpus: Optional[int] = None, global_batch: Optional[int] = None, seq_len: Optional[int] = None,
         precision: Optional[str] = None, top: int = 3, time_limit_s: float = 30.0, validated_only: bool = False,
         **options) -> PlanResult:
    """Search every layout for the fastest that fits: the ranked plans `parplan plan` prints, with the
    search's status and reasons (`.to_json()` is `plan --json`'s document, `.show()` prints its tables).

        >>> r = plan("llama3-8b", "dgx-h100", nodes=2, top=3)
        >>> [(p.layout.tp, p.layout.pp, p.layout.dp, round(p.time.step_s, 2)) for p in r.plans]
        >>> r.reasons[0]
    """
    from costmodels.train_spec import TrainSpec
    from planner.files import loading
    from planner.plan_any import any_mode, search_any
    from planner.search import frameworks as fws

    if not (isinstance(top, int) and 1 <= top <= 50):
        raise UserError(f"top {top!r}: expected a whole number from 1 to 50")
    if not (0.1 <= float(time_limit_s) <= 3600):
        raise UserError(f"time_limit_s {time_limit_s!r}: expected 0.1 to 3600 seconds")
    opts = _options(options)
    spec, clus, base, _ = _problem(model, cluster, nodes, gpus, seq_len)
    base = base or TrainSpec(global_batch_size=global_batch or DEFAULT_GLOBAL_BATCH)
    train = _train(base, global_batch, seq_len, precision, None, clus.num_gpus, opts)
    deadline = time.perf_counter() + time_limit_s
    prob, fw = loading.Problem(spec, clus, train), fws.load(opts.framework)
    if any_mode(fw, opts, base):  # as `parplan plan`: each framework's layouts priced with its own stack
        result, alternative, reasons, train, _ = search_any(prob, train, top, time_limit_s, validated_only, deadline)
    else:
        fws.require_precision([fw] if fw is not None else [], train)
        result, alternative, reasons = search_with_reasons(prob, train, top, time_limit_s, validated_only, fw,
                                                           deadline)
    return PlanResult(result.status, list(result.plans), reasons, alternative, result, spec, clus, train)


def search_with_reasons(prob, train: "TrainSpec", top: int, time_limit_s: float, validated_only: bool, fw=None,
                        deadline: Optional[float] = None, progress=None) -> tuple["SearchResult", Any, list[str]]:
    """(search result, best validated alternative when the winner is not validated, reasons), `plan`'s
    search with `fw`'s restrictions (planner.search.frameworks); `progress(message)` is told each phase."""
    from costmodels.uncertainty import band_gpu
    from planner.search import best_validated, search, validated_filter
    from planner.search import frameworks as fws
    from planner.search.explain import time_limit_note, why_nothing_fits, why_winner

    say = progress or (lambda message: None)
    model, clus = prob.model, prob.cluster
    space = fws.space_options(fw, model, clus, train)
    fw_keep = fws.keep(fw, train, moe=model.is_moe)  # one predicate for the search and the alternative: best_validated reuses
    keep = fws.keep(fw, train, validated_filter(train.stack_spec, clus.num_gpus, band_gpu(clus.gpu_profile),
                                                   model.is_moe, train.seq_len(model)), moe=model.is_moe) \
        if validated_only else fw_keep  # the candidates the search kept when its keep is the same
    result = search(model, clus, train, top=top, time_limit_s=time_limit_s, opts=space, progress=say, keep=keep,
                    deadline=deadline)
    beyond = validated_only and _drop_extrapolated(result)
    alternative = None
    winner = result.plans[0].uncertainty if result.plans else None
    if winner is not None and not winner.validated and _can_validate(train.stack_spec, model):
        say("searching the best layout in a validated regime")
        alternative = best_validated(model, clus, train, result, time_limit_s, opts=space, keep=fw_keep,
                                     deadline=deadline)
    said = [f"--validated-only: {beyond} of the fastest layouts left out: their regimes validate, but each estimate "
            "lies beyond the runs behind the band (extrapolated)"] if beyond else []
    if result.plans:
        return result, alternative, time_limit_note(result) + said + why_winner(result)
    return result, None, said + why_nothing_fits(model, clus, train, result, opts=space,
                                                 validated_only=validated_only, deadline=deadline, keep=fw_keep)


def _drop_extrapolated(result) -> int:
    """Leave out of `result` the plans whose estimate is not validated though their regime is (the search's
    validated filter sees the regime, not a layout's exposed communication); how many were left out."""
    kept = [(p, o) for p, o in zip(result.plans, result.objectives_s) if p.uncertainty.validated]
    dropped = len(result.plans) - len(kept)
    result.plans, result.objectives_s = [p for p, _ in kept], [o for _, o in kept]
    return dropped


def _can_validate(stack, model) -> bool:
    """Whether any regime of `stack` validates for a model of this kind (dense, or MoE: 'moe:' entries): when
    none does, the search for a validated alternative cannot succeed and is skipped (every MoE plan ran it)."""
    from costmodels.uncertainty import MOE_PREFIX, validated_regimes

    return any(k.startswith(MOE_PREFIX) == model.is_moe for k in validated_regimes(stack))


def check(config: Union[str, Path], *, cluster: Optional[ClusterArg] = None, nodes: Optional[int] = None,
          model: Optional[ModelArg] = None, micro_batch: Optional[int] = None, grad_accum: Optional[int] = None,
          global_batch: Optional[int] = None, seq_len: Optional[int] = None, precision: Optional[str] = None,
          recompute: Optional[str] = None, strict: bool = False, **options) -> CheckResult:
    """Does this configuration fit in GPU memory? A plan file, a Megatron launch script or args file, a
    DeepSpeed JSON or a torchtitan TOML, read as `parplan check` reads it: the verdict, its estimate, and
    what the config sets that parplan does not price (`warnings`).

        >>> v = check("pretrain_gpt.sh", cluster="dgx-h100", nodes=8)
        >>> v.fits, v.estimate.memory.device_bytes / 2**30, v.warnings
    """
    from planner import trainopts as to
    from planner.files import check_overrides as co
    from planner.files import loading
    from planner.frameworks.deepspeed.auto import ReadNotes
    from planner.files.native import config_kind, is_native, load_native
    from planner.search import frameworks as fws
    from planner.search import stage_split

    opts = _options(options)
    path = Path(config)
    if not path.exists():
        raise UserError(f"config file {str(config)!r} does not exist")
    over = co.CheckOptions(micro_batch, grad_accum, global_batch, seq_len, precision, recompute)
    read = ReadNotes()
    native, read_warnings = is_native(path), []
    if not native:
        prob = loading.load_plan(path, seq_len, model_replaced=model is not None)
        if prob.layout is None:
            raise UserError(f"{config}: a plan file for check needs a 'layout'")
        spec, read_warnings = _model_noted(model, seq_len or prob.train.seq_length) if model is not None else \
            (prob.model, list(prob.model_notes))
        clus = load_cluster(cluster, nodes) if cluster is not None else loading.resize_cluster(prob.cluster, nodes, None)
    else:
        named = [str(a) if isinstance(a, Path) else a for a in (model, cluster)]  # names, files or specs
        with redirect_stderr(io.StringIO()) as said, loading.notes_held():  # the reader's warning lines
            prob = load_native(path, named[0], named[1], nodes, over.trainer_flags(), read)  # (native.note)
        spec, clus = prob.model, prob.cluster
        read_warnings = [line.split(": ", 2)[-1] if line.startswith("parplan: warning:") else line
                         for line in said.getvalue().splitlines() if line.strip()]
        if isinstance(named[0], str):  # the Hugging Face notes, with the length the launch file gives
            read_warnings += loading.model_notes(named[0], seq_len or prob.train.seq_length)  # WHERE: LINE
    train, lay = to.apply(co.apply_train(prob.train, over), opts), prob.layout
    if not (native and config_kind(path) == "deepspeed"):
        train, lay = co.apply_batch(train, lay, clus, over)
    lay = co.apply_recompute(lay, over)
    lay = lay if native else stage_split.complete(spec, clus, train, lay)[0]
    result = co.estimate_of(config, spec, clus, train, lay)
    fws.require(fws.load(opts.framework), result.layout, train, moe=spec.is_moe)
    fits = result.fits and not (strict and result.memory.allocator_pressure)
    return CheckResult(fits, result, list(prob.warnings) + read_warnings, list(read.assumed), list(read.notes),
                       strict)
