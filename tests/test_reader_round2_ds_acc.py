"""Round 2 of the config readers, DeepSpeed and Accelerate side: the recompute a DeepSpeed JSON implies is named
under "assumed" (and --recompute wins either way), pipeline.activation_checkpoint_interval is priced, and an
Accelerate config's num_processes is spread over its num_machines.

Sources: DeepSpeed 0.19.8 runtime/pipe/engine.py and module.py (the checkpoint interval, the stage count from
the module's topology), runtime/activation_checkpointing/config.py; accelerate 1.15 commands/config/cluster.py
(num_processes: the total over all machines). See planner/frameworks/deepspeed/checkpointing.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

runner = CliRunner()
DS = {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8,
      "fp16": {"enabled": True}, "zero_optimization": {"stage": 2}}
SECTION = {"activation_checkpointing": {"partition_activations": False, "contiguous_memory_optimization": False}}


def _ds(tmp_path: Path, cfg: dict, flags=TrainerFlags(), nodes=1, model="llama2-7b"):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    notes = ReadNotes()
    return load_native(path, model, "dgx-a100", nodes, flags, notes), notes


def _check(tmp_path: Path, cfg: dict, *extra: str) -> dict:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    result = runner.invoke(app, ["check", str(path), "--model", "llama2-7b", "--cluster", "dgx-a100", "--json",
                                 *extra])
    assert result.exit_code in (0, 1), result.output[-1500:]
    return json.loads(result.stdout)


def test_the_section_reads_as_full_recompute_and_says_so(tmp_path: Path):
    prob, notes = _ds(tmp_path, {**DS, **SECTION})
    assert prob.layout.recompute == "full"
    said = [a for a in notes.assumed if a.startswith("activation_checkpointing section")]
    assert len(said) == 1 and "--recompute none" in said[0] and "deepspeed.checkpointing" in said[0]
    prob, notes = _ds(tmp_path, DS)  # no section, no "auto": none, said too
    assert prob.layout.recompute == "none" and any("--recompute full" in a for a in notes.assumed)
    _, notes = _ds(tmp_path, {**DS, **SECTION}, TrainerFlags(recompute="none"))
    assert not any("recompute" in a for a in notes.assumed)  # the flag leaves nothing to assume


def test_recompute_flag_is_honoured_either_way(tmp_path: Path):
    with_section = _check(tmp_path, {**DS, **SECTION}, "--recompute", "none")
    assert with_section["layout"]["recompute"] == "none" and not any("recompute" in a for a in with_section["assumed"])
    without = _check(tmp_path, DS, "--recompute", "full")
    assert without["layout"]["recompute"] == "full"
    assert _check(tmp_path, {**DS, **SECTION})["layout"]["recompute"] == "full"


PIPE = {"train_batch_size": 1024, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1},
        "bf16": {"enabled": True}, "pipeline": {"stages": 4, "activation_checkpoint_interval": 1}}


def test_pipeline_checkpoint_interval_is_priced(tmp_path: Path):
    prob, notes = _ds(tmp_path, PIPE, nodes=4, model="llama2-13b")
    assert (prob.layout.pp, prob.layout.recompute, prob.layout.recompute_num_layers) == (4, "full", None)
    assert not any(a.startswith(("activation recompute", "activation_checkpointing")) for a in notes.assumed)
    assert any(a.startswith("pipeline.stages=4") and "PipelineModule(num_stages" in a for a in notes.assumed)
    grouped = {**PIPE, "pipeline": {"stages": 4, "activation_checkpoint_interval": 3}}
    prob, notes = _ds(tmp_path, grouped, nodes=4, model="llama2-13b")
    lay = prob.layout
    assert (lay.recompute, lay.recompute_num_layers, lay.recompute_method) == ("full", 3, "uniform")
    assert any("activation_checkpoint_interval=3" in n and "groups of 3" in n for n in notes.notes)
    prob, _ = _ds(tmp_path, {**PIPE, "pipeline": {"stages": 4}}, nodes=4, model="llama2-13b")
    assert prob.layout.recompute == "none"


FSDP = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "mixed_precision": "bf16",
        "fsdp_config": {"fsdp_version": 2, "fsdp_reshard_after_forward": True}}


def _acc(tmp_path: Path, cfg: dict, nodes=None):
    path = tmp_path / "acc.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    notes = ReadNotes()
    return load_native(path, "llama3-8b", "dgx-h100", nodes, TrainerFlags(), notes), notes


def test_num_processes_spread_over_num_machines(tmp_path: Path):
    prob, notes = _acc(tmp_path, {**FSDP, "num_machines": 4, "num_processes": 8})
    assert (prob.cluster.num_nodes, prob.cluster.gpus_per_node) == (4, 2)
    assert any("num_machines 4" in n and "4 nodes x 2 GPUs" in n for n in notes.notes)
    prob, notes = _acc(tmp_path, {**FSDP, "num_machines": 4, "num_processes": 32})
    assert (prob.cluster.num_nodes, prob.cluster.gpus_per_node) == (4, 8)
    assert not any("num_machines" in n for n in notes.notes)
    prob, notes = _acc(tmp_path, {**FSDP, "num_machines": 3, "num_processes": 8})
    assert prob.cluster.num_gpus == 8 and any("does not divide over num_machines 3" in n for n in notes.notes)
    prob, _ = _acc(tmp_path, {**FSDP, "num_machines": 4, "num_processes": 8}, nodes=2)  # --nodes wins
    assert (prob.cluster.num_nodes, prob.cluster.gpus_per_node) == (2, 8)


def test_hybrid_shard_groups_follow_the_machines(tmp_path: Path):
    """HYBRID_SHARD shards inside a node: with 2 processes per machine the shard group is 2, not 8."""
    cfg = {**FSDP, "num_machines": 4, "num_processes": 8,
           "fsdp_config": {"fsdp_version": 1, "fsdp_sharding_strategy": "HYBRID_SHARD"}}
    prob, _ = _acc(tmp_path, cfg)
    assert prob.layout.shard_group == 2
