"""`parplan check` on a Hugging Face Trainer launch script (planner.files.shell_trainer), priced with the script's
TrainingArguments as the Trainer's values on the GPUs its launcher starts: the DeepSpeed JSON it names (native's
DeepSpeed reader); else the Accelerate config its `accelerate launch --config_file` gives, its `--fsdp`, or DDP
(planner.files.shell_trainer_accel, priced by planner.files.accelerate_yaml); DeepSpeed-Chat's scripts on the
config their flags build (planner.files.shell_trainer_dschat). --optim: planner.files.shell_trainer_optim.

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
from planner.files import accelerate_yaml, loading, shell_trainer
from planner.files import shell_trainer_accel as accel
from planner.files import shell_trainer_dschat as dschat
from planner.files import shell_trainer_optim as optim
from planner.files.safe_read import parse_json
from planner.safetext import visible
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


def world(launch, where: str, acc: Optional[dict] = None) -> tuple[Optional[int], Optional[int]]:
    """(nodes, GPUs per node) the launcher starts, where it says; for accelerate, its options over the Accelerate
    config `acc` it reads (num_processes counts every machine's)."""
    try:
        if launch.launcher == "deepspeed":
            return launcher_size(launch.opts)
        if launch.launcher == "torchrun":  # torchrun --nnodes defaults to 1
            nodes, per_node = torchrun_size(launch.opts)
            given = any(o.split("=")[0] in ("--nnodes", "--nnode") for o in launch.opts)
            return (1 if nodes is None and not given else nodes), (1 if _torchrun_one_per_node(launch) else per_node)
    except UserError as err:
        raise UserError(f"{where}: {err}") from None
    opts = acc if acc is not None else accel.overlay({}, shell_trainer.launch_options(launch))
    if opts.get("distributed_type") == "NO":
        return 1, 1
    total, machines = _count(opts, "num_processes", where), _count(opts, "num_machines", where)
    if total is None:
        return machines, None
    machines = machines or 1  # accelerate --num_machines defaults to 1
    if total % machines:
        raise UserError(f"{where}: accelerate --num_processes {total} is not a whole number per --num_machines "
                        f"{machines}")
    return machines, total // machines


NPROC = ("--nproc_per_node", "--nproc-per-node")


def _torchrun_one_per_node(launch) -> bool:
    """A torchrun (or python -m torch.distributed.run / launch) line of the script without --nproc_per_node (nor
    PET_NPROC_PER_NODE, which torchrun reads for it): one process per node, torch's default (torch/distributed/run.py
    get_args_parser: --nproc-per-node default "1"). Not the torchrun planner.files.finetune_yaml makes for
    llamafactory-cli (no command of a script), whose NPROC_PER_NODE defaults to every GPU."""
    return (launch.launcher == "torchrun" and bool(launch.sh.commands) and "PET_NPROC_PER_NODE" not in launch.sh.env
            and not any(o.split("=")[0] in NPROC for o in launch.opts))


def _count(opts: dict, key: str, where: str) -> Optional[int]:
    value = opts.get(key)
    if value is None or (isinstance(value, str) and "$" in value):
        return None
    if isinstance(value, bool) or not re.fullmatch(r"[0-9]{1,7}", str(value)) or int(value) < 1:
        raise UserError(f"{where}: accelerate --{key} {str(value)[:20]!r}: expected a count of at least 1")
    return int(value)


def _preset(launch, notes: ReadNotes) -> Optional[str]:
    """The preset --model_name_or_path names (planner.files.other_tools.preset_for: the Hub repository's name, as the
    Axolotl and LLaMA-Factory readers match theirs), said in a note; None when it names none."""
    from planner.files.other_tools import preset_for
    name = launch.flags.get("--model_name_or_path")
    preset = preset_for(name)
    if preset:
        shown = visible(name)[:80]
        notes.notes.append(f"model {preset}: the parplan preset with the shapes of --model_name_or_path {shown} "
                           "(matched by its repository name; --model overrides)")
    return preset


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
    """The Problem of a Trainer launch. load_text: native.load_native_text; size_cluster: native._cluster.
    DeepSpeed-Chat (shell_trainer_dschat) builds its own DeepSpeed config; a Trainer runs the DeepSpeed JSON it is
    given, else what its Accelerate config, its --fsdp or its launcher make it (shell_trainer_accel)."""
    where, notes = str(path), ReadNotes() if notes is None else notes
    model = model or _preset(launch, notes)
    _need(cluster, model, launch, where)
    dschat.refuse_rlhf(launch, where)
    if dschat.is_dschat(launch):
        return _dschat(launch, where, model, cluster, nodes, cli, notes, load_text, size_cluster)
    fsdp = accel.trainer_fsdp(launch, where)  # refuses --fsdp beside --deepspeed, as the Trainer does
    found, acc, acc_path = shell_trainer.config_text(launch, where), None, path
    if found is None:
        acc, acc_path = _accelerate_config(launch, fsdp, where, notes)
        if acc.get("distributed_type") == "DEEPSPEED":
            mixed = accel.trainer_precision(acc, script_flags(launch, where).precision)
            found = accel.deepspeed_source(acc, acc_path, launch, mixed)
    if found is None:
        return _accelerate(acc, acc_path, launch, where, model, cluster, nodes, cli, notes, size_cluster)
    return _deepspeed(found, acc, launch, where, model, cluster, nodes, cli, notes, load_text, size_cluster)


def _accelerate_config(launch, fsdp: Optional[dict], where: str, notes: ReadNotes) -> tuple[dict, Path]:
    """(the Accelerate config the launch runs under, the path named in messages): `accelerate launch --config_file`
    with the launch's options over it, the Trainer's --fsdp (over that file's process count and precision), an
    accelerate launch's own --use_deepspeed / --use_fsdp / --multi_gpu, else DDP under torchrun or deepspeed."""
    from_file = accel.from_config_file(launch, where)
    if fsdp is not None:
        base = from_file[0] if from_file else accel.overlay({}, shell_trainer.launch_options(launch))
        cfg = {**{k: base[k] for k in ("num_processes", "num_machines", "mixed_precision") if k in base}, **fsdp}
        accel.hybrid_note(cfg, notes.notes)
        return cfg, Path(where)
    if from_file is not None:
        return from_file
    cfg = accel.from_launch_options(launch, where, notes.assumed)
    if cfg is not None:
        return cfg, Path(where)
    if launch.launcher == "accelerate":
        raise UserError(f"{where}: accelerate launch of a Hugging Face Trainer ({launch.script}) with neither "
                        "--config_file nor --use_deepspeed / --use_fsdp / --multi_gpu: accelerate takes the rest from "
                        f"its default config ({accel.DEFAULT_CONFIG}), which parplan does not read; check that file, "
                        "or add --config_file to the launch")
    notes.notes.append(f"neither --deepspeed nor --fsdp: the Trainer runs DDP under {launch.launcher} (every GPU "
                       "holds the whole model and optimizer)")
    return {"distributed_type": "MULTI_GPU"}, Path(where)


def _sized(launch, where: str, acc: Optional[dict], cluster, nodes, notes: ReadNotes, size_cluster: Callable):
    """The cluster the launch starts (its launcher's counts, else the cluster's size, said)."""
    script_nodes, per_node = world(launch, where, acc)
    if _torchrun_one_per_node(launch):
        notes.assumed.append("torchrun without --nproc_per_node: 1 process (GPU) per node, torch's default "
                             "(torch/distributed/run.py); set --nproc_per_node in the script")
    if script_nodes is None and nodes is None:
        unread = {"deepspeed": " (its --hostfile is not read)"}
        notes.assumed.append(f"{launch.launcher} gives no node count{unread.get(launch.launcher, '')}: the "
                             "cluster's size is assumed; set --nodes")
    return size_cluster(cluster, nodes, per_node, script_nodes, where)


def _deepspeed(found: tuple, acc: Optional[dict], launch, where: str, model, cluster, nodes, cli: TrainerFlags,
               notes: ReadNotes, load_text: Callable, size_cluster: Callable) -> loading.Problem:
    """A Trainer run on a DeepSpeed JSON (its --deepspeed, accelerate's --deepspeed_config_file, or the Accelerate
    config's DeepSpeed settings)."""
    text, json_path = found
    cfg, script = parse_json(text, str(json_path)), script_flags(launch, where)
    wrong = mismatches(cfg, cli, script) if isinstance(cfg, dict) else []
    if wrong:
        added = " (accelerate adds bf16/fp16 enabled from mixed_precision)" if acc is not None else ""
        raise UserError(f"{where}: {json_path} disagrees with the Trainer's arguments: {'; '.join(wrong)}{added}; "
                        f"{MISMATCH}")
    clus = _sized(launch, where, acc, cluster, nodes, notes, size_cluster)
    flags = merged(cli, script)
    flags = dataclasses.replace(flags, recompute=flags.recompute or "none")  # activation_checkpointing default off
    prob = load_text(_without_checkpointing(cfg, text, notes), "deepspeed", model, clus, clus.num_nodes, json_path,
                     flags, notes)
    return _finish(prob, flags, launch, notes, isinstance(cfg, dict) and "optimizer" in cfg)


def _accelerate(acc: dict, acc_path: Path, launch, where: str, model, cluster, nodes, cli: TrainerFlags,
                notes: ReadNotes, size_cluster: Callable) -> loading.Problem:
    """A Trainer run under FSDP or DDP, priced by accelerate_yaml with the script's arguments as the Trainer's."""
    script = script_flags(launch, where)
    clus = _sized(launch, where, acc, cluster, nodes, notes, size_cluster)
    precision = cli.precision or accel.trainer_precision(acc, script.precision)
    if precision is None:
        precision = "fp32"
        notes.assumed.append("fp32 training: the script gives neither --bf16 nor --fp16 (TrainingArguments default "
                             "False) and no Accelerate mixed_precision; set --precision bf16|fp16")
    checkpointing = accelerate_yaml._on((accelerate_yaml.prefixed(acc).get("fsdp_config") or {}).get(
        "fsdp_activation_checkpointing"))
    recompute = cli.recompute or ("full" if script.recompute == "full" or checkpointing else "none")
    flags = dataclasses.replace(merged(cli, script), precision=precision, recompute=recompute)
    prob = accelerate_yaml.priced(acc_path, acc, model, clus, flags, notes, say_seq=False)
    return _finish(prob, flags, launch, notes, False)


def _dschat(launch, where: str, model, cluster, nodes, cli: TrainerFlags, notes: ReadNotes, load_text: Callable,
            size_cluster: Callable) -> loading.Problem:
    """A DeepSpeed-Chat step 1 or 2 run on the DeepSpeed config its flags build."""
    cfg, script = dschat.ds_config(launch, cli, where, notes)
    clus = _sized(launch, where, None, cluster, nodes, notes, size_cluster)
    flags = merged(cli, script)
    given = TrainerFlags(global_batch=cli.global_batch, precision=cli.precision, recompute=flags.recompute,
                         seq_len=flags.seq_len)
    prob = load_text(json.dumps(cfg), "deepspeed", model, clus, clus.num_nodes, Path(where), given, notes)
    return _finish(prob, flags, launch, notes, False)


def _without_checkpointing(cfg, text: str, notes: ReadNotes) -> str:
    """The JSON without its activation_checkpointing section, which the Trainer leaves unused (integrations/
    deepspeed.py never reads it; a Hugging Face model recomputes through --gradient_checkpointing, torch's
    checkpoint), said once."""
    if not isinstance(cfg, dict) or "activation_checkpointing" not in cfg:
        return text
    notes.notes.append("the JSON's activation_checkpointing section is not used by the Hugging Face Trainer (its "
                       "model recomputes only with --gradient_checkpointing / --activation_checkpointing); ignored")
    return json.dumps({k: v for k, v in cfg.items() if k != "activation_checkpointing"})


def _seq(flags: TrainerFlags, launch, train, notes: ReadNotes) -> int:
    """The sequence length: check's --seq-len or the script's length flag, else TRL's default for TRL's scripts,
    else the model's; what was assumed is said."""
    if flags.seq_len is not None:
        return flags.seq_len
    if shell_trainer.is_trl(launch):
        notes.assumed.append(f"sequence length {shell_trainer.TRL_MAX_LENGTH}: {launch.script} gives no --max_length, "
                             "TRL's default (trl 1.16 SFTConfig, DPOConfig, KTOConfig, RewardConfig max_length); "
                             "set --seq-len")
        return shell_trainer.TRL_MAX_LENGTH
    notes.assumed.append(f"sequence length {train.seq_length} (the model's): the script gives none of "
                         f"{', '.join(shell_trainer.SEQ_FLAGS)}; set --seq-len")
    return train.seq_length


def _finish(prob: loading.Problem, flags: TrainerFlags, launch, notes: ReadNotes,
            ds_optimizer: bool) -> loading.Problem:
    """The script's recompute, sequence length and --optim over what the config reader gave, and the script's
    warnings."""
    recompute = flags.recompute or "none"  # TrainingArguments.activation_checkpointing default: off
    if flags.precision in ("bf16", "fp16") and prob.train.precision != flags.precision:
        notes.notes.append(f"--{flags.precision} is on, but the DeepSpeed JSON has no {flags.precision} section: the "
                           f"Trainer fills {flags.precision}.enabled only where the section exists (transformers "
                           f"5.24.0 integrations/deepspeed.py lines 183-184), so DeepSpeed trains in "
                           f"{prob.train.precision}")
    lay = prob.layout
    if lay is not None and lay.recompute != recompute:
        lay = loading.validate(Layout, {**lay.model_dump(), "recompute": recompute}, "recompute", from_file=False)
    train = prob.train.model_copy(update={"seq_length": _seq(flags, launch, prob.train, notes)})
    no_trainer = "no_trainer" in (launch.script or "")  # Accelerate's *_no_trainer.py build torch's AdamW
    train = optim.apply(train, launch.flags, ds_optimizer, notes.notes, trainer=not no_trainer)
    if shell_trainer.is_trl(launch) and "dpo" in launch.script.replace(".", "/").split("/"):
        notes.notes.append("TRL DPO: priced as training one model on one sequence per sample; DPO's reference model "
                           "and its chosen + rejected pair per sample are not priced (an under-estimate)")
    warnings = list(prob.warnings) + list(launch.sh.warnings)
    return dataclasses.replace(prob, train=train, layout=lay, warnings=warnings)
