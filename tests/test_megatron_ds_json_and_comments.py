"""Megatron-DeepSpeed's --deepspeed_config read from disk (beside the script, then the current directory),
met with the flags (the JSON wins, with a warning naming both values); and a comment that ends a
backslash-continued command (bash ends it there) said, naming the line. Each test fails without its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.files.native import load_native
from planner.files.shellread import read_script

MDS = """#!/bin/bash
deepspeed --num_gpus 8 pretrain_gpt.py \\
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --no-pipeline-parallel \\
    --num-layers 40 --hidden-size 5120 --num-attention-heads 40 \\
    --seq-length 2048 --max-position-embeddings 2048 \\
    --micro-batch-size 1 --global-batch-size 64 {precision} {extra} \\
    --tokenizer-type GPT2BPETokenizer --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt \\
    --deepspeed --deepspeed_config {config} --checkpoint-activations
"""
ZERO3 = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
         "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}


def _setup(folder: Path, cfg: dict, precision: str = "--bf16", extra: str = "", config: str = "ds.json",
           json_folder: Path = None) -> Path:
    for where in (folder, json_folder or folder):
        where.mkdir(parents=True, exist_ok=True)
    (json_folder or folder).joinpath(Path(config).name).write_text(json.dumps(cfg))
    script = folder / "run.sh"
    script.write_text(MDS.format(precision=precision, extra=extra, config=config))
    return script


def test_zero_stage_is_read_from_the_json_beside_the_script(tmp_path, capsys):
    prob = load_native(_setup(tmp_path, ZERO3), None, "dgx-a100", None)
    assert prob.layout.zero == 3 and prob.layout.mbs == 1 and prob.train.global_batch_size == 64
    err = capsys.readouterr().err
    assert f"read {tmp_path / 'ds.json'}" in err and "is not written by the script" not in err


def test_the_json_is_looked_for_in_the_current_directory_too(tmp_path, monkeypatch):
    script = _setup(tmp_path / "scripts", ZERO3, json_folder=tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    assert load_native(script, None, "dgx-a100", None).layout.zero == 3


def test_flags_that_disagree_with_the_json_lose_with_a_warning(tmp_path, capsys):
    cfg = {**ZERO3, "train_batch_size": 128, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8}
    prob = load_native(_setup(tmp_path, cfg, extra="--zero-stage 1"), None, "dgx-a100", None)
    assert (prob.layout.zero, prob.layout.mbs, prob.train.global_batch_size) == (3, 2, 128)
    err = capsys.readouterr().err
    assert "--zero-stage 1 and ds.json zero_optimization.stage=3 disagree: 3 is priced" in err
    assert "--micro-batch-size 1 and ds.json train_micro_batch_size_per_gpu=2 disagree" in err
    assert "--global-batch-size 64 and ds.json train_batch_size=128 disagree" in err


def test_precision_gradient_accumulation_and_offload_come_from_the_json(tmp_path):
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "fp16": {"enabled": True},
           "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    script = _setup(tmp_path, cfg, precision="")
    script.write_text(script.read_text().replace("--global-batch-size 64 ", ""))
    prob = load_native(script, None, "dgx-a100", None)
    assert prob.train.precision == "fp16" and prob.train.offload_optimizer == "cpu"
    assert (prob.layout.zero, prob.layout.num_microbatches, prob.train.global_batch_size) == (2, 4, 32)


def test_a_json_found_nowhere_is_still_said(tmp_path, capsys):
    script = _setup(tmp_path, ZERO3, config="elsewhere/missing.json", json_folder=tmp_path / "other")
    prob = load_native(script, None, "dgx-a100", None)
    assert prob.layout.zero == 1  # --bf16 with stage 0: DeepSpeed's BF16_Optimizer, said
    err = capsys.readouterr().err
    assert "is not written by the script nor found beside it" in err
    assert "ZeRO stage 0 with bf16 priced as zero=1: DeepSpeed's BF16_Optimizer" in err


# ---- 6. a comment inside a continued command ------------------------------------------------------

CUT = """#!/bin/bash
# header
torchrun pretrain_gpt.py \\
    --num-layers 2 \\
    # --pipeline-model-parallel-size 2 \\
    --micro-batch-size 2
"""


@pytest.mark.parametrize("text", [
    "A=( --num-layers 2 \\\n  # a comment in an array \\\n  --hidden-size 8 )\n",  # bash reads arrays on
    "torchrun pretrain_gpt.py --num-layers 2\n# a comment of its own\n--not-a-continuation\n",
    "torchrun pretrain_gpt.py \\\n    --num-layers 2 \\\n    # the end\necho done\n",
])
def test_a_comment_ending_a_continued_command_is_said_with_its_line_and_no_other(text):
    sh = read_script(CUT, every_branch=False)
    assert any(w.startswith("line 5: a comment ends the command begun on line 3") and
               "the flags after it are not part of it" in w for w in sh.warnings), sh.warnings
    assert ["torchrun", "pretrain_gpt.py", "--num-layers", "2"] in sh.commands  # bash's reading is kept
    assert not [w for w in read_script(text, every_branch=False).warnings if "a comment ends" in w]
