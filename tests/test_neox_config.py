"""`parplan check` on GPT-NeoX (EleutherAI/gpt-neox: NeoX-20B, Pythia, Llemma) configs and `deepy.py train.py`
launch lines (planner/files/other_tools.py, other_tools_runs.neox_run). Before, a NeoX config was refused as a
broken plan file ("does not look like a parplan plan file ... nor like any config parplan reads") and a deepy.py
line was read as a Megatron script."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import UserError
from planner.files import loading
from planner.files.native import config_kind, is_native, load_native
from planner.files.other_tools import yaml_tool
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

# EleutherAI/gpt-neox configs/20B.yml as published (abridged): flow style, comments, `True`, trailing commas
NEOX_20B = """\
# DISCLAIMER: This is the configuration file for the GPT-NeoX-20B model as it was trained on 96x 40GB A100
# GPUs. Depending on your system configuration, you may need to change some parameters in order to fit
# the model in memory.
{
  "vocab-file": "./20B_checkpoints/20B_tokenizer.json",
  "save": "./20B_checkpoints",
  "load": "./20B_checkpoints",
  "pipe-parallel-size": 4,
  "model-parallel-size": 2,
  "num-layers": 44,
  "hidden-size": 6144,
  "num-attention-heads": 64,
  "seq-length": 2048,
  "max-position-embeddings": 2048,
  "norm": "layernorm",
  "pos-emb": "rotary",
  "rotary_pct": 0.25,
  "no-weight-tying": true,
  "gpt_j_residual": true,
  "output_layer_parallelism": "column",
  "scaled-upper-triang-masked-softmax-fusion": true,
  "bias-gelu-fusion": true,
  "init_method": "small_init",
  "output_layer_init_method": "wang_init",
  "optimizer": {
    "type": "Adam",
    "params": {
      "lr": 0.97e-4,
      "betas": [0.9, 0.95],
      "eps": 1.0e-8,
      }
      },
  "min_lr": 0.97e-5,
  "zero_optimization": {
  "stage": 1,
  "allgather_partitions": True,
  "allgather_bucket_size": 1260000000,
  "overlap_comm": True,
  "reduce_scatter": True,
  "reduce_bucket_size": 1260000000,
  "contiguous_gradients": True,
  },
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 32,
  "data-impl": "mmap",
  "split": "995,4,1",
  "checkpoint-activations": true,
  "checkpoint-num-layers": 1,
  "partition-activations": false,
  "synchronize-each-layer": true,
  "gradient_clipping": 1.0,
  "weight-decay": 0.01,
  "hidden-dropout": 0,
  "attention-dropout": 0,
  "fp16": {
    "fp16": true,
    "enabled": true,
    "loss_scale": 0,
    "loss_scale_window": 1000,
    "initial_scale_power": 12,
    "hysteresis": 2,
    "min_loss_scale": 1
    },
  "train-iters": 150000,
  "lr-decay-iters": 150000,
  "distributed-backend": "nccl",
  "lr-decay-style": "cosine",
  "warmup": 0.01,
  "checkpoint-factor": 500,
  "eval-interval": 1000,
  "eval-iters": 10,
  "log-interval": 2,
  "steps_per_print": 2,
  "wall_clock_breakdown": false,
  "tokenizer_type": "HFTokenizer",
  "tensorboard-dir": "./tensorboard",
  "log-dir": "./logs",
}
"""
COMMAND_20B = ("parplan estimate MODEL --cluster CLUSTER --layout tp=2,pp=4,zero=1,mbs=4,recompute=full "
               "--seq-len 2048 --precision fp16`")
SHAPE_20B = "num_layers 44, hidden_size 6144, num_attention_heads 64, seq_length 2048"

# A Pythia-style config (EleutherAI/pythia models/1B/pythia-1b.yml's keys), block style
PYTHIA = """\
# GPT-2 pretraining setup
"pipe-parallel-size": 1
"model-parallel-size": 1
"num-layers": 16
"hidden-size": 2048
"num-attention-heads": 8
"seq-length": 2048
"max-position-embeddings": 2048
"pos-emb": "rotary"
"rotary-pct": 0.25
"no-weight-tying": true
"gpt-j-residual": true
"output-layer-parallelism": "column"
"train_micro_batch_size_per_gpu": 16
"gradient_accumulation_steps": 1
"zero_optimization":
  "stage": 1
  "allgather_partitions": true
  "overlap_comm": true
"fp16":
  "enabled": true
  "loss_scale": 0
