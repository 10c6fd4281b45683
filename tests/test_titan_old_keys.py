"""torchtitan job files in the layouts before 0.1.0 read as those releases read them
(planner/frameworks/torchtitan/config_old.py, config_old_pp.py), and every key torchtitan does not define
named in one warning (config_keys.py, against the vendored known_keys.py).

The TOMLs below are written in the style of each layout's own train_configs: "2024" (argparse JobConfig of
mid-2024, forked-torchtitan 0.202.2 config_manager.py: [training] batch_size, data_parallel_degree,
tensor_parallel_degree, pipeline_parallel_degree, fp8_linear, compile) and "2025" (early 2025,
custom-torchtitan 0.0.2.1 config_manager.py: [training] data_parallel_shard_degree, tensor_parallel_degree,
[experimental] pipeline_parallel_degree, context_parallel_degree, model.converters and [float8])."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes
from planner.frameworks.torchtitan import config_keys, known_keys, known_keys_build

CORPUS = Path(__file__).parent / "data" / "configs"
runner = CliRunner()

LLAMA2_13B_2024 = """# torchtitan Llama 2 13B, mid-2024 layout
[job]
dump_folder = "./outputs"
description = "Llama2 13B training"

[model]
name = "llama2"
flavor = "13B"
norm_type = "rmsnorm"  # [layernorm, np_layernorm, rmsnorm, fused_rmsnorm]
tokenizer_path = "./torchtitan/datasets/tokenizer/tokenizer.model"

[optimizer]
name = "AdamW"
lr = 3e-4

[training]
batch_size = 2
seq_len = 4096
warmup_steps = 200
max_norm = 1.0
steps = 1000
data_parallel_degree = -1
tensor_parallel_degree = 4
pipeline_parallel_degree = 1
fp8_linear = "dynamic"
compile = true
dataset = "c4"

[checkpoint]
enable_checkpoint = false
interval_type = "steps"

[activation_checkpoint]
mode = "selective"
selective_ac_option = "op"
"""

LLAMA3_70B_2025 = """# torchtitan Llama 3 70B, early-2025 layout
[job]
dump_folder = "./outputs"
description = "Llama 3 70B training"

[model]
name = "llama3"
flavor = "70B"
norm_type = "rmsnorm"
tokenizer_path = "./assets/tokenizer/original/tokenizer.model"
converters = "float8"

[optimizer]
name = "AdamW"
lr = 1.5e-4

[training]
batch_size = 8
seq_len = 8192
warmup_steps = 200
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 8
compile = true
mixed_precision_param = "bfloat16"

[experimental]
context_parallel_degree = 2
pipeline_parallel_degree = 2
pipeline_parallel_schedule = "Interleaved1F1B"

[activation_checkpoint]
mode = "full"

