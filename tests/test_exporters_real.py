"""Exported files checked by the real frameworks' own parsers, when they are installed
(benchmarks/data/launch_formats.md, "Offline validation"): DeepSpeed's DeepSpeedConfig, hostfile parser and
launcher argument parser; torch's torch.distributed.run parser (strict: allow_abbrev=False) and
config_from_args. Skipped cleanly when deepspeed or torch is absent (install: pip install torch==2.13.0,
then DS_BUILD_OPS=0 pip install deepspeed)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from unittest import mock

import pytest

from planner.exporters import export, run_export
from planner.files.shellread import find_launch, read_script, split_at_script
from test_exporters import CASES  # pytest puts tests/ on sys.path (no __init__.py there)

DEEPSPEED_CASES = ["8b-pp2-zero1-full", "8b-zero3-dp8"]


@pytest.fixture
def quiet_tmp(tmp_path, monkeypatch):
    """torch's config_from_args makes log folders under the temp dir and sets OMP_NUM_THREADS."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return tmp_path


# ---- DeepSpeed ----------------------------------------------------------------------------------

def _ds_config(cfg: dict, dp: int):
    ds = pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig
    with mock.patch.object(ds.comm, "get_world_size", return_value=dp), \
            mock.patch.object(ds.comm, "get_rank", return_value=0):
        return DeepSpeedConfig(cfg)


@pytest.mark.parametrize("case", DEEPSPEED_CASES)
def test_deepspeed_accepts_config(case, tmp_path):
    doc = CASES[case]()
    export(doc, "deepspeed", tmp_path, force=False)
    cfg = json.loads((tmp_path / "ds_config.json").read_text())
    lay = doc["layout"]
    parsed = _ds_config(cfg, lay["dp"])
    assert parsed.train_batch_size == doc["train"]["global_batch_size"]
    assert parsed.train_micro_batch_size_per_gpu == lay["mbs"]
    assert parsed.gradient_accumulation_steps == lay["num_microbatches"]
    assert parsed.zero_optimization_stage == lay["zero"]
    assert parsed.bfloat16_config.enabled
    if lay["pp"] > 1:
        assert parsed.pipeline["stages"] == lay["pp"]


def test_deepspeed_rejects_a_broken_batch(tmp_path):
    doc = CASES["8b-zero3-dp8"]()
    export(doc, "deepspeed", tmp_path, force=False)
    cfg = json.loads((tmp_path / "ds_config.json").read_text())
    cfg["train_batch_size"] += 1
    with pytest.raises(AssertionError):
        _ds_config(cfg, doc["layout"]["dp"])


@pytest.mark.parametrize("case", DEEPSPEED_CASES)
def test_deepspeed_launcher_and_hostfile(case, tmp_path):
    pytest.importorskip("deepspeed")
    from deepspeed.launcher.runner import fetch_hostfile, parse_args
    doc = CASES[case]()
    export(doc, "deepspeed", tmp_path, force=False)
    pool = fetch_hostfile(str(tmp_path / "hostfile"))
    assert list(pool.values()) == [doc["cluster"]["gpus_per_node"]] * doc["cluster"]["num_nodes"]
    sh = read_script((tmp_path / "launch_deepspeed.sh").read_text().replace("$HERE", str(tmp_path)))
    args = parse_args(find_launch(sh, "deepspeed")[0])
    assert (args.num_nodes, args.num_gpus) == (doc["cluster"]["num_nodes"], doc["cluster"]["gpus_per_node"])
    assert args.hostfile == str(tmp_path / "hostfile") and args.user_script == "train.py"
    assert "--deepspeed_config" in args.user_args


def test_deepspeed_hostfile_parser_rejects_duplicates(tmp_path):
    pytest.importorskip("deepspeed")
    from deepspeed.launcher.runner import fetch_hostfile
    (tmp_path / "hostfile").write_text("node-0 slots=8\nnode-0 slots=8\n")
    with pytest.raises(ValueError):
        fetch_hostfile(str(tmp_path / "hostfile"))


# ---- torchrun -----------------------------------------------------------------------------------

FILES = {"megatron": "launch_megatron.sh", "torchrun": "launch_torchrun.sh", "torchtitan": "launch_torchtitan.sh",
         "slurm": "launch_slurm.sbatch"}


def _torchrun_argvs(path: Path, nodes: int) -> list[list[str]]:
    text = f"SLURM_NNODES={nodes}\nSLURM_JOB_ID=77\n" + path.read_text()
    text = text.replace('$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)', "node-0")
    return find_launch(read_script(text), "torchrun")


