"""benchmarks/physics_only.py: the time model with GEMMs and attention at the kernel model's typical rates
(no fitted compute curve), the route a GPU with no measured step times takes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from physics_only import errors, kernel_physics  # noqa: E402

import hardware_profiles as hp  # noqa: E402
from costmodels import compute as cmp  # noqa: E402
from costmodels.kernels import gemm_kernel_efficiency  # noqa: E402
from costmodels.layout import Layout, resolve_layout  # noqa: E402
from costmodels.timing import make_context  # noqa: E402
from costmodels.train_spec import TrainSpec  # noqa: E402


def _device():
    model = hp.load_model("llama3-8b")
    cluster = hp.load_cluster("dgx-h100", 1)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=8192), "megatron-core")
    lay = resolve_layout(model, cluster, train, Layout(tp=1, pp=1, zero=1, mbs=1))
    return make_context(model, cluster, train, lay).dev


def test_kernel_physics_prices_gemms_at_the_sustained_typical_kernel_rate_and_restores():
    dev, shape = _device(), (8192, 4096, 14336)
    shipped = cmp.device_gemm_efficiency(dev, *shape)
    with kernel_physics():
        inside = cmp.device_gemm_efficiency(dev, *shape)
    assert inside == dev.kernel.gen.sustained * gemm_kernel_efficiency(dev.kernel, *shape, typical=True)
    assert inside != shipped
    assert cmp.device_gemm_efficiency(dev, *shape) == shipped


def test_ampere_kernel_physics_alone_lands_within_15_percent_of_vtrain():
    """Spec sheet + A100 MAMF + the H100-measured ramps, nothing fitted on A100 step times: the vTrain rows
    with a role (fitting and validation blocks) are within 15% on average (measured: 13.6% single-node,
    10.3% multi-node)."""
    rows = [r for r in errors() if r[0].startswith("vtrain")]
    assert len(rows) > 1000
    assert float(np.mean([abs(p) for *_, p in rows])) <= 0.15


def test_the_hopper_megatron_data_sets_agree_under_kernel_physics():
    """With the 2024 Megatron README rows read with full recompute (benchmarks/measured_data.py
    MEGATRON_README_RECOMPUTE), kernel physics alone puts them and the 2025-26 Megatron-Bridge recipes on the
    same side within 10% (median -5% and -7%); read without recompute the README rows were 27% fast."""
    rows = errors()
    for dataset in ("megatron-readme", "production-recipes"):
        physics = [p for d, *_, p in rows if d == dataset]
        assert len(physics) >= 5 and abs(float(np.median(physics))) <= 0.10, (dataset, np.median(physics))


def test_torchtitan_2024_pipelines_split_the_local_batch_into_as_many_micro_batches_as_stages():
    """torchtitan before 2025 ran as many pipeline micro-batches as its schedule had stages (the Dec 2024 405B
    rows: local batch 32 on 8 ranks, micro-batches of 4 with 1F1B and of 2 interleaved); since 2025 the
    micro-batch is 1 (torchtitan 0.1.0 parallelism.pipeline_parallel_microbatch_size)."""
    from measured_data import torchtitan_pipeline_mbs

    assert torchtitan_pipeline_mbs(2024, 32, 8) == 4 and torchtitan_pipeline_mbs(2024, 32, 16) == 2
    assert torchtitan_pipeline_mbs(2025, 32, 8) == 1 and torchtitan_pipeline_mbs(2024, 6, 8) == 1
