"""LLaMA-Factory YAML keys (planner/files/finetune_yaml_read.py against the vendored key list,
planner/files/llamafactory_keys.py). Before, an unknown key was dropped and the default priced:
`per_device_train_batchsize: 2` priced the Trainer's micro-batch 8 ("does not fit", exit 1), `cutof_len: 8192`
priced 2048; LLaMA-Factory itself refuses to start on either (HfArgumentParser.parse_dict(allow_extra_keys=False)).
enable_liger_kernel was ignored without a word."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from cli_check import run_check
from planner.errors import UserError
from planner.files import llamafactory_keys
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

ZERO3 = {"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto",
         "gradient_accumulation_steps": "auto", "train_batch_size": "auto"}
# llamafactory 0.9.5 examples/train_full/llama3_full_sft.yaml, every key
EXAMPLE = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct", "trust_remote_code": True, "stage": "sft",
           "do_train": True, "finetuning_type": "full", "deepspeed": "ds_z3.json", "dataset": "identity,alpaca_en_demo",
           "template": "llama3", "cutoff_len": 2048, "max_samples": 1000, "overwrite_cache": True,
           "preprocessing_num_workers": 16, "dataloader_num_workers": 4, "output_dir": "saves/llama3-8b/full/sft",
           "logging_steps": 10, "save_steps": 500, "plot_loss": True, "overwrite_output_dir": True,
           "save_only_model": False, "report_to": "none", "per_device_train_batch_size": 1,
           "gradient_accumulation_steps": 2, "learning_rate": 1.0e-5, "num_train_epochs": 3.0,
           "lr_scheduler_type": "cosine", "warmup_ratio": 0.1, "bf16": True, "ddp_timeout": 180000000,
           "resume_from_checkpoint": None}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds_z3.json").write_text(json.dumps(ZERO3))
    return tmp_path


def _yaml(folder, doc: dict, name: str = "sft.yaml"):
    path = folder / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _load(path, model="llama3-8b"):
    read = ReadNotes()
    return load_native(path, model, "dgx-h100", 2, TrainerFlags(), read), read


def _error(path) -> str:
    with pytest.raises(UserError) as err:
        _load(path)
    return str(err.value)


def test_the_vendored_keys_take_every_key_of_llamafactorys_own_example(folder):
    assert set(EXAMPLE) <= llamafactory_keys.KEYS
    assert {"enable_liger_kernel", "pure_bf16", "use_badam", "fsdp_config", "optim"} <= llamafactory_keys.KEYS
    prob, _ = _load(_yaml(folder, EXAMPLE))
    assert (prob.layout.mbs, prob.train.seq_length) == (1, 2048)


@pytest.mark.parametrize("typo, meant", [("per_device_train_batchsize", "per_device_train_batch_size"),
                                         ("cutof_len", "cutoff_len")])
def test_a_misspelt_key_is_refused_naming_the_file_the_key_and_the_key_meant(folder, typo, meant):
    right = {k: v for k, v in EXAMPLE.items() if k != meant}
    path = _yaml(folder, {**right, typo: 2 if "batch" in typo else 8192})
    said = _error(path)
    assert str(path) in said and typo in said and f"did you mean {meant}?" in said
    assert "LLaMA-Factory refuses to start" in said


def test_check_exits_2_on_the_misspelt_micro_batch_not_1_for_the_default_8(folder):
    right = {k: v for k, v in EXAMPLE.items() if k != "per_device_train_batch_size"}
    code, out = run_check(_yaml(folder, {**right, "per_device_train_batchsize": 2}), "--cluster", "dgx-h100",
                          "--nodes", "2")
    assert code == 2 and "did you mean per_device_train_batch_size?" in out


def test_a_launch_lines_override_is_checked_too_unless_it_allows_extra_args(folder):
    _yaml(folder, EXAMPLE)
    line = folder / "run.sh"
    line.write_text("NNODES=2 llamafactory-cli train sft.yaml cutof_len=4096\n")
    assert "did you mean cutoff_len?" in _error(line)
    line.write_text("ALLOW_EXTRA_ARGS=1 NNODES=2 llamafactory-cli train sft.yaml cutof_len=4096\n")
    prob, read = _load(line)
    assert prob.train.seq_length == 2048 and any("cutof_len" in n and "ALLOW_EXTRA_ARGS" in n for n in read.notes)


def test_enable_liger_kernel_prices_the_chunked_loss_for_sft_and_says_so(folder):
    plain, _ = _load(_yaml(folder, EXAMPLE))
    liger, read = _load(_yaml(folder, {**EXAMPLE, "enable_liger_kernel": True}))
    assert plain.train.loss_chunks in (None, 0, 1) and liger.train.loss_chunks > 1
    assert any(n.startswith("enable_liger_kernel: Liger's fused linear cross-entropy") for n in read.notes)


def test_enable_liger_kernel_with_a_stage_that_needs_logits_is_noted_not_priced(folder):
    dpo, read = _load(_yaml(folder, {**EXAMPLE, "stage": "dpo", "enable_liger_kernel": True}))
    assert dpo.train.loss_chunks in (None, 0, 1)
    assert any("enable_liger_kernel: stage dpo needs the logits" in n for n in read.notes)


def test_the_key_list_is_data_not_an_import_of_llamafactory():
    source = open(llamafactory_keys.__file__).read()
    assert "import llamafactory" not in source and "0.9.5" in llamafactory_keys.VERSION
    assert os.path.basename(llamafactory_keys.__file__) == "llamafactory_keys.py"


def test_a_key_close_to_none_is_noted_not_refused(folder):
    """A key that misspells nothing LLaMA-Factory 0.9.5 takes may be another release's: said, the run still priced."""
    prob, read = _load(_yaml(folder, {**EXAMPLE, "zzz_vendor_switch": True}))
    assert prob.layout is not None
    assert any("zzz_vendor_switch: not a llamafactory 0.9.5 key" in n and "check the release you run" in n
               for n in read.notes)
