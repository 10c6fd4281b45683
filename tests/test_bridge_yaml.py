"""`check` reads a Megatron-Bridge ConfigContainer YAML (ConfigContainer.to_yaml, Megatron-Bridge 0.3.1) as the
Megatron-LM arguments it sets (planner/frameworks/megatron/bridge_yaml.py). Before, such a file was read as a
parplan plan file and refused for its `ddp` key. tests/data/bridge_llama3_8b.yaml is written the way
to_yaml writes one (`_target_` class paths, functions and dtypes as `{_target_, _call_}` mappings); its values
are Llama 3 8B's at tp2 with sequence parallelism, 128 x 8192 tokens."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.files.native import config_kind, is_native

runner = CliRunner()
BRIDGE = Path(__file__).resolve().parent / "data" / "bridge_llama3_8b.yaml"
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


def _variant(tmp_path: Path, **sections) -> Path:
    data = yaml.safe_load(BRIDGE.read_text())
    for section, changes in sections.items():
        if isinstance(changes, dict) and isinstance(data.get(section), dict):
            data[section].update(changes)
        else:
            data[section] = changes
    path = tmp_path / "variant.yaml"
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
