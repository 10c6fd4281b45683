"""check's torchtitan TOML reader against torchtitan 0.2.2's own ConfigManager (its TOML and tyro parser, on CPU):
the five public job files of tests/data/configs, and the 0.2 job files the exporter writes, are read both ways
and must agree on the degrees, batch, sequence, activation checkpointing, compile and float8. Skipped without torch
(torchtitan imports it) or without the package index (torchtitan 0.2.2 is downloaded: CI installs 0.3.0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from costmodels.layout import resolve_layout
from planner.files.native import load_native

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"
MODELS = Path(__file__).resolve().parent / "data" / "config_models"
PUBLIC = {  # file: (model, cluster, nodes), as tests/test_config_corpus.py reads them
    "tt_llama3_8b.toml": ("llama3-8b", "dgx-h100", 1),
    "tt_llama3_70b.toml": ("llama3-70b", "dgx-a100", 8),
    "tt_llama3_405b.toml": ("llama3.1-405b", "dgx-h100", 16),
    "tt_qwen3_32b.toml": ("qwen3-32b", str(MODELS / "h100-96gb-node.yaml"), 1),
    "tt_deepseek_v3_16b.toml": ("deepseek-v3-16b", "dgx-h100", 1),
}
EXPORTED = ["8b-zero3-dp8", "8b-pp2-zero1-full", "70b-tp4-cp2-interleaved"]  # zero 0 beside tp/pp gets no 0.2 TOML
WHEELS = ("torchtitan==0.2.2", "tyro", "docstring_parser", "typeguard")
PARSE = r"""
import contextlib, io, json, sys
from torchtitan.config.manager import ConfigManager
out = []
for path in json.loads(sys.argv[1]):
    with contextlib.redirect_stderr(io.StringIO()):
        c = ConfigManager().parse_args(["--job.config_file", path])
    p, t = c.parallelism, c.training
    out.append({"replicate": p.data_parallel_replicate_degree, "shard": p.data_parallel_shard_degree,
                "tp": p.tensor_parallel_degree, "pp": p.pipeline_parallel_degree, "cp": p.context_parallel_degree,
                "ep": p.expert_parallel_degree, "local": t.local_batch_size, "seq": t.seq_len,
                "ac": c.activation_checkpoint.mode, "compiled": c.compile.enable and "model" in c.compile.components,
                "float8": "float8" in c.model.converters})
print("PARSED " + json.dumps(out))
"""


def BACKGROUND():  # noqa: N802 - tests/conftest.py calls it at collection
    """Export the 0.2 job files now (parplan code, main thread); return the slow part: torchtitan 0.2.2 downloaded
    and run on every job file, giving {"files": {name: (path, model, cluster, nodes)}, "parsed": [torchtitan's
    reading]}, or {"skip": why}."""
    from planner.exporters import export
    from tests.test_exporters import CASES

    root = Path(tempfile.mkdtemp(prefix="torchtitan022-"))
    files = {name: (CONFIGS / name, *PUBLIC[name]) for name in PUBLIC}
    for case in EXPORTED:
        doc = CASES[case]()
        export(doc, "torchtitan", root / case, force=True)
        files[case] = (root / case / "torchtitan_0.2.toml", doc["model"]["name"], doc["cluster"]["name"],
                       doc["cluster"]["num_nodes"])
    return lambda: _run_torchtitan(root, files)


def _run_torchtitan(root: Path, files: dict) -> dict:
    import importlib.util

    from conftest import unpacked_wheels

    if importlib.util.find_spec("torch") is None:
        return {"skip": "torch is not installed (torchtitan imports it)"}
    got = unpacked_wheels(WHEELS, root)
    if "skip" in got:
        return got
    env = {**os.environ, "PYTHONPATH": got["site"]}  # ahead of an installed torchtitan 0.3
    run = subprocess.run([sys.executable, "-c", PARSE, json.dumps([str(f[0]) for f in files.values()])],
                         capture_output=True, text=True, env=env, cwd=root, timeout=300)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("PARSED ")), None)
    return {"files": files, "parsed": json.loads(line[len("PARSED "):]) if line else None, "stderr": run.stderr}


@pytest.fixture(scope="module")
def parsed(request):
    """{name: (parplan's Problem, torchtitan's reading)} for every job file, torchtitan run once for all."""
    from conftest import background

    result = background(request)
    if "skip" in result:
        pytest.skip(result["skip"])
    assert result["parsed"], result["stderr"][-2000:]
    files = result["files"]
    probs = {name: load_native(path, model, cluster, nodes) for name, (path, model, cluster, nodes) in files.items()}
    return {name: (probs[name], got) for name, got in zip(files, result["parsed"])}


@pytest.mark.parametrize("name", list(PUBLIC) + EXPORTED)
def test_check_reads_the_job_file_as_torchtitan_does(name, parsed):
    prob, got = parsed[name]
    lay = resolve_layout(prob.model, prob.cluster, prob.train, prob.layout)
    assert (lay.tp, lay.pp, lay.cp, lay.ep) == (got["tp"], got["pp"], got["cp"], got["ep"]), name
    shard = got["shard"] if got["shard"] != -1 else prob.cluster.num_gpus // (
        got["replicate"] * got["tp"] * got["pp"] * got["cp"])
    assert lay.dp == got["replicate"] * shard and prob.train.seq_length == got["seq"], name
    assert lay.recompute == got["ac"] and (prob.train.stack_spec.name == "torchtitan") == got["compiled"], name
    assert (prob.train.precision == "fp8") == got["float8"], name
    if lay.pp == 1:
        assert lay.mbs == got["local"], name
