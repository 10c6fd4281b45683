"""The example plan files in docs/examples are what `parplan plan` recommends today.

They were once written and then left behind while the time model moved (the Llama 3 70B example kept
a layout the planner had stopped choosing). Each file records its model, cluster and train spec; the
search is run again on them and must pick the same layout at the same step time. When the model
changes on purpose, regenerate them: `parplan plan <model> --cluster dgx-h100 --nodes N
--global-batch B --seq-len S --save docs/examples/<file> --force` (values from the file).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.files.loading import load_plan
from planner.search.engine import search

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "docs" / "examples").glob("*.json"))
KEYS = ("tp", "sp", "cp", "ep", "etp", "pp", "vpp", "dp", "zero", "shard_group", "mbs", "recompute", "schedule",
        "stage_layers")


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_plan_is_todays_winner(path):
    problem = load_plan(path)
    best = search(problem.model, problem.cluster, problem.train, time_limit_s=30.0).plans[0]
    want, got = problem.layout.model_dump(), best.layout.model_dump()
    assert {k: got[k] for k in KEYS} == {k: want[k] for k in KEYS}, f"regenerate {path.name}"
    recorded = json.loads(path.read_text())["estimate"]["time"]["step_s"]
    assert best.time.step_s == pytest.approx(recorded, rel=1e-3)


def test_there_are_examples():
    assert len(EXAMPLES) >= 4
