"""The Hugging Face reader's warnings (planner.files.hf_notes.hf_warnings) in `--json` output: `check`, `estimate`
and `plan` list them under the top-level "warnings" key, each as `WHERE: LINE`, the same text stderr shows after
`parplan: warning: `, which stays as it was (once, whether or not --json is given). A preset model adds none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()

# A small Llama whose checkpoint is fp8-quantized: the reader warns that the quantized format is not priced.
TINY_QUANT = dict(model_type="llama", num_hidden_layers=8, hidden_size=1024, num_attention_heads=8,
                  num_key_value_heads=8, intermediate_size=2816, vocab_size=32000, max_position_embeddings=2048,
                  quantization_config={"quant_method": "fp8"})
NOTE = "quantization_config (quant_method fp8): the checkpoint's quantized weight format is not priced"
TRAIN = {"global_batch_size": 16, "seq_length": 2048}
LAYOUT = {"tp": 1, "pp": 1, "mbs": 1}
DS_JSON = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
           "zero_optimization": {"stage": 1}, "bf16": {"enabled": True}}


def _write(path: Path, data: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return str(path)


def _hf(tmp_path: Path) -> str:
    return _write(tmp_path / "tiny-quant" / "config.json", TINY_QUANT)


def _json(*args: str) -> tuple[dict, str]:
    """The command's parsed stdout and its stderr; exit 0 (fits / a plan found) expected."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.exception)
    return json.loads(result.stdout), result.stderr


def _noted(warnings: list, where: str) -> list:
    return [line for line in warnings if line.startswith(f"{where}: {NOTE}")]


def _on_stderr_once(stderr: str, where: str) -> None:
    """The reader's line as before: `parplan: warning: WHERE: LINE`, once (show() does not print it again)."""
    assert stderr.count(f"parplan: warning: {where}: {NOTE}") == 1, stderr
    assert stderr.count(NOTE) == 1, stderr


def test_estimate_json_lists_the_hf_warning(tmp_path):
    hf = _hf(tmp_path)
    data, stderr = _json("estimate", hf, "--cluster", "dgx-h100", "--nodes", "1", "--layout", "tp=1,pp=1,mbs=1",
                         "--global-batch", "16", "--seq-len", "2048", "--json")
    assert len(_noted(data["warnings"], hf)) == 1 and "memory" in data and "time" in data
    _on_stderr_once(stderr, hf)


def test_plan_json_lists_the_hf_warning(tmp_path):
    hf = _hf(tmp_path)
    data, stderr = _json("plan", hf, "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "16",
                         "--seq-len", "2048", "--top", "1", "--time-limit", "10", "--json")
    assert len(_noted(data["warnings"], hf)) == 1 and data["plans"]
    _on_stderr_once(stderr, hf)


def test_check_json_lists_the_hf_warning_of_model_option(tmp_path):
    hf = _hf(tmp_path)
    plan = _write(tmp_path / "plan.json", {"model": "llama3-8b", "cluster": "dgx-h100", "train": TRAIN,
                                           "layout": LAYOUT})
    data, stderr = _json("check", plan, "--model", hf, "--json")
    assert _noted(data["warnings"], hf) == [data["warnings"][0]]  # first, before the config's own
    assert data["read"]["model"]["num_layers"] == 8
    _on_stderr_once(stderr, hf)


def test_check_json_lists_the_hf_warning_of_a_plan_files_inline_config(tmp_path):
    plan = _write(tmp_path / "plan.json", {"model": TINY_QUANT, "cluster": "dgx-h100", "train": TRAIN,
                                           "layout": LAYOUT})
    data, stderr = _json("check", plan, "--json")
    assert len(_noted(data["warnings"], f"{plan}: model")) == 1
    _on_stderr_once(stderr, f"{plan}: model")


def test_check_json_lists_the_hf_warning_of_a_native_configs_model(tmp_path):
    hf = _hf(tmp_path)
    ds = _write(tmp_path / "ds_config.json", DS_JSON)
    data, stderr = _json("check", ds, "--model", hf, "--cluster", "dgx-h100", "--nodes", "1", "--json")
    assert len(_noted(data["warnings"], hf)) == 1
    _on_stderr_once(stderr, hf)


