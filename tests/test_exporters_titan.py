"""The torchtitan 0.3.0 launch sets every option the plan priced (issue 34 section 7: the 405B launch
inherited torchtitan's float8, compile and async TP, which the plan did not price).

What torchtitan would run is rebuilt here from its own defaults, vendored in
tests/data/torchtitan_0.3.0_defaults.json (read off the 0.3.0 wheel, sources inside): Trainer.Config's
defaults, then the `--config` function's (llama3_8b/70b/405b), then the script's `--section.key`
overrides (tyro: a bool is `--section.key` / `--section.no-key`) and its activation-checkpoint
subcommand. A config module parplan writes beside the script stands for its base config without
converters. The result must be what planner/exporters/pricing.py priced. CI also runs torchtitan's
own ConfigManager on the launch (tests/test_frameworks.py, validate-titan extra)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from costmodels.layer_comm import tp_overlap_applies
from planner.exporters import export
from planner.files import loading
from planner.files.shellread import find_launch, read_script, split_at_script
from tests.test_exporters import make_doc

ROOT = Path(__file__).resolve().parent
TITAN = json.loads((ROOT / "data" / "torchtitan_0.3.0_defaults.json").read_text())

PLANS = {
    "8b-fsdp-selective": lambda: make_doc(zero=3, mbs=1, gbs=64, recompute="selective", train={"seq_length": 4096}),
    "8b-eager-ddp": lambda: make_doc(zero=0, mbs=1, gbs=64, train={"stack": "torchtitan-eager", "seq_length": 2048}),
    "70b-tp8-async": lambda: make_doc("llama3-70b", nodes=4, gbs=64, tp=8, sp=True, zero=3, mbs=1, recompute="full",
                                      train={"stack": "torchtitan", "tp_comm_overlap": True}),
    "70b-tp8-no-sp": lambda: make_doc("llama3-70b", nodes=4, gbs=64, tp=8, sp=False, zero=1, mbs=1,
                                      recompute="none"),
    "405b-pp16": lambda: make_doc("llama3.1-405b", nodes=64, gbs=512, tp=8, sp=True, pp=16,
                                  stage_layers=[7] + [8] * 14 + [7], mbs=1, zero=1, recompute="full"),
}


def overrides(args: list[str]) -> dict:
    """The script's `--section.key [value]` words and activation-checkpoint subcommand as {key: value}."""
    out, i = {}, 0
    while i < len(args):
        word = args[i]
        if word.startswith("activation-checkpoint:"):
            out["activation_checkpoint"] = word.split(":", 1)[1]
        elif word.startswith("--") and "." in word:
            section, key = word[2:].split(".", 1)
            nxt = args[i + 1] if i + 1 < len(args) else "--"
            if nxt.startswith("-") or nxt.startswith("activation-checkpoint:"):
                negated = key.startswith("no-")
                out[f"{section}.{key[3:] if negated else key}".replace("-", "_")] = not negated
            else:
                out[f"{section}.{key}"] = int(nxt) if re.fullmatch(r"-?[0-9]+", nxt) else nxt
                i += 1
        i += 1
    return out


def effective(folder: Path) -> dict:
    """What torchtitan 0.3.0 runs for launch_torchtitan.sh in `folder`."""
    argv = find_launch(read_script((folder / "launch_torchtitan.sh").read_text()), "torchrun")[0]
    _, module, args = split_at_script(argv)
    assert module == "torchtitan.train"
    config = args[args.index("--config") + 1]
    cfg = dict(TITAN["defaults"])
    if args[args.index("--module") + 1] == "parplan_torchtitan_config":
        text = (folder / "parplan_torchtitan_config.py").read_text()
        base = re.search(r"config_registry import (\w+)", text).group(1)
        assert re.search(r"model_registry\('[0-9A-Z]+'\)", text)  # rebuilt with no converters
        cfg.update(TITAN["configs"][base], **{"model_spec.converters": []})
    else:
        cfg.update(TITAN["configs"][config])
    cfg.update(overrides(args))
    return cfg


@pytest.mark.parametrize("name", list(PLANS))
def test_launch_sets_what_was_priced(name, tmp_path):
    doc = PLANS[name]()
    export(doc, "torchtitan", tmp_path, force=True)
    got = effective(tmp_path)
    spec = json.loads(next(line for line in (tmp_path / "launch_torchtitan.sh").read_text().splitlines()
                           if line.startswith("# Spec: "))[len("# Spec: "):])
    priced = loading.problem_from_plan(spec, "spec")
    lay, train = priced.layout, priced.train
    assert got["compile.enable"] == (train.stack_spec.name == "torchtitan")
    assert got["compile.enable_async_tensor_parallel"] == tp_overlap_applies(train, lay)
    assert got["model_spec.converters"] == []  # bf16 plans: no float8 / mxfp8
    assert got["activation_checkpoint"] == lay.recompute
    assert got["training.dtype"] == "float32" and got["training.mixed_precision_param"] == "bfloat16"
    assert got["training.enable_cpu_offload"] is False and got["training.disable_cuda_graphs"] is True
    assert got["parallelism.enable_sequence_parallel"] == (lay.sp or lay.tp == 1)
    assert (got["parallelism.tensor_parallel_degree"], got["parallelism.context_parallel_degree"],
            got["parallelism.pipeline_parallel_degree"]) == (lay.tp, lay.cp, lay.pp)
    assert got["parallelism.data_parallel_shard_degree"] * got["parallelism.data_parallel_replicate_degree"] == lay.dp
    assert got["parallelism.fsdp_reshard_after_forward"] == {0: "default", 2: "never", 3: "always"}[lay.zero]
    assert got["training.seq_len"] == train.seq_len(priced.model)
    assert got["training.global_batch_size"] == train.global_batch_size
    assert got["training.local_batch_size"] == lay.mbs * (lay.num_microbatches if lay.pp > 1 else 1)
    assert int(got["loss.num_chunks"]) == train.loss_chunks  # the preset's 8 would chunk an unchunked price


def test_405b_drops_torchtitans_float8_and_async_tp(tmp_path):
    """torchtitan's llama3_405b turns on float8, compile and async TP; a bf16 plan priced without async TP
    gets a config module without the converter and --compile.no-enable_async_tensor_parallel."""
    assert TITAN["configs"]["llama3_405b"]["model_spec.converters"] == ["float8"]
    export(PLANS["405b-pp16"](), "torchtitan", tmp_path, force=True)
    text = (tmp_path / "launch_torchtitan.sh").read_text()
    assert "--compile.no-enable_async_tensor_parallel" in text and "--config llama3_405b" not in text
    assert effective(tmp_path)["model_spec.converters"] == []


def test_toml_sets_compile_async_tp_and_converters(tmp_path):
    """The 0.2.x job file says the same (0.2.2 job_config.py: [compile] enable, [model] converters,
    [parallelism] enable_async_tensor_parallel)."""
    tomllib = pytest.importorskip("tomllib")
    export(PLANS["70b-tp8-async"](), "torchtitan", tmp_path, force=True)
    cfg = tomllib.loads((tmp_path / "torchtitan_0.2.toml").read_text())
    assert cfg["compile"]["enable"] is True and cfg["model"]["converters"] == []
    assert cfg["parallelism"]["enable_async_tensor_parallel"] is True
    assert cfg["training"]["dtype"] == "float32" and cfg["training"]["enable_cpu_offload"] is False
