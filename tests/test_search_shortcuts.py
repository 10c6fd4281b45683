"""The search's shortcuts around CP-SAT (planner.search.cpsat, planner.search.tables.capacity_bound) keep
it exact: the memory-aware bound never exceeds the best split that fits (brute force), a pipeline degree
it settles would have been proven infeasible by CP-SAT anyway (same winner, same split), and a search
that needs no model never imports OR-Tools (~0.5 s of a `parplan plan`, with the pandas it pulls in).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given

from costmodels.model_spec import ModelSpec
from planner.search import cpsat
from planner.search.brute import best_split
from planner.search.space import Candidate
from planner.search.tables import IntAffine, Table, capacity_bound, fit_capacities, lower_bound
from tests.helpers import llama_like
from tests.test_planner import QUICK, Problem, problems

ZERO = IntAffine(0, 0, 0)


@QUICK
@given(problems())
def test_capacity_bound_never_exceeds_a_split_that_fits_and_never_settles_a_tie(p: Problem):
    """Against brute force (one best_split per table serves both checks, the suite's slowest part here):
    capacity_bound never exceeds the best split that fits (and says nothing fits only where none does); and
    cpsat._beyond (skip a pipeline degree's model) says no for any candidate at an incumbent equal to the
    candidate's own best objective: a tie must still be modelled."""
    tables = p.tables()
    for i, table in enumerate(tables):
        found, bound = best_split(p.model, table), capacity_bound(table, p.model)
        if fit_capacities(table, p.model) is None or bound is None:
            assert found is None, f"{table.layout}: the bound says nothing fits, brute force fits {found}"
            continue
        assert bound >= lower_bound(table, p.model)
        if found is not None:
            assert bound <= found[0], f"{table.layout}: bound {bound} above the best split {found}"
            assert not cpsat._beyond(p.model, tables, [i], found[0], {}), table.layout


def _capped_table(model: ModelSpec) -> Table:
    """Hand-worked: 4 layers on pp=2, 10 time units a layer, nothing else priced; the first stage's memory
    (10 a layer against a capacity of 15) holds one layer only, so the best split is [1, 3]."""
    lay = Candidate(1, False, 1, "p2p", 1, 1, 2, 1, 1, 0, 1, "none", "1f1b", 4, None, None, None)
    time = (IntAffine(0, 10, 10), IntAffine(0, 10, 10))
    memory = (IntAffine(0, 10, 10), IntAffine(0, 1, 1))
    return Table(lay, time, memory, (ZERO, ZERO), (ZERO, ZERO), (ZERO, ZERO), 0, 15, False, False)


def test_capacity_bound_hand_worked():
    model = llama_like(128, 2, 2, 4, 256)
    table = _capped_table(model)
    q = 840  # tables.OBJ_PER_TIME; objective = (q m - q/v) max t + (q/v) sum t, m = 4, v = 1, sum t = 40
    assert lower_bound(table, model) == q * 3 * 20 + q * 40  # the mean stage, 20
    assert capacity_bound(table, model) == q * 3 * 30 + q * 40 == best_split(model, table)[0]  # [1, 3]
    assert best_split(model, table)[1] == [1, 3]


@QUICK
@given(problems())
def test_settled_groups_change_no_answer(p: Problem):
    """cpsat.solve with the capacity shortcut and without it (every group modelled) reach the same
    objectives, proven, for the winner and the runners-up (which of several tied candidates or splits CP-SAT
    returns may differ between any two runs of its parallel workers, shortcut or not)."""
    tables = p.tables()
    real = cpsat._beyond
    answers = []
    for beyond in (real, lambda *args: False):
        cpsat._beyond = beyond
        try:
            excluded, got = set(), []
            for _ in range(3):
                sol = cpsat.solve(p.model, tables, time_limit_s=30, exclude=frozenset(excluded))
                if sol is None:
                    break
                excluded.add(sol.index)
                got.append((sol.objective, sol.optimal))
            answers.append(got)
        finally:
            cpsat._beyond = real
    assert answers[0] == answers[1]


IMPORTS = """
import json, sys
import planner.search.engine, planner.search.stage_split, planner.plan_outputs, planner.cli_plan
loaded = 'ortools' in sys.modules
exporters = 'planner.exporters' in sys.modules or 'planner.report.html' in sys.modules
from planner.api import plan
r = plan("llama3-8b", "dgx-h100", nodes=1, framework="megatron", top=3, global_batch=32, seq_len=4096)
print(json.dumps({"at_import": loaded, "exporters": exporters, "after_plan": "ortools" in sys.modules, "pp": r.plans[0].layout.pp,
                  "models": r.search.stats.solver_models, "status": r.status}))
"""


def test_a_plan_settled_by_bounds_never_imports_ortools():
    """Importing the plan path imports no OR-Tools (nor the exporters and the HTML report, which only
    --save/--export/--report need); Llama 3 8B on one DGX H100, batch 32 x 4,096 as in
    docs/examples/llama3-8b-plan.json (pp=1 wins in a validated regime, so no alternative is searched: the pipelined
    candidates' balanced bounds are below it, but their first stages cannot hold the in-flight
    activations, which capacity_bound prices) is ranked without a CP-SAT model, and proven optimal."""
    proc = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"at_import": False, "exporters": False, "after_plan": False, "pp": 1, "models": 0,
                   "status": "optimal"}


SOLVE = """
import json, sys
from planner.search import cpsat
from planner.search.space import Candidate
from planner.search.tables import IntAffine, Table
from tests.helpers import llama_like
model, zero = llama_like(128, 2, 2, 4, 256), (IntAffine(0, 0, 0),) * 2
lay = Candidate(1, False, 1, "p2p", 1, 1, 2, 1, 1, 0, 1, "none", "1f1b", 4, None, None, None)
table = Table(lay, (IntAffine(0, 10, 10),) * 2, (IntAffine(0, 10, 10), IntAffine(0, 1, 1)), zero, zero, zero, 0, 15,
              False, False)  # _capped_table
sol = cpsat.solve(model, [table], time_limit_s=30, workers=1)
after = {"ortools": "ortools.sat.python.cp_model" in sys.modules, "pandas": "pandas" in sys.modules}
import pandas
print(json.dumps({**after, "split": sol.stage_layers, "models": sol.models, "real_pandas": hasattr(pandas, "DataFrame")}))
"""


def test_cpsat_runs_without_importing_pandas():
    """A model that must be solved (the hand-worked table: its bound is not settled by an incumbent) imports
    OR-Tools but not pandas (planner.search.cpsat._cp_model), and a later `import pandas` is the real one."""
    proc = subprocess.run([sys.executable, "-c", SOLVE], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"ortools": True, "pandas": False, "split": [1, 3], "models": 1, "real_pandas": True}


def test_of_two_equally_fast_layouts_the_one_with_more_headroom_wins():
    """DeepSpeed ZeRO-1 with 5 GiB to spare won over ZeRO-2 with 19 GiB at the same step time to the last digit (a
    new-user pass): exact ties go to the smaller peak."""
    from typer.testing import CliRunner  # noqa: PLC0415

    from planner.cli import app  # noqa: PLC0415

    res = CliRunner().invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--framework",
                                   "deepspeed", "--time-limit", "20", "--json"])
    plans = json.loads(res.stdout)["plans"]
    for a, b in zip(plans, plans[1:]):
        if a["time"]["step_s"] == b["time"]["step_s"]:
            assert a["memory"]["peak_bytes"] <= b["memory"]["peak_bytes"]
    assert plans[0]["time"]["step_s"] == plans[1]["time"]["step_s"]  # the case the pass met: still a tie
