"""Runs to calibrate on: one per training log, as the time model's problem (model, cluster sized to
the run, TrainSpec on the base stack, resolved layout) with the measured median step time.

What each framework's log gives and what the options fill in:
- Megatron-LM: everything from the argument dump (tp, pp, cp, ep, vpp, sp, micro and global batch,
  sequence, world size, distributed optimizer = zero 1, recompute, fp16/bf16, overlaps, flash
  attention); `--layout` keys override it. The dump's num_layers / hidden_size / heads must be
  --model's.
- torchtitan: batch and sequence from the trainer's start-up line; the layout from `--layout`
  (default: FSDP, zero=3, the local batch as micro-batch); its parameter count must be --model's
  within PARAM_TOLERANCE.
- DeepSpeed: batch, micro-batch, ZeRO stage and precision from the config dump; the rest from
  `--layout`; the sequence from `--seq-len` or the model.
The cluster is sized to the GPUs the log states (stated_world: Megatron's world_size, else the batch
arithmetic of torchtitan and DeepSpeed); a --nodes/--gpus that disagrees is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import hardware_profiles as hp
from costmodels.errors import SpecError
from costmodels.estimate import estimate_memory
from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout, resolve_layout
from costmodels.model_spec import ModelSpec
from costmodels.params import total_params
from costmodels.stack import Stack
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.files import loading
from planner.files.logs import RunLog, Summary, summarize
from planner.frameworks.deepspeed import log as deepspeed
from planner.frameworks.torchtitan import log as torchtitan
from planner.safetext import visible

MIN_STEP_S = 1e-4  # 0.1 ms: below any transformer training step (a kernel launch is ~5 us, a step thousands)
MAX_STEP_S = 86400.0  # a day per step: a log in other units, or a stalled job, not a run to fit on
PARAM_TOLERANCE = 0.1  # torchtitan counts every parameter; parplan's count of the same model agrees to ~1%
DEFAULT_STACKS = {"megatron": "megatron-core", "torchtitan": "torchtitan", "deepspeed": "deepspeed"}


@dataclass(frozen=True)
class Options:
    """What the command line says about every run."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: dict = field(default_factory=dict)  # the --layout keys given
    global_batch: Optional[int] = None
    seq_len: Optional[int] = None
    precision: Optional[str] = None
    stack: Optional[Stack] = None
    size_given: bool = False  # --nodes or --gpus given: a log stating another GPU count is an error, not a resize


@dataclass(frozen=True)
class Run:
    """One log as a problem with its measured step time."""

    name: str
    log: RunLog
    summary: Summary
    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    layout: Layout

    @property
    def measured_s(self) -> float:
        return self.summary.step_s


def layout_keys(text: Optional[str]) -> dict:
    """The keys a --layout string sets (parsed and validated by the estimate parser)."""
    if not text:
        return {}
    given = {part.split("=", 1)[0] for part in loading.layout_parts(text) if "=" in part}  # blanks or commas
    return {k: v for k, v in loading.parse_layout(text).model_dump().items() if k in given}


def _check_model(log: RunLog, model: ModelSpec) -> None:
    """A log of another model than --model: a UserError naming the line of the log's shape."""
    shape = {k: log.settings[k] for k in ("num_layers", "hidden_size", "num_attention_heads") if k in log.settings}
    wrong = {k: v for k, v in shape.items() if getattr(model, k) != v}
    if wrong:
        key = next(iter(wrong))
        theirs = ", ".join(f"{k} {v}" for k, v in shape.items())
        ours = ", ".join(f"{k} {getattr(model, k)}" for k in shape)
        raise UserError(f"{log.where(key)}: this log trains another model ({theirs}) than --model {model.name} "
                        f"({ours}); calibrate on logs of --model, or give the model the log trained")
    count = log.settings.get("total_params")
    if count and abs(total_params(model) / count - 1) > PARAM_TOLERANCE:
        raise UserError(f"{log.where('total_params')}: this log trains {log.settings.get('model_name', 'a model')} "
                        f"of {count:,} parameters, but --model {model.name} has {total_params(model):,}; calibrate "
                        "on logs of --model, or give the model the log trained")


