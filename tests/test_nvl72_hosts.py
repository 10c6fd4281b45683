"""A GB200 NVL72 node is a 72-GPU NVLink domain of 18 hosts (trays) of 4 GPUs (ClusterSpec.gpus_per_host).
Launchers count hosts: the exports write torchrun --nproc-per-node 4 and SLURM --nodes = trays, check reads them
back as racks, and a job on part of the racks (256 GPUs = 4 racks of 64) is sized by its GPUs. Found by a new-user
pass: exports wrote --nproc-per-node 72 (no GB200 host has 72 GPUs) and `#SBATCH -N 64 --gpus-per-node=4` was read
as 64 racks."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import hardware_profiles as hp
from costmodels.hardware_spec import ClusterSpec
from planner.cli import app
from planner.errors import UserError
from planner.files.loading import load_cluster, resize_cluster
from planner.files.native import load_native

runner = CliRunner()


def test_hosts_must_divide_the_domain():
    data = hp.load_cluster("gb200-nvl72").model_dump()
    with pytest.raises(ValueError, match="gpus_per_host=5 must divide gpus_per_node=72"):
        ClusterSpec.model_validate({**data, "gpus_per_host": 5})


def test_gpu_counts_fill_the_fewest_racks_with_whole_trays():
    base = hp.load_cluster("gb200-nvl72")
    four = resize_cluster(base, None, 256)
    assert (four.num_nodes, four.gpus_per_node, four.num_hosts) == (4, 64, 64)
    assert resize_cluster(base, None, 144).num_nodes == 2
    with pytest.raises(UserError, match="not a whole number"):
        resize_cluster(base, None, 100)  # 2 racks of 50: not whole 4-GPU trays
    with pytest.raises(UserError, match="not a whole number"):
        load_cluster("dgx-h100", gpus=12)  # a plain node is not split


def test_exports_count_trays_and_read_back_as_racks(tmp_path: Path):
    out = tmp_path / "out"
    res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--global-batch", "144",
                              "--framework", "megatron", "--export", str(out), "--format", "all"])
    assert res.exit_code == 0, res.output
    megatron = (out / "launch_megatron.sh").read_text()
    assert "NNODES=36" in megatron and "GPUS_PER_NODE=4" in megatron and "--nodes 2" in megatron
    assert "#SBATCH --nodes=36" in (out / "launch_slurm.sbatch").read_text()
    for name in ("launch_megatron.sh", "launch_slurm.sbatch", "launch_torchrun.sh"):
        prob = load_native(out / name, "llama3-8b" if "torchrun" in name else None, "gb200-nvl72", None)
        assert (prob.cluster.num_nodes, prob.cluster.gpus_per_node) == (2, 72), name


def test_an_sbatch_of_trays_is_sized_by_its_gpus(tmp_path: Path):
    script = tmp_path / "train.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH -N 64\n#SBATCH --ntasks-per-node=4\n#SBATCH --gpus-per-node=4\n"
        "srun python pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 "
        "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --seq-length 4096 "
        "--max-position-embeddings 4096 --swiglu --normalization RMSNorm --position-embedding-type rope "
        "--untie-embeddings-and-output-weights --disable-bias-linear --vocab-size 128256 --micro-batch-size 1 "
        "--global-batch-size 512 --bf16 --tensor-model-parallel-size 2\n")
    clus = load_native(script, None, "gb200-nvl72", None).cluster
    assert (clus.num_nodes, clus.gpus_per_node, clus.num_gpus) == (4, 64, 256)
