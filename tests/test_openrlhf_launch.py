"""OpenRLHF launch scripts (planner/files/other_tools.py find_launch, planner/files/other_tools_openrlhf.py). Before,
`deepspeed --module openrlhf.cli.train_sft ... --zero_stage 2` was read as DeepSpeed-Chat (its --zero_stage) and
passed with DeepSpeed-Chat's main.py defaults: micro-batch 16, sequence 512, fp16; OpenRLHF's own scripts, whose line
sits in a here-document under `if [[ ${1} != "slurm" ]]`, gave "no Megatron launch found". Now they are refused by
name with the `parplan estimate` command filled from the line."""

from __future__ import annotations

import re
import shlex

from typer.testing import CliRunner

from planner.cli import app
from planner.files import shell_trainer
from planner.files.native import load_native
from planner.files.other_tools import find_launch
from planner.files.shell_trainer_dschat import is_dschat
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags
from tests.cli_check import run_check, write_config

SFT_FLAGS = """--max_len 2048 --dataset Open-Orca/OpenOrca --input_key question --output_key response \\
   --train_batch_size 256 --micro_train_batch_size 2 --max_samples 500000 \\
   --pretrain meta-llama/Meta-Llama-3-8B --save_path ./checkpoint/llama3-8b-sft \\
   --save_steps -1 --logging_steps 1 --eval_steps -1 --zero_stage 2 --max_epochs 1 \\
   --bf16 --flash_attn --learning_rate 5e-6 --gradient_checkpointing
"""
SFT = "set -x\ndeepspeed --module openrlhf.cli.train_sft \\\n   " + SFT_FLAGS
HEREDOC = """set -x

read -r -d '' training_commands <<EOF
openrlhf.cli.train_sft \\
   --max_len 2048 \\
   --dataset Open-Orca/OpenOrca \\
   --train_batch_size 256 \\
   --micro_train_batch_size 2 \\
   --pretrain meta-llama/Meta-Llama-3-8B \\
   --save_steps -1 \\
   --zero_stage 2 \\
   --bf16 \\
   --flash_attn \\
   --load_checkpoint \\
   --gradient_checkpointing
EOF
    # --wandb [WANDB_TOKENS]

if [[ ${1} != "slurm" ]]; then
    deepspeed --module $training_commands
fi
"""
RAY_PPO = """ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json='{"working_dir": "/openrlhf"}' \\
   -- python3 -m openrlhf.cli.train_ppo_ray \\
   --ref_num_nodes 1 --ref_num_gpus_per_node 8 --reward_num_nodes 1 --reward_num_gpus_per_node 8 \\
   --critic_num_nodes 1 --critic_num_gpus_per_node 8 --actor_num_nodes 2 --actor_num_gpus_per_node 8 \\
   --vllm_num_engines 4 --vllm_tensor_parallel_size 2 --colocate_all_models \\
   --pretrain OpenRLHF/Llama-3-8b-sft-mixture --reward_pretrain OpenRLHF/Llama-3-8b-rm-700k \\
   --micro_train_batch_size 8 --train_batch_size 128 --micro_rollout_batch_size 32 --rollout_batch_size 1024 \\
   --prompt_max_len 1024 --generate_max_len 1024 --zero_stage 3 --bf16 --actor_learning_rate 5e-7 \\
   --init_kl_coef 0.01 --prompt_data OpenRLHF/prompt-collection-v2.0 --gradient_checkpointing --adam_offload
"""
DSCHAT_STEP1 = """#!/bin/bash
OUTPUT=./output_step1_llama2_7b
ZERO_STAGE=3
mkdir -p $OUTPUT

deepspeed main.py \\
   --data_path Dahoas/rm-static Dahoas/full-hh-rlhf \\
   --data_split 2,4,4 \\
   --model_name_or_path meta-llama/Llama-2-7b-hf \\
   --per_device_train_batch_size 4 \\
   --per_device_eval_batch_size 4 \\
   --learning_rate 9.65e-6 \\
   --num_train_epochs 4  \\
   --gradient_accumulation_steps 1 \\
   --gradient_checkpointing \\
   --zero_stage $ZERO_STAGE \\
   --deepspeed \\
   --output_dir $OUTPUT \\
   &> $OUTPUT/training.log
"""
SFT_COMMAND = ("parplan estimate llama3-8b --cluster dgx-a100 --stack deepspeed --layout zero=2,mbs=2,recompute=full "
               "--seq-len 2048 --precision bf16 --global-batch 256")


def _refused(tmp_path, text: str) -> tuple[str, str]:
    """(message, estimate command) of `parplan check` refusing the script by name (exit 2)."""
    code, message = run_check(write_config(tmp_path, text), "--cluster", "dgx-a100", "--model", "llama3-8b")
    message = " ".join(message.split())
    assert code == 2, message
    assert "an OpenRLHF launch" in message and "DeepSpeed-Chat" not in message, message
    return message, re.search(r"`(parplan estimate [^`]+)`", message).group(1)


