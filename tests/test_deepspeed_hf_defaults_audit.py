"""What check assumes when a DeepSpeed JSON key, an Accelerate config key or a launcher flag is absent, against the
real defaults: DeepSpeed 0.19.8 (the venv's: runtime/zero/config.py, runtime/engine.py), accelerate 1.15.0
(utils/dataclasses.py DeepSpeedPlugin, commands/launch.py, commands/config/config_args.py), transformers 5.24.0
(integrations/deepspeed.py) and torch (distributed/run.py). Each test fails on the reading it replaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from costmodels.estimate import estimate
from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

BATCH = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "bf16": {"enabled": True}}


def _json(tmp_path: Path, cfg: dict, nodes=1, model="llama3-8b"):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    read = ReadNotes()
    return load_native(path, model, "dgx-h100", nodes, TrainerFlags(), read), read


def _yaml(tmp_path: Path, cfg: dict, files: dict = None, nodes=None):
    for name, body in (files or {}).items():
        (tmp_path / name).write_text(json.dumps(body))
    path = tmp_path / "accelerate.yaml"
    path.write_text(yaml.safe_dump(cfg))
    read = ReadNotes()
    return load_native(path, "llama3-8b", "dgx-h100", nodes, TrainerFlags(micro_batch=1), read), read


def _step_s(prob) -> float:
    return estimate(prob.model, prob.cluster, prob.train, prob.layout).time.step_s


@pytest.mark.parametrize("zero, extra, overlap", [
    ({"stage": 2}, {}, False),  # DeepSpeedZeroConfig.overlap_comm_valid: absent -> stage == 3
    ({"stage": 1}, {}, False),
    ({"stage": 3}, {}, True),
    ({"stage": 2, "overlap_comm": True}, {}, True),
    ({"stage": 3, "overlap_comm": False}, {}, False),
    ({"stage": 0, "overlap_comm": True}, {}, False),  # engine.allreduce_gradients runs after backward
    ({"stage": 1, "overlap_comm": True}, {"pipeline": {"stages": 2}}, False)])  # PipelineModule: turned off
def test_overlap_comm_absent_is_deepspeeds_default(tmp_path, zero, extra, overlap):
    prob, _ = _json(tmp_path, {**BATCH, "zero_optimization": zero, **extra})
    assert prob.train.grad_overlap is overlap


def test_zero2_without_overlap_comm_exposes_the_reduction(tmp_path):
    quiet, _ = _json(tmp_path, {**BATCH, "zero_optimization": {"stage": 2}}, nodes=4)
    hidden, _ = _json(tmp_path, {**BATCH, "zero_optimization": {"stage": 2, "overlap_comm": True}}, nodes=4)
    assert _step_s(quiet) > _step_s(hidden)


def test_deepspeed_chat_config_keeps_overlap_comm(tmp_path):
    """DeepSpeed-Chat's get_train_ds_config writes overlap_comm true."""
    path = tmp_path / "run.sh"
    path.write_text("deepspeed main.py --model_name_or_path m --zero_stage 2 --per_device_train_batch_size 1 "
                    "--dtype bf16 --deepspeed --output_dir out\n")
    prob = load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(), ReadNotes())
    assert prob.layout.zero == 2 and prob.train.grad_overlap is True


def test_auto_zero_stage_and_offload_devices_take_accelerates_defaults(tmp_path):
    """accelerate DeepSpeedPlugin: zero_stage from ACCELERATE_DEEPSPEED_ZERO_STAGE (default 2), offload devices
    "none"; parplan refused "stage": "auto" as a key the Trainer does not fill."""
    cfg = {**BATCH, "zero_optimization": {"stage": "auto", "offload_optimizer": {"device": "auto"},
                                          "offload_param": {"device": "auto"}}}
    prob, read = _json(tmp_path, cfg)
    assert prob.layout.zero == 2
    assert (prob.train.offload_optimizer, prob.train.offload_params) == ("none", "none")
    assert any('zero_optimization.stage="auto": 2 assumed' in a for a in read.assumed)


