"""`check` reads a Megatron-Bridge ConfigContainer YAML (ConfigContainer.to_yaml, Megatron-Bridge 0.3.1) as the
Megatron-LM arguments it sets (planner/frameworks/megatron/bridge_yaml.py). Before, such a file was read as a
parplan plan file and refused for its `ddp` key. tests/data/bridge/: llama3_8b_hand.yaml is a short one written by
hand (Llama 3 8B at tp2 with sequence parallelism, 128 x 8192 tokens); llama3_70b.yaml, qwen3_30b_a3b.yaml and
deepseek_v3.yaml are whole dumps as to_yaml writes them after runtime_config_update (every field, defaults
included; `_target_` class paths; functions and dtypes as `{_target_, _call_}` mappings), built from the
dataclass defaults and the recipes' settings by a review pass. A first reader took every field of every
section: the dumps' Mamba defaults refused every run as a hybrid, and the dataset's null context-parallel size
and comm_overlap's null gradient overlap wiped the model's and the DDP config's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.files.native import config_kind, is_native

runner = CliRunner()
DATA = Path(__file__).resolve().parent / "data" / "bridge"
BRIDGE = DATA / "llama3_8b_hand.yaml"
SAME_AS_FLAGS = ("--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
                 "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
                 "--vocab-size 128256 --tensor-model-parallel-size 2 --sequence-parallel --global-batch-size 128 "
                 "--micro-batch-size 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
                 "--bf16 --swiglu --normalization RMSNorm --untie-embeddings-and-output-weights "
                 "--disable-bias-linear --position-embedding-type rope --rotary-base 500000 --kv-channels 128\n")


def _check(path: Path, *extra: str) -> dict:
    res = runner.invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_a_bridge_yaml_is_routed_as_a_megatron_config():
    assert is_native(BRIDGE) and config_kind(BRIDGE) == "megatron"


def test_a_bridge_yaml_prices_as_the_megatron_flags_it_stands_for(tmp_path):
    flags = tmp_path / "args.txt"
    flags.write_text(SAME_AS_FLAGS)
    said, plain = _check(BRIDGE), _check(flags)
    assert said["layout"] == plain["layout"] and said["layout"]["tp"] == 2 and said["layout"]["sp"] is True
    assert said["layout"]["zero"] == 1 and said["params"] == plain["params"]
    assert said["time"]["step_s"] == plain["time"]["step_s"]
    assert any("Megatron-Bridge ConfigContainer" in w for w in said["warnings"] + said["notes"])


def _variant(tmp_path: Path, base: Path = BRIDGE, **sections) -> Path:
    data = yaml.safe_load(base.read_text())
    for section, changes in sections.items():
        if isinstance(changes, dict) and isinstance(data.get(section), dict):
            data[section].update(changes)
        else:
            data[section] = changes
    path = tmp_path / f"variant{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_degrees_recompute_and_fp8_from_the_sections(tmp_path):
    """pp and recompute from `model`, the micro-batch from `train`, FP8 from a `mixed_precision` mapping (Bridge
    applies it over the model), and --nodes sizing the run."""
    path = _variant(tmp_path, model={"pipeline_model_parallel_size": 2, "recompute_granularity": "full",
                                     "recompute_method": "uniform", "recompute_num_layers": 1},
                    train={"micro_batch_size": 2},
                    mixed_precision={"_target_": "megatron.bridge.training.mixed_precision.MixedPrecisionConfig",
                                     "bf16": True, "fp8": "hybrid", "fp8_recipe": "tensorwise"})
    got = _check(path, "--nodes", "2")
    lay = got["layout"]
    assert (lay["pp"], lay["recompute"], lay["mbs"], lay["dp"]) == (2, "full", 2, 4)
    assert _check(path, "--nodes", "2", "--precision", "bf16")["time"]["step_s"] > got["time"]["step_s"]


def test_an_unknown_section_shape_is_an_error_naming_it(tmp_path):
    res = runner.invoke(app, ["check", str(_variant(tmp_path, train=[1, 2])), "--cluster", "dgx-h100"])
    assert res.exit_code == 2 and "train must be a mapping" in res.output


def test_whole_recipe_dumps_read_as_their_recipes_set_them():
    """Llama 3 70B (llama3_70b_pretrain_config on 64 nodes): tp4 pp4 vpp5 cp2 dp16 with sequence parallelism, the
    distributed optimizer and TP overlap (so the nemo stack); Qwen3-30B-A3B on 2 nodes: tp4 pp2 ep4, full
    recompute, 30.53 B parameters of which 3.35 B active."""
    llama = _check(DATA / "llama3_70b.yaml", "--nodes", "64")
    lay = llama["layout"]
    assert (lay["tp"], lay["pp"], lay["vpp"], lay["cp"], lay["dp"], lay["sp"], lay["zero"]) == (4, 4, 5, 2, 16, True, 1)
    assert lay["schedule"] == "interleaved"
    # without --nodes: the data-parallel size Bridge wrote into comm_overlap at start-up, times tp x pp x cp
    unsized = _check(DATA / "llama3_70b.yaml")
    assert unsized["layout"] == lay and any("the GPU count, 512, from comm_overlap.data_parallel_size 16"
                                            in w for w in unsized["warnings"] + unsized["notes"])
    qwen = _check(DATA / "qwen3_30b_a3b.yaml", "--nodes", "2")
    lay = qwen["layout"]
    assert (lay["tp"], lay["pp"], lay["ep"], lay["etp"], lay["recompute"]) == (4, 2, 4, 1, "full")
    assert round(qwen["params"]["total"] / 1e9, 2) == 30.53 and round(qwen["params"]["active"] / 1e9, 2) == 3.35
    assert not any("Mamba" in w for w in llama["warnings"] + qwen["warnings"])


def test_the_precision_aware_optimizers_dtypes_are_read(tmp_path):
    """bf16 moments and bf16 main gradients (DeepSeek-V3's recipe sets them) shrink the optimizer and gradient
    bytes; written as dtype mappings, they were dropped."""
    plain = _check(DATA / "qwen3_30b_a3b.yaml", "--nodes", "2")["memory"]["stages"][0]
    path = _variant(tmp_path, DATA / "qwen3_30b_a3b.yaml", optimizer={
        "use_precision_aware_optimizer": True, **{k: {"_target_": "torch.bfloat16", "_call_": False}
                                                  for k in ("main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")}})
    aware = _check(path, "--nodes", "2")["memory"]["stages"][0]
    assert aware["optimizer_bytes"] < plain["optimizer_bytes"] and aware["grads_bytes"] < plain["grads_bytes"]


def test_a_pipeline_layout_list_is_read_and_an_object_is_refused_by_name(tmp_path):
    """DeepSeek-V3's 61 layers on pp16 need its layout: a dump taken after the layout was built writes an object
    that keeps none (exit 2 naming the field); a list of stages is read as Megatron's layout string."""
    res = runner.invoke(app, ["check", str(DATA / "deepseek_v3.yaml"), "--cluster", "dgx-h100", "--nodes", "128"])
    assert res.exit_code == 2 and "model.pipeline_model_parallel_layout" in res.output
    stages = [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4 for _ in range(14)] + [["decoder", "mtp", "loss"]]
    data = yaml.safe_load((DATA / "deepseek_v3.yaml").read_text())
    data["model"]["pipeline_model_parallel_layout"] = stages
    path = tmp_path / "dsv3.yaml"
    path.write_text(yaml.safe_dump(data))
    lay = _check(path, "--nodes", "128")["layout"]
    assert (lay["tp"], lay["pp"], lay["ep"]) == (2, 16, 64) and lay["stage_layers"] == [4] * 15 + [1]
    data["model"]["pipeline_model_parallel_layout"] = "Etttt|" + "tttt|" * 14 + "tmL"  # Megatron's own string form
    path.write_text(yaml.safe_dump(data))
    assert _check(path, "--nodes", "128")["layout"] == lay


@pytest.mark.parametrize("change, said", [
    ({"peft": {"_target_": "megatron.bridge.peft.lora.LoRA"}}, "peft"),
    ({"model": {"_target_": "megatron.bridge.models.t5_provider.T5ModelProvider"}}, "model._target_"),
    ({"model": {"_target_": "megatron.bridge.models.mamba.mamba_provider.MambaModelProvider"}}, "model._target_"),
    ({"mixed_precision": "mixed_fp32_please"}, "mixed_precision"),
    ({"dataset": {"sequence_length": 4096}}, "dataset.sequence_length"),
])
def test_what_bridge_would_not_run_or_parplan_does_not_price_is_exit_2_naming_it(tmp_path, change, said):
    res = runner.invoke(app, ["check", str(_variant(tmp_path, BRIDGE, **change)), "--cluster", "dgx-h100"])
    assert res.exit_code == 2 and said in res.output, res.output
    assert "Traceback" not in res.output


def test_a_recipe_name_sets_the_precision_and_a_null_never_overrides(tmp_path):
    """mixed_precision 'bf16_with_fp8_current_scaling_mixed' is FP8 tensorwise (faster than bf16_mixed); a null
    comm_overlap.tp_comm_overlap leaves the model's own setting."""
    fp8 = _check(_variant(tmp_path, BRIDGE, mixed_precision="bf16_with_fp8_current_scaling_mixed"))
    bf16 = _check(_variant(tmp_path, BRIDGE, mixed_precision="bf16-mixed"))
    assert fp8["time"]["step_s"] < bf16["time"]["step_s"]
    overlap = _variant(tmp_path, BRIDGE, model={"tp_comm_overlap": True}, comm_overlap={"tp_comm_overlap": None})
    assert _check(overlap)["time"]["step_s"] != bf16["time"]["step_s"]


def test_a_key_that_is_not_a_name_is_left_unread(tmp_path):
    """A model section with an integer key (`1: x`, a hand edit) raised an internal error (exit 3) on str.replace;
    such a key names no field, so it is not read, and the rest prices as before."""
    assert _check(_variant(tmp_path, BRIDGE, model={1: "x"}))["layout"] == _check(BRIDGE)["layout"]
