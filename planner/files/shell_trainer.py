"""A Hugging Face Trainer launched by a shell script (FastChat, Alpaca, TRL, run_clm...): `deepspeed`, `torchrun` or
`accelerate launch` running a training script whose flags are TrainingArguments' (either spelling), with the
script's flags as the Trainer's arguments. How it is distributed (a DeepSpeed JSON, an Accelerate config, --fsdp,
DDP) is planner.files.shell_trainer_load's; DeepSpeed-Chat, which shares the flag names, is
planner.files.shell_trainer_dschat's.

Sources: transformers 5.24.0 src/transformers/training_args.py, TrainingArguments fields
per_device_train_batch_size (line 777, default 8), gradient_accumulation_steps (849, default 1), bf16 (874), fp16
(880; both True is refused, line 1784), activation_checkpointing (908) and its deprecated alias
gradient_checkpointing (926), deepspeed (1463: a JSON file); hf_argparser.py string_to_bool (line 36: a bool flag
alone is True, else yes/no, true/false, t/f, y/n, 1/0; _parse_dataclass_field, lines 151-153: every field is also
accepted with dashes, `--per-device-train-batch-size`, which `find` reads as the underscore name). The sequence
length is the training script's own argument (SEQ_FLAGS): model_max_length (FastChat, Alpaca), max_seq_length
(older TRL SFTConfig, transformers' run_mlm/run_qa), max_seq_len (DeepSpeed-Chat), max_length (TRL 1.16
trl/trainer/sft_config.py line 202, dpo_config.py 195, kto_config.py 166, reward_config.py 144, each default 1024),
block_size (run_clm.py).
integrations/deepspeed.py trainer_config_process (lines 136-192): "auto" values are filled from those arguments,
and a number that differs from them stops the Trainer (fill_match, lines 108-132, raised at lines 258-263); it
leaves the JSON's activation_checkpointing section unused (a Hugging Face model recomputes through
gradient_checkpointing). World size: deepspeed --num_nodes x --num_gpus, torchrun --nnodes x --nproc_per_node,
accelerate --num_processes over --num_machines. --model stays required: --model_name_or_path names a Hub repository,
which parplan does not fetch. Used by planner.files.native.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from planner.errors import UserError
from planner.safetext import clipped
from planner.files.safe_read import first_file, read_text
from planner.files.shell_builtins import written_file
from planner.files.shellread import ShellScript, flag_dict, parse_flags, read_script, split_at_script
from planner.frameworks.megatron.ds_json import candidates

MARKERS = ("--per_device_train_batch_size", "--gradient_accumulation_steps", "--model_max_length",
           "--max_seq_length", "--block_size", "--output_dir", "--num_train_epochs", "--model_name_or_path",
           "--gradient_checkpointing", "--activation_checkpointing", "--actor_model_name_or_path")
# the dashed spellings HfArgumentParser also accepts, of the markers no Megatron-LM flag shares a text with
DASHED = ("--per-device-train-batch-size", "--gradient-accumulation-steps", "--model-max-length", "--output-dir",
          "--num-train-epochs", "--model-name-or-path")
SEQ_FLAGS = ("--model_max_length", "--max_seq_length", "--max_seq_len", "--max_length", "--block_size")
TRL_SCRIPTS = ("sft", "dpo", "kto", "reward")  # trl/scripts/*.py whose config has max_length (default 1024)
TRL_MAX_LENGTH = 1024
RECOMPUTE_FLAGS = ("--activation_checkpointing", "--gradient_checkpointing")
TORCH_RUN = ("torch.distributed.run", "torch.distributed.launch")
TRUE, FALSE = ("yes", "true", "t", "y", "1"), ("no", "false", "f", "n", "0")


@dataclasses.dataclass
class Launch:
    """One Trainer launch: the launcher, its options, the training script and its flags."""

    launcher: str
    opts: list
    script: str
    flags: dict
    sh: ShellScript


def is_trainer_text(text: str) -> bool:
    """Cheap test before evaluating: a TrainingArguments flag (either spelling) and no Megatron --num-layers."""
    return "--num-layers" not in text and any(m in text for m in MARKERS + DASHED)


def underscored(flag: str) -> str:
    """`--per-device-train-batch-size` as `--per_device_train_batch_size`: HfArgumentParser registers both
    (transformers 5.24.0 hf_argparser.py lines 151-153); other words are returned as they are."""
    return "--" + flag[2:].replace("-", "_") if flag.startswith("--") else flag


def find(text: str, path) -> Optional[Launch]:
    """The first launch whose script takes TrainingArguments' flags, or None. Its flags are kept under their
    underscore names."""
    if not is_trainer_text(text):
        return None
    sh = read_script(text, path, every_branch=False)
    for words in sh.commands:
        found = _launch(words)
        if found and any(underscored(w.split("=", 1)[0]) in MARKERS for w in found[3]):
            launcher, opts, script, args = found
            flags = flag_dict([(underscored(f), v) for f, v in parse_flags(args)])
            return Launch(launcher, opts, script, flags, sh)
    return None


def is_trl(launch: Launch) -> bool:
    """TRL's own training scripts (trl/scripts/sft.py, dpo.py, kto.py, reward.py, or `-m trl.scripts.sft`)."""
    parts = launch.script.replace(".", "/").split("/")
    return "trl" in parts and any(p in TRL_SCRIPTS for p in parts)