def test_partial_optimizer_offload_needs_zero3(tmp_path):
    """DeepSpeedZeroConfig.offload_ratio_check: a ratio below 1 is refused below ZeRO-3."""
    cfg = {**BATCH, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    with pytest.raises(UserError, match=r"offload_optimizer.ratio=0.3 .*stage 3 \(got 2\)"):
        _json(tmp_path, cfg)
    prob, _ = _json(tmp_path, {**cfg, "zero_optimization": {**cfg["zero_optimization"], "stage": 3}})
    assert prob.train.offload_optimizer_fraction == 0.3


FSDP = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "mixed_precision": "bf16",
        "fsdp_config": {"fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}}


def test_accelerate_yaml_without_num_processes_is_not_one_gpu(tmp_path):
    """ClusterConfig.num_processes defaults to -1 and accelerate launch then needs --num_processes: the file does
    not fix the count (parplan priced one GPU)."""
    prob, read = _yaml(tmp_path, FSDP)
    assert prob.cluster.num_gpus == 8 and any("does not fix the GPU count" in a for a in read.assumed)
    prob, read = _yaml(tmp_path, {**FSDP, "num_machines": 2})
    assert prob.cluster.num_gpus == 16 and any("num_machines 2 whole nodes" in a for a in read.assumed)
    assert _yaml(tmp_path, {**FSDP, "num_machines": 2}, nodes=1)[0].cluster.num_gpus == 8
    assert _yaml(tmp_path, {**FSDP, "num_processes": 4})[0].cluster.num_gpus == 4


def test_mixed_precision_no_keeps_the_deepspeed_files_bf16(tmp_path):
    """DeepSpeedPlugin.set_mixed_precision fills only "auto" values, and refuses the other dtype only when
    mixed_precision is not "no": the file's bf16.enabled true trains in bf16 (parplan refused it)."""
    ds = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
          "train_batch_size": "auto", "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}}
    acc = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "DEEPSPEED", "num_machines": 1,
           "num_processes": 8, "deepspeed_config": {"deepspeed_config_file": str(tmp_path / "ds.json")}}
    for doc in (acc, {**acc, "mixed_precision": "no"}):
        prob, read = _yaml(tmp_path, doc, {"ds.json": ds})
        assert prob.train.precision == "bf16" and any("bf16.enabled=true as it is" in n for n in read.notes)
    with pytest.raises(UserError, match="bf16.enabled=true but precision fp16"):  # accelerate refuses this one
        _yaml(tmp_path, {**acc, "mixed_precision": "fp16"}, {"ds.json": ds})
    auto = {**ds, "bf16": {"enabled": "auto"}}
    assert _yaml(tmp_path, acc, {"ds.json": auto})[0].train.precision == "fp32"  # "auto" filled off, as before


def test_torchrun_without_nproc_per_node_starts_one_process(tmp_path):
    """torch/distributed/run.py: --nproc-per-node defaults to "1" (parplan took the preset's 8 GPUs)."""
    path = tmp_path / "run.sh"
    line = "torchrun {opts} run_clm.py --model_name_or_path m --per_device_train_batch_size 1 --bf16 --output_dir o\n"
    read = ReadNotes()
    path.write_text(line.format(opts="--nnodes 1"))
    prob = load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(), read)
    assert prob.cluster.num_gpus == 1 and any("without --nproc_per_node" in a for a in read.assumed)
    path.write_text(line.format(opts="--nnodes 1 --nproc_per_node=8"))
    assert load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(), ReadNotes()).cluster.num_gpus == 8


def test_fsdp2_reads_reshard_after_forward_not_the_fsdp1_strategy(tmp_path):
    """FullyShardedDataParallelPlugin: fsdp_version 2 takes fsdp_reshard_after_forward (default true) and never
    fsdp_sharding_strategy, which parplan took for FSDP2 too."""
    fsdp = {**FSDP["fsdp_config"], "fsdp_sharding_strategy": "SHARD_GRAD_OP"}
    doc = {**FSDP, "num_processes": 8, "fsdp_config": fsdp}
    prob, read = _yaml(tmp_path, doc)
    assert prob.layout.zero == 3 and any("is not read by FSDP2" in n for n in read.notes)
    v1 = {**doc, "fsdp_config": {**doc["fsdp_config"], "fsdp_version": 1}}
    assert _yaml(tmp_path, v1)[0].layout.zero == 2  # FSDP1 still takes it


def test_deepspeed_plans_price_no_overlap_where_deepspeed_cannot_overlap():
    """The deepspeed stack (overlap_comm on) still cannot overlap the gradient reduction at ZeRO 0 (engine.py
    allreduce_gradients after backward) or under a PipelineModule (overlap_comm turned off): estimate prices the
    reduction exposed there, and the exported JSON says overlap_comm false under a pipeline."""
    import hardware_profiles as hp
    from costmodels.layout import Layout, resolve_layout
    from costmodels.step import dp_overlap
    from costmodels.timing import make_context
    from costmodels.train_spec import TrainSpec

    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", 2)
    train = hp.resolve_train(TrainSpec(global_batch_size=64), "deepspeed")

    def reduce_overlaps(**kw) -> bool:
        lay = resolve_layout(model, cluster, train, Layout(**kw))
        return dp_overlap(make_context(model, cluster, train, lay)).reduce

    assert reduce_overlaps(zero=1) and reduce_overlaps(zero=2)
    assert not reduce_overlaps(zero=0) and not reduce_overlaps(zero=1, pp=2)


def test_an_accelerate_fsdp_yaml_without_an_auto_wrap_policy_says_accelerate_wraps_nothing(tmp_path):
    """accelerate 1.15.0 FullyShardedDataParallelPlugin: auto_wrap_policy defaults to NO_WRAP (the whole model one
    unit, gathered at once); priced per block, so check says so. A file naming the policy, and the Trainer's own
    --fsdp (TRANSFORMER_BASED_WRAP by default), say nothing."""
    import yaml

    from planner.files.accelerate_yaml import NO_WRAP_NOTE
    from planner.files.native import load_native
    from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

    fsdp = {"distributed_type": "FSDP", "mixed_precision": "bf16", "num_machines": 1, "num_processes": 8,
            "fsdp_config": {"fsdp_sharding_strategy": "FULL_SHARD", "fsdp_version": 1}}

    def notes(doc: dict) -> list:
        path = tmp_path / "accelerate.yaml"
        path.write_text(yaml.safe_dump(doc))
        read = ReadNotes()
        load_native(path, "llama3-8b", "dgx-h100", None, TrainerFlags(micro_batch=1), read)
        return read.notes

    assert NO_WRAP_NOTE in notes(fsdp)
    wrapped = {**fsdp, "fsdp_config": {**fsdp["fsdp_config"], "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}}
    assert NO_WRAP_NOTE not in notes(wrapped)

    from planner.files.shell_trainer_accel import trainer_fsdp

    class _Launch:
        flags = {"--fsdp": "full_shard auto_wrap"}

    assert trainer_fsdp(_Launch(), "run.sh")["fsdp_config"]["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