def _megatron_layout(s: dict, model: ModelSpec) -> dict:
    """The layout a Megatron log states. A dense model's expert degrees are left out: Megatron Core sets
    expert_tensor_parallel_size to the tensor-parallel size for every model (ModelParallelConfig.__post_init__;
    validate_args before the dump), so a dense tp4 run's log says etp 4, which a dense layout refuses."""
    keys = ("tp", "pp", "cp", "ep", "etp", "mbs", "sp") if model.is_moe else ("tp", "pp", "cp", "mbs", "sp")
    out = {k: s[k] for k in keys if k in s}
    if s.get("vpp"):
        out["vpp"] = s["vpp"]
    elif s.get("layers_per_vstage") and s.get("pp", 1) > 1:
        out["vpp"] = model.num_layers // (s["pp"] * s["layers_per_vstage"])
    out["zero"] = 1 if s.get("distributed_optimizer") else 0
    stated = s.get("recompute") if s.get("recompute") != "none" else None  # a 2021 dump: checkpoint_activations
    recompute = stated or ("full" if s.get("checkpoint_activations") else "none")
    out["recompute"] = recompute if recompute in ("full", "selective") else "none"
    return out


def _flash(s: dict) -> Optional[bool]:
    backend = str(s.get("attention_backend", "")).lower()
    if backend:
        return not any(word in backend for word in ("unfused", "local"))
    return s.get("flash_attention")


def _precision(s: dict) -> Optional[str]:
    if s.get("fp8") not in (None, "None"):
        return "fp8"
    return "bf16" if s.get("bf16") else "fp16" if s.get("fp16") else None


STATED = ("tp", "pp", "cp", "ep", "mbs", "zero", "recompute")  # the layout keys a run's time hangs on
MEGATRON_SOURCES = {"zero": ("distributed_optimizer",), "recompute": ("recompute", "checkpoint_activations")}


def _base_layout(log: RunLog, pp: int = 1) -> dict:
    """The layout keys a torchtitan or DeepSpeed log states (Megatron's: _megatron_layout). torchtitan's local
    batch is each accumulation step's batch per rank (torchtitan/trainer.py: gradient_accumulation_steps = global
    // (local_batch_size x batch degree), and every accumulation step fetches local_batch_size sequences), so it
    is the micro-batch without pipelining; with pipelining (`pp` > 1, from --layout) the micro-batch is
    --parallelism.pipeline_parallel_microbatch_size, which the log does not print (default 1)."""
    s = log.settings
    if log.framework == "megatron":
        return {}
    if log.framework == "torchtitan":  # torchtitan's defaults: FSDP, selective activation checkpointing
        mbs = s.get("local_batch", 1) if pp == 1 else 1
        return {"zero": 3, "mbs": max(mbs, 1), "recompute": s.get("recompute") or "selective"}
    out = {k: s[k] for k in ("zero", "mbs") if isinstance(s.get(k), int)}
    if isinstance(s.get("sp_size"), int) and s["sp_size"] > 1:  # DeepSpeed-Ulysses: all-to-all over heads
        out.update(cp=s["sp_size"], cp_comm="a2a")
    return out


def _assumed(log: RunLog, opts: Options, layout: Layout) -> str:
    """The note naming the layout keys neither the log nor --layout stated (taken from the layout's defaults,
    or the framework's), or ''. A Megatron log without its argument dump was fitted as tp=1, zero=0, no
    recompute without a word (a new-user pass)."""
    if log.framework == "megatron":  # _megatron_layout derives zero and recompute even when the dump is silent
        read = {k for k in _megatron_layout(log.settings, opts.model)
                if any(src in log.settings for src in MEGATRON_SOURCES.get(k, (k,)))}
    else:
        pp = opts.layout.get("pp", 1)
        read = set(_base_layout(log, pp)) - ({"mbs"} if log.framework == "torchtitan" and pp > 1 else set())
    keys = STATED if opts.model.is_moe else tuple(k for k in STATED if k != "ep")  # no experts: ep moot
    missing = [k for k in keys if k not in read and k not in opts.layout]
    if not missing:
        return ""
    values = ", ".join(f"{k}={getattr(layout, k)}" for k in missing)
    return (f"assumed: {visible(log.path)} does not state {', '.join(missing)}: taken as {values}; give the run's "
            "--layout if it differs (the fit is only as right as the layout)")


def _fits(run_model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, lay: Layout, log: RunLog, assumed: str) -> None:
    """A layout the run could not have used (it does not fit in memory) is refused, not fitted on."""
    mem = estimate_memory(run_model, cluster, train, lay)
    if not mem.fits:
        why = " (assumed: give --layout)" if assumed else ""
        raise UserError(f"{visible(log.path)}: layout {_short(lay)}{why} needs {mem.device_bytes / 2**30:.1f} GiB of "
                        f"the {mem.device_budget_bytes / 2**30:.1f} GiB a GPU has: the run could not have used it; "
                        "give the run's --layout")


