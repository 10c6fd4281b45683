"""check's DeepSpeed JSON reader against DeepSpeed's own DeepSpeedConfig (the venv's deepspeed, on CPU): the public
configs of tests/data/configs and small configs that leave keys out are read both ways, parplan's "auto" values
filled as check fills them (planner.frameworks.deepspeed.auto.resolve), and must agree on the ZeRO stage, the batch,
precision, offload and whether the gradient reduction overlaps. Skipped without deepspeed."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from costmodels.layout import resolve_layout
from planner.files.native import load_native
from planner.frameworks.deepspeed import auto
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"
PUBLIC = ["ds_alpaca_offload_z3.json", "ds_fastchat_s3.json", "ds_hf_zero2_bf16.json", "ds_hf_zero3.json",
          "dsx_training_autotuning_hf_dsconfigs_ds_config_z3.json"]
BATCH = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "bf16": {"enabled": True}}
LEFT_OUT = {  # keys left out, each a default DeepSpeed applies
    "zero2-no-overlap-key": {**BATCH, "zero_optimization": {"stage": 2}},
    "zero1-no-overlap-key": {**BATCH, "zero_optimization": {"stage": 1}},
    "zero3-no-overlap-key": {**BATCH, "zero_optimization": {"stage": 3}},
    "zero0": {**BATCH, "zero_optimization": {"stage": 0, "overlap_comm": True}},
    "no-zero-section": BATCH,
    "overlap-auto": {**BATCH, "zero_optimization": {"stage": 3, "overlap_comm": "auto"}},  # dropped, then the default
    "offload-optimizer": {**BATCH, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}},
}


def _deepspeed_config(cfg: dict, dp: int):
    ds = pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig
    with mock.patch.object(ds.comm, "get_world_size", return_value=dp), \
            mock.patch.object(ds.comm, "get_rank", return_value=0):
        return DeepSpeedConfig(cfg)


# "auto" values the Trainer fills from the model's hidden size (integrations/deepspeed.py trainer_config_finalize),
# which parplan does not price and leaves as placeholders: DeepSpeed's own defaults stand in for them here
MODEL_AUTOS = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")


def _model_autos_dropped(cfg: dict) -> dict:
    zero = dict(cfg.get("zero_optimization") or {})
    for key in MODEL_AUTOS:
        if not isinstance(zero.get(key), (int, float)) or zero.get(key) <= 0:
            zero.pop(key, None)
    return {**cfg, "zero_optimization": zero} if "zero_optimization" in cfg else cfg


def _paths(tmp_path) -> dict[str, Path]:
    paths = {name: CONFIGS / name for name in PUBLIC}
    for name, cfg in LEFT_OUT.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(cfg))
    return paths


@pytest.mark.parametrize("name", PUBLIC + list(LEFT_OUT))
def test_check_reads_the_config_as_deepspeed_does(name, tmp_path):
    pytest.importorskip("deepspeed")
    path = _paths(tmp_path)[name]
    prob = load_native(path, "llama2-7b", "dgx-a100", 1, notes=ReadNotes())
    lay = resolve_layout(prob.model, prob.cluster, prob.train, prob.layout)
    filled = _model_autos_dropped(auto.resolve(json.loads(path.read_text()), TrainerFlags(), path, ReadNotes()))
    ds = _deepspeed_config(filled, lay.dp)
    t = prob.train
    assert lay.zero == ds.zero_optimization_stage, name
    assert (lay.mbs, lay.num_microbatches, t.global_batch_size) == (
        ds.train_micro_batch_size_per_gpu, ds.gradient_accumulation_steps, ds.train_batch_size), name
    assert t.precision == ("bf16" if ds.bfloat16_config.enabled else "fp16" if ds.float16_config.enabled
                           else "fp32"), name
    offload = ds.zero_config.offload_optimizer
    assert t.offload_optimizer == (getattr(offload.device, "value", offload.device) if offload else "none"), name
    if ds.zero_optimization_stage > 0:  # stage 0 reduces after backward whatever overlap_comm says
        assert t.grad_overlap == bool(ds.zero_config.overlap_comm), name
    else:
        assert not t.grad_overlap, name
