"""DeepSpeed JSON as Hugging Face Trainer users write it: "auto" values filled from check's flags or
TrainingArguments' defaults (transformers integrations/deepspeed.py trainer_config_process), offload
sections and fp32 (neither bf16 nor fp16) read, every default named. The corpus files are unedited
(tests/data/configs/SOURCES.tsv)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from costmodels.estimate import estimate
from costmodels.train_spec import TrainSpec
from planner.cli import app
from planner.errors import UserError
from planner.files import loading
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags, resolve
from planner.files.native import load_native

CORPUS = Path(__file__).parent / "data" / "configs"
runner = CliRunner()


def _read(name: str, flags: TrainerFlags = TrainerFlags(), model: str = "llama2-7b", nodes: int = 1):
    notes = ReadNotes()
    prob = load_native(CORPUS / name, model, "dgx-a100", nodes, flags, notes)
    return prob, notes


def test_auto_takes_trainer_defaults_and_says_so():
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
           "train_batch_size": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}
    read = ReadNotes()
    out = resolve(cfg, TrainerFlags(), Path("ds.json"), read)
    assert out["train_micro_batch_size_per_gpu"] == 8 and out["gradient_accumulation_steps"] == 1
    assert "train_batch_size" not in out  # left to DeepSpeed's rule: world x micro x GAS
    assert out["bf16"]["enabled"] is False
    joined = "\n".join(read.assumed)
    assert "per_device_train_batch_size" in joined and "fp32 training assumed" in joined
    assert len(read.assumed) == 5  # micro, GAS, train_batch_size, bf16, recompute: one line each


def test_flags_fill_auto_and_must_agree_with_numbers():
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
           "train_batch_size": "auto", "fp16": {"enabled": "auto"}}
    read = ReadNotes()
    out = resolve(cfg, TrainerFlags(micro_batch=2, global_batch=64, precision="fp16", recompute="none"),
                  Path("ds.json"), read)
    assert out["train_micro_batch_size_per_gpu"] == 2 and out["train_batch_size"] == 64
    assert "gradient_accumulation_steps" not in out  # derived from 64 / (2 * dp)
    assert out["fp16"]["enabled"] is True and read.assumed == []
    with pytest.raises(UserError, match="train_micro_batch_size_per_gpu=4 but --micro-batch 2"):
        resolve({"train_micro_batch_size_per_gpu": 4}, TrainerFlags(micro_batch=2), Path("ds.json"), ReadNotes())


def test_global_batch_derives_grad_accum_over_dp():
    prob, notes = _read("ds_hf_zero2_bf16.json", TrainerFlags(micro_batch=2, global_batch=64, precision="bf16"))
    assert prob.layout.mbs == 2 and prob.layout.num_microbatches == 4  # 64 / (2 x 8 GPUs)
    assert prob.train.global_batch_size == 64 and prob.train.precision == "bf16"


def test_corpus_files_read_with_their_offload_and_precision():
    # (file, precision without flags, offload_optimizer, offload_params, zero)
    want = {"ds_alpaca_offload_z3.json": ("fp32", "cpu", "cpu", 3),
            "ds_fastchat_s3.json": ("fp32", "cpu", "cpu", 3),
            "ds_hf_zero2_bf16.json": ("fp32", "cpu", "none", 2),  # "bfloat16": "auto", no --bf16 given
            "ds_hf_zero3.json": ("fp16", "cpu", "cpu", 3),
            "dsx_training_autotuning_hf_dsconfigs_ds_config_z3.json": ("fp32", "none", "none", 3),
            "dsx_training_pipeline_parallelism_ds_config.json": ("fp32", "none", "none", 0),
            "bs_tr11_176B_ds_config.json": ("bf16", "none", "none", 0)}
    for name, (precision, opt, par, zero) in want.items():
        prob, _ = _read(name, nodes=128 if name.startswith("bs_") else 1)
        got = (prob.train.precision, prob.train.offload_optimizer, prob.train.offload_params, prob.layout.zero)
        assert got == (precision, opt, par, zero), name


def test_bfloat16_alias_follows_precision_flag():
    prob, _ = _read("ds_hf_zero2_bf16.json", TrainerFlags(precision="bf16"))
    assert prob.train.precision == "bf16"


def test_no_batch_keys_is_read_as_auto():
    prob, notes = _read("ds_hf_zero3.json")
    assert prob.layout.mbs == 8 and prob.train.global_batch_size == 64
    assert any("no train_micro_batch_size_per_gpu" in line for line in notes.assumed)


def test_unpriced_auto_values_are_named():
    _, notes = _read("ds_alpaca_offload_z3.json")
    assert any("optimizer.params.lr" in n and "gradient_clipping" in n for n in notes.notes)


def test_fp32_training_is_16_bytes_per_param_and_fp32_activations():
    """fp32 Adam: 4 (weights) + 4 (grads) + 8 (moments), no master copy; activations twice bf16's."""
    fp32 = TrainSpec(global_batch_size=8, precision="fp32")
    assert (fp32.weight_bytes_per_param, fp32.grad_bytes_per_param, fp32.optimizer_bytes_per_param) == (4, 4, 8)
    assert TrainSpec(global_batch_size=8).optimizer_bytes_per_param == 12
    prob, _ = _read("dsx_training_autotuning_hf_dsconfigs_ds_config_z3.json", TrainerFlags(micro_batch=1))
    lay = prob.layout.model_copy(update={"zero": 0})
    half = prob.train.model_copy(update={"precision": "bf16"})
    full_mem, half_mem = (estimate(prob.model, prob.cluster, t, lay).memory.stages[0]
                          for t in (prob.train, half))
    params = full_mem.weights_bytes / 4
    assert full_mem.weights_bytes + full_mem.grads_bytes + full_mem.optimizer_bytes == pytest.approx(16 * params)
    assert full_mem.activations_bytes == pytest.approx(2 * half_mem.activations_bytes, rel=1e-6)


