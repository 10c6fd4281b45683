"""Which published rows fit the time model, which validate it, declared by source family.

Three roles, never mixed:
- fit: rows a stage of benchmarks/calibrate.py puts in its objective (`fitting_sets`).
- validation: rows declared here that no objective sees; benchmarks/accuracy.py reports them as
  "held out" and the error bands come from them and from leave-one-regime-out cross-validation
  (benchmarks/loro.py). They have been used to choose model changes, so they are validation rows.
- test: benchmarks/frozen_split.py, which this module never opens (tests/test_accuracy.py checks
  that the three sets are disjoint and cover every row); only `accuracy.py --final` reports them.
A row in none of them is unseen and accuracy.py says so.

vTrain sweeps are split by whole (hidden size, layers) blocks, not by alternating neighbouring
rows (which measured interpolation): the fitting blocks enter the objective on every other row
(for speed), the validation blocks are whole model sizes the fit never saw.
- a100 (stage 1): vTrain single-node blocks h1024 x 12 and h2048 x 16 layers, multi-node blocks
  GPT h3072 x 30 (64 GPUs) and h8192 x 48 (512 GPUs), Korthikanti Table 4 (5 layers).
- megatron-core (stage 2): Megatron-Core H100 weak-scaling rows MG-001, 003, 005, 007, 009.
- torchtitan (stage 3): torchtitan Dec 2024 H100 benchmark (TT-001..018) and docs/performance.md
  (A100 TT-036..043, 405B TT-033..035).
- fp8-rowwise (stage 4): TT-023 and TT-029 (the vanilla-TP rowwise rows of the 2025-06 benchmark).
- deepspeed-ratios (stage 5): the step-time ratios of the ZeRO++ blog's ZeRO-3 rows (ZPP-001, 009,
  017, 025), relative data only.
"""

from __future__ import annotations

from functools import lru_cache

import hardware_profiles as hp
from measured_data import load_measured, zpp_ratio_pairs
from reference_data import korthikanti_layer, vtrain

MG_FIT = {"MG-001", "MG-003", "MG-005", "MG-007", "MG-009"}
TT_FIT = {f"TT-{i:03d}" for i in [*range(1, 19), *range(33, 44)]}
ROWWISE_FIT = {"TT-023", "TT-029"}  # the only rows that fit the FP8 rowwise fraction (vanilla TP)
VTRAIN_FIT_BLOCKS = {"single": {(1024, 12), (2048, 16)}, "multi": {(3072, 30), (8192, 48)}}
VTRAIN_VALIDATION_BLOCKS = {"single": {(1024, 16), (1024, 20), (1024, 24), (2048, 12), (2048, 20)},
                            "multi": {(12288, 96)}}
VALIDATION_IDS = {
    "MG-002", "MG-004", "MG-006", "MG-008",
    "TT-025", "TT-026", "TT-027", "TT-028", "TT-030", *(f"TT-{i:03d}" for i in range(44, 55)),
    *(f"AM-{i:03d}" for i in range(4, 11)), "DSV3-001",
    "mb2604-h100-llama3-70b", "mb2511-h100-llama3-70b-gbs128", "mb2511-h100-llama3-8b-fsdp",
    "mb2604-h100-qwen3-30b-ep16", "mb2604-h100-gpt-oss-120b",
}


@lru_cache(maxsize=None)
def vtrain_blocks(which: str) -> tuple[tuple[int, int], ...]:
    """(hidden size, layers) of every vTrain row, in file order."""
    return tuple((c.model.hidden_size, c.model.num_layers) for c in vtrain(hp.load_gpu("a100-80gb"), which))


def vtrain_role(which: str, index: int) -> str | None:
    """'fit', 'validation' or None (not declared here) for vTrain row `index`."""
    block = vtrain_blocks(which)[index]
    if block in VTRAIN_FIT_BLOCKS[which]:
        return "fit"
    return "validation" if block in VTRAIN_VALIDATION_BLOCKS[which] else None


def vtrain_fitted(which: str, index: int) -> bool:
    """Whether vTrain row `index` is in a fitting block (the objective reads every other one of them)."""
    return vtrain_role(which, index) == "fit"


def _in_objective(which: str, index: int) -> bool:
    return vtrain_fitted(which, index) and index % 2 == 0


@lru_cache(maxsize=None)
def measured():
    """The measured rows, production recipes included (cached: the loader resolves stacks from YAML)."""
    from measured_data import production_recipe_cases

    return (*load_measured(), *production_recipe_cases())


def measured_fitted(row_id: str) -> bool:
    """Whether a measured row is in a fitting set."""
    return row_id in MG_FIT or row_id in TT_FIT or row_id in ROWWISE_FIT


def measured_role(row_id: str) -> str | None:
    """'fit', 'validation' or None (not declared here) for a measured row."""
    if measured_fitted(row_id):
        return "fit"
    return "validation" if row_id in VALIDATION_IDS else None


def fitting_sets(split: str, keep=None):
    """([case lists, one per data set], per-layer rows) that stage `split` fits on; `keep(case)` (for
    leave-one-regime-out refits, benchmarks/loro.py) drops the cases it rejects."""
    keep = keep or (lambda c: True)
    if split == "a100":
        gpu = hp.load_gpu("a100-80gb")
        sets = [[c for i, c in enumerate(vtrain(gpu, w)) if _in_objective(w, i) and keep(c)] for w in ("single", "multi")]
        return sets, korthikanti_layer(gpu)
    return [[c for c in measured() if c.row_id in _ids(split) and keep(c)]], ()


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
        return ["vtrain-single blocks h1024x12, h2048x16 (every other row)",
                "vtrain-multi blocks h3072x30, h8192x48 (every other row)", "korthikanti-table4 (5)"]
    return sorted(_ids(split))


def describe(split: str) -> str:
    """One line naming the rows of a stage."""
    return "; ".join(row_ids(split)) if split == "a100" else ", ".join(row_ids(split))