def _short(lay: Layout) -> str:
    return ",".join(f"{k}={getattr(lay, k)}" for k in ("tp", "pp", "cp", "ep", "dp", "mbs", "zero", "recompute"))


def stated_world(log: RunLog, layout: dict) -> Optional[tuple[int, str, str]]:
    """(GPUs, how the log states them, the setting's key) of the run, or None where the log does not say:
    Megatron's world_size; torchtitan's and DeepSpeed's data-parallel degree, global batch / (per-rank batch x
    accumulation steps), times the `layout`'s (--layout's) tp x pp x cp. Sources: torchtitan/trainer.py
    (gradient_accumulation_steps = global_batch_size // (local_batch_size x batch degree), cp outside the batch
    degree); deepspeed/runtime/config.py _batch_assertion (train_batch_size = micro-batch x accumulation x
    data-parallel world, the world over model and sequence parallelism)."""
    s = log.settings
    if log.framework == "megatron":
        return (s["world_size"], f"world_size {s['world_size']}", "world_size") if s.get("world_size") else None
    per_rank = s.get("local_batch") if log.framework == "torchtitan" else s.get("mbs")
    gbs, accum = s.get("global_batch"), s.get("grad_accum") or (1 if log.framework == "torchtitan" else None)
    if not (per_rank and gbs and accum) or gbs % (per_rank * accum):
        return None
    dp = gbs // (per_rank * accum)
    ulysses = s.get("sp_size") if log.framework == "deepspeed" and isinstance(s.get("sp_size"), int) else 1
    model_parallel = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", ulysses)
    how = f"global batch {gbs} / ({per_rank} per rank x {accum} accumulation steps) = {dp} data-parallel ranks"
    return dp * model_parallel, how + (f" x {model_parallel} model-parallel" if model_parallel > 1 else ""), \
        "global_batch"


def _world(log: RunLog, opts: Options) -> ClusterSpec:
    """The cluster sized to the GPUs the run's log states (stated_world), else the cluster as given. Where --nodes
    or --gpus was given and disagrees, an error names both (it was silently overridden)."""
    cluster, stated = opts.cluster, stated_world(log, opts.layout)
    if stated is None and not opts.size_given:
        log.notes.append(f"assumed: {visible(log.path)} does not state its GPU count: taken as the cluster's "
                         f"{cluster.num_gpus}; give --gpus if it differs")
    if stated is None or stated[0] == cluster.num_gpus:
        return cluster
    world, how, key = stated
    if opts.size_given:
        raise UserError(f"{log.where(key)}: the run used {world} GPUs ({how}), but --nodes/--gpus gives "
                        f"{cluster.num_gpus}; drop the option, or give --layout's tp/pp/cp if they explain it")
    try:
        resized = loading.resize_cluster(cluster, None, world, gpus_from="the GPU count")
    except UserError as err:
        raise UserError(f"{log.where(key)}: {world} GPUs ({how}) do not fit cluster {cluster.name!r}: {err}") from None
    log.notes.append(f"cluster sized to the {world} GPUs the log states ({how})")
    return resized


def _batch(log: RunLog, opts: Options, model: ModelSpec) -> tuple[int, int]:
    """(global batch in sequences, sequence length): the log's, else the options', else an error."""
    gbs = log.settings.get("global_batch") or opts.global_batch
    if not gbs:
        raise UserError(f"{visible(log.path)}: the log does not state the global batch; give --global-batch")
    if not log.settings.get("seq_length") and not opts.seq_len:
        log.notes.append(f"assumed: {visible(log.path)} does not state its sequence length: taken as the model's "
                         f"{model.seq_length:,} tokens; give --seq-len if it differs")
    return gbs, log.settings.get("seq_length") or opts.seq_len or model.seq_length


