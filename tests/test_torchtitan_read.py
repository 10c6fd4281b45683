"""torchtitan TOML read as its users run it (planner/frameworks/torchtitan/config_toml.py): converters, float8 recipe,
compile components, async TP, activation checkpoint modes, CPU offload; and the five corpus presets
(tests/data/configs, unedited) judged on the hardware they ran on."""

from __future__ import annotations

from pathlib import Path

import pytest

import hardware_profiles as hp

from costmodels.estimate import estimate
from planner.errors import UserError
from planner.files import loading
from planner.frameworks.deepspeed.auto import ReadNotes
from planner.files.native import load_native

CORPUS = Path(__file__).parent / "data" / "configs"
GIB = 2**30
BASE = "[parallelism]\ndata_parallel_shard_degree = 8\n[training]\nlocal_batch_size = 1\nseq_len = 2048\n"


def _h100_96gb():
    """torchtitan's H100s: 96 GB HBM2e at 500 W (hardware profile h100-sxm-500w), 8 per node."""
    base = loading.load_cluster("dgx-h100")
    return base.model_copy(update={"gpu": hp.load_gpu("h100-sxm-500w"), "name": "h100-96gb"})


def _load(tmp_path, text: str, model: str = "llama3-8b", cluster: str = "dgx-h100"):
    path = tmp_path / "job.toml"
    path.write_text(text)
    notes = ReadNotes()
    return load_native(path, model, cluster, 1, notes=notes), notes.notes


# (file, model preset, cluster, nodes): the hardware each ran on (corpus README; DeepSeek-V3 16B:
# torchtitan issue #1789, 8 x H100 80 GB with local_batch_size 4)
PRESETS = [("tt_llama3_8b.toml", "llama3-8b", "dgx-h100", 1), ("tt_llama3_70b.toml", "llama3-70b", "dgx-a100", 8),
           ("tt_llama3_405b.toml", "llama3.1-405b", "dgx-h100", 16), ("tt_qwen3_32b.toml", "qwen3-32b", None, 1),
           ("tt_deepseek_v3_16b.toml", "deepseek-v3-16b", "dgx-h100", 1)]


@pytest.mark.parametrize("name,model,cluster,nodes", PRESETS, ids=[p[0] for p in PRESETS])
def test_corpus_presets_fit_where_they_ran(name, model, cluster, nodes):
    prob = load_native(CORPUS / name, model, cluster or _h100_96gb(), nodes)
    result = estimate(prob.model, prob.cluster, prob.train, prob.layout)
    assert result.fits, f"{name}: {result.memory.device_bytes / GIB:.1f} GiB"


def test_deepseek_v3_16b_reserved_peak_near_the_log():
    """torchtitan issue #1789: 73.32 GiB max reserved on rank 0 with this file's settings (lbs 4, EP 8)."""
    prob = load_native(CORPUS / "tt_deepseek_v3_16b.toml", "deepseek-v3-16b", "dgx-h100", 1)
    reserved = estimate(prob.model, prob.cluster, prob.train, prob.layout).memory.peak_reserved_bytes
    assert reserved / GIB == pytest.approx(73.32, rel=0.10)
    assert prob.train.fused_loss is True and prob.train.stack_spec.name == "torchtitan-eager"


def test_405b_reads_float8_async_tp_compile_and_full_ac():
    notes = ReadNotes()
    prob = load_native(CORPUS / "tt_llama3_405b.toml", "llama3.1-405b", "dgx-h100", 16, notes=notes)
    t = prob.train
    assert (t.precision, t.fp8_recipe, t.tp_comm_overlap, t.stack_spec.name) == ("fp8", "tensorwise", True,
                                                                                 "torchtitan")
    assert prob.layout.recompute == "full" and prob.layout.tp == 8
    assert any("enable_fsdp_float8_all_gather" in n for n in notes.notes)


