"""DeepSpeed-Chat's training scripts launched by `deepspeed main.py ...` (DeepSpeedExamples,
applications/DeepSpeed-Chat): not the Hugging Face Trainer, though they share its flag names. Its `--deepspeed` is
DeepSpeed's bool switch (deepspeed 0.19.8 deepspeed/__init__.py _add_core_arguments, lines 628-631: "helper flag
for user code"), and the script builds its DeepSpeed config from its own flags.

Source: DeepSpeedExamples applications/DeepSpeed-Chat, training/step1_supervised_finetuning/main.py and
step2_reward_model_finetuning/main.py parse_args (--per_device_train_batch_size default 16, --max_seq_len 512,
--gradient_accumulation_steps 1, --gradient_checkpointing, --zero_stage 0, --offload, --dtype fp16|bf16 default
fp16, --lora_dim, --only_optimize_lora), and dschat/utils/ds_utils.py get_train_ds_config (zero_optimization.stage
= --zero_stage, overlap_comm true; offload_param and offload_optimizer device "cpu" with --offload, else "none"; fp16
or bf16 enabled by --dtype; train_micro_batch_size_per_gpu and train_batch_size = micro x world x accumulation, set in
main.py). That repository is not a package on a registry: these were read from its source as published, not from a
copy here. Step 3 (RLHF: actor, critic, reference and reward models, `--actor_zero_stage`) is refused by name.
OpenRLHF's scripts (`-m openrlhf.cli.train_sft`, `openrlhf/cli/train_dpo.py`) share --zero_stage and
--gradient_checkpointing but are not DeepSpeed-Chat: is_dschat leaves them (planner.files.other_tools refuses them).
"""

from __future__ import annotations

import re
from typing import Optional

from planner.errors import UserError
from planner.files import shell_trainer
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

MICRO, SEQ, GAS, STAGE, DTYPE = 16, 512, 1, 0, "fp16"  # main.py parse_args defaults
RLHF_FLAGS = ("--actor_zero_stage", "--critic_zero_stage", "--actor_model_name_or_path")
OPENRLHF = re.compile(r"(?:^|[/.])openrlhf[/.]")  # a module or script of the openrlhf package


def is_dschat(launch) -> bool:
    """A DeepSpeed-Chat step: --zero_stage (or step 3's --actor_zero_stage), which no Trainer argument is, in a
    script that is not OpenRLHF's (which has a --zero_stage of its own)."""
    return (any(f in launch.flags for f in ("--zero_stage",) + RLHF_FLAGS)
            and not OPENRLHF.search(launch.script or ""))


def refuse_rlhf(launch, where: str) -> None:
    """UserError for DeepSpeed-Chat step 3, naming what to run instead; nothing for steps 1 and 2."""
    given = [f for f in RLHF_FLAGS if f in launch.flags]
    if not given:
        return
    stage = launch.flags.get("--actor_zero_stage") or "3"
    micro = launch.flags.get("--per_device_training_batch_size") or "1"
    raise UserError(f"{where}: a DeepSpeed-Chat RLHF launch ({launch.script}, {given[0]}): parplan prices one model "
                    "in training, not step 3's actor, critic, reference and reward models with its hybrid engine; "
                    f"price the actor alone with `parplan estimate MODEL --cluster CLUSTER --layout zero={stage[:2]},"
                    f"mbs={micro[:6]}`")


def _int(flags: dict, flag: str, default: int, where: str, low: int = 1) -> int:
    if flag not in flags:
        return default
    value = flags[flag]
    if value is not None and "$" in value:
        raise UserError(f"{where}: {flag} {value[:20]}: a value parplan cannot evaluate (a script argument or a "
                        "variable set under a condition on one); write the number in the script")
    if value is None or not value.isdigit() or len(value) > 7 or int(value) < low:
        raise UserError(f"{where}: {flag} {str(value)[:20]!r}: expected a whole number of at least {low}")
    return int(value)


def script_flags(launch, where: str, assumed: list) -> TrainerFlags:
    """The run's settings from DeepSpeed-Chat's flags, its defaults named in `assumed`."""
    f = launch.flags
    for flag, default in (("--per_device_train_batch_size", MICRO), ("--max_seq_len", SEQ), ("--dtype", DTYPE)):
        if flag not in f:
            assumed.append(f"{flag} {default} (DeepSpeed-Chat main.py default)")
    dtype = f.get("--dtype", DTYPE)
    if dtype not in ("fp16", "bf16"):
        raise UserError(f"{where}: --dtype {str(dtype)[:20]!r}: DeepSpeed-Chat takes fp16 or bf16")
    return TrainerFlags(micro_batch=_int(f, "--per_device_train_batch_size", MICRO, where),
                        grad_accum=_int(f, "--gradient_accumulation_steps", GAS, where),
                        precision=dtype, recompute="full" if "--gradient_checkpointing" in f else "none",
                        seq_len=_int(f, "--max_seq_len", SEQ, where))


def ds_config(launch, cli: TrainerFlags, where: str, read: ReadNotes) -> tuple[dict, TrainerFlags]:
    """(the DeepSpeed config get_train_ds_config builds, the run's settings with check's options over the
    script's). Batch numbers are written in, so check's --micro-batch / --grad-accum are what-ifs, not conflicts."""
    f = launch.flags
    script = script_flags(launch, where, read.assumed)
    stage = _int(f, "--zero_stage", STAGE, where, low=0)
    if stage > 3:
        raise UserError(f"{where}: --zero_stage {stage}: DeepSpeed has stages 0 to 3")
    offload = shell_trainer.as_bool(f, "--offload", where)
    if offload and stage == 0:
        raise UserError(f"{where}: --offload with --zero_stage 0: DeepSpeed offloads the optimizer only under ZeRO "
                        "1-3 (runtime/engine.py)")
    zero: dict = {"stage": stage, "overlap_comm": True}  # get_train_ds_config's zero_opt_dict sets overlap_comm true
    if offload:
        zero["offload_optimizer"] = {"device": "cpu"}
        if stage == 3:  # DeepSpeed reads offload_param under ZeRO-3 only
            zero["offload_param"] = {"device": "cpu"}
    micro = cli.micro_batch or script.micro_batch
    gas = cli.grad_accum or script.grad_accum
    if cli.global_batch is not None and cli.grad_accum is None:
        gas = None  # check's --global-batch: DeepSpeed's batch rule derives the accumulation
    cfg = {key: value for key, value in (("train_micro_batch_size_per_gpu", micro),
                                         ("gradient_accumulation_steps", gas)) if value is not None}
    cfg.update({"zero_optimization": zero, script.precision: {"enabled": True}})
    _notes(f, read)
    return cfg, script


def _notes(flags: dict, read: ReadNotes) -> None:
    """What DeepSpeed-Chat's flags change that parplan does not price."""
    lora: Optional[str] = flags.get("--lora_dim")
    if lora not in (None, "0"):
        only = "--only_optimize_lora" in flags
        read.notes.append(f"--lora_dim {lora[:8]}{' --only_optimize_lora' if only else ''}: LoRA is not priced; "
                          "priced as full fine-tuning of every parameter (an upper bound)")
    if "--compute_fp32_loss" in flags:
        read.notes.append("--compute_fp32_loss: the fp32 logits copy is not priced")


__all__ = ["ds_config", "is_dschat", "refuse_rlhf"]
