"""A Hugging Face Trainer launched by a shell script (deepspeed / torchrun / accelerate launch with TrainingArguments'
flags) is read as the DeepSpeed JSON its --deepspeed names, with the script's flags as the Trainer's arguments
(planner.files.shell_trainer). Sources: transformers 5.24.0 training_args.py, integrations/deepspeed.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_check import run_check as _check

from planner.errors import UserError
from planner.files.native import config_kind, load_native


AUTO = {"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto", "train_batch_size": "auto", "gradient_clipping": "auto"}
FASTCHAT = """#!/bin/bash
{launcher} fastchat/train/train_mem.py \\
    --model_name_or_path meta-llama/Llama-2-13b-hf --data_path data/sharegpt.json --bf16 True \\
    --output_dir out --num_train_epochs 3 --per_device_train_batch_size 4 --gradient_accumulation_steps 2 \\
    --learning_rate 2e-5 --model_max_length 4096 --gradient_checkpointing True --deepspeed {json}
"""
DEEPSPEED = "deepspeed --hostfile hostfile --num_nodes 2 --num_gpus 8"


def _files(tmp_path: Path, cfg: dict = AUTO, launcher: str = DEEPSPEED, json_name: str = "ds.json") -> Path:
    (tmp_path / "ds.json").write_text(json.dumps(cfg))
    path = tmp_path / "run.sh"
    path.write_text(FASTCHAT.format(launcher=launcher, json=json_name))
    return path


def test_the_script_flags_fill_the_trainer_arguments(tmp_path):
    prob = load_native(_files(tmp_path), "llama2-13b", "dgx-h100", None)
    lay, train = prob.layout, prob.train
    assert prob.cluster.num_gpus == 16 and lay.zero == 3 and lay.mbs == 4 and lay.num_microbatches == 2
    assert train.precision == "bf16" and lay.recompute == "full" and train.seq_length == 4096
    assert train.global_batch_size == 16 * 4 * 2 and config_kind(tmp_path / "run.sh") == "deepspeed"


@pytest.mark.parametrize("launcher, gpus, per_node", [("torchrun --nnodes 1 --nproc_per_node 4", 4, 4),
                                                      ("accelerate launch --num_processes 16 --num_machines 2", 16, 8),
                                                      ("python -m torch.distributed.run --nproc-per-node 8", 8, 8)])
def test_every_launcher_sizes_the_world(tmp_path, launcher, gpus, per_node):
    prob = load_native(_files(tmp_path, launcher=launcher), "llama2-13b", "dgx-h100", None)
    assert prob.cluster.num_gpus == gpus and prob.cluster.gpus_per_node == per_node


def test_a_json_number_that_disagrees_stops_the_trainer(tmp_path):
    cfg = {**AUTO, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4}
    code, message = _check(_files(tmp_path, cfg), "--cluster", "dgx-h100", "--model", "llama2-13b")
    assert code == 2 and "run.sh" in message
    assert "train_micro_batch_size_per_gpu=1 vs --per_device_train_batch_size 4" in message
    assert "gradient_accumulation_steps=4 vs --gradient_accumulation_steps 2" in message


def test_a_missing_json_is_named(tmp_path):
    code, message = _check(_files(tmp_path, json_name="nowhere.json"), "--cluster", "dgx-h100", "--model", "llama2-13b")
    assert code == 2 and "--deepspeed nowhere.json" in message and "not found" in message


def test_a_hub_name_of_a_preset_is_matched_and_another_still_needs_model(tmp_path):
    """meta-llama/Llama-2-13b-hf is the llama2-13b preset's repository (matched as the Axolotl and LLaMA-Factory
    readers match theirs, said in a note); a repository no preset has keeps --model required, naming it."""
    path = _files(tmp_path)
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code in (0, 1) and "model llama2-13b: the parplan preset" in message
    path.write_text(path.read_text().replace("meta-llama/Llama-2-13b-hf", "mistralai/Mistral-7B-v0.1"))
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 2 and "--model is required" in message and "mistralai/Mistral-7B-v0.1" in message


def test_the_json_checkpointing_section_does_not_recompute_a_trainer_run(tmp_path):
    cfg = {**AUTO, "activation_checkpointing": {"partition_activations": True}}
    path = _files(tmp_path, cfg)
    path.write_text(path.read_text().replace("--gradient_checkpointing True ", ""))
    assert load_native(path, "llama2-13b", "dgx-h100", None).layout.recompute == "none"


def test_check_reads_it_as_deepspeed_without_megatron_warnings(tmp_path):
    code, message = _check(_files(tmp_path), "--cluster", "dgx-h100", "--model", "llama2-13b")
    assert code in (0, 1) and "not a Megatron-LM flag" not in message and "stack deepspeed" in message


def test_both_precisions_on_are_refused(tmp_path):
    path = _files(tmp_path)
    path.write_text(path.read_text().replace("--bf16 True", "--bf16 True --fp16"))
    with pytest.raises(UserError, match="--bf16 and --fp16 are both true"):
        load_native(path, "llama2-13b", "dgx-h100", None)