def test_without_json_stderr_is_unchanged(tmp_path):
    hf = _hf(tmp_path)
    result = runner.invoke(app, ["estimate", hf, "--cluster", "dgx-h100", "--nodes", "1", "--layout",
                                 "tp=1,pp=1,mbs=1", "--global-batch", "16", "--seq-len", "2048"])
    assert result.exit_code == 0, result.stderr
    _on_stderr_once(result.stderr, hf)


def test_a_preset_model_adds_no_warning(tmp_path):
    data, stderr = _json("estimate", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--layout",
                         "tp=2,pp=1,mbs=1", "--global-batch", "16", "--json")
    assert data["warnings"] == [] and "parplan: warning:" not in stderr
    data, _ = _json("plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "16",
                    "--top", "1", "--time-limit", "10", "--json")
    assert data["warnings"] == []
    plan = _write(tmp_path / "plan.json", {"model": "llama3-8b", "cluster": "dgx-h100", "train": TRAIN,
                                           "layout": {"tp": 2, "pp": 1, "mbs": 1}})
    data, stderr = _json("check", plan, "--json")
    assert data["warnings"] == [] and "warning" not in stderr


def test_the_python_api_check_returns_the_hf_warning_too(tmp_path):
    """planner.api.check(plan file, model=config.json) and (plan file with an inline config): the same note in
    CheckResult.warnings as check --json gives."""
    from planner import api

    hf = _hf(tmp_path)
    plan = _write(tmp_path / "plan.json", {"model": "llama3-8b", "cluster": "dgx-h100", "train": TRAIN,
                                           "layout": LAYOUT})
    assert len(_noted(api.check(plan, model=hf).warnings, hf)) == 1
    inline = _write(tmp_path / "inline.json", {"model": TINY_QUANT, "cluster": "dgx-h100", "train": TRAIN,
                                               "layout": LAYOUT})
    assert len(_noted(api.check(inline).warnings, f"{inline}: model")) == 1


def test_multi_token_prediction_layers_are_said_with_their_parameters(tmp_path):
    """A new-user pass: DeepSeek-V3's config.json (num_nextn_predict_layers 1) came out at 682.6 B parameters where
    the report says 671 B, with no word that the MTP layer was counted; GLM-4.5-Air 109 B against its 106 B."""
    from costmodels.params import total_params  # noqa: PLC0415
    from planner.files.hf_config import model_from_hf_config  # noqa: PLC0415
    from planner.files.hf_notes import hf_warnings  # noqa: PLC0415

    v3 = {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
          "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
          "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
          "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
          "num_nextn_predict_layers": 1}
    spec = model_from_hf_config(v3)
    line = next(w for w in hf_warnings(v3, spec) if w.startswith("num_nextn_predict_layers=1"))
    assert "+11.61 B parameters" in line and "mtp_num_layers: 0" in line
    assert total_params(spec.model_copy(update={"mtp_num_layers": 0})) / 1e9 == pytest.approx(671.0, abs=0.1)
    assert not any("nextn" in w for w in hf_warnings({**v3, "num_nextn_predict_layers": 0},
                                                     model_from_hf_config({**v3, "num_nextn_predict_layers": 0})))


def test_the_assumed_sequence_length_is_said(tmp_path):
    """A Llama config.json with max_position_embeddings 131072 was priced at 4,096 tokens with nothing on stderr or in
    the JSON warnings (a new-user pass); a context of at most 4,096 is taken as it is, unsaid."""
    from planner.files.hf_config import model_from_hf_config  # noqa: PLC0415
    from planner.files.hf_notes import hf_warnings  # noqa: PLC0415

    config = {**TINY_QUANT, "max_position_embeddings": 131072}
    del config["quantization_config"]
    lines = hf_warnings(config, model_from_hf_config(config))
    assert lines == ["sequence length 4,096 taken as the model's (max_position_embeddings=131072 is the longest "
                     "context it supports; a config.json does not say the training length): --seq-len, a plan's "
                     "train.seq_length or a launch file's own length replaces it"]
    short = {**config, "max_position_embeddings": 2048}
    assert hf_warnings(short, model_from_hf_config(short)) == []