def _launch(words: list[str]) -> Optional[tuple]:
    """(launcher, options, script, arguments) of a deepspeed / torchrun / accelerate launch / python -m
    torch.distributed.run command, or None."""
    for i, w in enumerate(words):
        name = w.rsplit("/", 1)[-1]
        if name == "accelerate":
            if words[i + 1:i + 2] != ["launch"]:
                return None
            rest = words[i + 2:]
        elif name in ("deepspeed", "torchrun", "python", "python3"):
            rest = words[i + 1:]
        else:
            continue
        opts, script, args = split_at_script(rest)
        if name.startswith("python"):
            if script not in TORCH_RUN:
                return None
            name, (opts, script, args) = "torchrun", split_at_script(args)
        return (name, opts, script, args) if script else None
    return None


def as_bool(flags: dict, flag: str, where: str) -> Optional[bool]:
    """A TrainingArguments bool flag: None when absent, True alone, else string_to_bool's words."""
    if flag not in flags:
        return None
    value = flags[flag]
    if value is None or value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise UserError(f"{where}: {flag} {value[:20]!r}: expected true or false (yes/no, t/f, y/n, 1/0)")


def as_int(flags: dict, flag: str, where: str) -> Optional[int]:
    value = flags.get(flag)
    if flag not in flags:
        return None
    if value is None or not value.isdigit() or len(value) > 7 or int(value) < 1:
        raise UserError(f"{where}: {flag} {str(value)[:20]!r}: expected a whole number of at least 1")
    return int(value)


def precision(flags: dict, where: str) -> Optional[str]:
    """bf16 / fp16 when the script turns one on; fp32 when it turns them off; None when it says nothing."""
    bf16, fp16 = as_bool(flags, "--bf16", where), as_bool(flags, "--fp16", where)
    if bf16 and fp16:
        raise UserError(f"{where}: --bf16 and --fp16 are both true; the Trainer refuses that (transformers 5.24.0 "
                        "training_args.py line 1785: 'At most one of fp16 and bf16 can be True')")
    if bf16 or fp16:
        return "bf16" if bf16 else "fp16"
    return "fp32" if bf16 is False or fp16 is False else None


def recompute(flags: dict, where: str) -> Optional[str]:
    """full when --activation_checkpointing (or its alias --gradient_checkpointing) is on, none when off."""
    values = [as_bool(flags, f, where) for f in RECOMPUTE_FLAGS]
    if any(values):
        return "full"
    return "none" if False in values else None


def seq_flag(flags: dict) -> Optional[str]:
    """The first of SEQ_FLAGS the script gives (None when none)."""
    return next((f for f in SEQ_FLAGS if f in flags), None)


def seq_len(flags: dict, where: str) -> Optional[int]:
    flag = seq_flag(flags)
    return None if flag is None else as_int(flags, flag, where)


def launch_options(launch: Launch) -> dict:
    """The launcher's own options (accelerate's both spellings under the underscore name), last one winning."""
    return flag_dict([(underscored(f), v) for f, v in parse_flags(launch.opts)])


def config_name(launch: Launch) -> Optional[str]:
    """The DeepSpeed JSON: the Trainer's --deepspeed, else accelerate's --deepspeed_config_file."""
    given = launch.flags.get("--deepspeed")
    if given is None and launch.launcher == "accelerate":
        given = launch_options(launch).get("--deepspeed_config_file")
    return given


def config_option(launch: Launch) -> str:
    """The option config_name's file comes from, as messages name it."""
    if launch.flags.get("--deepspeed") is None and launch.launcher == "accelerate":
        return "accelerate launch --deepspeed_config_file"
    return "--deepspeed"


def find_file(launch: Launch, given: str, extra: tuple = (), what: Optional[str] = None) -> Optional[tuple[str, Path]]:
    """(text, path) of a file the launch names: written by the script (a here-document), else found beside the
    script or in the current directory (planner.frameworks.megatron.ds_json.candidates), else in `extra`
    folders; None when nowhere. `what` (the script and the option that names the file) begins the UserError
    safe_read.first_file raises when the path there is a folder, FIFO or device."""
    body = written_file(launch.sh, given)
    if body is not None:
        return body, Path(given)
    path = first_file(candidates(given, launch.sh.script_dir) + [Path(d) / given for d in extra],
                      what or f"{launch.launcher} ... {launch.script}: {clipped(given)}")
    return None if path is None else (read_text(path), path)


def config_text(launch: Launch, where: str):
    """(the JSON's text, the path it names for messages), or None when the launch names no DeepSpeed JSON; a
    UserError naming it when it cannot be found."""
    given = config_name(launch)
    if not given:
        return None
    said = f"{where}: {config_option(launch)} {clipped(given)}"
    found = find_file(launch, given, what=said)
    if found is None:
        raise UserError(f"{said}: the DeepSpeed JSON the Trainer is given is not written by the script and not "
                        "found beside it or in the current directory")
    return found


__all__ = ["Launch", "config_text", "find", "find_file", "is_trainer_text", "is_trl", "launch_options", "precision",
           "recompute", "seq_flag", "seq_len", "underscored"]
