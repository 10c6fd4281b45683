"""The shipped collective numbers are what benchmarks/calibrate_nccl.py fits today, and no fitted
parameter sits at a bound without a reason.

A profile that differs from its script's output is a number nobody can regenerate: before this test,
h100-sxm carried out_half_mib 9.82 from a fit made before the hierarchical tree existed, while the
script fitted 0.96 with it. Fails as soon as comm.py or the NCCL data change without
`python benchmarks/calibrate_nccl.py --write`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
pytest.importorskip("scipy")
import calibrate_nccl  # noqa: E402


@pytest.fixture(scope="module")
def fits():
    return calibrate_nccl.fit_all(calibrate_nccl.load_rows())


def _efficiency(name: str) -> dict:
    return yaml.safe_load((ROOT / "hardware_profiles" / "gpus" / f"{name}.yaml").read_text())["efficiency"]


@pytest.mark.parametrize("name", sorted(calibrate_nccl.PROFILE_KIND))
def test_gpu_profile_collectives_are_the_scripts_fit(fits, name):
    want = calibrate_nccl.profile_fields(name, fits[calibrate_nccl.PROFILE_KIND[name]][0])
    have = {k: _efficiency(name)[k] for k in want}
    assert have == pytest.approx(want, rel=2e-3, abs=0.011), f"rerun benchmarks/calibrate_nccl.py --write ({name})"


@pytest.mark.parametrize("name", sorted(calibrate_nccl.CLUSTER_KIND))
def test_cluster_latencies_are_the_scripts_fit(fits, name):
    kind = calibrate_nccl.CLUSTER_KIND[name]
    alpha_out = fits[calibrate_nccl.ALPHA_OUT_KIND.get(name, kind)][0]["alpha_out_us"]
    cluster = yaml.safe_load((ROOT / "hardware_profiles" / "clusters" / f"{name}.yaml").read_text())
    assert cluster["scale_up_latency_us"] == pytest.approx(float(fits[kind][0]["alpha_up_us"]), abs=1e-3)
    assert cluster["scale_out_latency_us"] == pytest.approx(float(alpha_out), abs=1e-3)


def test_no_fitted_number_sits_at_a_bound_without_a_reason():
    """benchmarks/calibrate.py writes "(no reason recorded: investigate)" for a parameter at a bound
    that BOUND_REASONS does not explain; a shipped profile must not carry it."""
    texts = [p.read_text() for p in (ROOT / "hardware_profiles").rglob("*.yaml")]
    assert texts and not any(re.search(r"no reason recorded", t) for t in texts)


def test_every_gpu_profile_has_a_compute_curve_the_refit_writes():
    """Each GPU profile's compute curve is fitted (a calibrate.py stage), tied to the die it shares
    (predict.TIED_GPUS) or copied from a named sibling (calibrate.COPIES), and equals its source: b300, gb200
    and mi355x once kept a curve from an old h100-sxm fit that no refit rewrote (0.795 / 4,042 / 0.619)."""
    import calibrate
    from predict import TIED_GPUS

    fitted = {p.profile for _, params, _ in calibrate.STAGES for p in params if p.kind == "gpu"}
    source = {name: src for src, names in TIED_GPUS.items() for name in names}
    source.update({name: src for (kind, name), (src, _) in calibrate.COPIES.items() if kind == "gpu"})
    curve = ("gemm_max", "gemm_half_dim", "attn_max", "attn_half_seq")
    for path in sorted((ROOT / "hardware_profiles" / "gpus").glob("*.yaml")):
        name = path.stem
        assert name in fitted or name in source, f"{name}: no stage fits it and no source is copied into it"
        if name in source:
            want = {k: _efficiency(source[name])[k] for k in curve}
            assert {k: _efficiency(name)[k] for k in curve} == want, f"{name} differs from {source[name]}"


def _stack(name: str) -> dict:
    return yaml.safe_load((ROOT / "hardware_profiles" / "stacks" / f"{name}.yaml").read_text())["fitted"]


def test_automodel_runs_megatron_core_kernels_without_compile():
    """NeMo AutoModel's BackendConfig defaults to TE Linear and TE DotProductAttention on GPU (the kernels
    of the Megatron-Core rows the h100-sxm curve is fitted on) and compiles nothing unless asked: its
    GEMM and attention scales are megatron-core's, the rest torchtitan-eager's (calibrate.py COPIES)."""
    auto, core, eager = _stack("automodel"), _stack("megatron-core"), _stack("torchtitan-eager")
    assert (auto["gemm_scale"], auto["attn_scale"]) == (core["gemm_scale"], core["attn_scale"])
    for key in ("elementwise_scale", "overlap_slowdown", "layer_overhead_s"):
        assert auto[key] == eager[key], key


def test_a_scope_that_names_its_nics_gets_their_share():
    """'3x8/4nic' (nccl-tests#119: 3 nodes of 8 A100, 4 HDR NICs each) is 24 ranks with half a NIC per GPU,
    so the row's plateau is 8 x 12.5 GB/s per node, not the 8 x 25 of a DGX A100."""
    assert calibrate_nccl.placement("3x8/4nic") == (8, 24, 1)
    assert calibrate_nccl.nic_share("3x8/4nic") == 0.5 and calibrate_nccl.nic_share("2x8") == 1.0
    p = {**calibrate_nccl.START, "nvls": 1.0}
    full, half = (calibrate_nccl.links_for("a100", p, 8, "proc", s).out_bytes_per_s for s in (1.0, 0.5))
    assert half == pytest.approx(full / 2)


def test_every_gpu_profile_is_what_the_nccl_fit_writes():
    """Each shipped GPU profile takes its collective numbers from benchmarks/calibrate_nccl.py (measured,
    or copied from the fit of its nearest generation and saying so): h100-sxm-500w, the GPU of 23 fitted
    torchtitan rows, missed the last refit (scale_out 1.0 and no launch or half sizes) while no test
    looked at it."""
    import hardware_profiles as hp

    assert set(hp.list_gpus()) == set(calibrate_nccl.PROFILE_KIND)
    for name in hp.list_gpus():
        assert "NCCL collectives:" in _efficiency(name)["fitted_on"], name


def test_refit_runs_every_fit_in_dependency_order():
    """`python -m benchmarks.refit` runs NCCL before the compute fit that prices collectives, the stacks
    before the bands measured with them, the examples after the bands, and every script it names exists."""
    from benchmarks import refit

    assert list(refit.STEPS) == ["nccl", "kernels", "stacks", "memory", "accuracy", "examples", "docs"]
    assert refit.selected("memory", None) == ["memory", "accuracy", "examples", "docs"]
    for name in refit.STEPS:
        for cmd in refit.STEPS[name]():
            scripts = [c for c in cmd if c.endswith(".py")]
            assert all(Path(c).exists() for c in scripts), cmd
    assert len(refit.example_commands()) == len(list((ROOT / "docs" / "examples").glob("*.json")))