"checkpoint-activations": true
"""

LOCAL_SETUP = '{\n  "data-path": "data/enwik8/enwik8_text_document",\n  "num_gpus": 8,\n  "num_nodes": 12,\n}\n'
SPEC = {"name": "tiny-neox", "num_layers": 8, "hidden_size": 1024, "num_attention_heads": 8, "vocab_size": 50432,
        "seq_length": 2048}


def _write(folder, name: str, text: str):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _check(path, *more):
    result = CliRunner().invoke(app, ["check", str(path), *more])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    return said


def _error(path) -> str:
    with pytest.raises(UserError) as err:
        load_native(path, "llama3-8b", "dgx-a100", None, TrainerFlags(), ReadNotes())
    return str(err.value)


def test_the_neox_20b_config_is_refused_by_name_with_the_estimate_command(tmp_path):
    path = _write(tmp_path, "20B.yml", NEOX_20B)
    assert is_native(path) and yaml_tool(loading.read_mapping(path)) == "neox"
    said = _check(path)
    assert "a GPT-NeoX config" in said and COMMAND_20B in said and SHAPE_20B in said
    assert "does not look like" not in said and "--global-batch: train_micro_batch_size_per_gpu 4 x " \
        "gradient_accumulation_steps 32" in said
    with pytest.raises(UserError, match="a GPT-NeoX config.*not a parplan plan file"):
        loading.load_plan(path)  # e.g. given to `parplan estimate`


def test_a_pythia_block_style_config_with_dashed_keys(tmp_path):
    said = _error(_write(tmp_path, "pythia-1b.yml", PYTHIA))
    assert ("GPT-NeoX" in said and "--layout zero=1,mbs=16,recompute=full --seq-len 2048 --precision fp16`" in said
            and "num_layers 16, hidden_size 2048, num_attention_heads 8, seq_length 2048" in said)


@pytest.mark.parametrize("change, needle", [
    ({"precision": "bfloat16", "fp16": None}, "--precision bf16"),
    ({"fp16": None, "bf16": {"enabled": True}}, "--precision bf16"),
    ({"fp16": None}, "--precision fp32"),
    ({"checkpoint-activations": False, "zero_optimization": None}, "--layout mbs=16,recompute=none "),
    ({"model-parallel-size": 4, "sequence_parallel": True}, "--layout tp=4,zero=1,mbs=16,recompute=full,sp=1 "),
    ({"moe_num_experts": 8, "moe_expert_parallel_size": 2, "pipe-parallel-size": 0}, "--layout ep=2,zero=1,mbs=16,"),
    ({"train_batch_size": 512}, "--global-batch 512"),
    ({"num_gpus": 8, "num_nodes": 2, "gradient_accumulation_steps": 4}, "--gpus 16 --layout"),
    ({"num_gpus": 8, "num_nodes": 2, "gradient_accumulation_steps": 4}, "--global-batch 1024`"),
    ({"pipe-parallel-size": "x", "train_micro_batch_size_per_gpu": [1], "seq-length": -1, "precision": 7},
     "--layout zero=1,recompute=full` (MODEL"),
])
def test_neox_values_and_odd_ones(tmp_path, change, needle):
    data = {**yaml.safe_load(PYTHIA), **change}
    said = _error(_write(tmp_path, "cfg.yml", yaml.safe_dump({k: v for k, v in data.items() if v is not None})))
    assert "GPT-NeoX" in said and needle in said


def test_the_printed_command_runs(tmp_path):
    said = _check(_write(tmp_path, "20B.yml", NEOX_20B))
    words = shlex.split(re.search(r"`(parplan estimate [^`]+)`", said).group(1))
    spec = _write(tmp_path, "tiny.json", json.dumps(SPEC))
    args = [str(spec) if w == "MODEL" else "dgx-a100" if w == "CLUSTER" else w for w in words[1:]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), result.output


def test_the_deepy_launch_line_follows_its_configs_merged(tmp_path):
    _write(tmp_path, "configs/20B.yml", NEOX_20B)
    _write(tmp_path, "configs/local_setup.yml", LOCAL_SETUP)
    script = _write(tmp_path, "train.sh",
                    "#!/bin/bash\npython ./deepy.py train.py -d configs 20B.yml local_setup.yml\n")
    assert is_native(script)
    said = _check(script, "--cluster", "dgx-a100")
    assert "`deepy.py train.py ...` is a GPT-NeoX launch" in said and "Megatron needs" not in said
    assert ("parplan estimate MODEL --cluster dgx-a100 --gpus 96 --layout tp=2,pp=4,zero=1,mbs=4,recompute=full "
            "--seq-len 2048 --precision fp16 --global-batch 1536`") in said and SHAPE_20B in said
    assert "not found" not in said


def test_a_deepy_line_naming_one_config_and_a_missing_one(tmp_path):
    _write(tmp_path, "configs/pythia-1b.yml", PYTHIA)
    one = _write(tmp_path, "one.sh", "deepy.py train.py configs/pythia-1b.yml\n")
    said = _error(one)
    assert "GPT-NeoX launch" in said and "--layout zero=1,mbs=16,recompute=full --seq-len 2048" in said
    part = _error(_write(tmp_path, "part.sh", "python deepy.py train.py --conf_dir configs pythia-1b.yml gone.yml\n"))
    assert "mbs=16" in part and "configs/gone.yml was not found" in part and "its values are not filled in" in part
    none = _error(_write(tmp_path, "none.sh", "python deepy.py train.py -d configs a.yml b.yml\n"))
    assert "configs/a.yml, configs/b.yml were not found" in none and "--layout tp=...,pp=...,mbs=..." in none


DS_JSON = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8, "zero_optimization": {"stage": 1},
           "fp16": {"enabled": True}, "gradient_clipping": 1.0}


def test_a_deepspeed_json_with_neox_like_sections_is_still_deepspeed(tmp_path):
    path = _write(tmp_path, "ds.json", json.dumps(DS_JSON))
    assert is_native(path) and config_kind(path) == "deepspeed"
    prob = load_native(path, "llama3-8b", "dgx-a100", None, TrainerFlags(), ReadNotes())
    assert (prob.layout.zero, prob.layout.mbs, prob.train.precision) == (1, 4, "fp16")
    assert yaml_tool(DS_JSON) is None
    assert yaml_tool({**DS_JSON, "pipe-parallel-size": 1}) is None  # a parallel size alone: no NeoX model key


OTHERS = {
    "axolotl": {"base_model": "NousResearch/Meta-Llama-3.1-8B", "micro_batch_size": 2, "sequence_len": 4096},
    "llamafactory": {"model_name_or_path": "meta-llama/Meta-Llama-3-8B", "stage": "sft", "cutoff_len": 2048},
    "torchtune": {"model": {"_component_": "torchtune.models.llama3_1.llama3_1_8b"}, "batch_size": 2},
    "nemo1": {"trainer": {"devices": 8}, "exp_manager": {}, "model": {"num_layers": 32, "tensor_model_parallel_size": 2,
                                                                     "pipeline_model_parallel_size": 2}},
    "nanotron": {"general": {"project": "x"}, "parallelism": {"dp": 2, "tp": 2, "pp": 2},
                 "tokens": {"sequence_length": 2},
                 "model": {"model_config": {"num_hidden_layers": 2, "hidden_size": 64}}},
    "levanter": {"trainer": {"mp": "p=f32,c=bfloat16", "model_axis_size": 2}, "model": {"type": "llama"}},
    "maxtext": {"base_config": "base.yml", "model_name": "llama3-8b", "ici_tensor_parallelism": 2},
    None: {"distributed_type": "DEEPSPEED", "num_processes": 8, "deepspeed_config": {"zero_stage": 3}},
}
NOT_NEOX = {
    "plan file": {"model": {"num_layers": 44, "hidden_size": 6144, "num_attention_heads": 64}, "cluster": "dgx-a100",
                  "train": {"seq_length": 2048}, "layout": {"tp": 2, "pp": 4}, "model_parallel_size": 2},
    "model spec": {"name": "x", "num_layers": 44, "hidden_size": 6144, "num_attention_heads": 64, "seq_length": 2048},
    "Megatron YAML": {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 4, "num_layers": 44,
                      "hidden_size": 6144, "micro_batch_size": 4},
    "DeepSpeed YAML": DS_JSON,
}


@pytest.mark.parametrize("tool", OTHERS)
def test_every_other_tool_is_still_itself(tool):
    assert yaml_tool(OTHERS[tool]) == tool


@pytest.mark.parametrize("kind", NOT_NEOX)
def test_what_is_no_neox_config_is_not_caught(tmp_path, kind):
    assert yaml_tool(NOT_NEOX[kind]) is None
    said = " ".join(CliRunner().invoke(app, ["check", str(_write(tmp_path, "x.yaml", yaml.safe_dump(NOT_NEOX[kind]))),
                                             "--cluster", "dgx-a100"]).output.split())
    assert "GPT-NeoX" not in said and "Traceback" not in said
