"""`check`'s batch, sequence and precision options over what a config says.

A DeepSpeed JSON takes --micro-batch, --grad-accum, --global-batch and --precision while it is read
(they fill its "auto" values: planner.frameworks.deepspeed.auto); for every format, --seq-len and --precision then
replace the training settings, --recompute the layout's activation recompute, and for the others (plan file, Megatron script, torchtitan TOML)
--micro-batch sets the layout's micro-batch, --global-batch the global batch, and --grad-accum the
micro-batches per step (global batch = micro-batch x dp x grad-accum), the micro-batch count being
derived again from the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, get_args

from costmodels.hardware_spec import ClusterSpec, Precision
from costmodels.estimate import estimate
from costmodels.layout import Layout, LayoutError
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.files import loading
from planner.files.said import note
from planner.frameworks.deepspeed.auto import TrainerFlags


@dataclass(frozen=True)
class CheckOptions:
    """check's --micro-batch, --grad-accum, --global-batch, --seq-len, --precision (None = not given)."""

    micro_batch: Optional[int] = None
    grad_accum: Optional[int] = None
    global_batch: Optional[int] = None
    seq_len: Optional[int] = None
    precision: Optional[str] = None
    recompute: Optional[str] = None

    def trainer_flags(self) -> TrainerFlags:
        """The Trainer's arguments these options stand for (a DeepSpeed JSON's "auto" values)."""
        return TrainerFlags(self.micro_batch, self.grad_accum, self.global_batch, self.precision, self.recompute,
                            self.seq_len)


def apply_train(train: TrainSpec, opts: CheckOptions) -> TrainSpec:
    """--seq-len and --precision over the config's training settings, validated."""
    data = {**train.model_dump(), "stack": train.stack}
    if opts.seq_len is not None:
        data["seq_length"] = opts.seq_len
    if opts.precision is not None:
        data["precision"] = _choice("--precision", opts.precision, get_args(Precision))
    return loading.validate(TrainSpec, data, "--seq-len/--precision", from_file=False)


def apply_recompute(lay: Layout, opts: CheckOptions) -> Layout:
    """--recompute over the config's activation recompute (the Hugging Face Trainer's --gradient_checkpointing
    is full recompute and lives outside the DeepSpeed JSON), validated. A config's module list or layer count
    belongs to its own mode and is dropped with it; --recompute full is full recompute of every layer, so a
    config's layer count goes too (over a torchtitan every-second-block reading or a Megatron
    --recompute-num-layers it changed nothing)."""
    if opts.recompute is None:
        return lay
    recompute = _choice("--recompute", opts.recompute, ("none", "selective", "full"))
    data = lay.model_dump()
    if recompute != lay.recompute or recompute == "full":
        data.update(recompute_modules=None, recompute_num_layers=None, recompute_method="uniform")
    return loading.validate(Layout, {**data, "recompute": recompute}, "--recompute", from_file=False)


def apply_batch(train: TrainSpec, lay: Layout, cluster: ClusterSpec, opts: CheckOptions) -> tuple[TrainSpec, Layout]:
    """--micro-batch, --global-batch and --grad-accum over a config that is not a DeepSpeed JSON."""
    if opts.micro_batch is None and opts.global_batch is None and opts.grad_accum is None:
        return train, lay
    mbs = opts.micro_batch or lay.mbs
    gbs = opts.global_batch
    if opts.grad_accum is not None:
        dp = lay.dp or max(cluster.num_gpus // lay.model_parallel_size, 1)
        derived = mbs * dp * opts.grad_accum
        if gbs is not None and gbs != derived:
            raise UserError(f"--global-batch {gbs} but --micro-batch x dp x --grad-accum = {mbs}*{dp}*{opts.grad_accum}"
                            f" = {derived}; give two of them")
        gbs = derived
    lay = loading.validate(Layout, {**lay.model_dump(), "mbs": mbs, "num_microbatches": None}, "--micro-batch",
                           from_file=False)
    if gbs is not None:
        if opts.global_batch is None and gbs != train.global_batch_size:  # derived from --grad-accum: said
            note("--grad-accum", f"global batch {mbs} x dp {gbs // (mbs * opts.grad_accum)} x "
                     f"{opts.grad_accum} = {gbs} sequences, not the config's {train.global_batch_size} (to keep a "
                     "batch, give --global-batch with --micro-batch instead)")
        data = {**train.model_dump(), "stack": train.stack, "global_batch_size": gbs}
        train = loading.validate(TrainSpec, data, "--global-batch/--grad-accum", from_file=False)
    return train, lay


def _choice(option: str, value: str, allowed) -> str:
    """`value` when it is one of `allowed`, else one line naming the option, the value and the choices."""
    if value not in allowed:
        hint = f"; did you mean {value.lower()}?" if value.lower() in allowed else ""
        raise UserError(f"{option} {value[:40]!r}: expected one of {', '.join(allowed)}{hint}")
    return value


def estimate_of(config, spec, clus, train: TrainSpec, lay: Layout):
    """`estimate` of a config's run; a layout rule it breaks names the config (the file's flags set it)."""
    try:
        return estimate(spec, clus, train, lay)
    except LayoutError as exc:
        raise UserError(f"{config}: {exc}") from exc
