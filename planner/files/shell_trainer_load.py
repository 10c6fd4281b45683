"""`parplan check` on a Hugging Face Trainer launch script (planner.files.shell_trainer): the DeepSpeed JSON it names,
priced by native's DeepSpeed reader with the script's TrainingArguments as the Trainer's values, on the GPUs its
launcher starts.

Sources: transformers 5.24.0 integrations/deepspeed.py trainer_config_process (lines 136-192: "auto" filled from
TrainingArguments; a number that differs from them is a mismatch the Trainer refuses to start with, lines 258-263);
training_args.py defaults (per_device_train_batch_size 8, gradient_accumulation_steps 1, bf16/fp16 False,
activation_checkpointing off). `check`'s own --micro-batch, --grad-accum and --precision stand in for the script's
values when given (they are what-ifs); --recompute and --seq-len are applied after, as for every config.
Launcher sizes: deepspeed --num_nodes/--num_gpus (planner.frameworks.megatron.deepspeed_dialect.launcher_size; its
hostfile is not read), torchrun --nnodes (default 1) x --nproc_per_node (planner.frameworks.megatron.world.
torchrun_size), accelerate --num_processes (every GPU) over --num_machines (default 1).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Callable, Optional

from costmodels.layout import Layout
from planner.errors import UserError
from planner.files import loading, shell_trainer
from planner.files.safe_read import parse_json
from planner.files.shellread import flag_dict, parse_flags
from planner.frameworks.deepspeed.auto import HF_GRAD_ACCUM, HF_MICRO_BATCH, ReadNotes, TrainerFlags
from planner.frameworks.megatron.deepspeed_dialect import launcher_size
from planner.frameworks.megatron.world import torchrun_size

MISMATCH = ("the Trainer refuses to start on a mismatch (transformers 5.24.0 integrations/deepspeed.py lines 258-263); "
            'set these to "auto" in the JSON or make them agree')


def script_flags(launch, where: str) -> TrainerFlags:
    """The Trainer's arguments the script gives (None where it gives none)."""
    f = launch.flags
    return TrainerFlags(micro_batch=shell_trainer.as_int(f, "--per_device_train_batch_size", where),
                        grad_accum=shell_trainer.as_int(f, "--gradient_accumulation_steps", where),
                        precision=shell_trainer.precision(f, where), recompute=shell_trainer.recompute(f, where),
                        seq_len=shell_trainer.seq_len(f, where))


def merged(cli: TrainerFlags, script: TrainerFlags) -> TrainerFlags:
    """check's options over the script's values (each check option given wins)."""
    pick = {k.name: getattr(cli, k.name) if getattr(cli, k.name) is not None else getattr(script, k.name)
            for k in dataclasses.fields(TrainerFlags)}
    return TrainerFlags(**pick)


def _label(cli_value, script_value, default: int, option: str, field: str) -> tuple[int, str]:
    if cli_value is not None:
        return cli_value, f"check {option} {cli_value}"
    if script_value is not None:
        return script_value, f"--{field} {script_value}"
    return default, f"TrainingArguments.{field} default {default}"


def mismatches(cfg: dict, cli: TrainerFlags, script: TrainerFlags) -> list[str]:
    """What the Trainer's fill_match would list: a JSON number (not "auto") that differs from the argument."""
    out = []
    for key, cli_v, script_v, default, option, field in (
            ("train_micro_batch_size_per_gpu", cli.micro_batch, script.micro_batch, HF_MICRO_BATCH, "--micro-batch",
             "per_device_train_batch_size"),
            ("gradient_accumulation_steps", cli.grad_accum, script.grad_accum, HF_GRAD_ACCUM, "--grad-accum",
             "gradient_accumulation_steps")):
        value, said = _label(cli_v, script_v, default, option, field)
        if isinstance(cfg.get(key), int) and not isinstance(cfg.get(key), bool) and cfg[key] != value:
            out.append(f"{key}={cfg[key]} vs {said}")
    if cli.precision is None:  # check --precision replaces the precision anyway
        for key in ("bf16", "fp16"):
            section = cfg.get(key)
            on = section.get("enabled") if isinstance(section, dict) else None  # absent: not checked
            if isinstance(on, bool) and on != (script.precision == key):
                out.append(f"{key}.enabled={str(on).lower()} vs --{key} {script.precision == key}"
                           + ("" if script.precision else " (TrainingArguments default)"))
    return out


def world(launch, where: str) -> tuple[Optional[int], Optional[int]]:
    """(nodes, GPUs per node) the launcher starts, where it says."""
    try:
        if launch.launcher == "deepspeed":
            return launcher_size(launch.opts)
        if launch.launcher == "torchrun":  # torchrun --nnodes defaults to 1
            nodes, per_node = torchrun_size(launch.opts)
            given = any(o.split("=")[0] in ("--nnodes", "--nnode") for o in launch.opts)
            return (1 if nodes is None and not given else nodes), per_node
    except UserError as err:
        raise UserError(f"{where}: {err}") from None
    opts = flag_dict(parse_flags(launch.opts))
    total = _count(opts, ("--num_processes", "--num-processes"), where)
    machines = _count(opts, ("--num_machines", "--num-machines"), where)
    if total is None:
        return machines, None
    machines = machines or 1  # accelerate --num_machines defaults to 1
    if total % machines:
        raise UserError(f"{where}: accelerate --num_processes {total} is not a whole number per --num_machines "
                        f"{machines}")
    return machines, total // machines


