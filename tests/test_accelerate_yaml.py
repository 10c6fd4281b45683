"""`parplan check` of Hugging Face Accelerate configs (planner/files/accelerate_yaml.py): the files TRL, axolotl and
LLaMA-Factory pass to `accelerate launch --config_file`, read as the run they start. Before, every YAML was taken
for a plan file ("unknown plan-file keys")."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import UserError
from planner.files.native import config_kind, is_native, load_native
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

runner = CliRunner()
BASE = {"compute_environment": "LOCAL_MACHINE", "debug": False, "machine_rank": 0, "main_training_function": "main",
        "mixed_precision": "bf16", "num_machines": 1, "num_processes": 8, "rdzv_backend": "static",
        "same_network": True, "use_cpu": False}
# accelerate's `accelerate config` answers as TRL's examples/accelerate_configs ship them
ZERO3 = {**BASE, "distributed_type": "DEEPSPEED", "deepspeed_config": {
    "deepspeed_multinode_launcher": "standard", "offload_optimizer_device": "none", "offload_param_device": "none",
    "zero3_init_flag": True, "zero3_save_16bit_model": True, "zero_stage": 3}}
FSDP1 = {**BASE, "distributed_type": "FSDP", "fsdp_config": {
    "fsdp_activation_checkpointing": False, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    "fsdp_backward_prefetch": "BACKWARD_PRE", "fsdp_offload_params": False, "fsdp_sharding_strategy": "FULL_SHARD",
    "fsdp_state_dict_type": "FULL_STATE_DICT", "fsdp_use_orig_params": True}}
SMALL = TrainerFlags(micro_batch=1)


def _write(tmp_path, doc: dict, name: str = "accelerate.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _load(tmp_path, doc: dict, flags: TrainerFlags = SMALL, nodes=None):
    read = ReadNotes()
    return load_native(_write(tmp_path, doc), "llama3-8b", "dgx-h100", nodes, flags, read), read


def test_deepspeed_zero3_is_the_config_accelerate_builds(tmp_path):
    prob, read = _load(tmp_path, ZERO3)
    assert (prob.cluster.num_gpus, prob.layout.zero, prob.layout.mbs, prob.train.precision) == (8, 3, 1, "bf16")
    assert prob.train.stack_spec.name == "deepspeed" and prob.train.global_batch_size == 8
    assert any("gradient_accumulation_steps" in a for a in read.assumed)
    assert config_kind(tmp_path / "accelerate.yaml") == "deepspeed" and is_native(tmp_path / "accelerate.yaml")


def test_deepspeed_offload_and_a_config_file_beside_it(tmp_path):
    offload = {**ZERO3, "deepspeed_config": {**ZERO3["deepspeed_config"], "offload_optimizer_device": "cpu",
                                             "offload_param_device": "cpu"}}
    prob, _ = _load(tmp_path, offload)
    assert (prob.train.offload_optimizer, prob.train.offload_params) == ("cpu", "cpu")
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"},
                                                  "train_micro_batch_size_per_gpu": "auto"}))
    prob, _ = _load(tmp_path, {**BASE, "distributed_type": "DEEPSPEED",
                               "deepspeed_config": {"deepspeed_config_file": "ds.json"}})
    assert prob.layout.zero == 2 and prob.train.precision == "bf16"  # "auto" bf16 from mixed_precision
    prob, read = _load(tmp_path, {**ZERO3, "mixed_precision": "fp8"})
    assert prob.train.precision == "bf16" and any("fp8" in n for n in read.notes)  # was fp32, silently
    with pytest.raises(UserError, match="deepspeed_config_file='x' is not a regular file in any of "):
        _load(tmp_path, {**BASE, "distributed_type": "DEEPSPEED", "deepspeed_config": {"deepspeed_config_file": "x"}})


@pytest.mark.parametrize("fsdp, zero, group", [
    ({"fsdp_sharding_strategy": "FULL_SHARD"}, 3, None), ({"fsdp_sharding_strategy": "SHARD_GRAD_OP"}, 2, None),
    ({"fsdp_sharding_strategy": 3}, 0, None), ({"fsdp_reshard_after_forward": "HYBRID_SHARD"}, 3, 8),
    ({"fsdp_version": 2, "fsdp_reshard_after_forward": True}, 3, None),
    ({"fsdp_version": 2, "fsdp_reshard_after_forward": False}, 2, None)])
def test_fsdp_sharding_strategies(tmp_path, fsdp, zero, group):
    """accelerate utils/constants.py FSDP_SHARDING_STRATEGY (1-5: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD,
    HYBRID_SHARD, HYBRID_SHARD_ZERO2); FSDP2 writes fsdp_reshard_after_forward as a bool."""
    config = {**FSDP1, "num_processes": 16, "num_machines": 2, "fsdp_config": {"fsdp_activation_checkpointing": True,
                                                                                **fsdp}}
    prob, _ = _load(tmp_path, config)
    assert (prob.layout.zero, prob.layout.shard_group, prob.layout.recompute) == (zero, group, "full")
    assert prob.cluster.num_gpus == 16 and prob.train.stack_spec.name == "fsdp"
    assert config_kind(tmp_path / "accelerate.yaml") == "fsdp"


def test_ddp_single_gpu_offload_and_sizes(tmp_path):
    prob, read = _load(tmp_path, {**BASE, "distributed_type": "MULTI_GPU", "num_processes": 4})
    assert (prob.cluster.num_gpus, prob.layout.zero, prob.layout.recompute) == (4, 0, "none")
    assert any("--gradient_checkpointing" in a for a in read.assumed)
    assert _load(tmp_path, {**BASE, "distributed_type": "NO"})[0].cluster.num_gpus == 1
    prob, read = _load(tmp_path, {**FSDP1, "fsdp_config": {**FSDP1["fsdp_config"], "fsdp_offload_params": True}})
    assert prob.train.offload_params == "cpu" and any("fsdp_offload_params" in n for n in read.notes)
    prob, _ = _load(tmp_path, FSDP1, TrainerFlags(micro_batch=2, grad_accum=4))
    assert (prob.layout.mbs, prob.layout.num_microbatches, prob.train.global_batch_size) == (2, 4, 64)
    prob, _ = _load(tmp_path, FSDP1, TrainerFlags(global_batch=64, grad_accum=2))
    assert (prob.layout.mbs, prob.layout.num_microbatches) == (4, 2)
    for flags in (TrainerFlags(global_batch=4, grad_accum=1), TrainerFlags(global_batch=60, micro_batch=2)):
        with pytest.raises(UserError, match="--global-batch"):
            _load(tmp_path, FSDP1, flags)


@pytest.mark.parametrize("doc, match", [({**BASE, "distributed_type": "TPU"}, "distributed_type='TPU'"),
                                        ({**BASE, "distributed_type": "FSDP", "mixed_precision": "int4"},
                                         "mixed_precision='int4'"),
                                        ({**FSDP1, "fsdp_config": {"fsdp_sharding_strategy": "SOMETIMES"}},
                                         "SOMETIMES"),
                                        ({**FSDP1, "num_processes": 12}, "give --nodes")])
def test_bad_values_are_named(tmp_path, doc, match):
    with pytest.raises(UserError, match=match):
        _load(tmp_path, doc)


def test_cli_check_reads_it_and_a_plan_yaml_is_still_a_plan(tmp_path):
    path = _write(tmp_path, FSDP1)
    result = runner.invoke(app, ["check", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                 "--micro-batch", "1", "--seq-len", "4096", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["layout"]["zero"] == 3
    plan = _write(tmp_path, {"model": "llama3-8b", "cluster": "dgx-h100", "train": {"global_batch_size": 8},
                             "layout": {"zero": 1}}, "plan.yaml")
    assert not is_native(plan)
    assert runner.invoke(app, ["check", str(plan)]).exit_code in (0, 1)


def test_defaults_the_file_leaves_to_the_launch_are_named(tmp_path):
    """A config without `mixed_precision` trains in fp32 (accelerate's default "no") and no Accelerate or DeepSpeed
    file states the sequence length (the training script's max_seq_length / block_size does): both were taken
    silently, the fp32 default costing 4-byte activations and 13x the step time of bf16 on one 7B row."""
    bare = {k: v for k, v in BASE.items() if k != "mixed_precision"}
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}}))
    for doc in ({**bare, "distributed_type": "FSDP", "fsdp_config": FSDP1["fsdp_config"]},
                {**bare, "distributed_type": "DEEPSPEED", "deepspeed_config": {"deepspeed_config_file": "ds.json"}}):
        prob, read = _load(tmp_path, doc)
        assert prob.train.precision == "fp32"
        assert any(a.startswith("mixed_precision not set: fp32") for a in read.assumed), doc["distributed_type"]
        assert any(a.startswith(f"sequence length {prob.train.seq_length} ") for a in read.assumed)
        _, told = _load(tmp_path, doc, TrainerFlags(micro_batch=1, precision="bf16", seq_len=2048))
        assert not any(a.startswith(("mixed_precision", "sequence length")) for a in told.assumed)
    _, read = _load(tmp_path, FSDP1)  # bf16 stated: no precision assumption
    assert not any(a.startswith("mixed_precision") for a in read.assumed)


def test_a_deepspeed_json_names_the_sequence_length_it_assumes(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True},
                                "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}))
    read = ReadNotes()
    prob = load_native(path, "llama3-8b", "dgx-h100", 1, TrainerFlags(), read)
    assert f"sequence length {prob.train.seq_length} (the model's" in " ".join(read.assumed)
    told = ReadNotes()
    load_native(path, "llama3-8b", "dgx-h100", 1, TrainerFlags(seq_len=2048), told)
    assert not any(a.startswith("sequence length") for a in told.assumed)
    result = runner.invoke(app, ["check", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100", "--json"])
    assert any(a.startswith("sequence length") for a in json.loads(result.stdout)["assumed"])


def test_check_json_echoes_what_it_read(tmp_path):
    """--json shows what check read besides the layout (the model, the cluster's size, batch, sequence, precision
    and stack), so a silently misread setting can be seen: before, a wrong sequence or precision was invisible."""
    doc = {**FSDP1, "mixed_precision": "fp16", "num_processes": 16, "num_machines": 2}
    result = runner.invoke(app, ["check", str(_write(tmp_path, doc)), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                 "--micro-batch", "1", "--seq-len", "2048", "--json"])
    read = json.loads(result.stdout)["read"]
    assert (read["cluster"]["num_gpus"], read["cluster"]["gpu"], read["model"]["hidden_size"]) == (16, "h100-sxm", 4096)
    assert (read["train"]["seq_length"], read["train"]["precision"], read["train"]["stack"]) == (2048, "fp16", "fsdp")
    assert read["train"]["global_batch_size"] == 16


def test_fsdp_keys_read_as_accelerate_reads_them(tmp_path):
    """accelerate prefixes an fsdp_config key without `fsdp` (reshard_after_forward is fsdp_reshard_after_forward)
    and ignores keys it does not know: a misspelt fsdp_sharding_stratgy runs with the default FULL_SHARD, now said
    with the key meant."""
    fsdp2 = {**BASE, "distributed_type": "FSDP", "fsdp_config": {"fsdp_version": 2, "reshard_after_forward": False,
                                                                  "auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}}
    prob, read = _load(tmp_path, fsdp2)
    assert prob.layout.zero == 2 and not any("not a key accelerate reads" in n for n in read.notes)
    typo = {**FSDP1, "fsdp_config": {**FSDP1["fsdp_config"], "fsdp_sharding_stratgy": "SHARD_GRAD_OP"}}
    typo["fsdp_config"].pop("fsdp_sharding_strategy")
    prob, read = _load(tmp_path, typo)
    assert prob.layout.zero == 3
    assert any("fsdp_config.fsdp_sharding_stratgy: not a key accelerate reads (did you mean fsdp_sharding_strategy?)"
               in n for n in read.notes)


def test_fsdp_offload_steps_on_the_host_with_no_gpu_temporaries(tmp_path):
    """LLaMA-Factory's fsdp_config_offload.yaml (70B on 2 GPUs, fsdp_offload_params true) was priced 153 GiB per
    GPU, 120 GiB of it the foreach AdamW temporaries of a step that CPUOffload runs on the host: a new-user pass."""
    from costmodels.estimate import estimate  # noqa: PLC0415

    doc = {**FSDP1, "num_processes": 2, "fsdp_config": {**FSDP1["fsdp_config"], "fsdp_offload_params": True}}
    read = ReadNotes()
    prob = load_native(_write(tmp_path, doc), "llama3-70b", "dgx-a100", None,
                       TrainerFlags(micro_batch=1, seq_len=2048, recompute="full"), read)
    stage = estimate(prob.model, prob.cluster, prob.train, prob.layout).memory.stages[0]
    assert stage.weights_bytes == stage.optimizer_bytes == 0
    assert stage.transient_bytes < 0.1 * 4 * 70.5e9 / 2  # the loss's logits, not 4 B x 35 B local parameters
    on_gpu = load_native(_write(tmp_path, FSDP1), "llama3-8b", "dgx-h100", None, SMALL, ReadNotes())
    kept = estimate(on_gpu.model, on_gpu.cluster, on_gpu.train, on_gpu.layout).memory.stages[0]
    assert kept.transient_bytes >= 4 * 8.0e9 / 8  # without offload: AdamW's 4 B per local parameter stays