@pytest.mark.parametrize("case", list(CASES))
def test_torch_distributed_run_accepts(case, quiet_tmp):
    pytest.importorskip("torch")
    from torch.distributed.run import config_from_args, get_args_parser
    doc = CASES[case]()
    result = run_export(doc, "all", quiet_tmp / "out", force=False)
    nodes, gpus = doc["cluster"]["num_nodes"], doc["cluster"]["gpus_per_node"]
    seen = 0
    for path in result.written:
        if path.name not in FILES.values():
            continue
        for argv in _torchrun_argvs(path, nodes):
            parser = get_args_parser()
            parser.allow_abbrev = False
            args = parser.parse_args(argv)
            config, _, cmd_args = config_from_args(args)
            assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (nodes, nodes, gpus), path.name
            assert config.rdzv_backend in ("static", "c10d")
            _, script, rest = split_at_script(argv)
            assert rest == cmd_args[-len(rest):] if rest else True
            seen += 1
    assert seen >= 4  # megatron, torchrun static + c10d, slurm (+ torchtitan unless refused)


def test_strict_parser_rejects_abbreviation():
    pytest.importorskip("torch")
    from torch.distributed.run import get_args_parser
    parser = get_args_parser()
    parser.allow_abbrev = False
    with pytest.raises(SystemExit):
        parser.parse_args(["--nnode", "2", "--nproc-per-node", "8", "train.py"])


# ---- torchtitan 0.3.0 ---------------------------------------------------------------------------------------------

TITAN_CASES = ["8b-zero3-dp8", "8b-tp2-interleaved", "70b-tp4-cp2-interleaved"]
TITAN_WHEELS = ("torchtitan==0.3.0", "tyro", "docstring_parser", "typeguard")
READ_LINES = [  # launch lines as users write them, read by parplan and by torchtitan 0.3.0 itself
    "--module llama3 --config llama3_8b",
    "--module llama3 --config llama3_8b --parallelism.tensor_parallel_degree 2 --training.local_batch_size=2 "
    "--loss.num_chunks 4 activation-checkpoint:full",
    "--module llama3 --config llama3_8b --parallelism.tensor_parallel_degree 4 "
    "--parallelism.no-enable_sequence_parallel",
    "--module llama3 --config llama3_70b --parallelism.data_parallel_shard_degree=1 "
    "--parallelism.context_parallel_degree 2 --training.seq_len 16384",
    "--module qwen3 --config qwen3_32b --parallelism.pipeline_parallel_degree 2 --compile.enable "
    "--training.disable_cuda_graphs activation-checkpoint:none",
    "--module deepseek_v3 --config deepseek_v3_16b",
]
PP_WITH_GRAPHS = "--module llama3 --config llama3_8b --parallelism.pipeline_parallel_degree 2"
TITAN_PARSE = r"""
import contextlib, io, json, sys
from torchtitan.config.manager import ConfigManager
out = []
for args in json.loads(sys.argv[1]):
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            c = ConfigManager().parse_args(args)
    except BaseException as err:  # tyro prints the trainer's ValueError and exits 2
        out.append({"error": f"{type(err).__name__}: {err} {said.getvalue()}"})
        continue
    p, t, ac = c.parallelism, c.training, c.activation_checkpoint
    out.append({"tp": p.tensor_parallel_degree, "cp": p.context_parallel_degree, "pp": p.pipeline_parallel_degree,
                "ep": p.expert_parallel_degree, "shard": p.data_parallel_shard_degree,
                "replicate": p.data_parallel_replicate_degree, "local": t.local_batch_size,
                "global": t.global_batch_size, "seq": t.seq_len, "chunks": getattr(c.loss, "num_chunks", 1),
                "sp": p.enable_sequence_parallel, "compile": c.compile.enable and "model" in c.compile.components,
                "ac": type(ac).__qualname__.split(".")[0] if ac is not None else "none"})
print("PARSED " + json.dumps(out))
"""
AC_KIND = {"none": "none", "FullAC": "full", "SelectiveAC": "selective"}


def _titan_path():
    """What PYTHONPATH needs for torchtitan 0.3.0: "" where it is installed (CI's validate-titan extra), else its
    wheels unpacked (conftest.unpacked_wheels); {"skip": why} without torch, which torchtitan imports, or without
    either."""
    import importlib.util

    from conftest import unpacked_wheels

    if importlib.util.find_spec("torch") is None:
        return {"skip": "torch is not installed (torchtitan imports it)"}
    if importlib.util.find_spec("torchtitan") and importlib.util.find_spec("tyro"):
        return ""
    got = unpacked_wheels(TITAN_WHEELS, Path(tempfile.mkdtemp(prefix="torchtitan-")))
    return got.get("site", got)


def _titan_argv(folder: Path) -> list[str]:
    """The launch's words after -m torchtitan.train, its TT_MODULE/TT_CONFIG defaults filled in."""
    text = (folder / "launch_torchtitan.sh").read_text()
    env = dict(re.findall(r'^(TT_MODULE|TT_CONFIG)="\$\{\w+:-([^}]*)\}"', text, re.M))
    _, module, args = split_at_script(find_launch(read_script(text), "torchrun")[0])
    assert module == "torchtitan.train"
    return [env.get(a.strip('"$'), a) if a in ('"$TT_MODULE"', '"$TT_CONFIG"', "$TT_MODULE", "$TT_CONFIG") else a
            for a in args]