def _count(opts: dict, names: tuple, where: str) -> Optional[int]:
    value = next((opts[n] for n in names if opts.get(n) is not None), None)
    if value is None or "$" in value:
        return None
    if not re.fullmatch(r"[0-9]{1,7}", value) or int(value) < 1:
        raise UserError(f"{where}: accelerate {names[0]} {value[:20]!r}: expected a count of at least 1")
    return int(value)


def _need(cluster, model, launch, where: str) -> None:
    if not cluster:
        raise UserError(f"{where}: --cluster is required: a launch script does not say which GPUs it runs on "
                        "(e.g. --cluster dgx-h100)")
    if not model:
        name = launch.flags.get("--model_name_or_path")
        named = f" (the script trains {name[:80]!r}, a Hub repository parplan does not fetch)" if name else ""
        raise UserError(f"{where}: --model is required for a Hugging Face Trainer launch{named}: give a preset "
                        "(parplan models) or the model's config.json")


def load(path: Path, launch, model, cluster, nodes, cli: TrainerFlags, notes: Optional[ReadNotes],
         load_text: Callable, size_cluster: Callable) -> loading.Problem:
    """The Problem of a Trainer launch. load_text: native.load_native_text; size_cluster: native._cluster."""
    where, notes = str(path), ReadNotes() if notes is None else notes
    _need(cluster, model, launch, where)
    text, json_path = shell_trainer.config_text(launch, where)
    cfg, script = parse_json(text, str(json_path)), script_flags(launch, where)
    wrong = mismatches(cfg, cli, script) if isinstance(cfg, dict) else []
    if wrong:
        raise UserError(f"{where}: {json_path} disagrees with the Trainer's arguments: {'; '.join(wrong)}; {MISMATCH}")
    script_nodes, per_node = world(launch, where)
    if script_nodes is None and nodes is None:
        unread = {"deepspeed": " (its --hostfile is not read)", "accelerate": " (its --config_file is not read)"}
        notes.assumed.append(f"{launch.launcher} gives no node count{unread.get(launch.launcher, '')}: the "
                             "cluster's size is assumed; set --nodes")
    clus = size_cluster(cluster, nodes, per_node, script_nodes, where)
    flags = merged(cli, script)
    flags = dataclasses.replace(flags, recompute=flags.recompute or "none")  # activation_checkpointing default off
    prob = load_text(_without_checkpointing(cfg, text, notes), "deepspeed", model, clus, clus.num_nodes, json_path,
                     flags, notes)
    return _finish(prob, flags, launch, notes)


def _without_checkpointing(cfg, text: str, notes: ReadNotes) -> str:
    """The JSON without its activation_checkpointing section, which the Trainer leaves unused (integrations/
    deepspeed.py never reads it; a Hugging Face model recomputes through --gradient_checkpointing, torch's
    checkpoint), said once."""
    if not isinstance(cfg, dict) or "activation_checkpointing" not in cfg:
        return text
    notes.notes.append("the JSON's activation_checkpointing section is not used by the Hugging Face Trainer (its "
                       "model recomputes only with --gradient_checkpointing / --activation_checkpointing); ignored")
    return json.dumps({k: v for k, v in cfg.items() if k != "activation_checkpointing"})


def _finish(prob: loading.Problem, flags: TrainerFlags, launch, notes: ReadNotes) -> loading.Problem:
    """The script's recompute and sequence length over what the JSON reader gave, and the script's warnings."""
    recompute = flags.recompute or "none"  # TrainingArguments.activation_checkpointing default: off
    if flags.precision in ("bf16", "fp16") and prob.train.precision != flags.precision:
        notes.notes.append(f"--{flags.precision} is on, but the DeepSpeed JSON has no {flags.precision} section: the "
                           f"Trainer fills {flags.precision}.enabled only where the section exists (transformers "
                           f"5.24.0 integrations/deepspeed.py lines 183-184), so DeepSpeed trains in "
                           f"{prob.train.precision}")
    lay = prob.layout
    if lay is not None and lay.recompute != recompute:
        lay = loading.validate(Layout, {**lay.model_dump(), "recompute": recompute}, "recompute", from_file=False)
    train = prob.train
    if flags.seq_len is not None:
        train = train.model_copy(update={"seq_length": flags.seq_len})
    else:
        notes.assumed.append(f"sequence length {train.seq_length} (the model's): the script gives none of "
                             f"{', '.join(shell_trainer.SEQ_FLAGS)}; set --seq-len")
    warnings = list(prob.warnings) + list(launch.sh.warnings)
    return dataclasses.replace(prob, train=train, layout=lay, warnings=warnings)