def test_fp32_gemms_run_at_the_fp32_peak():
    """A100: FP32 19.5 TFLOP/s, TF32 156 (datasheet); fp32 steps are slower than bf16 and tf32's."""
    prob, _ = _read("dsx_training_autotuning_hf_dsconfigs_ds_config_z3.json", TrainerFlags(micro_batch=1))
    gpu = prob.cluster.gpu_profile
    assert gpu.peak_flops("fp32") == 19.5e12 and gpu.peak_flops("tf32") == 156e12
    steps = {p: estimate(prob.model, prob.cluster, prob.train.model_copy(update={"precision": p}),
                         prob.layout).time.step_s for p in ("fp32", "tf32", "bf16")}
    assert steps["fp32"] > steps["tf32"] > steps["bf16"]
    v100 = loading.load_cluster("dgx-a100").gpu_profile.model_copy(update={"tf32_tflops": None})
    with pytest.raises(Exception, match="no tf32 peak"):
        v100.peak_flops("tf32")


def test_check_cli_names_assumptions_on_stderr_and_in_json():
    args = ["check", str(CORPUS / "ds_alpaca_offload_z3.json"), "--model", "llama2-7b", "--cluster", "dgx-a100",
            "--nodes", "1", "--seq-len", "512"]
    result = runner.invoke(app, args + ["--json"])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert any("per_device_train_batch_size" in a for a in doc["assumed"])
    assert doc["notes"] and result.stderr.count("assumed: ") == len(doc["assumed"])
    assert doc["layout"]["mbs"] == 8
    flagged = json.loads(runner.invoke(app, args + ["--micro-batch", "1", "--precision", "bf16", "--json"]).stdout)
    assert flagged["layout"]["mbs"] == 1 and not any("per_device" in a for a in flagged["assumed"])
    bad = runner.invoke(app, args + ["--precision", "fp64"])
    assert bad.exit_code == 2 and "precision" in bad.stderr and "Traceback" not in bad.output


