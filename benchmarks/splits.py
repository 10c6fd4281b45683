"""Which published rows fit the time model and which are held out, declared by source.

benchmarks/calibrate.py fits only on `fitting_sets`; benchmarks/accuracy.py reports every row with
`is_fitted` so that held-out error is never computed on a row an objective has seen.
- a100 (stage 1): vTrain single-node rows with index % 6 == 0 (240 of 1,440), vTrain multi-node
  even rows (55 of 109), Korthikanti Table 4 (5 layers). Narayanan Table 1: never fitted.
- megatron-core (stage 2): Megatron-Core H100 weak-scaling rows MG-001, 003, 005, 007, 009; held
  out: MG-002, 004, 006, 008 and the strong-scaling MG-010, 011.
- torchtitan (stage 3): measured/README.md's suggested fitting rows: torchtitan Dec 2024 H100
  benchmark (TT-001..018) and docs/performance.md (A100 TT-036..043, 405B TT-033..035). Held
  out: async-TP 2025-06 (TT-019..030), H200, B200 and MXFP8 rows, NeMo AutoModel MoE, DeepSeek-V3.
- fp8-rowwise (stage 4): the FP8 rowwise GEMM fraction alone, on TT-023 and TT-029 (the vanilla-TP
  rowwise rows of the 2025-06 benchmark: no other row measures rowwise); the async-TP rowwise rows
  TT-024, TT-030 and the B200 row TT-048 stay held out.
- deepspeed-ratios (stage 5): DeepSpeed's ZeRO-3 per-call host cost and overlap slowdown, on the
  step-time ratios of the ZeRO++ blog's ZeRO-3 rows of its 18B model on 384 V100 (ZPP-001, 009,
  017, 025: 1K vs 2K tokens per GPU, 400 vs 100 Gb/s), which the data's README reserves for
  relative checks: only ratios enter the objective, never an absolute step time.
"""

from __future__ import annotations

from functools import lru_cache

import hardware_profiles as hp
from measured_data import load_measured, zpp_ratio_pairs
from reference_data import korthikanti_layer, vtrain

MG_FIT = {"MG-001", "MG-003", "MG-005", "MG-007", "MG-009"}
TT_FIT = {f"TT-{i:03d}" for i in [*range(1, 19), *range(33, 44)]}
ROWWISE_FIT = {"TT-023", "TT-029"}  # the only rows that fit the FP8 rowwise fraction (vanilla TP)


def vtrain_fitted(which: str, index: int) -> bool:
    """Stage 1 fits vTrain single-node rows index % 6 == 0 and multi-node even rows."""
    return index % 6 == 0 if which == "single" else index % 2 == 0


@lru_cache(maxsize=None)
def measured():
    """The measured rows (cached: the loader resolves stacks from YAML)."""
    return tuple(load_measured())


def measured_fitted(row_id: str) -> bool:
    """Whether a measured row is in a fitting set."""
    return row_id in MG_FIT or row_id in TT_FIT or row_id in ROWWISE_FIT


def fitting_sets(split: str):
    """([case lists, one per data set], per-layer rows) that stage `split` fits on."""
    if split == "a100":
        gpu = hp.load_gpu("a100-80gb")
        single = [c for i, c in enumerate(vtrain(gpu, "single")) if vtrain_fitted("single", i)]
        multi = [c for i, c in enumerate(vtrain(gpu, "multi")) if vtrain_fitted("multi", i)]
        return [single, multi], korthikanti_layer(gpu)
    return [[c for c in measured() if c.row_id in _ids(split)]], ()


def _ids(split: str) -> set[str]:
    return {"megatron-core": MG_FIT, "torchtitan": TT_FIT, "fp8-rowwise": ROWWISE_FIT, "deepspeed-ratios": set()}[split]


def ratio_sets(split: str):
    """((case a, layout a), (case b, layout b), measured t_a/t_b) that a stage fits on (relative data)."""
    if split != "deepspeed-ratios":
        return []
    from costmodels.layout import resolve_layout

    def prep(c):
        return c, resolve_layout(c.model, c.cluster, c.train, c.layout)

    return [(prep(a), prep(b), r) for a, b, r in zpp_ratio_pairs()]


def row_ids(split: str) -> list[str]:
    """Ids of the rows a stage fits on (ranges for vTrain)."""
    if split == "deepspeed-ratios":
        return sorted({c.row_id for a, b, _ in zpp_ratio_pairs() for c in (a, b)})
    if split == "a100":
        return ["vtrain-single rows with index % 6 == 0", "vtrain-multi even rows", "korthikanti-table4 (5)"]
    return sorted(_ids(split))


def describe(split: str) -> str:
    """One line naming the rows of a stage."""
    return "; ".join(row_ids(split)) if split == "a100" else ", ".join(row_ids(split))
