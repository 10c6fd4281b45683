"""Accuracy of the time model against published runs, with the shipped (fitted) profiles.

benchmarks/accuracy.py prints the full tables (docs/accuracy.md). Bounds, with margin over what
the model reaches today (in brackets), on validation rows (benchmarks/splits.py) unless said otherwise.
The frozen test split (benchmarks/frozen_split.py: Narayanan Table 1, one vTrain block per sweep,
...) is never asserted on here: only `accuracy.py --final` reports it, and the tests below check that
nothing else opens it and that it is disjoint from every fitting and validation set.
- A100 Megatron runs on >= 256 GPUs (vTrain multi-node, test block left out): mean <= 8%   [6.2%]
- vTrain multi-node: mean <= 9.5% [7.5%]; single-node validation blocks: mean <= 9.5% [8.5%]
  (the vTrain-multi max target is retired: consistency.py's 32.5% floor, docs/accuracy.md)
- ZeRO-3 / FSDP / HSDP held out (validation, 14 rows since the test split took TT-019..024 and AM-001..003):
  mean <= 15% (issue 12's target); dense (torchtitan) rows
  mean <= 10% [5.9%];
  none predicted faster than measured by more than 25% [-16.1%]
- Megatron-Core H100 held out: mean <= 10% (issue 12's target) [3.6%]; fitted rows <= 6% [3.6%]
- Korthikanti Table 4 per layer (fitted): mean <= 4%   [1.0%]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from costmodels.uncertainty import parse_regime

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
accuracy = pytest.importorskip("accuracy")


@pytest.fixture(scope="module")
def rows():
    return accuracy.collect()


@pytest.fixture(scope="module")
def table(rows):
    return accuracy.by_dataset(rows)


@pytest.fixture(scope="module")
def done(rows):
    return accuracy.done_when(rows)


def test_a100_megatron_at_scale(done):
    s = done["A100 Megatron >= 256 GPUs, all"]
    assert s["n"] >= 60 and s["mean"] <= 0.08


def test_vtrain(table):
    assert table["vtrain-multi"]["all"]["n"] == 109 - 15 and table["vtrain-multi"]["all"]["mean"] <= 0.095
    assert table["vtrain-multi"]["held out"]["mean"] <= 0.10
    assert table["vtrain-single"]["all"]["n"] == 1440 - 180 and table["vtrain-single"]["held out"]["mean"] <= 0.095


def test_sharded_data_parallel_held_out(done, rows):
    s = done["ZeRO-3 / FSDP / HSDP, held out"]
    assert s["n"] >= 12 and s["mean"] <= 0.15
    assert s["min_signed"] >= -0.25, "a held-out ZeRO-3/FSDP row is predicted > 25% faster than measured"
    dense = accuracy.summary([r for r in rows if r.dataset == "torchtitan-bench" and not r.fitted and not r.excluded])
    assert dense["n"] >= 8 and dense["mean"] <= 0.10


def test_megatron_core_h100(table, done):
    assert done["Megatron-Core H100, held out"]["mean"] <= 0.10
    assert table["megatron-readme"]["fitted"]["mean"] <= 0.06


def test_korthikanti_per_layer(table):
    assert table["korthikanti-table4"]["all"]["mean"] <= 0.04


def test_excluded_rows_are_shown_with_a_reason(rows):
    """Rows left out of the bands stay in the tables and say why."""
    excluded = [r for r in rows if r.excluded]
    assert {r.label for r in excluded} == set(accuracy.EXCLUDED)
    assert all(len(r.excluded) > 20 for r in excluded)


# ---- the frozen test split ----------------------------------------------------------------------

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
REPO = BENCH.parent


def _importers_of(name: str):
    """(file, enclosing function or None) of every import of module `name` in the repository."""
    import ast

    found = []
    for path in [*REPO.glob("benchmarks/**/*.py"), *REPO.glob("planner/**/*.py"), *REPO.glob("costmodels/**/*.py"),
                 *REPO.glob("hardware_profiles/**/*.py"), *REPO.glob("tests/**/*.py")]:
        tree = ast.parse(path.read_text())
        for fn in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
            for node in ast.walk(fn) if fn is not tree else ast.iter_child_nodes(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n.split(".")[-1] == name for n in names):
                    found.append((path.relative_to(REPO).as_posix(), None if fn is tree else fn.name))
    return found


def test_only_accuracy_final_opens_the_frozen_split():
    """No fitting or model-selection code imports benchmarks/frozen_split.py or names its file: only
    accuracy._frozen_test, which collect(final=True) (`--final`) alone calls."""
    users = {where for where in _importers_of("frozen_split") if where[0] != "tests/test_accuracy.py"}
    assert users == {("benchmarks/accuracy.py", "_frozen_test")}
    for path in [*REPO.glob("benchmarks/**/*.py"), *REPO.glob("planner/**/*.py"), *REPO.glob("costmodels/**/*.py")]:
        if path.name not in ("accuracy.py", "frozen_split.py"):
            text = path.read_text()
            assert "frozen_split" not in text.replace("benchmarks/frozen_split.py", ""), path
    source = (BENCH / "accuracy.py").read_text()
    assert source.count("_frozen_test(") == 2 and source.count("_frozen_test() if final") == 1  # def + one call


@pytest.fixture(scope="module")
def frozen():
    import frozen_split

    return frozen_split


def test_fitting_validation_and_test_sets_are_disjoint_and_cover_every_row(frozen):
    """Every vTrain and measured row has exactly one role, and no stage of calibrate.py fits a test row."""
    import splits

    import hardware_profiles as hp
    from reference_data import narayanan, vtrain

    a100 = hp.load_gpu("a100-80gb")
    for which in ("single", "multi"):
        blocks = splits.vtrain_blocks(which)
        for i, c in enumerate(vtrain(a100, which)):
            roles = [splits.vtrain_role(which, i), "test" if frozen.is_frozen(c.dataset, c.label, blocks[i]) else None]
            assert [r for r in roles if r] in (["fit"], ["validation"], ["test"]), (which, i, roles)
    for c in splits.measured():
        if c.row_id.startswith("ZPP"):
            continue  # relative data: the ratio stage only
        roles = [splits.measured_role(c.row_id), "test" if frozen.is_frozen(c.source, c.row_id) else None]
        assert [r for r in roles if r] in (["fit"], ["validation"], ["test"]), (c.row_id, roles)
    assert all(frozen.is_frozen(c.dataset, c.label) for c in narayanan(a100))
    for split in ("a100", "megatron-core", "torchtitan", "fp8-rowwise", "deepspeed-ratios"):
        sets, _ = splits.fitting_sets(split)
        for c in (c for s in sets for c in s):
            block = (c.model.hidden_size, c.model.num_layers) if c.dataset.startswith("vtrain") else None
            assert not frozen.is_frozen(getattr(c, "source", "") or c.dataset, c.label, block), (split, c.label)


def test_every_regime_that_can_spare_rows_has_test_rows(frozen):
    """A GPU generation x framework the data covers with >= 5 rows keeps some for the test split."""
    final = accuracy.collect(final=True)
    test = {f"{parse_regime(r.regime)[3]}/{parse_regime(r.regime)[0]}" for r in final if r.role == "test" and r.regime}
    for key in ("ampere/megatron-2021", "hopper/torchtitan", "hopper/megatron-core", "hopper/automodel"):
        assert key in test, key