def _estimate(command: str) -> int:
    """The exit code of the printed estimate command run through the CLI (MODEL filled, as a user would)."""
    argv = shlex.split(command.replace(" MODEL ", " llama3-8b "))
    assert argv[:2] == ["parplan", "estimate"], argv
    result = CliRunner().invoke(app, argv[1:])
    assert "Traceback" not in result.output, result.output
    return result.exit_code


def test_an_openrlhf_sft_line_is_refused_by_name_with_its_estimate_command(tmp_path):
    message, command = _refused(tmp_path, SFT)
    assert command == SFT_COMMAND
    assert "--module openrlhf.cli.train_sft" in message and "assumed" not in message
    assert _estimate(command) in (0, 1)


def test_openrlhfs_own_script_with_the_line_in_a_here_document_under_an_if(tmp_path):
    message, command = _refused(tmp_path, HEREDOC)
    assert command == SFT_COMMAND
    decided = HEREDOC.replace('[[ ${1} != "slurm" ]]', "true")  # the branch taken: nothing said of branches
    message, command = _refused(tmp_path, decided)
    assert command == SFT_COMMAND and "cannot decide" not in message
    machine = HEREDOC.replace('[[ ${1} != "slurm" ]]', "[[ $(hostname) == node0 ]]")  # no branch taken
    message, command = _refused(tmp_path, machine)
    assert command == SFT_COMMAND and "under an `if` whose condition parplan cannot decide" in message


def test_a_ray_ppo_job_prices_the_actor_and_says_what_it_leaves_out(tmp_path):
    message, command = _refused(tmp_path, RAY_PPO)
    assert command == ("parplan estimate MODEL --cluster dgx-a100 --gpus 16 --stack deepspeed --layout "
                       "zero=3,mbs=8,recompute=full --seq-len 2048 --precision bf16 --global-batch 128")
    assert "MODEL: the preset of --pretrain OpenRLHF/Llama-3-8b-sft-mixture" in message
    assert "the critic, reference and reward models" in message and "--adam_offload" in message
    assert _estimate(command) in (0, 1)


def test_newer_dotted_flags_launchers_and_script_paths(tmp_path):
    dpo = ("deepspeed --num_nodes 1 --num_gpus 8 --module openrlhf.cli.train_dpo "
           "--model.model_name_or_path meta-llama/Meta-Llama-3-8B-Instruct --train.micro_batch_size 1 "
           "--train.batch_size 128 --data.max_len 4096 --ds.zero_stage 3 --ds.param_dtype bf16 "
           "--model.gradient_checkpointing_enable --ds.ring_attn_size 2\n")
    message, command = _refused(tmp_path, dpo)
    assert command == ("parplan estimate llama3-8b --cluster dgx-a100 --gpus 8 --stack deepspeed --layout "
                       "cp=2,cp_comm=allgather,zero=3,mbs=1,recompute=full --seq-len 4096 --precision bf16 "
                       "--global-batch 128")
    assert "the reference model and each pair's second (rejected) sequence" in message
    assert _estimate(command) in (0, 1)
    rm = ("torchrun --nproc_per_node 4 OpenRLHF/openrlhf/cli/train_rm.py --pretrain meta-llama/Meta-Llama-3-8B "
          "--micro_train_batch_size 1 --ds_tensor_parallel_size 2 --lora_rank 16\n")
    message, command = _refused(tmp_path, rm)
    assert command == "parplan estimate llama3-8b --cluster dgx-a100 --gpus 4 --stack deepspeed --layout tp=2,mbs=1"
    assert "`train_rm.py ...`" in message and "LoRA (rank 16)" in message
    message, command = _refused(tmp_path, "python -m openrlhf.cli.train_sft --pretrain meta-llama/Meta-Llama-3-8B\n")
    assert command == "parplan estimate llama3-8b --cluster dgx-a100 --stack deepspeed --layout tp=...,pp=...,mbs=..."


def test_the_deepspeed_chat_reader_leaves_openrlhf_lines(tmp_path):
    path = write_config(tmp_path, SFT)
    launch = shell_trainer.find(SFT, path)
    assert launch is not None and launch.script == "openrlhf.cli.train_sft" and not is_dschat(launch)


def test_a_deepspeed_chat_step1_script_is_still_read_as_deepspeed_chat(tmp_path):
    path = write_config(tmp_path, DSCHAT_STEP1)
    assert find_launch(DSCHAT_STEP1, path) is None
    launch = shell_trainer.find(DSCHAT_STEP1, path)
    assert launch is not None and is_dschat(launch)
    read = ReadNotes()
    prob = load_native(path, "llama2-7b", "dgx-a100", None, TrainerFlags(), read)
    assert (prob.layout.zero, prob.layout.mbs, prob.layout.recompute) == (3, 4, "full")
    assert (prob.train.seq_length, prob.train.precision) == (512, "fp16")
    assert any("--max_seq_len 512 (DeepSpeed-Chat main.py default)" in a for a in read.assumed)
