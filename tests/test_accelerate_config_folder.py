"""A file an `accelerate launch` Trainer/TRL script names that is there but is a folder or a FIFO: `parplan check`
exits 2 naming the script, the option that names it and its path as not a regular file (safe_read.first_file),
never "not found" of a path that is there, and never opens it. Sources: accelerate 1.15.0 commands/launch.py
(--config_file, --deepspeed_config_file, deepspeed_config.deepspeed_config_file), transformers 5.24.0
training_args.py (--fsdp_config)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from cli_check import run_check, write_config

ARGS = ("--model", "llama3-8b", "--cluster", "dgx-h100")
TRAIN = ("trl/scripts/sft.py --per_device_train_batch_size 2 --gradient_accumulation_steps 8 --max_length 4096 "
         "--bf16 --output_dir o")
ZERO3 = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "DEEPSPEED", "mixed_precision": "bf16",
         "num_machines": 1, "num_processes": 8, "deepspeed_config": {"zero_stage": 3}}


def _not_a_file(path: Path, kind: str) -> Path:
    """`path` made a folder or a FIFO, as `kind` says."""
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    return path


def _refused(tmp_path: Path, launch: str, option: str, name: str) -> None:
    """`parplan check` of run.sh holding `launch` exits 2 saying the option with the `name` it is given, and that
    tmp_path / name (where it is) is not a regular file."""
    code, message = run_check(write_config(tmp_path, f"#!/bin/bash\n{launch}\n"), *ARGS)
    assert code == 2, message
    assert f"{option} {name}: " in message and f"{tmp_path / name} is not a regular file" in message, message
    assert "is not a regular file (a directory" in message and "not found" not in message, message


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Run from tmp_path: accelerate opens a relative file from the working directory."""
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_config_file_that_is_a_folder_or_fifo_is_named_with_its_option(tmp_path, kind):
    _not_a_file(tmp_path / "configs", kind)
    _refused(tmp_path, f"accelerate launch --config_file {tmp_path / 'configs'} {TRAIN}",
             "accelerate launch --config_file", str(tmp_path / "configs"))


def test_relative_config_file_folder_beside_the_script(tmp_path):
    _not_a_file(tmp_path / "zero3.yaml", "directory")
    _refused(tmp_path, f"accelerate launch --config_file zero3.yaml {TRAIN}", "accelerate launch --config_file",
             "zero3.yaml")


def test_deepspeed_config_file_option_that_is_a_folder(tmp_path):
    _not_a_file(tmp_path / "ds.json", "directory")
    launch = f"accelerate launch --num_processes 8 --use_deepspeed --deepspeed_config_file ds.json {TRAIN}"
    _refused(tmp_path, launch, "accelerate launch --deepspeed_config_file", "ds.json")


def test_fsdp_config_that_is_a_folder(tmp_path):
    _not_a_file(tmp_path / "fsdp.json", "directory")
    launch = f"accelerate launch --num_processes 8 --multi_gpu {TRAIN} --fsdp full_shard --fsdp_config fsdp.json"
    _refused(tmp_path, launch, "--fsdp_config", "fsdp.json")


def test_deepspeed_config_file_in_the_yaml_that_is_a_folder(tmp_path):
    """The accelerate YAML's deepspeed_config.deepspeed_config_file naming a folder (accelerate_yaml.config_file)."""
    _not_a_file(tmp_path / "z3.json", "directory")
    (tmp_path / "zero3.yaml").write_text(yaml.safe_dump({**ZERO3, "deepspeed_config": {
        "deepspeed_config_file": "z3.json"}}))
    code, message = run_check(write_config(tmp_path, f"#!/bin/bash\naccelerate launch --config_file zero3.yaml "
                                                     f"{TRAIN}\n"), *ARGS)
    assert code == 2, message
    assert "deepspeed_config_file='z3.json'" in message and str(tmp_path / "z3.json") in message, message
    assert "is not a regular file (a directory" in message and "not found" not in message, message


def test_a_missing_config_file_is_still_not_found(tmp_path):
    code, message = run_check(write_config(tmp_path, f"#!/bin/bash\naccelerate launch --config_file nowhere.yaml "
                                                     f"{TRAIN}\n"), *ARGS)
    assert code == 2 and "--config_file nowhere.yaml: not written by the script and not found" in message, message