def test_converters_and_recipes(tmp_path):
    prob, _ = _load(tmp_path, BASE + '[model]\nconverters = ["quantize.linear.float8"]\n'
                    '[quantize.linear.float8]\nrecipe_name = "rowwise_with_gw_hp"\n')
    assert (prob.train.precision, prob.train.fp8_recipe) == ("fp8", "rowwise")
    prob, _ = _load(tmp_path, BASE + '[model]\nconverters = ["float8"]\n[float8]\nrecipe_name = "rowwise"\n')
    assert prob.train.fp8_recipe == "rowwise"
    prob, notes = _load(tmp_path, BASE + '[model]\nconverters = ["mx", "quantize.grouped_mm.mx", "lora"]\n',
                        cluster="dgx-b200")  # MX needs Blackwell: an H100 is refused while reading (round 2)
    assert prob.train.fp8_recipe == "mxfp8" and len([n for n in notes if "converters" in n]) == 2
    prob, _ = _load(tmp_path, BASE)
    assert prob.train.precision == "bf16"
    with pytest.raises(UserError, match="recipe_name='fp4'"):
        _load(tmp_path, BASE + '[model]\nconverters = ["float8"]\n[float8]\nrecipe_name = "fp4"\n')


@pytest.mark.parametrize("section,want,noted", [
    ('mode = "selective"\nselective_ac_option = "op"', "selective", False),
    ('mode = "selective"\nselective_ac_option = "1"', "full", False),
    ('mode = "selective"\nselective_ac_option = "3"', "full", True),  # 1 block in 3: tests/test_torchtitan_ac_period
    ('mode = "full"', "full", False), ('mode = "none"', "none", False),
    ('mode = "memory_budget"\nmemory_budget = 0.0', "full", False),
    ('mode = "memory_budget"\nmemory_budget = 0.3', "selective", True),
])
def test_activation_checkpoint_modes(tmp_path, section, want, noted):
    prob, notes = _load(tmp_path, BASE + "[activation_checkpoint]\n" + section + "\n")
    assert prob.layout.recompute == want
    assert any("activation_checkpoint" in n for n in notes) == noted


@pytest.mark.parametrize("section,message", [
    ('mode = "selective"\nselective_ac_option = "every"', "selective_ac_option"),
    ('mode = "memory_budget"\nmemory_budget = 2', "memory_budget=2"),
    ('mode = "some"', "mode='some'"),
])
def test_activation_checkpoint_errors_name_the_key(tmp_path, section, message):
    with pytest.raises(UserError, match=message):
        _load(tmp_path, BASE + "[activation_checkpoint]\n" + section + "\n")


def test_compile_components_and_async_tp(tmp_path):
    prob, notes = _load(tmp_path, BASE + '[compile]\nenable = true\ncomponents = ["loss"]\n')
    assert prob.train.stack_spec.name == "torchtitan-eager" and prob.train.fused_loss and notes
    prob, _ = _load(tmp_path, BASE + '[compile]\nenable = true\n')  # default components: model and loss
    assert prob.train.stack_spec.name == "torchtitan" and prob.train.fused_loss
    prob, notes = _load(tmp_path, BASE + '[compile]\nenable = false\nenable_async_tensor_parallel = true\n')
    assert prob.train.tp_comm_overlap and any("async" in n for n in notes)  # 0.3's place for the switch


def test_cpu_offload_and_fp32_params(tmp_path):
    prob, _ = _load(tmp_path, BASE.replace("[training]\n", "[training]\nenable_cpu_offload = true\n"
                                           'mixed_precision_param = "float32"\n'))
    t = prob.train
    assert (t.offload_optimizer, t.offload_params, t.precision) == ("cpu", "cpu", "fp32")


LAUNCH_03 = """#!/bin/bash
torchrun --nproc_per_node=8 --rdzv_backend c10d --rdzv_endpoint="localhost:0" \\
  -m torchtitan.train --module llama3 --config llama3_70b \\
  --parallelism.tensor_parallel_degree 4 --training.local_batch_size=2 \\
  --compile.enable --compile.components model loss --metrics.log_freq 10
"""