def test_a_given_sequence_length_replaces_the_note_on_the_models(tmp_path):
    """With --seq-len 16384 the note still said "sequence length 4,096 taken as the model's ... --seq-len replaces
    it" while 16,384 was priced (a new-user pass): a given length is not the model's. One past the config's
    max_position_embeddings is said instead (Yi 1.5 at 32,768 against 4,096 was silent)."""
    config = {**TINY_QUANT, "max_position_embeddings": 8192}
    del config["quantization_config"]
    path = _write(tmp_path / "llama" / "config.json", config)
    base = ["estimate", path, "--cluster", "dgx-h100", "--nodes", "1", "--layout", "tp=1,dp=8", "--global-batch", "8",
            "--json"]
    doc, err = _json(*base)
    assert any("taken as the model's" in w for w in doc["warnings"])
    doc, err = _json(*base, "--seq-len", "8192")
    assert not any("sequence length" in w for w in doc["warnings"]) and "taken as the model's" not in err
    doc, err = _json(*base, "--seq-len", "16384")
    assert [w for w in doc["warnings"] if "sequence length" in w] == [
        f"{path}: sequence length 16,384 is past max_position_embeddings=8,192, the longest context the model supports:"
        " priced as given (extending a checkpoint's context, e.g. with RoPE scaling, costs the same per token); check "
        "--seq-len if that is not the plan"]


def test_check_of_a_launch_file_says_the_length_it_priced(tmp_path):
    """check of a DeepSpeed JSON with --model config.json and --seq-len 8192: the model reader printed "4,096
    taken as the model's" on stderr while loading, before the length was known, though 8,192 was priced (the
    JSON's warnings were right; a review). The notes are printed once the length is known."""
    config = {**TINY_QUANT, "max_position_embeddings": 8192}
    del config["quantization_config"]
    hf = _write(tmp_path / "llama" / "config.json", config)
    ds = _write(tmp_path / "ds_config.json", DS_JSON)
    data, stderr = _json("check", ds, "--model", hf, "--cluster", "dgx-h100", "--nodes", "1", "--seq-len", "8192",
                         "--json")
    assert "taken as the model's" not in stderr and not any("sequence length" in w for w in data["warnings"])
    data, stderr = _json("check", ds, "--model", hf, "--cluster", "dgx-h100", "--nodes", "1", "--json")
    # without --seq-len the DeepSpeed reader's own line says the length it took, once
    assert stderr.count("sequence length") == 1 and "assumed: sequence length 4096" in stderr


def test_the_python_api_check_of_a_launch_file_gives_the_notes_once_with_its_length(tmp_path):
    """planner.api.check of a DeepSpeed JSON with a config.json model: the model notes as check --json gives them,
    once, and with the given length (the API read them while loading, without it: a review)."""
    from planner import api  # noqa: PLC0415

    hf = _write(tmp_path / "long" / "config.json", {**TINY_QUANT, "max_position_embeddings": 8192})
    ds = _write(tmp_path / "ds_config.json", DS_JSON)
    warnings = api.check(ds, model=hf, cluster="dgx-h100", nodes=1, seq_len=2048).warnings
    assert len(_noted(warnings, hf)) == 1 and not any("taken as the model's" in w for w in warnings)


def test_a_plan_files_inline_model_notes_speak_of_the_model_and_length_priced(tmp_path):
    """A plan file with an inline config.json (max_position_embeddings 2048): --seq-len 8192 said nothing of the
    length, and --model llama3-8b still printed the inline model's quantization note, for a model not priced (a
    review). The notes follow the length given and the model priced."""
    plan = _write(tmp_path / "plan.json", {"model": TINY_QUANT, "cluster": "dgx-h100", "train": TRAIN,
                                           "layout": LAYOUT})
    longer = runner.invoke(app, ["check", plan, "--seq-len", "8192", "--json"])
    assert longer.exit_code in (0, 1), longer.stderr
    assert any("sequence length 8,192 is past max_position_embeddings=2,048" in w
               for w in json.loads(longer.stdout)["warnings"])
    other = runner.invoke(app, ["check", plan, "--model", "llama3-8b", "--json"])  # 8B on ZeRO-0 dp=8: too big
    assert other.exit_code in (0, 1), other.stderr
    assert json.loads(other.stdout)["warnings"] == [] and "quantization_config" not in other.stderr
