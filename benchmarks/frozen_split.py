"""THE FROZEN TEST SPLIT. Read only by `python benchmarks/accuracy.py --final`.

Whole source families, chosen on 2026-11-26 before any of their errors were looked at under this
split, so that the error reported on them is a test error and not a validation error: no fitting
stage (benchmarks/calibrate.py, benchmarks/splits.py) and no model-selection report (accuracy.py
without --final, consistency.py, ordering.py, the stacks' held_out bands) may open this module;
tests/test_accuracy.py enforces it (an AST scan of every module) and that the fitting and
validation sets of benchmarks/splits.py are disjoint from it. Do not tune anything on its numbers:
a change chosen after reading `--final` makes this set a validation set, and it must then be
replaced by a fresh family (say so in docs/accuracy.md).

Seen before freezing (said, not hidden): the rows' old held-out errors in docs/accuracy.md, and the
production recipes' first predictions when they were loaded (DeepSeek-V3 +120%).

Families (one per regime that can spare rows):
- vtrain-single: the h 2048, 24-layer sweep block (all GPU counts, 180 rows): A100 Megatron-2021, <=8 GPUs.
- vtrain-multi: the h 6144, 40-layer block (GPT 18B on 256 A100, 15 rows).
- narayanan2021: Narayanan et al. SC'21 Table 1, all 10 rows (A100 Megatron at 32..3072 GPUs).
- torchtitan-bench: the H200 file (TT-031, TT-032) and the Llama-3 70B block of the 2025-06 async-TP
  benchmark on 256 H100 (TT-019..022, TT-024; TT-023 fits the FP8 rowwise fraction and stays fitted).
- megatron-readme: the strong-scaling sub-table (MG-010, MG-011).
- automodel-moe: the DeepSeek-V3 / Kimi-K2 family (AM-001..003).
- production-recipes: the Megatron-Bridge Llama-3.1 405B recipes on 1,024 H100 (2 rows) and the
  DeepSeek-V3 recipe (MoE, 1,024 H100).
"""

from __future__ import annotations

VTRAIN_BLOCKS = {"single": {(2048, 24)}, "multi": {(6144, 40)}}  # (hidden size, layers)
DATASETS = {"narayanan2021"}  # every row of these data sets
ROW_IDS = {
    "TT-019", "TT-020", "TT-021", "TT-022", "TT-024", "TT-031", "TT-032",
    "MG-010", "MG-011",
    "AM-001", "AM-002", "AM-003",
    "mb2604-h100-llama31-405b", "mb2511-h100-llama31-405b-gbs512", "mb2509-h100-deepseek-v3",
}


def is_frozen(dataset: str, label: str, block: tuple[int, int] | None = None) -> bool:
    """Whether a row (data set, row id or vTrain label, vTrain (hidden, layers) block) is a test row."""
    if dataset in DATASETS or label in ROW_IDS:
        return True
    which = dataset.removeprefix("vtrain-")
    return block is not None and block in VTRAIN_BLOCKS.get(which, set())