def test_check_seq_len_applies_to_every_format():
    base = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--json"]
    short = runner.invoke(app, ["check", str(CORPUS / "tt_llama3_8b.toml"), *base, "--seq-len", "2048"])
    long = runner.invoke(app, ["check", str(CORPUS / "tt_llama3_8b.toml"), *base])
    assert json.loads(short.stdout)["time"]["step_s"] < json.loads(long.stdout)["time"]["step_s"]


@pytest.mark.parametrize("zero,message", [
    ({"stage": 2, "offload_optimizer": {"device": 5}}, "offload_optimizer.device=5 must be none, cpu or nvme"),
    ({"stage": 0, "offload_optimizer": {"device": "cpu"}}, "needs zero_optimization.stage >= 1"),
    ({"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 2}}, "offload_optimizer.ratio=2 must be from 0"),
    ({"stage": 3, "offload_optimizer": {"device": "disk"}}, "device='disk'"),
])
def test_offload_sections_refused_with_the_key(tmp_path, zero, message):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}))
    with pytest.raises(UserError, match=message):
        load_native(path, "llama2-7b", "dgx-a100", 1)


def test_partial_offload_ratio_is_the_fraction(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme",
                                                                                        "ratio": 0.25}}}))
    train = load_native(path, "llama2-7b", "dgx-a100", 1).train
    assert (train.offload_optimizer, train.offload_optimizer_fraction) == ("nvme", 0.25)


def test_fp32_plans_are_refused_by_the_exporters_not_crashed(tmp_path):
    """fp32/tf32 plans export what can say them (torchrun) and name the rest's reason (exit 0, no crash)."""
    from planner.exporters import run_export
    doc = {"model": "llama2-7b", "cluster": {"name": "dgx-a100", "gpu": "a100-80gb", "num_nodes": 1,
           "scale_up_gb_per_s": 300.0, "scale_out_gb_per_s": 25.0},
           "train": {"global_batch_size": 8, "precision": "fp32"}, "layout": {"zero": 3, "mbs": 1}}
    result = run_export(doc, "all", tmp_path / "out", False)
    assert "megatron" in result.refused and "precision=fp32" in result.refused["deepspeed"]


BATCH_VALUE = st.one_of(st.just("auto"), st.just(None), st.sampled_from([1, 2, 4, 8, 64]))


@settings(max_examples=60, deadline=None)
@given(micro=BATCH_VALUE, gas=BATCH_VALUE, total=BATCH_VALUE,
       flags=st.tuples(*(st.one_of(st.none(), st.sampled_from([1, 2, 4, 64])) for _ in range(3))))
def test_any_auto_mix_reads_consistently_or_names_the_problem(micro, gas, total, flags):
    """Whatever mix of numbers, "auto" and absent keys and whatever flags: either a UserError, or a
    batch that obeys DeepSpeed's rule (micro x GAS x dp = train_batch_size) and honours every flag."""
    import tempfile
    cfg = {k: v for k, v in (("train_micro_batch_size_per_gpu", micro), ("gradient_accumulation_steps", gas),
                             ("train_batch_size", total)) if v is not None}
    cfg["zero_optimization"] = {"stage": 1}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ds.json"
        path.write_text(json.dumps(cfg))
        try:
            prob = load_native(path, "llama2-7b", "dgx-a100", 1, TrainerFlags(*flags))
        except UserError:
            return
    lay, gbs = prob.layout, prob.train.global_batch_size
    assert lay.mbs * lay.num_microbatches * 8 == gbs
    for flag, got in zip(flags, (lay.mbs, lay.num_microbatches, gbs)):
        assert flag is None or flag == got