def _train(log: RunLog, opts: Options, gbs: int, seq: int) -> TrainSpec:
    s = log.settings
    if s.get("quantized") and not opts.precision:
        log.notes.append(f"assumed: {log.where('quantized')} prints 'mfu: N/A', as torchtitan does only for a "
                         "quantized (float8/MX) run, yet it is priced as bf16; give --precision fp8 if it ran FP8")
    data = {"global_batch_size": gbs, "seq_length": seq,
            "precision": opts.precision or _precision(s) or "bf16"}
    if log.framework == "megatron":
        data.update(grad_dtype="fp32", flash_attention=_flash(s), overlap_grad_reduce=s.get("overlap_grad_reduce"),
                    tp_comm_overlap=s.get("tp_comm_overlap"))
    train = loading.validate(TrainSpec, {k: v for k, v in data.items() if v is not None}, f"{log.path}: train",
                             from_file=False)
    return loading.resolve_train(train, opts.stack or _default_stack(log))


def _default_stack(log: RunLog) -> Stack:
    """The stack a log is priced and fitted from without --stack: nemo for Megatron with TP overlap, megatron-2021
    for a 2021 Megatron-LM dump (it states checkpoint_activations and nothing of flash attention: it was priced as
    today's Megatron Core with flash attention, a log-format pass), else the framework's."""
    s = log.settings
    name = DEFAULT_STACKS[log.framework]
    if log.framework == "megatron" and s.get("tp_comm_overlap"):
        name = "nemo"
    elif log.framework == "megatron" and "checkpoint_activations" in s and _flash(s) is None:
        name = "megatron-2021"
        log.notes.append(f"assumed: {log.where('checkpoint_activations')} is a 2021 Megatron-LM dump "
                         "(checkpoint_activations, no flash attention stated): priced from stack megatron-2021; "
                         "give --stack to choose another")
    return hp.load_stack(name)


def build(log: RunLog, opts: Options) -> Run:
    """The run of one parsed log: checked against --model, step times in seconds, layout resolved."""
    _check_model(log, opts.model)
    cluster = _world(log, opts)
    gbs, seq = _batch(log, opts, opts.model)
    if log.framework == "torchtitan":
        torchtitan.to_seconds(log, gbs, seq, cluster.num_gpus)
    elif log.framework == "deepspeed":
        deepspeed.to_seconds(log, gbs)
    check_step_times(log)
    summary = summarize(log)
    train = _train(log, opts, gbs, seq)
    layout_data = {**_base_layout(log, opts.layout.get("pp", 1)), **(_megatron_layout(log.settings, opts.model)
                                           if log.framework == "megatron" else {}), **opts.layout}
    layout = loading.validate(Layout, layout_data, f"{log.path}: layout", from_file=False)
    try:
        resolved = resolve_layout(opts.model, cluster, train, layout)
    except SpecError as err:
        raise UserError(f"{visible(log.path)}: the run's layout does not fit --model/--cluster: {err}") from None
    assumed = _assumed(log, opts, resolved)
    if assumed:
        log.notes.append(assumed)
    _fits(opts.model, cluster, train, resolved, log, assumed)
    return Run(Path(log.path).name, log, summary, opts.model, cluster, train, resolved)


def check_step_times(log: RunLog) -> None:
    """Every step time (in seconds, after the reader's conversion) lies within MIN_STEP_S..MAX_STEP_S;
    else a UserError naming the file and line. Refused, not fitted: a zero divides the fit's error by
    zero, a negative or absurd one drags every parameter to its bound."""
    for s in log.steps:
        if not s.bad_loss and not MIN_STEP_S <= s.seconds <= MAX_STEP_S:
            raise UserError(f"{visible(log.path)}:{s.line}: step {s.step} took {s.seconds:.6g} s; a step time must "
                            f"lie between {MIN_STEP_S:g} s and {MAX_STEP_S:g} s (a day) to be fitted on")


def same_framework(logs: list[RunLog]) -> None:
    """Logs of one framework only: each framework's log states other things and is priced by another
    stack, so a mix cannot be one calibration."""
    kinds = {log.framework for log in logs}
    if len(kinds) > 1:
        listed = ", ".join(f"{Path(log.path).name}: {log.framework}" for log in logs)
        raise UserError(f"the logs come from different frameworks ({listed}); calibrate one framework at a time")


def same_stack(runs: list[Run]) -> Stack:
    """The one base stack of all runs (a calibration fits one stack)."""
    names = {r.train.stack_spec.name for r in runs}
    if len(names) > 1:
        listed = ", ".join(f"{r.name}: {r.train.stack_spec.name}" for r in runs)
        raise UserError(f"the logs come from different stacks ({listed}); calibrate one stack at a time, or "
                        "give --stack")
    return runs[0].train.stack_spec