def test_torchtitan_03_launch_line(tmp_path):
    """torchtitan 0.3.0: --module/--config pick the config_registry preset (llama3_70b: seq 8192, full
    AC), tyro flags override it; GPUs from torchrun --nproc_per_node; unpriced flags named."""
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH_03)
    notes = ReadNotes()
    prob = load_native(path, "llama3-70b", "dgx-h100", None, notes=notes)
    lay, t = prob.layout, prob.train
    assert (prob.cluster.num_gpus, lay.tp, lay.mbs, lay.recompute) == (8, 4, 2, "full")
    assert (t.seq_length, t.stack_spec.name, t.fused_loss) == (8192, "torchtitan", True)
    assert notes.notes[0] == "--metrics.log_freq: not priced by parplan"
    assert len(notes.notes) == 2 and "one captured CUDA graph" in notes.notes[1]  # 0.3.0 captures by default


def test_torchtitan_03_run_train_env_and_defaults(tmp_path):
    """MODULE=/CONFIG=/NGPU= before run_train.sh; an unknown preset takes 0.3's defaults (local batch 8,
    seq 2048, per-op selective AC: 0.2's default was every 2nd layer) and says so; booleans as --x.no-y."""
    path = tmp_path / "run.sh"
    path.write_text("NGPU=4 MODULE=llama3 CONFIG=my_own ./run_train.sh --compile.no-enable\n")
    notes = ReadNotes()
    prob = load_native(path, "llama3-8b", "dgx-h100", None, notes=notes)
    assert (prob.cluster.num_gpus, prob.layout.mbs, prob.train.seq_length) == (4, 8, 2048)
    assert prob.layout.recompute == "selective" and prob.train.stack_spec.name == "torchtitan-eager"
    assert any("my_own" in n for n in notes.notes)
    path.write_text("./run_train.sh --module llama3 --training.seq_len many\n")
    with pytest.raises(UserError, match="--config"):
        load_native(path, "llama3-8b", "dgx-h100", 1)


def test_torchtitan_03_nested_flags(tmp_path):
    """--quantize.linear.float8.recipe_name reaches the float8 recipe under the 405B preset's converter;
    a flag below a value is refused naming it."""
    path = tmp_path / "launch.sh"
    path.write_text("torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 --config llama3_405b "
                    "--quantize.linear.float8.recipe_name rowwise\n")
    prob = load_native(path, "llama3.1-405b", "dgx-h100", 16)
    assert (prob.train.precision, prob.train.fp8_recipe, prob.train.tp_comm_overlap) == ("fp8", "rowwise", True)
    path.write_text("./run_train.sh --module llama3 --config llama3_8b --training.seq_len.x 3\n")
    with pytest.raises(UserError, match="seq_len is a value"):
        load_native(path, "llama3-8b", "dgx-h100", 1)


@pytest.mark.parametrize("name,model,cluster,nodes", PRESETS, ids=[p[0] for p in PRESETS])
def test_a_shipped_flavor_needs_no_model(name, model, cluster, nodes):
    """torchtitan's [model] name / flavor names the model; each corpus config names one parplan has as a
    preset, so `check` reads it without --model (it used to refuse: "--model is required") and says so."""
    notes = ReadNotes()
    prob = load_native(CORPUS / name, None, cluster or _h100_96gb(), nodes, notes=notes)
    assert prob.model.name == model
    assert any(n.startswith(f"model {model}: the preset of torchtitan's [model]") for n in notes.notes)
    assert load_native(CORPUS / name, "llama3-8b", cluster or _h100_96gb(), nodes).model.name == "llama3-8b"


def test_an_unshipped_flavor_still_needs_the_model(tmp_path):
    with pytest.raises(UserError, match="--model is required"):
        _load(tmp_path, '[model]\nname = "llama3"\nflavor = "debugmodel"\n' + BASE, model=None)


def test_a_03_list_flag_is_one_comma_separated_word(tmp_path):
    """torchtitan 0.3.0 reads `--compile.components model,loss` as two components (config/manager.py
    list_str_rule: one word split on commas); it was read as the one component 'model,loss', so the model was
    priced eager while the note said the loss was compiled (a new-user pass)."""
    from planner.frameworks.torchtitan import config_cli
    from planner.frameworks.torchtitan.export import cli_words

    line = LAUNCH_03.replace("--compile.components model loss", "--compile.components model,loss")
    cfg, _ = config_cli.cli_config(line, tmp_path / "launch.sh", [])
    assert cfg["compile"]["components"] == ["model", "loss"]
    assert cli_words("compile", "components", ["model", "loss"]) == ["--compile.components", "model,loss"]