def test_gpu_count_assumed_and_said_only_when_notes_are_kept():
    """A Trainer config never fixes the GPU count: check assumes the cluster's size and says so; a
    caller that keeps no notes gets the old error rather than a silent assumption."""
    notes = ReadNotes()
    prob = load_native(CORPUS / "ds_hf_zero2_bf16.json", "llama2-7b", "dgx-h100", None, notes=notes)
    assert prob.cluster.num_gpus == 8 and any("set --nodes" in a for a in notes.assumed)
    with pytest.raises(UserError, match="give --nodes"):
        load_native(CORPUS / "ds_hf_zero2_bf16.json", "llama2-7b", "dgx-h100", None)


def test_unpriced_deepspeed_keys_are_named():
    _, notes = _read("ds_fastchat_s3.json")
    line = next(n for n in notes.notes if n.startswith("read but not priced"))
    assert "stage3_max_live_parameters=1000000000.0" in line and "sub_group_size" not in line


def test_sub_group_size_is_read():
    """zero_optimization.sub_group_size bounds ZeRO-3's fp32 gradient cast (priced, so not named as unpriced)."""
    prob, _ = _read("ds_fastchat_s3.json")
    assert prob.train.zero_sub_group_mparams == 1e6


def test_recompute_option_for_gradient_checkpointing():
    """The Trainer's --gradient_checkpointing is outside the JSON: none is assumed and said; --recompute full
    sets it, and the activations shrink."""
    args = ["check", str(CORPUS / "ds_fastchat_s3.json"), "--model", "llama2-7b", "--cluster", "dgx-a100",
            "--precision", "fp16", "--json"]
    plain_run = runner.invoke(app, args)
    assert any("--gradient_checkpointing" in a for a in json.loads(plain_run.stdout)["assumed"])
    full = json.loads(runner.invoke(app, args + ["--recompute", "full"]).stdout)
    assert full["layout"]["recompute"] == "full"
    assert full["memory"]["peak_bytes"] < json.loads(plain_run.stdout)["memory"]["peak_bytes"]
    bad = runner.invoke(app, args + ["--recompute", "some"])
    assert bad.exit_code == 2 and "recompute" in bad.stderr


@pytest.mark.parametrize("option,value,choices", [("--precision", "fp64", "bf16, fp16, fp8, fp32, tf32"),
                                                  ("--recompute", "yes", "none, selective, full")])
def test_a_check_option_outside_its_choices_names_the_option_and_the_choices(option, value, choices):
    result = runner.invoke(app, ["check", str(CORPUS / "ds_hf_zero3.json"), "--model", "llama2-7b",
                                 "--cluster", "dgx-a100", option, value])
    assert result.exit_code == 2
    assert f"{option} '{value}': expected one of {choices}" in result.stderr


def test_auto_beside_an_enabled_section_is_not_called_fp32():
    """Axolotl's zero3_bf16.json: bf16.enabled true, fp16.enabled "auto": priced bf16, and the assumption says so."""
    read = ReadNotes()
    out = resolve({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "fp16": {"enabled": "auto"}},
                  TrainerFlags(recompute="none"), Path("ds.json"), read)
    assert out["fp16"]["enabled"] is False
    assert not any("fp32" in a for a in read.assumed)
    assert any('fp16.enabled="auto": off' in a and "bf16.enabled=true sets the precision" in a for a in read.assumed)


@pytest.mark.parametrize("sections,flag", [({"bf16": {"enabled": True}}, "fp16"),
                                           ({"bf16": {"enabled": True}, "fp16": {"enabled": "auto"}}, "fp16"),
                                           ({"bf16": {"enabled": True}}, "tf32"),
                                           ({"fp16": {"enabled": True}}, "fp8"),
                                           ({"bf16": {"enabled": False}}, "bf16")])
def test_precision_flag_contradicting_the_file_is_refused_naming_both(sections, flag):
    key, value = next((k, v["enabled"]) for k, v in sections.items() if isinstance(v["enabled"], bool))
    with pytest.raises(UserError, match=f"{key}.enabled={str(value).lower()} but --precision {flag}"):
        resolve({"train_micro_batch_size_per_gpu": 1, **sections}, TrainerFlags(precision=flag), Path("ds.json"),
                ReadNotes())


