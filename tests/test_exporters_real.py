"""Exported files checked by the real frameworks' own parsers, when they are installed
(benchmarks/data/launch_formats.md, "Offline validation"): DeepSpeed's DeepSpeedConfig, hostfile parser and
launcher argument parser; torch's torch.distributed.run parser (strict: allow_abbrev=False) and
config_from_args. Skipped cleanly when deepspeed or torch is absent (install: pip install torch==2.13.0,
then DS_BUILD_OPS=0 pip install deepspeed)."""

from __future__ import annotations

import json
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
