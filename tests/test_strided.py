"""Eager element-wise kernels on chunk views are issue-bound (costmodels.strided): a rate per SM and clock, measured
on one H200 (benchmarks/data/measured/gpu_moe_mcore_h200.json), capped by the HBM rate."""

from __future__ import annotations

import pytest

import hardware_profiles as hp
from costmodels.strided import BYTES_PER_SM_CLOCK, datasheet_clock_hz, strided_bytes_per_s


def _hbm(gpu) -> float:
    return gpu.hbm_bytes_per_s * gpu.efficiency.hbm


@pytest.mark.parametrize("name, ghz", [("h100-sxm", 1.83), ("h200", 1.83), ("a100-80gb", 1.41),
                                       ("v100-sxm3-32gb", 1.53), ("b200", 1.86), ("mi300x", 2.1)])
def test_the_datasheet_peak_gives_back_the_datasheet_clock(name, ghz):
    assert datasheet_clock_hz(hp.load_gpu(name)) / 1e9 == pytest.approx(ghz, rel=0.02)


def test_hopper_parts_share_one_rate_whatever_their_hbm():
    """132 SMs at 1.83 GHz x 6 bytes = 1.45 TB/s on the H100 (3.35 TB/s HBM) and the H200 (4.8 TB/s): the rate
    follows the SMs, so the H200's faster memory does not speed these kernels up."""
    h100, h200 = hp.load_gpu("h100-sxm"), hp.load_gpu("h200")
    assert strided_bytes_per_s(h100, _hbm(h100)) == pytest.approx(132 * 1.83e9 * BYTES_PER_SM_CLOCK, rel=0.01)
    assert strided_bytes_per_s(h200, _hbm(h200)) == pytest.approx(strided_bytes_per_s(h100, _hbm(h100)))
    assert 0.25 < strided_bytes_per_s(h200, _hbm(h200)) / (h200.hbm_bytes_per_s) < 0.38  # measured 25-38% of peak


@pytest.mark.parametrize("name", hp.list_gpus())
def test_no_gpu_runs_strided_kernels_faster_than_its_memory(name):
    gpu = hp.load_gpu(name)
    rate = strided_bytes_per_s(gpu, _hbm(gpu))
    assert 0 < rate <= _hbm(gpu)


def test_a_profile_without_sm_count_keeps_the_hbm_rate():
    gpu = hp.load_gpu("h100-sxm").model_copy(update={"sm_count": None})
    assert datasheet_clock_hz(gpu) is None and strided_bytes_per_s(gpu, 2e12) == 2e12


def test_the_constant_stays_in_its_measured_range():
    assert 5.0 <= BYTES_PER_SM_CLOCK <= 7.5  # per op on the H200: le / ge 5.0 ... where 7.4