def BACKGROUND():  # noqa: N802 - tests/conftest.py calls it at collection
    """Export the launches now (parplan code, main thread); return the slow part: every torchtitan parse of this
    module in one interpreter (torch imported once), giving {"exports": [(plan doc, parsed)], "lines": [parsed],
    "pp_graphs": parsed}, {"skip": why}, or {"stderr": ...} when nothing parsed."""
    import shlex

    tmp = Path(tempfile.mkdtemp(prefix="titan-exports-"))
    docs, argvs, folders = [], [], []
    for case in TITAN_CASES:
        folder = tmp / case
        docs.append(CASES[case]())
        export(docs[-1], "torchtitan", folder, force=True)
        argvs.append(_titan_argv(folder))
        folders.append(str(folder))
    argvs += [shlex.split(line) for line in READ_LINES + [PP_WITH_GRAPHS]]
    return lambda: _parse_titan(tmp, docs, argvs, folders)


def _parse_titan(tmp: Path, docs: list, argvs: list, folders: list) -> dict:
    import subprocess
    import sys

    site = _titan_path()
    if isinstance(site, dict):
        return site
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([p for p in [site, *folders] if p])}
    run = subprocess.run([sys.executable, "-c", TITAN_PARSE, json.dumps(argvs)], capture_output=True, text=True,
                         env=env, cwd=tmp, timeout=300)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("PARSED ")), None)
    if line is None:
        return {"stderr": run.stderr}
    parsed = json.loads(line[len("PARSED "):])
    n = len(TITAN_CASES)
    return {"exports": list(zip(docs, parsed[:n])), "lines": parsed[n:-1], "pp_graphs": parsed[-1]}


@pytest.fixture(scope="module")
def titan(request):
    """BACKGROUND's parses (started at collection by tests/conftest.py)."""
    from conftest import background

    result = background(request)
    if "skip" in result:
        pytest.skip(result["skip"])
    assert "exports" in result, result["stderr"][-2000:]
    return result


def test_torchtitan_accepts_the_launch_lines(titan):
    """torchtitan 0.3.0's own ConfigManager (tyro) parses each exported launch line, and what it builds is the
    layout, batch, sequence and loss chunks that were priced."""
    for doc, got in titan["exports"]:
        assert "error" not in got, got
        lay, train = doc["layout"], doc["train"]
        assert (got["tp"], got["cp"], got["pp"]) == (lay["tp"], lay["cp"], lay["pp"])
        assert got["shard"] * got["replicate"] == lay["dp"] and got["global"] == train["global_batch_size"]
        assert got["chunks"] == train["loss_chunks"] and got["sp"] == (lay["sp"] or lay["tp"] == 1)


def test_parplan_reads_launch_lines_as_torchtitan_does(titan, tmp_path):
    """The same launch lines through torchtitan's ConfigManager and through check's reader
    (planner.frameworks.torchtitan.config_cli): degrees, micro-batch, sequence, loss chunks, compile and
    activation checkpointing agree."""
    from planner.files.native import load_native
    from planner.frameworks.deepspeed.auto import ReadNotes

    for i, (text, got) in enumerate(zip(READ_LINES, titan["lines"])):
        assert "error" not in got, (text, got)
        path = tmp_path / f"run{i}.sh"
        path.write_text(f"torchrun --nproc_per_node 8 -m torchtitan.train {text}\n")
        prob = load_native(path, None, "dgx-h100", 2, notes=ReadNotes())
        lay, train = prob.layout, prob.train
        assert (lay.tp, lay.cp, lay.pp, lay.ep) == (got["tp"], got["cp"], got["pp"], got["ep"]), text
        assert lay.sp == (got["sp"] and lay.tp > 1), text
        assert train.seq_length == got["seq"] and train.loss_chunks == got["chunks"], text
        assert (train.stack_spec.name == "torchtitan") == got["compile"], text
        assert lay.recompute == AC_KIND[got["ac"]], text
        if lay.pp == 1:
            assert lay.mbs == got["local"], text


def test_both_refuse_pipeline_parallelism_with_cuda_graphs_on(titan, tmp_path):
    """torchtitan 0.3.0 captures CUDA graphs by default and refuses them with pp > 1; check exits 2 alike."""
    from planner.errors import UserError
    from planner.files.native import load_native

    assert "CUDA graphs do not support pipeline parallelism" in titan["pp_graphs"].get("error", "")
    path = tmp_path / "run.sh"
    path.write_text(f"torchrun --nproc_per_node 8 -m torchtitan.train {PP_WITH_GRAPHS}\n")
    with pytest.raises(UserError, match="--training.disable_cuda_graphs"):
        load_native(path, None, "dgx-h100", 1)
