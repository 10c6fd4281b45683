"""Messages a new user found wrong or confusing (second round): each names what is actually in the input.

1. A Qwen2 config.json with use_sliding_window and max_window_layers is read as transformers reads it
   (configuration_qwen2.Qwen2Config.__post_init__), and a split parplan cannot state is refused naming the
   keys that are in the file, not a 'layer_types' key that is not; qwen3_moe windows every layer.
2. A dense model's bad width names the field given, never moe_ffn_hidden_size.
3. A global batch that cannot be split over the GPUs says so (no layout formed), not "nothing fits".
4. --fp8-recipe without --precision fp8 is warned of by plan, estimate and export.
5. Any exception escaping a command (an ImportError of a half-edited command module included) is one line,
   exit 3; --debug shows the traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import planner.report
from costmodels.model_spec import ModelSpec
from planner.cli import app
from planner.cli_registry import COMMANDS
from planner.files.hf_config import model_from_hf_config
from tests.test_exporters import make_doc

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]

# /tmp/planattack/hf/qwen25_72b_sw.json: Qwen2.5-72B's config.json with the window switched on
QWEN25_72B_SW = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568,
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 152064,
    "max_position_embeddings": 32768, "sliding_window": 4096, "use_sliding_window": True, "max_window_layers": 40,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "hidden_act": "silu",
    "torch_dtype": "bfloat16"}
SMALL = dict(num_hidden_layers=4, hidden_size=1024, num_attention_heads=16, intermediate_size=4096, vocab_size=32000)


def _cli(argv: list[str]):
    return runner.invoke(app, argv)


# ---- 1. Qwen2 sliding window ------------------------------------------------------------------------------
def test_qwen2_window_split_is_refused_naming_the_keys_in_the_file(tmp_path):
    with pytest.raises(ValueError) as info:
        model_from_hf_config(QWEN25_72B_SW)
    msg = str(info.value)
    for part in ("use_sliding_window=true", "sliding_window=4096", "max_window_layers=40", "layers 0-39",
                 "layers 40-79", "set use_sliding_window to false"):
        assert part in msg, msg
    assert "key 'layer_types'" not in msg
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_72B_SW))
    result = _cli(["estimate", str(path), "--cluster", "dgx-h100", "--layout", "tp=8"])
    assert result.exit_code == 2 and "max_window_layers=40" in result.stderr and "Traceback" not in result.output


def test_qwen2_window_without_max_window_layers_names_transformers_default():
    config = {**SMALL, "num_hidden_layers": 40, "model_type": "qwen3", "sliding_window": 4096,
              "use_sliding_window": True}
    with pytest.raises(ValueError, match=r"max_window_layers absent \(default 28\): layers 0-27"):
        model_from_hf_config(config)


def test_qwen_windows_transformers_can_state_are_read():
    everyone = model_from_hf_config({**SMALL, "model_type": "qwen2", "sliding_window": 512,
                                     "use_sliding_window": True, "max_window_layers": 0})
    nobody = model_from_hf_config({**SMALL, "model_type": "qwen2", "sliding_window": 512,
                                   "use_sliding_window": True, "max_window_layers": 4})
    assert (everyone.sliding_window, everyone.full_attention_interval) == (512, 0)
    assert nobody.sliding_window == 0


def test_qwen3_moe_window_is_on_every_layer():
    """modeling_qwen3_moe (transformers 5.24): every attention layer takes config.sliding_window; the config
    has no max_window_layers (a stray one, as in Qwen3-30B-A3B's file, is not read)."""
    m = model_from_hf_config({**SMALL, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2,
                              "moe_intermediate_size": 512, "sliding_window": 1024, "use_sliding_window": True,
                              "max_window_layers": 28})
    assert (m.sliding_window, m.full_attention_interval) == (1024, 0)


def test_layer_types_in_the_file_is_still_named():
    types = ["full_attention", "full_attention", "sliding_attention", "sliding_attention"]
    with pytest.raises(ValueError, match="config.json key 'layer_types'"):
        model_from_hf_config({**SMALL, "model_type": "mistral", "sliding_window": 512, "layer_types": types})


# ---- 2. dense errors name no MoE field ----------------------------------------------------------------------
def test_dense_hf_config_negative_width_names_only_intermediate_size():
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": -5, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "vocab_size": 128256}  # /tmp/planattack/hf/broken_neg.json
    with pytest.raises(ValueError) as info:
        model_from_hf_config(config)
    msg = str(info.value)
    assert "'intermediate_size'" in msg and "-5" in msg and "moe" not in msg.lower(), msg


def test_mixtral_width_error_is_said_once():
    config = {**SMALL, "model_type": "mixtral", "intermediate_size": -5, "num_local_experts": 4,
              "num_experts_per_tok": 2}
    with pytest.raises(ValueError) as info:
        model_from_hf_config(config)
    assert str(info.value).count("intermediate_size") == 1, str(info.value)


@pytest.mark.parametrize("bad,field", [({"ffn_hidden_size": -5}, "ffn_hidden_size"),
                                       ({"hidden_size": -8}, "hidden_size")])
def test_native_spec_error_names_only_the_field_given(bad, field):
    spec = {"name": "x", "num_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "vocab_size": 1000,
            "seq_length": 128, **bad}
    with pytest.raises(ValidationError) as info:
        ModelSpec.model_validate(spec)
    assert {e["loc"][0] for e in info.value.errors()} == {field}


# ---- 3. no layout formed ------------------------------------------------------------------------------------
def test_batch_that_cannot_be_split_over_the_gpus_says_so():
    result = _cli(["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1024", "--seq-len", "1",
                   "--global-batch", "1", "--json"])
    assert result.exit_code == 1, result.output
    reasons = json.loads(result.stdout)["reasons"]
    text = " ".join(reasons)
    assert "no layout can be formed: global batch 1 over 8,192 GPUs" in text, reasons
    assert "at least one sequence" in text and "fewest data-parallel ranks any layout has here is 32" in text
    assert "tp=8 x cp=1 x pp=32 = 256 GPUs" in text and "a multiple of 32 sequences" in text
    assert "device budget" not in text


# ---- 4. --fp8-recipe without fp8 ----------------------------------------------------------------------------
WARNING = "--fp8-recipe rowwise is ignored: precision is bf16"


def test_plan_warns_of_an_unused_fp8_recipe():
    result = _cli(["plan", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "8", "--fp8-recipe",
                   "rowwise", "--json"])
    assert result.exit_code == 0 and result.stderr.count(WARNING) == 1, result.stderr


def test_export_warns_of_an_unused_fp8_recipe(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(make_doc(tp=8, mbs=1)))
    result = _cli(["export", str(plan), "--format", "megatron", "--out", str(tmp_path / "out"), "--fp8-recipe",
                   "rowwise"])
    assert result.exit_code == 0 and result.stderr.count(WARNING) == 1, result.output
    quiet = _cli(["export", str(plan), "--format", "megatron", "--out", str(tmp_path / "out2")])
    assert quiet.exit_code == 0 and "ignored" not in quiet.stderr


# ---- 5. internal errors -------------------------------------------------------------------------------------
BROKEN = "from planner.cli_common import name_a_half_edit_removed\n"
INTERNAL = "internal error (ImportError: cannot import name 'name_a_half_edit_removed'"


@pytest.fixture
def broken_models(tmp_path, monkeypatch):
    """`parplan models` whose module fails to import (a half-edited module)."""
    (tmp_path / "parplan_broken_cmd.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(COMMANDS, "models", ("parplan_broken_cmd", "models_cmd", COMMANDS["models"][2]))
    return tmp_path


def test_import_error_of_a_command_module_is_exit_3_one_line(broken_models):
    result = _cli(["models"])
    assert result.exit_code == 3, (result.exit_code, result.output)
    assert INTERNAL in result.stderr and "rerun with --debug and report it" in result.stderr
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback_of_an_import_error(broken_models):
    result = _cli(["models", "--debug"])
    assert result.exit_code == 3 and "Traceback" in result.stderr and INTERNAL in result.stderr


def test_lazy_import_inside_a_command_is_exit_3(monkeypatch):
    monkeypatch.delattr(planner.report, "listing", raising=False)
    monkeypatch.setitem(sys.modules, "planner.report.listing", None)  # `from planner.report import listing` fails
    result = _cli(["models"])
    assert result.exit_code == 3, result.output
    assert "internal error (ModuleNotFoundError: import of planner.report.listing" in result.stderr


def test_typer_errors_keep_their_codes(broken_models):
    assert _cli(["hardware", "--no-such-option"]).exit_code == 2
    assert _cli(["--help"]).exit_code == 0


def test_import_error_exits_3_from_the_console_entry_point(broken_models):
    """As the console script runs it (planner.cli:main, Typer's __call__, sys.exit in ParplanGroup.main)."""
    code = ("import sys, planner.cli as c\nfrom planner.cli_registry import COMMANDS\n"
            "COMMANDS['models'] = ('parplan_broken_cmd', 'models_cmd', 'x')\nsys.argv = ['parplan', 'models']\n"
            "c.main()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(broken_models), str(REPO)])}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert INTERNAL in done.stderr and "Traceback" not in done.stderr
