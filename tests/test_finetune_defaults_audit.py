"""What `parplan check` assumes where an Axolotl or LLaMA-Factory YAML leaves a key out, against the tools' own
defaults (axolotl 0.19.0, llamafactory 0.9.5; planner/files/finetune_yaml_read.py, finetune_yaml.py)."""

from __future__ import annotations

import pytest
import yaml

from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

AXOLOTL = {"base_model": "meta-llama/Meta-Llama-3-8B", "datasets": [], "sequence_len": 2048}
LLAMAFACTORY = {"model_name_or_path": "meta-llama/Meta-Llama-3-8B", "stage": "sft", "finetuning_type": "full",
                "per_device_train_batch_size": 1, "gradient_accumulation_steps": 1}


def _load(folder, doc, cluster="dgx-h100", flags=TrainerFlags()):
    path = folder / "cfg.yaml"
    path.write_text(yaml.safe_dump(doc))
    read = ReadNotes()
    return load_native(path, "llama3-8b", cluster, None, flags, read), read


def _error(folder, doc) -> str:
    with pytest.raises(UserError) as err:
        _load(folder, doc)
    return str(err.value)


def test_axolotl_batch_size_leaves_gradient_accumulation_at_its_default_1(tmp_path):
    # axolotl 0.19.0 schemas/training.py fills gradient_accumulation_steps=1 at validation, before normalize_config
    # could derive batch_size // micro_batch_size (was priced as 8 micro-batches per step)
    prob, read = _load(tmp_path, {**AXOLOTL, "micro_batch_size": 4, "batch_size": 32})
    assert (prob.layout.mbs, prob.layout.num_microbatches) == (4, 1)
    assert any("gradient_accumulation_steps not set: Axolotl's default 1, not batch_size 32" in a for a in read.assumed)


@pytest.mark.parametrize("doc, needle", [({"batch_size": 32}, "batch_size=32 without micro_batch_size"),
                                         ({"batch_size": 32, "micro_batch_size": 2, "gradient_accumulation_steps": 4},
                                          "batch_size=32 and gradient_accumulation_steps=4")])
def test_axolotl_batch_size_combinations_axolotl_refuses_are_refused(tmp_path, doc, needle):
    said = _error(tmp_path, {**AXOLOTL, **doc})
    assert needle in said and "Axolotl refuses" in said


def test_axolotl_fp32_run_has_tf32_gemms_where_axolotl_turns_tf32_on(tmp_path):
    # tf32 defaults to "auto" (schemas/config.py check_tf32: is_torch_tf32_available, CUDA sm >= 80)
    fp32 = {**AXOLOTL, "bf16": False}
    prob, read = _load(tmp_path, fp32)
    assert prob.train.precision == "tf32"
    assert any("tf32: auto" in a for a in read.assumed) and not any(a.startswith("fp32 training") for a in read.assumed)
    assert _load(tmp_path, {**fp32, "tf32": False})[0].train.precision == "fp32"
    assert _load(tmp_path, fp32, cluster="mi300x-node")[0].train.precision == "fp32"  # ROCm: no tf32
    assert _load(tmp_path, fp32, flags=TrainerFlags(precision="fp32"))[0].train.precision == "fp32"  # check's wins
    assert _load(tmp_path, AXOLOTL)[0].train.precision == "bf16"  # bf16 auto: unchanged
    assert "tf32='yes'" in _error(tmp_path, {**fp32, "tf32": "yes"})


def test_llamafactory_pure_bf16_without_bf16_computes_in_bf16_not_fp32(tmp_path):
    # hparams/parser.py: compute_dtype bfloat16 for pure_bf16; model/adapter.py keeps the weights in it
    prob, read = _load(tmp_path, {**LLAMAFACTORY, "pure_bf16": True})
    assert prob.train.precision == "bf16"
    assert any("pure_bf16: true without bf16" in a for a in read.assumed)
    assert not any(a.startswith("fp32 training") for a in read.assumed)
    assert _load(tmp_path, LLAMAFACTORY)[0].train.precision == "fp32"  # neither bf16 nor pure_bf16: fp32, as before


def test_axolotl_fsdp_config_sharding_strategy_is_not_read_by_axolotl(tmp_path):
    # schemas/fsdp.py FSDPConfig has no sharding_strategy: FULL_SHARD (ZeRO-3) runs, not SHARD_GRAD_OP
    doc = {**AXOLOTL, "fsdp_config": {"fsdp_sharding_strategy": "SHARD_GRAD_OP", "auto_wrap_policy":
                                      "TRANSFORMER_BASED_WRAP"}}
    prob, read = _load(tmp_path, doc)
    assert prob.layout.zero == 3 and any("fsdp_config.fsdp_sharding_strategy" in n for n in read.notes)
    alone = _load(tmp_path, {**AXOLOTL, "fsdp_config": {"sharding_strategy": "SHARD_GRAD_OP"}})[0]
    assert (alone.layout.zero, alone.train.stack_spec.name) == (3, "fsdp")  # still FSDP, not DDP
    words = _load(tmp_path, {**doc, "fsdp": ["shard_grad_op", "auto_wrap"]})[0]
    assert words.layout.zero == 2  # the `fsdp` list is the Trainer's own


def test_llamafactory_notes_what_its_pairwise_stages_and_optimizers_leave_unpriced(tmp_path):
    read = _load(tmp_path, {**LLAMAFACTORY, "stage": "dpo", "bf16": True})[1]
    assert any("stage: dpo" in n and "second sequence" in n and "under-estimate" in n for n in read.notes)
    read = _load(tmp_path, {**LLAMAFACTORY, "stage": "rm", "bf16": True})[1]
    assert any("stage: rm" in n and "two sequences" in n for n in read.notes)
    read = _load(tmp_path, {**LLAMAFACTORY, "use_badam": True, "bf16": True})[1]
    assert any("use_badam" in n and "over-estimate" in n for n in read.notes)


def test_llamafactory_fp8_is_named_unpriced(tmp_path):
    # a new-user pass: llama3_fp8_deepspeed_sft.yaml's fp8: true vanished without a word (priced in bf16)
    read = _load(tmp_path, {**LLAMAFACTORY, "bf16": True, "fp8": True, "fp8_backend": "torchao"})[1]
    assert any("fp8: true" in n and "torchao" in n and "--precision fp8" in n for n in read.notes)
    assert not any("fp8" in n for n in _load(tmp_path, {**LLAMAFACTORY, "bf16": True})[1].notes)


def test_axolotl_reward_model_is_named(tmp_path):
    # a new-user pass: qwen3/reward-model.yaml was priced with a vocabulary head's logits, unsaid
    read = _load(tmp_path, {**AXOLOTL, "reward_model": True})[1]
    assert any("reward_model: true" in n and "over-estimate" in n for n in read.notes)
