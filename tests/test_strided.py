"""Eager element-wise kernels on chunk views are issue-bound (costmodels.strided): a rate per SM and clock, measured
on one H200 (benchmarks/data/measured/gpu_moe_mcore_h200.json), capped by the HBM rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hardware_profiles as hp
from costmodels.strided import BYTES_PER_SM_CLOCK, datasheet_clock_hz, strided_bytes_per_s


DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "measured"


def _hbm(gpu) -> float:
    return gpu.hbm_bytes_per_s * gpu.efficiency.hbm


@pytest.mark.parametrize("name, ghz", [("h100-sxm", 1.83), ("h200", 1.83), ("a100-80gb", 1.41),
                                       ("v100-sxm3-32gb", 1.53), ("b200", 1.86), ("mi300x", 2.1)])
def test_the_datasheet_peak_gives_back_the_datasheet_clock(name, ghz):
    assert datasheet_clock_hz(hp.load_gpu(name)) / 1e9 == pytest.approx(ghz, rel=0.02)


def test_hopper_parts_share_one_rate_whatever_their_hbm():
    """132 SMs at 1.83 GHz x 5.5 bytes = 1.33 TB/s on the H100 (3.35 TB/s HBM) and the H200 (4.8 TB/s): the rate
    follows the SMs, so the H200's faster memory does not speed these kernels up."""
    h100, h200 = hp.load_gpu("h100-sxm"), hp.load_gpu("h200")
    assert strided_bytes_per_s(h100, _hbm(h100)) == pytest.approx(132 * 1.83e9 * BYTES_PER_SM_CLOCK, rel=0.01)
    assert strided_bytes_per_s(h200, _hbm(h200)) == pytest.approx(strided_bytes_per_s(h100, _hbm(h100)))
    assert 0.25 < strided_bytes_per_s(h200, _hbm(h200)) / (h200.hbm_bytes_per_s) < 0.38  # measured 24-38% of peak


@pytest.mark.parametrize("name", hp.list_gpus())
def test_no_gpu_runs_strided_kernels_faster_than_its_memory(name):
    gpu = hp.load_gpu(name)
    rate = strided_bytes_per_s(gpu, _hbm(gpu))
    assert 0 < rate <= _hbm(gpu)


def test_a_profile_without_sm_count_keeps_the_hbm_rate():
    gpu = hp.load_gpu("h100-sxm").model_copy(update={"sm_count": None})
    assert datasheet_clock_hz(gpu) is None and strided_bytes_per_s(gpu, 2e12) == 2e12


def test_the_constant_stays_in_its_measured_range():
    assert 5.0 <= BYTES_PER_SM_CLOCK <= 6.0  # the clamp path's strided passes: H100 5.0, H200 5.5 and 6.0


def _measured(gpu: str) -> dict:
    rows = json.loads((DATA / f"gpu_strided_{gpu}.json").read_text())["rows"]
    return {(r["view"], r["op"]): r["tb_per_s"] for r in rows}


def test_strided_ops_follow_the_sms_and_contiguous_ones_the_memory():
    """benchmarks/gpu/measure_strided.py on an H100 and an H200 (same 132 SMs and clock; HBM 3.35 vs 4.8 TB/s):
    contiguous ops and a clone run 1.39-1.42 x faster on the H200, the same ops on Megatron's chunk view 1.08-1.16 x.
    An HBM-bound kernel would gain the full 1.43 x. (On an interleaved view, clamp and le gain 1.12 x, where and add
    1.37-1.41 x: reading every second element wastes no sector, so those stay near the memory's pace.)"""
    h100, h200 = _measured("h100"), _measured("h200")
    for op in ("clamp", "le", "add"):
        assert 1.3 < h200[("contiguous", op)] / h100[("contiguous", op)] < 1.5
    for op in ("clamp", "le", "where", "add"):
        assert 1.0 < h200[("chunk", op)] / h100[("chunk", op)] < 1.25


@pytest.mark.parametrize("gpu, profile", [("h100", "h100-sxm"), ("h200", "h200")])
def test_the_priced_rate_is_within_ten_percent_of_the_clamp_paths_measured_rate(gpu, profile):
    """Megatron-Core's clamp path on chunk views: clamps 4 passes, le + ge 4.5, where 5 (costmodels.glu_clamp). The
    pass-weighted measured rate is 1.20 TB/s (H100) and 1.33 (H200); priced 1.33 on both."""
    m = _measured(gpu)
    seconds_per_unit = 4 / m[("chunk", "clamp")] + 4.5 / m[("chunk", "le")] + 5 / m[("chunk", "where")]
    measured = 13.5 / seconds_per_unit * 1e12
    g = hp.load_gpu(profile)
    assert strided_bytes_per_s(g, _hbm(g)) == pytest.approx(measured, rel=0.12)
