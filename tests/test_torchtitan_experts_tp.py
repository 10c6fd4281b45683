"""torchtitan 0.1-0.2.x splits an MoE model's routed experts over the tensor-parallel ranks when ep = 1
(apply_moe_ep_tp: TensorParallel() over the tp mesh), and over expert_tensor_parallel_degree (1 or tp) when ep > 1
(planner.frameworks.torchtitan.config_values.tt_expert_tp). Before, a TOML with tp 8 and ep 1 was priced with every
expert whole on each rank: about 8x the expert weights torchtitan holds."""

from __future__ import annotations

from pathlib import Path

import pytest

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.layout import Layout, resolve_layout
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes

TOML = """
[model]
name = "deepseek_v3"
flavor = "16B"

[training]
local_batch_size = 4
seq_len = 4096

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = {tp}
expert_parallel_degree = {ep}
{extra}
"""


def _load(tmp_path: Path, tp: int, ep: int, extra: str = ""):
    path = tmp_path / "job.toml"
    path.write_text(TOML.format(tp=tp, ep=ep, extra=extra))
    return load_native(path, None, "dgx-h100", 2, notes=ReadNotes())


def test_ep_1_splits_the_experts_over_tp(tmp_path: Path):
    """With pp 2 FSDP keeps a stage's weights gathered across its micro-batches: 18.8 GiB a GPU with the experts
    split over the 8 tp ranks, 110.5 GiB with each rank holding them whole (the old reading)."""
    split = _load(tmp_path, 8, 1, "pipeline_parallel_degree = 2")
    assert split.layout.etp == 8 and _load(tmp_path, 1, 1).layout.etp == 1
    whole = split.layout.model_copy(update={"etp": 1})
    a, b = (estimate(split.model, split.cluster, split.train, lay).memory.peak_bytes
            for lay in (split.layout, whole))
    assert a < b / 4


def test_ep_above_1_takes_the_key_as_torchtitan_allows_it(tmp_path: Path, capsys):
    assert _load(tmp_path, 2, 4).layout.etp == 1
    assert _load(tmp_path, 2, 4, "expert_tensor_parallel_degree = 2").layout.etp == 2
    assert "expert_tensor_parallel_degree" not in capsys.readouterr().err  # read and priced: no "ignored" warning
    with pytest.raises(UserError, match="expert_tensor_parallel_degree=4: torchtitan runs 1 or the "
                                        "tensor_parallel_degree, 2"):
        _load(tmp_path, 2, 4, "expert_tensor_parallel_degree = 4")


def test_a_0_3_launch_splits_the_experts_over_tp_without_ep(tmp_path: Path):
    """torchtitan 0.3 models/common/moe_sharding.py: routed-expert weights are dense {TP} on the EP-disabled,
    TP-enabled path and sparse {EP} (no TP) with EP."""
    path = tmp_path / "launch.sh"
    for degrees, etp in (("--parallelism.tensor_parallel_degree 2", 2),
                         ("--parallelism.tensor_parallel_degree 2 --parallelism.expert_parallel_degree 4", 1)):
        path.write_text("torchrun --nproc_per_node 8 -m torchtitan.train --module qwen3 --config qwen3_30b_a3b "
                        f"{degrees} --training.local_batch_size 2 --training.disable_cuda_graphs\n")
        assert load_native(path, None, "dgx-h100", None, notes=ReadNotes()).layout.etp == etp


def _titan_plan(tp: int, ep: int, etp: int):
    from planner.exporters.common import ExportPlan  # noqa: PLC0415

    model, cluster = hp.load_model("mixtral-8x7b"), hp.load_cluster("dgx-h100", 2)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096), "torchtitan")
    lay = resolve_layout(model, cluster, train, Layout(tp=tp, sp=tp > 1, ep=ep, etp=etp, zero=3))
    return ExportPlan(model, cluster, train, lay, 0, 1.0)


def test_plan_searches_only_the_expert_split_torchtitan_builds():
    """`plan --framework torchtitan` keeps a MoE candidate only where etp is what torchtitan 0.3 builds (tp without
    ep, 1 with it), and still keeps tp > 1 with the experts split; a dense model keeps etp 1 at any tp."""
    from planner.search import frameworks as fws  # noqa: PLC0415
    from planner.search.space import SpaceOptions, enumerate_layouts  # noqa: PLC0415

    fw, model, cluster = hp.load_framework("torchtitan"), hp.load_model("mixtral-8x7b"), hp.load_cluster("dgx-h100", 2)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096), "torchtitan")
    keep = fws.keep(fw, train, moe=True)
    kept = [c for c in enumerate_layouts(model, cluster, train, SpaceOptions(max_mbs=1, max_vpp=1, max_cp=1)) if keep(c)]
    assert kept and all(c.etp == (c.tp if c.ep == 1 else 1) for c in kept)
    assert any(c.tp > 1 and c.etp == c.tp for c in kept) and any(c.ep > 1 for c in kept)


def test_torchtitan_export_writes_tp_split_experts_and_refuses_whole_ones():
    from planner.exporters import ExportRefused, refuse_unrunnable  # noqa: PLC0415
    from planner.frameworks.torchtitan import export as titan_export  # noqa: PLC0415

    titan_export.refusal(_titan_plan(2, 1, 2))
    refuse_unrunnable("torchtitan", _titan_plan(2, 1, 2))
    for tp, ep, etp in ((2, 1, 1), (2, 2, 2)):
        with pytest.raises(ExportRefused, match=f"etp={etp} with tp={tp} ep={ep}"):
            titan_export.refusal(_titan_plan(tp, ep, etp))
