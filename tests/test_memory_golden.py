"""Golden memory numbers from the papers (benchmarks/data/published_numbers.md)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import gpt

from costmodels import activations as act
from costmodels.memory import zero_state_bytes
from costmodels.params import total_params
from costmodels.train_spec import TrainSpec

REF = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
ADAM16 = TrainSpec(global_batch_size=1)  # bf16 weights + bf16 grads + 12-byte Adam: 16 bytes/param
GB = 1e9


def _zero_totals_gb(params: float, n: int) -> list[float]:
    return [sum(zero_state_bytes(params, n, z, ADAM16)) / GB for z in range(4)]


def test_zero_figure1_7_5b_on_64_gpus():
    """ZeRO (Rajbhandari et al., SC'20) Figure 1: 7.5B params, N = 64 -> 120 / 31.4 / 16.6 / 1.9 GB."""
    got = _zero_totals_gb(7.5e9, 64)
    assert got == pytest.approx([120.0, 31.4, 16.6, 1.875], abs=0.05)


def test_seed_7b_on_8_gpus():
    """Seed worked example (published_numbers.md section 1): 7B on 8 GPUs -> 112 / 38.5 / 26.25 / 14 GB."""
    assert _zero_totals_gb(7e9, 8) == pytest.approx([112.0, 38.5, 26.25, 14.0], rel=1e-12)


def test_megatron_distributed_optimizer_fp32_grads():
    """Megatron docs (published_numbers.md section 1): bf16 weights + fp32 grads: 18 B/param, 6 + 12/N sharded."""
    train = TrainSpec(global_batch_size=1, grad_dtype="fp32")
    assert sum(zero_state_bytes(1.0, 8, 0, train)) == 18
    assert sum(zero_state_bytes(1.0, 8, 1, train)) == pytest.approx(6 + 12 / 8)


# Korthikanti et al. MLSys'23 Table 2 at the paper's shapes (Table 3): 22B, 175B (GPT-3), 530B (MT-NLG).
SHAPES = {"22B": (6144, 64, 48), "175B": (12288, 96, 96), "530B": (20480, 128, 105)}
S, B, T = 2048, 4, 8


def _table2(h: int, a: int, row: str) -> float:
    sbh = S * B * h
    return {
        "none": sbh * (34 + 5 * a * S / h),
        "tp": sbh * (10 + 24 / T + 5 * a * S / (h * T)),
        "tp+sp": sbh * (34 / T + 5 * a * S / (h * T)),
        "tp+selective": sbh * (10 + 24 / T),
        "tp+sp+selective": sbh * 34 / T,
        "full": 2 * sbh,
    }[row]


ROWS = {  # row -> (tp, sp, recompute)
    "none": (1, False, "none"),
    "tp": (T, False, "none"),
    "tp+sp": (T, True, "none"),
    "tp+selective": (T, False, "selective"),
    "tp+sp+selective": (T, True, "selective"),
    "full": (1, False, "full"),
}


@pytest.mark.parametrize("size", SHAPES)
@pytest.mark.parametrize("row", ROWS)
def test_korthikanti_table2(size: str, row: str):
    """Every Table 2 row at every paper shape, exact (classic attention, dropout, GELU, LayerNorm)."""
    h, a, layers = SHAPES[size]
    tp, sp, recompute = ROWS[row]
    model = gpt(h, a, layers, seq=S)
    shape = act.ActShape(seq=S, mbs=B, tp=tp, sp=sp, recompute=recompute, flash=False)
    assert act.layer_bytes(model, shape, moe=False) == pytest.approx(_table2(h, a, row), rel=1e-12)


def test_flash_attention_equals_selective():
    """Korthikanti section 5 / published_numbers.md: flash attention keeps what selective recompute keeps."""
    model = gpt(6144, 64, 48)
    flash = act.ActShape(seq=S, mbs=B, tp=T, sp=True, recompute="none", flash=True)
    selective = act.ActShape(seq=S, mbs=B, tp=T, sp=True, recompute="selective", flash=False)
    assert act.layer_bytes(model, flash, False) == act.layer_bytes(model, selective, False)


def test_first_stage_1f1b_holds_all_layers():
    """Korthikanti section 4.2.3: with 1F1B the first stage holds p micro-batches of L/p layers = L layers."""
    for p in (2, 4, 8, 16):
        assert act.inflight_microbatches("1f1b", 0, p, 1, 64) * (96 / p) == 96


def test_interleaved_factor():
    """Korthikanti section 4.2.3: interleaving multiplies the first stage by (1 + (p-1)/(p*v))."""
    p, v = 8, 4
    assert act.inflight_microbatches("interleaved", 0, p, v, 64) == pytest.approx(p * (1 + (p - 1) / (p * v)))


def _narayanan_rows() -> list[dict]:
    with open(REF / "narayanan2021_table1.csv") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("row", _narayanan_rows(), ids=lambda r: r["params_billion"])
def test_narayanan_eq2_parameter_counts(row: dict):
    """Narayanan et al. SC'21 eq. (2) and Table 1's first column, within 0.5%."""
    h, a, layers = int(row["hidden_size"]), int(row["num_attention_heads"]), int(row["num_layers"])
    V, s = 51200, 2048
    eq2 = 12 * layers * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * layers * h))
    ours = total_params(gpt(h, a, layers, vocab=V, seq=s))
    assert ours == pytest.approx(eq2, rel=1e-4)  # differs only by the final LayerNorm (2h)
    # Table 1 prints billions rounded to one decimal: agree within that rounding plus 0.5%.
    table = float(row["params_billion"])
    assert abs(ours / 1e9 - table) <= 0.05 + 0.005 * table
