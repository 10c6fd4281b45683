"""torchtitan 0.1-0.2 without FSDP (data_parallel_shard_degree * context_parallel_degree = 1): mixed precision
is FSDP's MixedPrecisionPolicy, so under TP or PP distributed/utils.py maybe_enable_amp applies nothing and
the fp32 model trains in fp32; DDP or one GPU run torch.autocast (planner/frameworks/torchtitan/config_toml.py
amp_precision)."""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodels.train_spec import TrainSpec
from planner.frameworks.torchtitan import config_toml as tr
from planner.frameworks.torchtitan import config_values as ttc

PATH = Path("job.toml")


def _read(par: dict, world: int, precision: str = "bf16", training: dict | None = None):
    cfg = {"parallelism": par, "training": training or {}}
    lay, _ = ttc.tt_layout(par, PATH, world, 32)
    notes: list[str] = []
    return tr.amp_precision(cfg, PATH, {"precision": precision}, lay, notes), notes


@pytest.mark.parametrize("par,world", [
    ({"tensor_parallel_degree": 8, "data_parallel_shard_degree": 1}, 8),
    ({"tensor_parallel_degree": 8}, 8),  # data_parallel_shard_degree -1: the rest, 1 here
    ({"pipeline_parallel_degree": 2, "data_parallel_shard_degree": 1}, 2),
])
def test_tp_or_pp_without_fsdp_trains_in_fp32(par, world):
    fields, notes = _read(par, world)
    assert fields == {"precision": "fp32"}
    assert any("maybe_enable_amp" in n and "fp32" in n for n in notes)
    train = TrainSpec(global_batch_size=8, **fields)
    assert (train.weight_bytes_per_param, train.optimizer_bytes_per_param) == (4, 8)  # 16 B/param, no master copy


@pytest.mark.parametrize("par,world", [
    ({"data_parallel_shard_degree": 8}, 8),  # FSDP: its MixedPrecisionPolicy
    ({"tensor_parallel_degree": 4, "context_parallel_degree": 2, "data_parallel_shard_degree": 1}, 8),  # FSDP over cp
])
def test_fsdp_keeps_bf16(par, world):
    assert _read(par, world) == ({"precision": "bf16"}, [])


def test_ddp_and_one_gpu_keep_bf16_under_autocast_and_say_so():
    for par, world in (({"data_parallel_replicate_degree": 8, "data_parallel_shard_degree": 1}, 8),
                       ({"data_parallel_shard_degree": 1}, 1)):
        fields, notes = _read(par, world)
        assert fields == {"precision": "bf16"} and any("torch.autocast" in n for n in notes)


def test_bf16_model_and_fp8_are_left_as_read():
    tp = {"tensor_parallel_degree": 8, "data_parallel_shard_degree": 1}
    assert _read(tp, 8, training={"dtype": "bfloat16"}) == ({"precision": "bf16"}, [])
    fields, notes = _read(tp, 8, precision="fp8")
    assert fields == {"precision": "fp8"} and any("stay fp32" in n for n in notes)
    assert _read(tp, 8, precision="fp32") == ({"precision": "fp32"}, [])


def test_ddp_replicas_beside_tp_are_refused_as_torchtitan_refuses_them(tmp_path):
    """torchtitan 0.2 raises "DDP has not supported > 1D parallelism" for replicate 4 with tp 2: check said fits."""
    from planner.errors import UserError  # noqa: PLC0415
    from planner.files.native import load_native  # noqa: PLC0415

    path = tmp_path / "ddp.toml"
    path.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\nseq_len = 2048\n'
                    "[parallelism]\ndata_parallel_replicate_degree = 4\ndata_parallel_shard_degree = 1\n"
                    "tensor_parallel_degree = 2\n")
    with pytest.raises(UserError, match="DDP has not supported > 1D parallelism"):
        load_native(path, None, "dgx-h100", 1)
