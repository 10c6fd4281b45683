"""The run an OpenRLHF launch line describes (openrlhf_run), in `parplan estimate`'s terms: OpenRLHF trains on
DeepSpeed (its own ZeRO config, Hugging Face models), so the command names the deepspeed stack. Finding the line is
planner.files.other_tools.find_launch (`-m openrlhf.cli.train_*`, `openrlhf/cli/train_*.py`); its refusal is
planner.files.other_tools_launch.refuse_launch.

Read from the `openrlhf` package's argparse (PyPI wheels 0.6.4, 0.8.11, 0.9.10, 0.10.4, 0.11.2; openrlhf/cli/
train_sft.py, train_dpo.py, train_rm.py, train_kto.py, train_kd.py, train_prm.py, train_ppo_ray.py), whose flags
were renamed twice; each value is read under every name (FLAGS):
- up to 0.8: --pretrain, --micro_train_batch_size (per GPU), --train_batch_size (global), --max_len, --zero_stage,
  --bf16 (a switch), --gradient_checkpointing, --ring_attn_size, --ds_tensor_parallel_size (0.8), --adam_offload,
  --lora_rank; train_ppo_ray.py: --prompt_max_len + --generate_max_len (its --max_len, when given, is the total),
  the actor's --actor_num_nodes x --actor_num_gpus_per_node.
- 0.9: the same names, precision from --param_dtype bf16|fp16; train_ppo_ray.py --max_len is prompt + response.
- 0.10 on: dotted names, --model.model_name_or_path (PPO: --actor.model_name_or_path), --train.micro_batch_size,
  --train.batch_size, --data.max_len, --ds.zero_stage, --ds.param_dtype, --model.gradient_checkpointing_enable (PPO:
  --actor.gradient_checkpointing_enable), --ds.ring_attn_size, --ds.tensor_parallel_size, --ds.adam_offload,
  --ds.lora.rank, --actor.num_nodes x --actor.num_gpus_per_node.
Only what the line says is filled in: OpenRLHF's defaults (micro-batch 8, global batch 128, max_len 2048, ZeRO-2)
are never shown as if read. --ring_attn_size is context parallelism with its keys and values all-gathered
(ring_flash_attn 0.1.8 adapters/hf_adapter.py runs llama3_flash_attn_varlen_func): cp_comm=allgather. GPUs: the
deepspeed launcher's --num_nodes x --num_gpus (both said; its hostfile is not read), torchrun's --nnodes (default 1)
x --nproc_per_node, else the PPO actor's nodes (OpenRLHF's default 1) x GPUs per node.
"""

from __future__ import annotations

import posixpath
from typing import Optional

from planner.files.other_tools import Launch, preset_for
from planner.files.other_tools_runs import Run, _dtype, _gpus, _int, _word
from planner.files.shellread import flag_dict, parse_flags

FLAGS = {
    "model": ("--pretrain", "--model.model_name_or_path", "--actor.model_name_or_path"),
    "mbs": ("--micro_train_batch_size", "--train.micro_batch_size"),
    "gbs": ("--train_batch_size", "--train.batch_size"),
    "seq": ("--max_len", "--data.max_len"),
    "zero": ("--zero_stage", "--ds.zero_stage"),
    "dtype": ("--param_dtype", "--ds.param_dtype"),
    "recompute": ("--gradient_checkpointing", "--model.gradient_checkpointing_enable",
                  "--actor.gradient_checkpointing_enable"),
    "cp": ("--ring_attn_size", "--ds.ring_attn_size"),
    "tp": ("--ds_tensor_parallel_size", "--ds.tensor_parallel_size"),
    "offload": ("--adam_offload", "--ds.adam_offload"),
    "lora": ("--lora_rank", "--ds.lora.rank"),
    "nodes": ("--actor_num_nodes", "--actor.num_nodes"),
    "per_node": ("--actor_num_gpus_per_node", "--actor.num_gpus_per_node"),
}
PPO = "the critic, reference and reward models and the rollout generation (vLLM)"
SECOND = {"train_dpo": "the reference model and each pair's second (rejected) sequence",
          "train_kto": "the reference model", "train_rm": "each pair's second (rejected) sequence",
          "train_kd": "the teacher model", "train_ppo": PPO, "train_ppo_ray": PPO}


