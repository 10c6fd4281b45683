"""A DeepSpeed JSON whose batch keys fix the GPU count (train_batch_size / (micro x accumulation)) sizes the cluster
in place of the cluster's own node count; the `assumed:` line that says so (planner/frameworks/deepspeed/
config_json.py ds_world_note). Before, `check ds.json --model llama3-8b --cluster dgx-h100` priced 2 nodes for
{"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4} with no word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.files.loading import load_cluster
from planner.files.native import load_native
from planner.frameworks.deepspeed import config_json as dsc
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

FIXED = {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4,
         "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}


def test_the_note_says_how_the_gpu_count_was_derived_and_what_it_replaced():
    one = load_cluster("dgx-h100", 1)
    line = dsc.ds_world_note(FIXED, Path("ds.json"), 1, load_cluster("dgx-h100", 2), one)
    assert line.startswith("16 GPUs (2 node(s)): derived from train_batch_size 256 / (train_micro_batch_size_per_gpu "
                           "4 x gradient_accumulation_steps 4)")
    assert "overriding dgx-h100's 1 node(s) (8 GPUs)" in line and "--nodes" in line
    piped = dsc.ds_world_note({**FIXED, "pipeline": {"stages": 2}}, Path("ds.json"), 2, load_cluster("dgx-h100", 4),
                              one)
    assert piped.startswith("32 GPUs (4 node(s))") and "x pipeline.stages*sequence_parallel_size 2" in piped
    two = load_cluster("dgx-h100", 2)
    assert "as many as dgx-h100 has" in dsc.ds_world_note(FIXED, Path("ds.json"), 1, two, two)
    small = {**FIXED, "train_batch_size": 64}  # 4 GPUs: part of one node, still a change
    part = dsc.ds_world_note(small, Path("ds.json"), 1, load_cluster("dgx-h100", gpus=4), one)
    assert part.startswith("4 GPUs") and "overriding dgx-h100's 1 node(s) (8 GPUs)" in part


def test_no_note_where_the_keys_do_not_fix_the_count():
    unfixed = {k: v for k, v in FIXED.items() if k != "train_batch_size"}
    one = load_cluster("dgx-h100", 1)
    assert dsc.ds_world_note(unfixed, Path("ds.json"), 1, one, one) is None


def test_check_says_the_cluster_was_sized_by_the_batch_keys(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(FIXED))
    read = ReadNotes()
    prob = load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(), read)
    assert prob.cluster.num_gpus == 16
    assert any("derived from train_batch_size 256" in a for a in read.assumed), read.assumed