[float8]
enable_fsdp_float8_all_gather = true
precompute_float8_dynamic_scale_for_fsdp = true
"""


def _load(tmp_path, text: str, model: str, cluster: str = "dgx-h100", nodes: int = 1):
    path = tmp_path / "train.toml"
    path.write_text(text)
    notes = ReadNotes()
    return load_native(path, model, cluster, nodes, notes=notes), notes.notes


def _dp(prob) -> int:
    lay = prob.layout
    return prob.cluster.num_gpus // (lay.tp * lay.cp * lay.pp)


def test_2024_layout_reads_batch_tp_dp_fp8_and_compile(tmp_path):
    prob, notes = _load(tmp_path, LLAMA2_13B_2024, "llama2-13b", "dgx-a100")
    lay, train = prob.layout, prob.train
    assert (lay.tp, lay.pp, _dp(prob), lay.mbs, lay.zero, train.global_batch_size) == (4, 1, 2, 2, 3, 4)
    assert (train.precision, train.fp8_recipe) == ("fp8", "tensorwise")  # fp8_linear "dynamic"
    assert train.stack_spec.name == "torchtitan" and not train.fused_loss  # blocks compiled, loss eager
    assert any("2024 layout" in n and "training.batch_size as training.local_batch_size" in n for n in notes)
    assert prob.warnings == []


def test_2024_layout_without_fp8_or_compile(tmp_path):
    text = LLAMA2_13B_2024.replace('"dynamic"', '""').replace("compile = true", "compile = false")
    prob, _ = _load(tmp_path, text.replace("tensor_parallel_degree = 4", "tensor_parallel_degree = 8"),
                    "llama2-13b", "dgx-a100")
    # no FSDP (dp 1) under tp 8: mixed precision is FSDP's, so the fp32 model trains in fp32
    # (planner.frameworks.torchtitan.config_toml.amp_precision)
    assert (prob.layout.tp, _dp(prob), prob.train.precision) == (8, 1, "fp32")
    assert prob.train.stack_spec.name == "torchtitan-eager"


def test_2024_pipeline_is_priced_with_the_note_that_torchtitan_refused_it(tmp_path):
    text = LLAMA2_13B_2024.replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2")
    prob, notes = _load(tmp_path, text, "llama2-13b", "dgx-a100")
    assert (prob.layout.tp, prob.layout.pp, _dp(prob)) == (4, 2, 1)
    assert any("PP not implemented yet" in n for n in notes)


def test_2025_layout_reads_tp_cp_pp_mbs_float8_and_compile(tmp_path):
    prob, notes = _load(tmp_path, LLAMA3_70B_2025, "llama3-70b", nodes=8)
    lay, train = prob.layout, prob.train
    assert (lay.tp, lay.cp, lay.pp, _dp(prob), lay.vpp) == (8, 2, 2, 2, 2)
    # generate_split_points: 4 stages of 80 // 4 layers; ranks hold stages (0, 2) and (1, 3)
    assert lay.stage_layers == [40, 40] and lay.schedule == "interleaved"
    assert lay.mbs == 2 and train.global_batch_size == 8 * 2  # batch 8 over 4 microbatches, one per stage
    assert train.precision == "fp8" and not train.fused_loss and train.stack_spec.name == "torchtitan"
    assert any("2025 layout" in n for n in notes) and prob.warnings == []


def test_2025_split_points_and_microbatches(tmp_path):
    text = LLAMA3_70B_2025.replace('pipeline_parallel_schedule = "Interleaved1F1B"',
                                   'pipeline_parallel_schedule = "1F1B"\n'
                                   'pipeline_parallel_split_points = "layers.30"\npipeline_parallel_microbatches = 8')
    prob, _ = _load(tmp_path, text, "llama3-70b", nodes=8)
    assert (prob.layout.stage_layers, prob.layout.vpp, prob.layout.mbs) == ([30, 50], 1, 1)
    with pytest.raises(UserError, match="does not divide into 3 microbatches"):
        _load(tmp_path, text.replace("microbatches = 8", "microbatches = 3"), "llama3-70b", nodes=8)


def test_0_1_split_points_are_read(tmp_path):
    text = ('[model]\nname = "llama3"\nflavor = "70B"\n[training]\nlocal_batch_size = 4\n[parallelism]\n'
            'tensor_parallel_degree = 8\npipeline_parallel_degree = 2\npipeline_parallel_split_points = ["layers.36"]\n'
            'pipeline_parallel_microbatch_size = 1\n')
    prob, _ = _load(tmp_path, text, "llama3-70b", nodes=2)
    assert prob.layout.stage_layers == [36, 44]


def test_0_1_training_compile_still_compiles_the_loss(tmp_path):
    """torchtitan 0.1.0 components/loss.py compiles the loss under training.compile; the old layouts did not."""
    new = '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\ncompile = true\n'
    old = '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nbatch_size = 1\ncompile = true\n'
    assert _load(tmp_path, new, "llama3-8b")[0].train.fused_loss is True
    assert not _load(tmp_path, old, "llama3-8b")[0].train.fused_loss


@pytest.mark.parametrize("find, added, named", [
    ("[checkpoint]", "[parallelism]\ntensor_parallel_degree = 8\n\n[checkpoint]",  # the old key says 4
     "parallelism.tensor_parallel_degree"),
    ("[checkpoint]", "[compile]\nenable = false\n\n[checkpoint]", "compile.enable"),  # training.compile says true
    ('name = "llama2"', 'name = "llama2"\nconverters = ["mx"]', "model.converters"),  # fp8_linear says float8
])
def test_an_old_and_a_new_key_that_disagree_are_refused_naming_both(tmp_path, find, added, named):
    with pytest.raises(UserError, match=rf"training\.\w+ .*{named.replace('.', r'.')}.* disagree"):
        _load(tmp_path, LLAMA2_13B_2024.replace(find, added), "llama2-13b", "dgx-a100")


def test_an_old_and_a_new_key_that_agree_are_read(tmp_path):
    prob, _ = _load(tmp_path, LLAMA2_13B_2024 + "[parallelism]\ntensor_parallel_degree = 4\n", "llama2-13b",
                    "dgx-a100")
    assert (prob.layout.tp, prob.layout.mbs) == (4, 2)


def test_conflict_exits_2_on_the_command_line(tmp_path):
    path = tmp_path / "both.toml"
    path.write_text(LLAMA2_13B_2024 + "[parallelism]\ntensor_parallel_degree = 8\n")
    result = runner.invoke(app, ["check", str(path), "--model", "llama2-13b", "--cluster", "dgx-a100"])
    assert result.exit_code == 2
    assert "training.tensor_parallel_degree" in result.stderr and "parallelism.tensor_parallel_degree" in result.stderr


TYPO = ('[model]\nname = "llama3"\nflavor = "70B"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n[parallelism]\n'
        'data_parallel_shard_degree = -1\ntensor_paralel_degree = 8   # typo\n')


def test_a_misspelled_key_is_named_with_the_key_meant(tmp_path):
    prob, _ = _load(tmp_path, TYPO, "llama3-70b", nodes=4)
    assert prob.layout.tp == 1
    assert prob.warnings == ["parallelism.tensor_paralel_degree is not a key of the torchtitan releases parplan "
                             "reads (mid-2024 and early-2025 snapshots, 0.1.0-0.2.2) (did you mean "
                             "parallelism.tensor_parallel_degree?); ignored (torchtitan 0.2.x refuses unknown keys)"]


def test_typo_warning_on_stderr_and_in_json(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(TYPO)
    result = runner.invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--nodes", "4", "--json"])
    assert result.exit_code in (0, 1)
    assert "warning: parallelism.tensor_paralel_degree is not a key of the torchtitan releases" in result.stderr
    assert any("tensor_paralel_degree" in w for w in json.loads(result.stdout)["warnings"])


def test_a_key_in_the_wrong_section_and_a_far_miss():
    assert config_keys.suggestion("parallelism.local_batch_size") == "training.local_batch_size"
    assert config_keys.suggestion("training.zzz_qqq") is None
    assert "did you mean" not in config_keys.unknown("training.zzz_qqq")


def test_a_flood_of_unknown_keys_is_named_twenty_times_then_counted():
    cfg = {"parallelism": {f"tensor_parallel_degree_{i}": 1 for i in range(25)}}
    lines = config_keys.key_warnings(cfg, cfg)
    assert len(lines) == 21 and lines[-1] == "and 5 more keys torchtitan does not define; ignored"


def test_a_real_key_that_changes_memory_and_is_not_priced_is_named(tmp_path):
    text = TYPO.replace("tensor_paralel_degree", "tensor_parallel_degree") + '[optimizer]\nname = "SGD"\n'
    prob, _ = _load(tmp_path, text, "llama3-70b", nodes=4)
    assert prob.warnings == ["optimizer.name='SGD': a torchtitan key parplan does not price (parplan prices Adam's "
                             "two fp32 states); ignored"]


@pytest.mark.parametrize("key", sorted(known_keys.KEYS))
def test_no_known_key_is_called_unknown(key):
    *tables, name = key.split(".")
    cfg: dict = {}
    node = cfg
    for table in tables:
        node = node.setdefault(table, {})
    node[name] = config_keys.UNPRICED[key][0][0] if key in config_keys.UNPRICED else "x"
    assert config_keys.key_warnings(cfg, cfg) == []


@pytest.mark.parametrize("path", sorted(CORPUS.glob("tt_*.toml")), ids=lambda p: p.name)
def test_corpus_presets_raise_no_key_warning(path):
    import tomllib  # noqa: PLC0415

    cfg = tomllib.loads(path.read_text())
    assert config_keys.key_warnings(cfg, cfg) == []
    assert load_native(path, "llama3-8b", "dgx-h100", 64).warnings == []


def test_known_keys_is_the_generator_output_unedited():
    found = {key: versions.split() for key, versions in known_keys.KEYS.items()}
    assert known_keys_build.render(found) == Path(known_keys.__file__).read_text()
    assert {"training.batch_size", "experimental.pipeline_parallel_degree",
            "quantize.linear.float8.recipe_name"} <= set(known_keys.KEYS)