def _said(flags: dict, what: str) -> tuple[bool, Optional[str]]:
    """(whether the line gives the value under any of its names, the value)."""
    name = next((f for f in FLAGS[what] if f in flags), None)
    return name is not None, flags.get(name) if name else None


def _value(flags: dict, what: str) -> Optional[str]:
    return _said(flags, what)[1]


def openrlhf_run(launch: Launch) -> Run:
    """The Run of an OpenRLHF line: only what it says, with notes on what the command does not price."""
    words = [w for w in launch.words if w != "\\"]  # the shell reader keeps a here-document's `\` line ends
    flags = flag_dict(parse_flags(words))
    cp = _int(_value(flags, "cp"))
    lay = {"tp": _int(_value(flags, "tp")), "cp": cp, "cp_comm": "allgather" if cp and cp > 1 else None,
           "zero": _zero(_value(flags, "zero")), "mbs": _int(_value(flags, "mbs")),
           "recompute": "full" if _said(flags, "recompute")[0] else None}
    name = _word(_value(flags, "model"))
    hint = f"the preset of --pretrain {name}" if name else "the preset of the model it trains (its --pretrain)"
    run = Run(preset_for(name), f"MODEL: {hint}",
              {k: v for k, v in lay.items() if v is not None}, _seq(flags), _precision(flags),
              _int(_value(flags, "gbs")), _launcher_gpus(launch.before) or _actor_gpus(flags), "deepspeed")
    run.notes = _notes(flags, _module(launch), launch.undecided)
    return run


def _zero(value) -> Optional[int]:
    return int(value) if value in ("0", "1", "2", "3") else None


def _seq(flags: dict) -> Optional[int]:
    """--max_len (PPO: prompt + response), else PPO's --prompt_max_len + --generate_max_len when both are said."""
    total = _int(_value(flags, "seq"))
    prompt, reply = _int(flags.get("--prompt_max_len")), _int(flags.get("--generate_max_len"))
    return total or (_int(prompt + reply) if prompt and reply else None)


def _precision(flags: dict) -> Optional[str]:
    if "--bf16" in flags:  # a switch (up to 0.8); the shell reader may hand it the next word as a value
        return "bf16"
    return _dtype(_value(flags, "dtype")) if _said(flags, "dtype")[0] else None


def _launcher_gpus(before: list) -> Optional[int]:
    """deepspeed --num_nodes x --num_gpus; torchrun (or python -m torch.distributed.run) --nnodes x
    --nproc_per_node."""
    opts = flag_dict(parse_flags([w for w in before if w != "\\"]))
    names = [posixpath.basename(w) for w in before]
    if "deepspeed" in names:
        return _gpus(opts.get("--num_nodes"), opts.get("--num_gpus"))
    if "torchrun" in names or "torch.distributed.run" in before:
        return _gpus(opts.get("--nnodes", "1"), opts.get("--nproc_per_node", opts.get("--nproc-per-node")))
    return None


def _actor_gpus(flags: dict) -> Optional[int]:
    per_node = _value(flags, "per_node")
    return _gpus(_value(flags, "nodes") or "1", per_node) if per_node else None


def _module(launch: Launch) -> str:
    """`train_sft` of `--module openrlhf.cli.train_sft` or `train_sft.py`."""
    return launch.entry.rsplit(" ", 1)[-1].rsplit(".py", 1)[0].replace("/", ".").rsplit(".", 1)[-1]


def _notes(flags: dict, module: str, undecided: bool) -> list:
    """What the run holds that one model's estimate does not price, and how the line was found."""
    out = []
    if module in SECOND:
        out.append(f"{module} also runs {SECOND[module]}: parplan prices the trained model alone, which understates "
                   "this run")
    rank = _int(_value(flags, "lora"))
    if rank:
        out.append(f"LoRA (rank {rank}): parplan prices full training, which overstates it")
    if _said(flags, "offload")[0]:
        out.append("--adam_offload: the optimizer is offloaded to CPU (DeepSpeed offload_optimizer), which the "
                   "command does not price")
    if undecided:
        out.append("the line is under an `if` whose condition parplan cannot decide (read from its branches)")
    return out


__all__ = ["FLAGS", "openrlhf_run"]