def test_fp8_over_a_bf16_file_and_bf16_over_an_fp32_file_are_said():
    read = ReadNotes()
    resolve({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}}, TrainerFlags(precision="fp8"),
            Path("ds.json"), read)
    assert any("fp8 is priced on top of the file's bf16" in n for n in read.notes)
    read = ReadNotes()
    resolve({"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": "auto"}}, TrainerFlags(precision="bf16"),
            Path("ds.json"), read)
    assert any("would train this file alone in fp32" in n for n in read.notes)
    read = ReadNotes()
    resolve({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "auto"}}, TrainerFlags(precision="bf16"),
            Path("ds.json"), read)
    assert read.notes == []  # "auto" takes the flag: nothing to say


def test_sub_group_size_zero_is_one_parameter_per_sub_group(tmp_path):
    """DeepSpeed allows sub_group_size 0 (ge=0; a sub-group closes once it holds that many elements, so each
    parameter is one): axolotl's zero3_bf16.json ships it, and parplan refused the file (a new-user pass). It is
    priced as the largest parameter's partition (llama2-7b's 32000 x 4096 embedding over 8 GPUs)."""
    cfg = json.loads((CORPUS / "ds_fastchat_s3.json").read_text())
    cfg["zero_optimization"]["sub_group_size"] = 0
    path = tmp_path / "zero3_bf16.json"
    path.write_text(json.dumps(cfg))
    res = runner.invoke(app, ["check", str(path), "--model", "llama2-7b", "--cluster", "dgx-a100", "--precision",
                              "fp16", "--json"])
    assert res.exit_code in (0, 1), res.output
    assert json.loads(res.stdout)["read"]["train"]["zero_sub_group_mparams"] == pytest.approx(32000 * 4096 / 8 / 1e6)


def test_a_json_without_precision_sections_says_fp32_and_offload_is_a_json_note(tmp_path):
    """A new-user pass: DeepSpeed's autotuning template (no bf16/fp16 section) was priced in fp32 without a word on
    stderr, and the host RAM an offload keeps was on stderr but not among --json's notes."""
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
           "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": False}}}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    args = ["check", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100", "--json"]
    doc = json.loads(runner.invoke(app, args).stdout)
    assert any(a.startswith("precision fp32: no bf16 or fp16 section") for a in doc["assumed"])
    assert any(n.startswith("offload keeps") and "host RAM per node" in n for n in doc["notes"])
    told = json.loads(runner.invoke(app, args + ["--precision", "bf16"]).stdout)
    assert not any(a.startswith("precision fp32") for a in told["assumed"])
    path.write_text(json.dumps({**cfg, "bf16": {"enabled": False}}))  # the file's own word: nothing assumed
    assert not any(a.startswith("precision fp32") for a in json.loads(runner.invoke(app, args).stdout)["assumed"])


def test_torch_autocast_prices_its_16_bit_compute(tmp_path):
    """A review: a JSON with "torch_autocast": {"enabled": true} (DeepSpeed 0.16+) was said to train in fp32 ("no
    bf16 or fp16 section") and priced so; autocast computes in its dtype (default bfloat16)."""
    cfg = {"torch_autocast": {"enabled": True}, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
           "zero_optimization": {"stage": 2}}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    doc = json.loads(runner.invoke(app, ["check", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100",
                                         "--json"]).stdout)
    assert doc["read"]["train"]["precision"] == "bf16"
    assert not any(a.startswith("precision fp32") for a in doc["assumed"])
    assert any(n.startswith("torch_autocast: bf16 autocast") for n in doc["notes"])
    path.write_text(json.dumps({**cfg, "torch_autocast": {"enabled": True, "dtype": "int8"}}))
    bad = runner.invoke(app, ["check", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100"])
    assert bad.exit_code == 2 and "torch_autocast.dtype='int8'" in bad.stderr
