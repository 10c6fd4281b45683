"""NeMo 2 refusals that say what to do next (planner/files/other_tools_launch.py). Before, a NeMo 2 recipe .py file got
"not a plan file, Megatron script/argument file (no --num-layers), DeepSpeed JSON or torchtitan TOML", and the
`nemo llm pretrain ...` refusal handed over a `parplan estimate` command without saying that estimate exits 0 whether
or not the layout fits, which a CI gate built on it would never notice."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli_check import run_check
from planner.cli import app
from planner.errors import UserError
from planner.files.native import load_native
from planner.files.other_tools_launch import refuse_recipe
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

NEMO2_RECIPE = '''import nemo_run as run
from nemo.collections import llm

def configure_recipe(nodes: int = 8, gpus_per_node: int = 8):
    recipe = llm.llama3_70b.pretrain_recipe(dir="/checkpoints/llama3", name="llama3_70b_pretraining",
                                            num_nodes=nodes, num_gpus_per_node=gpus_per_node)
    recipe.trainer.strategy.tensor_model_parallel_size = 4
    recipe.trainer.strategy.pipeline_model_parallel_size = 4
    recipe.trainer.strategy.sequence_parallel = True
    recipe.data.micro_batch_size = 1
    recipe.data.global_batch_size = 512
    recipe.data.seq_length = 8192
    return recipe

if __name__ == "__main__":
    run.run(configure_recipe(), executor=run.LocalExecutor(ntasks_per_node=8, launcher="torchrun"))
'''
BRIDGE_RECIPE = '''from megatron.bridge.recipes.llama import llama3_8b_pretrain_config
from megatron.bridge.training.pretrain import pretrain

cfg = llama3_8b_pretrain_config()
cfg.model.tensor_model_parallel_size = 2
cfg.train.micro_batch_size = 2
cfg.train.global_batch_size = 128
pretrain(cfg)
'''
NEMO_LLM = ("nemo llm pretrain --factory llama3_8b trainer.num_nodes=2 trainer.devices=8 "
            "trainer.strategy.tensor_model_parallel_size=2 data.global_batch_size=256 data.micro_batch_size=2 -y\n")


def _refusal(text: str) -> str:
    with pytest.raises(UserError) as err:
        refuse_recipe("recipe.py", text, "dgx-h100")
    return str(err.value)


def test_a_nemo2_recipe_is_named_and_its_estimate_command_filled_from_it():
    said = _refusal(NEMO2_RECIPE)
    assert said.startswith("recipe.py: a NeMo 2 / Megatron-Bridge Python recipe (it imports nemo.collections): "
                           "parplan does not run Python")
    assert ("`parplan estimate llama3-70b --cluster dgx-h100 --gpus 64 --layout tp=4,pp=4,sp=1,mbs=1,zero=1 "
            "--seq-len 8192 --global-batch 512`") in said
    assert "exits 0 even when the layout does not fit" in said


def test_a_megatron_bridge_recipe_is_named_with_its_preset():
    said = _refusal(BRIDGE_RECIPE)
    assert "(it imports megatron.bridge)" in said and "`parplan estimate llama3-8b --cluster dgx-h100 " in said
    assert "tp=2" in said and "--global-batch 128" in said


def test_other_python_is_not_called_a_recipe():
    refuse_recipe("train.py", "import torch\nmodel = torch.nn.Linear(4, 4)\n")  # no UserError


def test_check_of_a_nemo2_recipe_names_it(tmp_path):
    path = tmp_path / "pretrain_llama3_70b.py"
    path.write_text(NEMO2_RECIPE)
    code, out = run_check(path, "--cluster", "dgx-h100")
    assert code == 2 and "NeMo 2 / Megatron-Bridge Python recipe" in out and "not a plan file" not in out


def test_the_nemo_llm_refusal_says_estimate_does_not_gate_and_what_does(tmp_path):
    path = tmp_path / "pretrain.sh"
    path.write_text("#!/bin/bash\n" + NEMO_LLM)
    with pytest.raises(UserError) as err:
        load_native(path, None, "dgx-h100", None, TrainerFlags(), ReadNotes())
    said = str(err.value)
    assert "`parplan estimate llama3-8b --cluster dgx-h100 --gpus 16" in said
    assert "`parplan estimate` exits 0 even when the layout does not fit" in said
    assert "`parplan plan --save`" in said and "`parplan check PLAN.json` (exit 1 when it does not fit)" in said


def test_what_the_refusal_says_of_the_exit_codes_holds(tmp_path):
    layout = "tp=1,mbs=8,zero=0"  # llama3-70b on one node, unsharded: far over the GPU
    est = CliRunner().invoke(app, ["estimate", "llama3-70b", "--cluster", "dgx-h100", "--layout", layout])
    assert est.exit_code == 0 and "does not fit" in est.stdout
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"model": "llama3-70b", "cluster": "dgx-h100", "train": {"global_batch_size": 64},
                                "layout": {"tp": 1, "mbs": 8, "zero": 0}}))
    assert run_check(plan)[0] == 1
