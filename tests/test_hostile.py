"""A battery of hostile inputs (issue 6): every one exits 2 with a message naming the field or value,
and never prints a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
GOOD_MODEL = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "vocab_size": 1000}
EST = ["estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--global-batch", "64"]
L70 = "tp=8,pp=4,dp=2,mbs=1"


def _model(**over) -> str:
    return json.dumps({**GOOD_MODEL, **over})


def _plan(**over) -> str:
    plan = {"model": "llama3-8b", "cluster": {"preset": "dgx-h100", "num_nodes": 1},
            "train": {"global_batch_size": 8}, "layout": {"tp": 8}}
    plan.update(over)
    return json.dumps(plan)


def _est_file(name: str) -> list[str]:
    return ["estimate", name, "--cluster", "dgx-h100", "--layout", "tp=1", "--global-batch", "8"]


# id: (argv, {file name: content (str or bytes)}, substrings the message must contain)
CASES = {
    "missing-model-file": (_est_file("nope.yaml"), {}, ["nope.yaml"]),
    "empty-file": (_est_file("m.yaml"), {"m.yaml": ""}, ["empty"]),
    "binary-file": (_est_file("m.yaml"), {"m.yaml": b"\x00\xff\xfe\x80"}, ["UTF-8"]),
    "invalid-yaml": (_est_file("m.yaml"), {"m.yaml": "num_layers: [1, 2\nhidden: ]"}, ["invalid YAML"]),
    "yaml-alias-bomb": (_est_file("m.yaml"), {"m.yaml": "a: &a [1, 2]\nb: [*a, *a]\n"}, ["aliases"]),
    "yaml-python-tag": (_est_file("m.yaml"), {"m.yaml": "x: !!python/object/apply:os.system ['true']\n"},
                        ["invalid YAML"]),
    "invalid-json": (_est_file("m.json"), {"m.json": "{\"num_layers\": }"}, ["invalid JSON", "line 1"]),
    "top-level-list": (_est_file("m.json"), {"m.json": "[1, 2]"}, ["mapping"]),
    "missing-field": (_est_file("m.json"), {"m.json": json.dumps({"hidden_size": 256})}, ["num_layers", "required"]),
    "unknown-field": (_est_file("m.json"), {"m.json": _model(num_layer=4)}, ["num_layer", "xtra"]),
    "string-for-int": (_est_file("m.json"), {"m.json": _model(num_layers="4")}, ["num_layers", "'4'"]),
    "negative-width": (_est_file("m.json"), {"m.json": _model(hidden_size=-256)}, ["hidden_size", "-256"]),
    "nan-capacity": (_est_file("m.yaml"), {"m.yaml": "num_layers: 4\nhidden_size: 256\nnum_attention_heads: 8\n"
                                           "vocab_size: 1000\nnum_experts: 4\ntop_k: 2\ncapacity_factor: .nan\n"},
                     ["capacity_factor"]),
    "infinite-vocab": (_est_file("m.yaml"), {"m.yaml": "num_layers: 4\nhidden_size: 256\nnum_attention_heads: 8\n"
                                             "vocab_size: .inf\n"}, ["vocab_size"]),
    "absurd-layers": (_est_file("m.json"), {"m.json": _model(num_layers=10**30)}, ["num_layers", "less than"]),
    "heads-vs-kv": (_est_file("m.json"), {"m.json": _model(num_kv_heads=3)}, ["num_attention_heads=8",
                                                                              "num_kv_heads=3"]),
    "hidden-vs-heads": (_est_file("m.json"), {"m.json": _model(hidden_size=250)}, ["hidden_size=250", "head_dim"]),
    "topk-over-experts": (_est_file("m.json"), {"m.json": _model(num_experts=4, top_k=5)}, ["top_k=5"]),
    "topk-without-experts": (_est_file("m.json"), {"m.json": _model(top_k=2)}, ["top_k=2", "num_experts"]),
    "hf-unsupported-arch": (_est_file("config.json"), {"config.json": json.dumps(
        {"model_type": "gpt2", "n_layer": 12})}, ["gpt2"]),
    "hf-missing-key": (_est_file("config.json"), {"config.json": json.dumps(
        {"model_type": "llama", "num_hidden_layers": 2})}, ["missing required key"]),
    "file-too-large": (_est_file("m.json"), {"m.json": " " * (5 * 2**20) + "{}"}, ["limited"]),
    "unknown-model-preset": (["estimate", "llama3-70", "--cluster", "dgx-h100"], {}, ["llama3-70b"]),
    "unknown-cluster-preset": (["estimate", "llama3-8b", "--cluster", "dgx-h10"], {}, ["dgx-h100"]),
    "nodes-zero": (EST[:4] + ["--nodes", "0"], {}, ["--nodes"]),
    "nodes-not-a-number": (EST[:4] + ["--nodes", "eight"], {}, ["--nodes"]),
    "negative-batch": (EST[:6] + ["--global-batch", "-1"], {}, ["--global-batch"]),
    "unknown-precision": (EST + ["--layout", L70, "--precision", "fp4"], {}, ["precision", "fp4"]),
    "fp8-on-a100": (["estimate", "llama3-8b", "--cluster", "dgx-a100", "--layout", "tp=8", "--global-batch", "8",
                     "--precision", "fp8"], {}, ["fp8", "a100-80gb"]),
    "layout-no-equals": (EST + ["--layout", "tp8"], {}, ["tp8", "key=value"]),
    "layout-not-a-number": (EST + ["--layout", "tp=x"], {}, ["tp", "'x'"]),
    "layout-unknown-key": (EST + ["--layout", "foo=1"], {}, ["foo"]),
    "layout-duplicate-key": (EST + ["--layout", "tp=8,tp=4"], {}, ["tp", "twice"]),
    "layout-only-commas": (EST + ["--layout", ",,,,"], {}, ["--layout", "no key=value"]),
    "layout-bad-recompute": (EST + ["--layout", "recompute=sometimes"], {}, ["recompute", "sometimes"]),
    "layout-product": (EST + ["--layout", "tp=8,pp=4,dp=4"], {}, ["tp*cp*pp*dp", "GPUs=64"]),
    "layout-heads-tp": (EST + ["--layout", "tp=3,dp=1"], {}, ["num_attention_heads=64", "tp=3"]),
    "batch-not-divisible": (EST[:6] + ["--global-batch", "7", "--layout", L70], {}, ["global_batch_size=7"]),
    "stage-layers-sum": (EST + ["--layout", L70 + ",stage_layers=20:20:20:10"], {}, ["stage_layers", "80"]),
    "vpp-without-pp": (EST + ["--layout", "tp=8,dp=8,vpp=2"], {}, ["vpp=2", "pp"]),
    "ep-on-dense": (EST + ["--layout", L70 + ",ep=2"], {}, ["ep=2", "num_experts=0"]),
    "cp-seq": (["estimate", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "24", "--global-batch", "8",
                "--layout", "tp=8,cp=3", "--seq-len", "1000"], {}, ["2*cp=6"]),
    "nodes-and-gpus": (EST + ["--layout", L70, "--gpus", "64"], {}, ["not both"]),
    "gpus-not-whole-nodes": (["estimate", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "12"], {},
                             ["--gpus 12", "whole number"]),
    "estimate-without-cluster": (["estimate", "llama3-8b"], {}, ["--cluster"]),
    "check-missing-file": (["check", "nope.json"], {}, ["nope.json", "does not exist"]),
    "check-plan-without-layout": (["check", "p.json"], {"p.json": _plan(layout=None)}, ["layout"]),
    "check-unknown-plan-key": (["check", "p.json"], {"p.json": _plan(extra_key=1)}, ["extra_key"]),
    "check-plan-bad-train": (["check", "p.json"], {"p.json": _plan(train={"global_batch_size": 0})},
                             ["global_batch_size"]),
    "cluster-unknown-gpu": (["estimate", "llama3-8b", "--cluster", "c.yaml", "--layout", "tp=8"], {
        "c.yaml": "gpu: h100\nscale_up_gb_per_s: 450\nscale_out_gb_per_s: 50\n"}, ["h100-sxm"]),
    "plan-top-zero": (["plan", "llama3-8b", "--cluster", "dgx-h100", "--top", "0"], {}, ["--top"]),
    "plan-negative-time-limit": (["plan", "llama3-8b", "--cluster", "dgx-h100", "--time-limit", "-1"], {},
                                 ["--time-limit"]),
    "plan-save-missing-folder": (["plan", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "8",
                                  "--save", "nowhere/plan.json"], {}, ["nowhere"]),
    "schema-unknown-definition": (["schema", "Nope"], {}, ["Nope", "Estimate"]),
    # the stack and sharding inputs of the time-model issue
    "stack-file-dup-key-yaml": (EST + ["--layout", L70, "--stack-file", "s.yaml"],
                                {"s.yaml": "name: a\nframework: megatron\nname: b\n"}, ["'name'", "twice", "line 3"]),
    "stack-file-dup-key-json": (EST + ["--layout", L70, "--stack-file", "s.json"],
                                {"s.json": '{"name": "a", "framework": "megatron", "name": "b"}'}, ["'name'", "twice"]),
    "stack-file-is-a-folder": (EST + ["--layout", L70, "--stack-file", "."], {}, ["not a regular file"]),
    "stack-name-escape": (EST + ["--layout", L70, "--stack-file", "s.yaml"],
                          {"s.yaml": 'name: "x\\x1b[2J"\nframework: megatron\n'}, ["stack.name", "pattern"]),
    "stack-unknown": (EST + ["--layout", L70, "--stack", "megatron-cor"], {}, ["--stack", "megatron-core"]),
    "shard-group-not-divisor": (EST + ["--layout", L70 + ",zero=3,shard_group=3"], {}, ["shard_group=3", "dp*cp"]),
    "shard-group-arabic-digit": (EST + ["--layout", "tp=8,dp=8,zero=3,shard_group=\u0668"], {},
                                 ["shard_group", "ASCII digits"]),
    "layout-arabic-digit": (EST + ["--layout", "tp=\u0668"], {}, ["tp=", "ASCII digits"]),
    "fp8-recipe-unknown": (EST + ["--layout", L70, "--fp8-recipe", "fp4"], {}, ["--fp8-recipe", "fp4"]),
}


@pytest.mark.parametrize("case", CASES)
def test_hostile_input_exits_2_with_a_named_field(case: str, tmp_path: Path, monkeypatch):
    argv, files, needles = CASES[case]
    monkeypatch.chdir(tmp_path)
    for name, content in files.items():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    result = runner.invoke(app, argv)
    message = result.stderr + result.stdout
    assert result.exit_code == 2, message
    assert "Traceback" not in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_fifo_spec_file_is_refused_not_read(tmp_path: Path, monkeypatch):
    """A FIFO named as a spec file would block forever on read: refused by its type, at once."""
    import os

    monkeypatch.chdir(tmp_path)
    os.mkfifo("s.yaml")
    result = runner.invoke(app, EST + ["--layout", L70, "--stack-file", "s.yaml"])
    assert result.exit_code == 2 and "not a regular file" in result.stderr + result.stdout


def test_battery_size():
    """Issue 6 asks for at least 40 hostile inputs."""
    assert len(CASES) >= 40


def test_report_without_layout_exits_2(tmp_path: Path):
    plan = tmp_path / "p.json"
    plan.write_text(_plan(layout=None))
    result = runner.invoke(app, ["report", str(plan)])
    assert result.exit_code == 2 and "layout" in result.stderr and "Traceback" not in result.output
