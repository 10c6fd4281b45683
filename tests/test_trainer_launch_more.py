"""Trainer launches parplan check used to misread (audit /tmp/cfgC): TRL's --max_length and DeepSpeed-Chat's
--max_seq_len, dashed TrainingArguments flags, the Trainer's --fsdp, `accelerate launch --config_file`, DeepSpeed-Chat,
an Accelerate deepspeed_config_file relative to the working directory, Accelerate's parallelism_config, --optim.
Sources: transformers 5.24.0 (hf_argparser.py, training_args.py), trl 1.16.0 (trainer/sft_config.py), accelerate
1.15.0 (commands/launch.py, parallelism_config.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

AUTO = {"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto", "train_batch_size": "auto"}
ZERO3 = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "DEEPSPEED", "mixed_precision": "bf16",
         "num_machines": 1, "num_processes": 8,
         "deepspeed_config": {"zero_stage": 3, "offload_optimizer_device": "none", "offload_param_device": "none"}}
FSDP2 = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "mixed_precision": "bf16",
         "num_machines": 1, "num_processes": 8, "fsdp_config": {"fsdp_version": 2, "fsdp_reshard_after_forward": True,
                                                                "fsdp_activation_checkpointing": True}}


def _load(tmp_path: Path, script: str, files: dict = None, flags: TrainerFlags = TrainerFlags(),
          model: str = "llama3-8b"):
    """(Problem, ReadNotes) of run.sh holding `script`, with `files` (name: dict as JSON/YAML, or text) beside it."""
    for name, body in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        text = body if isinstance(body, str) else (yaml.safe_dump(body) if name.endswith(".yaml") else json.dumps(body))
        (tmp_path / name).write_text(text)
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\n" + script)
    read = ReadNotes()
    return load_native(path, model, "dgx-h100", None, flags, read), read


TRL = ("accelerate launch --num_processes 8 --use_deepspeed --deepspeed_config_file ds.json trl/scripts/sft.py "
       "--model_name_or_path m --per_device_train_batch_size 4 --gradient_accumulation_steps 2 {seq} --bf16 "
       "--output_dir out\n")


def test_trl_max_length_and_its_default_are_the_sequence_length(tmp_path):
    prob, read = _load(tmp_path, TRL.format(seq="--max_length 1024"), {"ds.json": AUTO})
    assert prob.train.seq_length == 1024 and not any(a.startswith("sequence length") for a in read.assumed)
    prob, read = _load(tmp_path, TRL.format(seq="--max-seq-length 2048"), {"ds.json": AUTO})  # older TRL, dashed
    assert prob.train.seq_length == 2048
    prob, read = _load(tmp_path, TRL.format(seq=""), {"ds.json": AUTO})  # TRL's own default, named
    assert prob.train.seq_length == 1024 and any("--max_length" in a and "TRL" in a for a in read.assumed)


def test_dashed_trainer_flags_are_a_trainer_launch(tmp_path):
    script = ("deepspeed --num_gpus=8 run_clm.py --deepspeed ds.json --model-name-or-path m "
              "--per-device-train-batch-size 2 --gradient-accumulation-steps 4 --block-size 4096 --bf16 "
              "--gradient-checkpointing --output-dir o\n")
    prob, _ = _load(tmp_path, script, {"ds.json": AUTO})
    assert (prob.layout.mbs, prob.layout.num_microbatches, prob.layout.recompute) == (2, 4, "full")
    assert (prob.train.seq_length, prob.train.precision, prob.layout.zero) == (4096, "bf16", 3)


FSDP_RUN = ("torchrun --nproc_per_node=8 run_clm.py --model_name_or_path m --per_device_train_batch_size 1 "
            "--gradient_accumulation_steps 4 --block_size 4096 --bf16 --fsdp {fsdp} {extra} --output_dir o\n")


@pytest.mark.parametrize("fsdp, extra, zero, recompute, offload", [
    ('"full_shard auto_wrap"', "", 3, "none", "none"),
    ("shard_grad_op", "--fsdp_config fsdp.json", 2, "full", "none"),
    ('"full_shard offload"', "--gradient_checkpointing", 3, "full", "cpu")])
def test_trainer_fsdp_is_priced_as_fsdp(tmp_path, fsdp, extra, zero, recompute, offload):
    files = {"fsdp.json": {"fsdp_activation_checkpointing": "true", "version": 2}}
    prob, _ = _load(tmp_path, FSDP_RUN.format(fsdp=fsdp, extra=extra), files)
    assert (prob.layout.zero, prob.layout.recompute, prob.train.offload_params) == (zero, recompute, offload)
    assert prob.train.stack_spec.name == "fsdp" and prob.cluster.num_gpus == 8 and prob.layout.mbs == 1
    with pytest.raises(UserError, match="--fsdp 'full_shard sometimes'"):
        _load(tmp_path, FSDP_RUN.format(fsdp='"full_shard sometimes"', extra=""))
    with pytest.raises(UserError, match="--fsdp 'full_shard' with --deepspeed ds.json"):
        _load(tmp_path, FSDP_RUN.format(fsdp="full_shard", extra="--deepspeed ds.json"), {"ds.json": AUTO})


def test_a_plain_torchrun_trainer_is_ddp(tmp_path):
    prob, read = _load(tmp_path, FSDP_RUN.replace("--fsdp {fsdp} {extra} ", ""))
    assert prob.layout.zero == 0 and any("DDP" in n for n in read.notes)


def test_accelerate_config_file_is_followed_and_combined(tmp_path):
    script = ("accelerate launch --config_file configs/zero3.yaml --num_processes 16 --num_machines 2 trl/scripts/"
              "sft.py --per_device_train_batch_size 2 --gradient_accumulation_steps 8 --gradient_checkpointing "
              "--max_length 4096 --bf16 --output_dir o\n")
    prob, _ = _load(tmp_path, script, {"configs/zero3.yaml": ZERO3})
    assert (prob.layout.zero, prob.layout.mbs, prob.layout.num_microbatches, prob.layout.recompute) == (3, 2, 8, "full")
    assert (prob.train.seq_length, prob.train.precision, prob.cluster.num_gpus) == (4096, "bf16", 16)
    fsdp = script.replace("zero3", "fsdp").replace("--gradient_checkpointing ", "")
    prob, _ = _load(tmp_path, fsdp, {"configs/fsdp.yaml": FSDP2})
    assert (prob.layout.zero, prob.layout.recompute, prob.train.stack_spec.name) == (3, "full", "fsdp")
    with pytest.raises(UserError, match="bf16.enabled=true vs --bf16 False"):  # the Trainer refuses this mismatch
        _load(tmp_path, script.replace(" --bf16", ""), {"configs/zero3.yaml": ZERO3})
    with pytest.raises(UserError, match="--config_file nowhere.yaml"):
        _load(tmp_path, script.replace("configs/zero3.yaml", "nowhere.yaml"))


DSCHAT = ("deepspeed main.py --model_name_or_path m --per_device_train_batch_size 2 --max_seq_len 512 "
          "--gradient_accumulation_steps 1 --gradient_checkpointing --offload --dtype bf16 --zero_stage 3 "
          "--deepspeed --output_dir o\n")


def test_deepspeed_chat_builds_its_config_from_its_flags(tmp_path):
    prob, _ = _load(tmp_path, DSCHAT)
    assert (prob.layout.zero, prob.layout.mbs, prob.layout.recompute) == (3, 2, "full")
    assert (prob.train.seq_length, prob.train.precision) == (512, "bf16")
    assert (prob.train.offload_optimizer, prob.train.offload_params) == ("cpu", "cpu")
    prob, read = _load(tmp_path, "deepspeed main.py --model_name_or_path m --zero_stage 2 --deepspeed\n")
    assert (prob.layout.zero, prob.layout.mbs, prob.train.seq_length, prob.train.precision) == (2, 16, 512, "fp16")
    assert any("--max_seq_len 512" in a for a in read.assumed)
    with pytest.raises(UserError, match="DeepSpeed-Chat RLHF.*parplan estimate"):
        _load(tmp_path, "deepspeed main.py --actor_model_name_or_path m --actor_zero_stage 3 --deepspeed\n")


def test_accelerate_deepspeed_file_is_looked_for_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "examples/deepspeed").mkdir(parents=True)
    (tmp_path / "examples/accelerate").mkdir(parents=True)
    (tmp_path / "examples/deepspeed/z3.json").write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    path = tmp_path / "examples/accelerate/ds.yaml"
    named = {"deepspeed_config_file": "examples/deepspeed/z3.json"}
    path.write_text(yaml.safe_dump({**ZERO3, "deepspeed_config": named}))
    monkeypatch.chdir(tmp_path)
    assert load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(micro_batch=1), ReadNotes()).layout.zero == 3
    monkeypatch.chdir(tmp_path / "examples")
    with pytest.raises(UserError, match="examples/examples/deepspeed/z3.json, .*accelerate/examples/deepspeed/z3.json"):
        load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(micro_batch=1), ReadNotes())


def _parallel(tmp_path, **sizes):
    pc = {f"parallelism_config_{k}": v for k, v in sizes.items()}
    path = tmp_path / "acc.yaml"
    path.write_text(yaml.safe_dump({**FSDP2, "parallelism_config": pc}))
    return load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(micro_batch=1), ReadNotes())


def test_accelerate_parallelism_config_sets_tp_cp_and_the_shard_group(tmp_path):
    prob = _parallel(tmp_path, dp_replicate_size=1, dp_shard_size=2, tp_size=2, cp_size=2)
    lay = prob.layout  # dp = 8 / (tp x cp) = 2: the global batch is micro-batch 1 x 2
    assert (lay.tp, lay.cp, lay.cp_comm, lay.shard_group, prob.train.global_batch_size) == (2, 2, "p2p", None, 2)
    prob = _parallel(tmp_path, dp_replicate_size=2, dp_shard_size=4)
    assert (prob.layout.tp, prob.layout.shard_group, prob.train.global_batch_size) == (1, 4, 8)
    with pytest.raises(UserError, match="parallelism_config: dp_replicate x dp_shard x tp x cp = 4, not num_proc"):
        _parallel(tmp_path, dp_shard_size=2, tp_size=2)
    with pytest.raises(UserError, match="parallelism_config_sp_size=2"):
        _parallel(tmp_path, dp_shard_size=4, sp_size=2)
    path = tmp_path / "ds.yaml"  # not silently dropped under DeepSpeed either
    path.write_text(yaml.safe_dump({**ZERO3, "parallelism_config": {"parallelism_config_tp_size": 2}}))
    with pytest.raises(UserError, match="parallelism_config: accelerate 1.15 uses it with FSDP2 only"):
        load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(micro_batch=1), ReadNotes())


@pytest.mark.parametrize("optim, states, note", [("adamw_bnb_8bit", ("adam", "fp8", "fp8"), "2 bytes"),
                                                 ("paged_adamw_8bit", ("adam", "fp8", "fp8"), "paged"),
                                                 ("adafactor", ("sgd", "fp32", "fp32"), "upper bound")])
def test_optim_sets_the_optimizer_states(tmp_path, optim, states, note):
    prob, read = _load(tmp_path, TRL.format(seq=f"--optim {optim}"), {"ds.json": AUTO})
    train = prob.train
    assert (train.optimizer, train.exp_avg_dtype, train.exp_avg_sq_dtype) == states
    said = [n for n in read.notes if f"--optim {optim}" in n]
    assert len(said) == 1 and note in said[0]
    own = {"ds.json": {**AUTO, "optimizer": {"type": "AdamW"}}}  # DeepSpeed's optimizer runs, not --optim
    prob, read = _load(tmp_path, TRL.format(seq=f"--optim {optim}"), own)
    assert prob.train.exp_avg_dtype == "fp32"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_named_file_that_is_no_regular_file_is_said_so(tmp_path, monkeypatch, kind):
    """A --deepspeed JSON (Trainer launch) or an Axolotl `deepspeed:` path that exists but is a FIFO or a folder is
    named as such (safe_read.first_file), not reported "not found" of a path that is there, and never opened."""
    import os  # noqa: PLC0415

    monkeypatch.chdir(tmp_path)
    target = tmp_path / "ds.json"
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    with pytest.raises(UserError, match="ds.json is not a regular file"):
        _load(tmp_path, "deepspeed train.py --deepspeed ds.json --per_device_train_batch_size 1 --bf16\n")
    (tmp_path / "ax.yaml").write_text("base_model: meta-llama/Meta-Llama-3-8B\nmicro_batch_size: 1\n"
                                      "sequence_len: 4096\ndeepspeed: ds.json\n")
    with pytest.raises(UserError, match="ds.json is not a regular file"):
        load_native(tmp_path / "ax.yaml", "llama3-8b", "dgx-h100", None, TrainerFlags(), ReadNotes())
