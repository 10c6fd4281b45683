"""`parplan check` on other training tools' configs and launch lines (planner/files/other_tools.py,
planner/files/finetune_yaml.py). Before, an Axolotl, LLaMA-Factory, torchtune, NeMo 1.x, Nanotron, Levanter or MaxText
YAML was refused as a broken plan file ("does not look like a parplan plan file", "unknown plan-file keys"), and their
launch scripts were read as Megatron ("--micro-batch-size is missing (Megatron needs it)")."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import UserError
from planner.files import loading
from planner.files.native import config_kind, is_native, load_native
from planner.files.other_tools import preset_for
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

ZERO3 = {"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
         "gradient_accumulation_steps": "auto", "train_batch_size": "auto"}
AXOLOTL = {"base_model": "NousResearch/Meta-Llama-3.1-8B", "datasets": [{"path": "tatsu-lab/alpaca"}],
           "sequence_len": 4096, "micro_batch_size": 2, "gradient_accumulation_steps": 4, "bf16": "auto",
           "gradient_checkpointing": True, "optimizer": "adamw_bnb_8bit", "deepspeed": "ds.json"}
LLAMAFACTORY = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "stage": "sft", "finetuning_type": "full",
                "deepspeed": "examples/deepspeed/ds_z3.json", "cutoff_len": 2048, "per_device_train_batch_size": 1,
                "gradient_accumulation_steps": 2, "bf16": True}


def _write(folder, name: str, doc) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc) if name.endswith(".yaml") else json.dumps(doc))
    return path


def _load(path, model="llama3-8b", flags=TrainerFlags()):
    read = ReadNotes()
    return load_native(path, model, "dgx-h100", None, flags, read), read


def _error(path, model="llama3-8b") -> str:
    with pytest.raises(UserError) as err:
        _load(path, model)
    return str(err.value)


def test_axolotl_yaml_gives_the_same_run_as_the_trainer_launch_it_stands_for(tmp_path):
    _write(tmp_path, "ds.json", ZERO3)
    yaml_path = _write(tmp_path, "fft.yaml", AXOLOTL)
    script = _write(tmp_path, "run.sh", "deepspeed --num_gpus 8 train.py --deepspeed ds.json --bf16 "
                    "--per_device_train_batch_size 2 --gradient_accumulation_steps 4 --gradient_checkpointing "
                    "--model_max_length 4096 --optim adamw_bnb_8bit --model_name_or_path x\n")
    assert is_native(yaml_path) and config_kind(yaml_path) == "deepspeed"
    (yml, read), (sh, _) = _load(yaml_path, model=None), _load(script)
    assert yml.layout == sh.layout and yml.train == sh.train and yml.model == sh.model
    assert (yml.layout.zero, yml.layout.mbs, yml.layout.num_microbatches, yml.layout.recompute) == (3, 2, 4, "full")
    assert (yml.train.precision, yml.train.seq_length, yml.train.exp_avg_dtype) == ("bf16", 4096, "fp8")
    assert any("llama3-8b" in n and "Meta-Llama-3.1-8B" in n for n in read.notes)  # the Hub id matched a preset
    assert any("bf16: auto" in a for a in read.assumed)


def test_axolotl_fsdp2_and_ddp_and_the_defaults_it_takes(tmp_path):
    fsdp = {k: v for k, v in AXOLOTL.items() if k not in ("deepspeed", "gradient_checkpointing", "optimizer")}
    fsdp.update(fsdp_version=2, fsdp_config={"reshard_after_forward": True, "activation_checkpointing": True,
                                             "fsdp_offload_params": True})
    prob, read = _load(_write(tmp_path, "fsdp.yaml", fsdp))
    assert (prob.layout.zero, prob.layout.recompute, prob.train.offload_params, prob.train.stack_spec.name) == (
        3, "full", "cpu", "fsdp")
    bare = {"base_model": "meta-llama/Meta-Llama-3-8B", "datasets": []}
    prob, read = _load(_write(tmp_path, "bare.yaml", bare), model=None)
    assert (prob.layout.zero, prob.layout.mbs, prob.layout.num_microbatches, prob.train.seq_length) == (0, 1, 1, 512)
    assert config_kind(tmp_path / "bare.yaml") == "fsdp"
    assert any("sequence_len not set: Axolotl's default 512" in a for a in read.assumed)


@pytest.mark.parametrize("change, needle", [({"adapter": "lora"}, "adapter: lora"),
                                            ({"adapter": "qlora", "load_in_4bit": True}, "adapter: qlora"),
                                            ({"load_in_8bit": True}, "load_in_8bit")])
def test_axolotl_lora_is_refused_by_name(tmp_path, change, needle):
    said = _error(_write(tmp_path, "lora.yaml", {**AXOLOTL, **change}))
    assert needle in said and "full training" in said and "Axolotl" in said


def test_llamafactory_yaml_reads_its_json_from_the_repository_root_and_refuses_lora(tmp_path):
    _write(tmp_path, "examples/deepspeed/ds_z3.json", ZERO3)
    path = _write(tmp_path, "examples/train_full/sft.yaml", LLAMAFACTORY)
    prob, read = _load(path, model=None)  # cwd is not the repository root: found two folders above the YAML
    assert (prob.layout.zero, prob.layout.mbs, prob.layout.num_microbatches, prob.layout.recompute) == (3, 1, 2, "full")
    assert (prob.train.seq_length, prob.train.precision) == (2048, "bf16")
    assert any("read from" in n for n in read.notes) and any("gradient checkpointing on" in a for a in read.assumed)
    lora = {k: v for k, v in LLAMAFACTORY.items() if k != "finetuning_type"}
    assert "finetuning_type: lora (LLaMA-Factory's default)" in _error(_write(tmp_path, "lora.yaml", lora))


def test_a_hub_id_that_is_no_preset_needs_model(tmp_path):
    _write(tmp_path, "ds.json", ZERO3)
    said = _error(_write(tmp_path, "own.yaml", {**AXOLOTL, "base_model": "acme/secret-13b"}), model=None)
    assert "--model is required" in said and "acme/secret-13b" in said and "Hub" in said


@pytest.mark.parametrize("name, preset", [("NousResearch/Meta-Llama-3.1-8B", "llama3-8b"),
                                          ("meta-llama/Llama-2-7b-chat-hf", "llama2-7b"),
                                          ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
                                          ("llama3_1_405b", "llama3.1-405b"), ("llama31_405b", "llama3.1-405b"),
                                          ("Qwen/Qwen3-32B", "qwen3-32b"), ("llama3_2_1b", None), ("gpt2", None)])
def test_tool_model_names_match_presets_of_the_same_shapes(name, preset):
    assert preset_for(name) == preset


REFUSED = {
    "torchtune": ({"model": {"_component_": "torchtune.models.llama3_1.llama3_1_8b"}, "batch_size": 2, "dtype": "bf16",
                   "enable_activation_checkpointing": True, "tokenizer": {"max_seq_len": 4096}},
                  "parplan estimate llama3-8b --cluster dgx-h100 --stack fsdp --layout zero=3,mbs=2,recompute=full "
                  "--seq-len 4096 --precision bf16"),
    "NeMo 1.x": ({"trainer": {"devices": 8, "num_nodes": 2, "precision": "bf16-mixed"}, "exp_manager": {},
                  "model": {"micro_batch_size": 1, "global_batch_size": 64, "tensor_model_parallel_size": 4,
                            "encoder_seq_length": 4096, "num_layers": 32, "optim": {"name": "distributed_fused_adam"}}},
                 "--gpus 16 --layout tp=4,mbs=1,zero=1,recompute=none --seq-len 4096 --precision bf16 --global-batch 64"),
    "Nanotron": ({"general": {"project": "x"}, "parallelism": {"dp": 2, "tp": 2, "pp": 1},
                  "tokens": {"micro_batch_size": 2, "sequence_length": 256, "batch_accumulation_per_replica": 4},
                  "model": {"dtype": "bfloat16"}}, "--gpus 4 --layout tp=2,dp=2,mbs=2 --seq-len 256"),
    "Levanter": ({"trainer": {"mp": "p=f32,c=bfloat16", "train_batch_size": 256, "per_device_parallelism": 4},
                  "model": {"type": "llama"}}, "--layout zero=3,mbs=4,recompute=full --seq-len 2048 --precision bf16"),
    "MaxText": ({"base_config": "base.yml", "model_name": "llama3-8b", "per_device_batch_size": 4,
                 "max_target_length": 8192, "ici_fsdp_parallelism": -1},
                "parplan estimate llama3-8b --cluster dgx-h100 --stack fsdp --layout zero=3,mbs=4,recompute=full"),
}


@pytest.mark.parametrize("tool", REFUSED)
def test_other_tools_yaml_is_refused_by_name_with_the_estimate_command(tmp_path, tool):
    doc, command = REFUSED[tool]
    path = _write(tmp_path, "cfg.yaml", doc)
    said = _error(path)
    assert is_native(path) and tool in said and command in said and "does not look like" not in said


SCRIPTS = {
    "torchtune": "tune run --nproc_per_node 8 full_finetune_distributed --config llama3_1/8B_full batch_size=4",
    "ColossalAI": "colossalai run --nproc_per_node 8 pretrain.py --plugin gemini --batch_size 16 --max_length 4096",
    "ColossalAI ": "torchrun --standalone --nproc_per_node 8 benchmark.py -c 7b -p 3d --tp 2 --pp 2 -l 4096 -g --mbs 1",
    "Nanotron": "torchrun --nproc_per_node=8 run_train.py --config-file examples/config_tiny_llama.yaml",
    "MaxText": "python3 -m MaxText.train MaxText/configs/base.yml model_name=llama3-8b per_device_batch_size=4",
    "NeMo 2": "nemo llm pretrain --factory llama3_8b trainer.devices=8 trainer.strategy.tensor_model_parallel_size=2",
    "Levanter": "python -m levanter.main.train_lm --config_path config/llama2_7b.yaml --trainer.train_batch_size 256",
}


@pytest.mark.parametrize("tool", SCRIPTS)
def test_other_tools_launch_lines_are_refused_by_name_not_read_as_megatron(tmp_path, tool):
    said = _error(_write(tmp_path, "run.sh", "#!/bin/bash\n" + SCRIPTS[tool] + "\n"))
    assert f"is a {tool.strip()}" in said and "parplan estimate" in said and "Megatron needs" not in said


def test_llamafactory_and_axolotl_lines_follow_their_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "examples/deepspeed/ds_z3.json", ZERO3)
    _write(tmp_path, "examples/train_full/sft.yaml", LLAMAFACTORY)
    lf = _write(tmp_path, "lf.sh", "NNODES=2 llamafactory-cli train examples/train_full/sft.yaml "
                "per_device_train_batch_size=4\n")
    prob, _ = _load(lf, model=None)
    assert (prob.cluster.num_nodes, prob.layout.mbs, config_kind(lf)) == (2, 4, "deepspeed")
    _write(tmp_path, "ds.json", ZERO3)
    _write(tmp_path, "fft.yaml", {k: v for k, v in AXOLOTL.items() if k != "deepspeed"})
    axo = _write(tmp_path, "axo.sh", "accelerate launch --num_processes 16 --num_machines 2 -m axolotl.cli.train "
                 "fft.yaml --deepspeed ds.json --micro-batch-size 1\n")
    prob, _ = _load(axo, model=None)
    assert (prob.cluster.num_gpus, prob.layout.zero, prob.layout.mbs) == (16, 3, 1)
    missing = _write(tmp_path, "gone.sh", "axolotl train nowhere.yaml\n")
    assert "nowhere.yaml" in _error(missing) and "Axolotl" in _error(missing)


def test_a_yaml_parplan_does_not_know_names_what_check_reads(tmp_path):
    other = _write(tmp_path, "other.yaml", {"foo": 1, "bar": 2})
    with pytest.raises(UserError, match="check reads .*Axolotl and LLaMA-Factory YAML"):
        loading.load_plan(other)
    with pytest.raises(UserError, match="unknown plan-file keys.*check reads"):
        loading.load_plan(_write(tmp_path, "half.yaml", {"model": "llama3-8b", "foo": 1}))
    with pytest.raises(UserError, match="a torchtune config.*not a parplan plan file"):
        loading.load_plan(_write(tmp_path, "tt.yaml", REFUSED["torchtune"][0]))  # e.g. given to `parplan estimate`


def test_check_cli_prices_an_axolotl_yaml(tmp_path):
    _write(tmp_path, "ds.json", ZERO3)
    path = _write(tmp_path, "fft.yaml", AXOLOTL)
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        result = CliRunner().invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--json"])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    read = json.loads(result.stdout)["read"]["train"]
    assert (read["seq_length"], read["precision"], read["global_batch_size"]) == (4096, "bf16", 64)
