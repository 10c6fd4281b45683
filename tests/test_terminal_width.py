"""Every terminal output fits the terminal: at 80 columns the tables leave out columns (named in the
caption) instead of cutting cells or wrapping rows; at 120 and 200 columns nothing is cut or left out
(issue 36 part 5: cells read `recomp…`, `alloc…`, `optimi…` even at 200 columns)."""

from __future__ import annotations

import functools
import json
import re

import pytest
from plan_cache import shared_plan_searches
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
TABLE = re.compile(r"[│┃┏┡└╶─]")  # a line of a table (its cells, borders or rules)
CUT = re.compile(r"\w…")  # rich's ellipsis after a cut cell ("recomp…"); a lone "…" row marks stages left out


def run(columns: int, *args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code in (0, 1), result.output
    return result.stdout


@pytest.fixture(scope="module", autouse=True)
def one_search_per_problem():
    """The search does not read the terminal width: each problem is searched once (tests/plan_cache.py)
    and every width renders its result (mixtral-8x7b on 4 nodes, four times, cost ~7 s a search)."""
    with shared_plan_searches() as done:
        yield done


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("plans") / "moe.json"
    result = runner.invoke(app, ["plan", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "4", "--save", str(path)],
                           env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    return str(path)


@functools.lru_cache(maxsize=None)
def outputs(columns: int, plan_file: str) -> dict[str, str]:
    """Every command's output at `columns` (computed once per width: the tests only read it)."""
    return {
        "plan": run(columns, "plan", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "4", "--top", "3"),
        "estimate": run(columns, "estimate", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--layout",
                        "tp=8,pp=4,vpp=5,mbs=1,zero=1,recompute=selective,sp=1", "--global-batch", "64"),
        "check": run(columns, "check", "tests/data/configs/mlm_mixtral_8x7b.sh", "--cluster", "dgx-h100",
                     "--nodes", "8"),
        "report": run(columns, "report", plan_file),
        "models": run(columns, "models"),
    }


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if TABLE.search(line)]


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_tables_fit_and_nothing_is_cut(columns, plan_file):
    for name, text in outputs(columns, plan_file).items():
        lines = table_lines(text) if name != "report" else text.splitlines()[3:]
        assert lines or name == "report", name
        for line in lines:
            assert len(line.rstrip()) <= columns, (name, columns, line)
            assert not CUT.search(line), (name, columns, line)


@pytest.mark.parametrize("columns", [120, 200])
def test_wide_terminals_leave_nothing_out(columns, plan_file):
    for name, text in outputs(columns, plan_file).items():
        assert "not shown at" not in text, (name, columns)


def test_every_line_fits_80_columns(plan_file):
    """Prose too: the step time, its warning and the memory verdict wrap at words, not past the edge."""
    for name, text in outputs(80, plan_file).items():
        for line in text.splitlines():
            assert len(line) <= 80, (name, line)


def test_narrow_terminal_names_what_it_leaves_out(plan_file):
    text = outputs(80, plan_file)["plan"]
    assert "not shown at 80 columns:" in text
    header = next(line for line in table_lines(text) if "recompute" in line)
    assert "tokens/s" not in header and "peak/budget" in header and "MFU" in header


def test_rows_do_not_wrap_at_80_columns(plan_file):
    """One line per plan row: the row's number starts exactly one line per plan."""
    text = outputs(80, plan_file)["plan"]
    ranked = text.split("winner:")[0]
    rows = [line for line in table_lines(ranked) if re.match(r"\s*\d+ │", line)]
    assert [r.split("│")[0].strip() for r in rows] == ["1", "2", "3"]


def test_sweep_fits_at_80_and_keeps_every_column_at_120():
    args = ["sweep", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1..2", "--tokens", "1e12"]
    narrow, wide = run(80, *args), run(120, *args)
    rows = [line for line in narrow.splitlines() if "dgx-h100 " in line and "pick" not in line]
    assert len(rows) == 2, narrow  # one line per point
    for line in rows:
        assert len(line.rstrip()) <= 80 and not CUT.search(line), line
    assert "not shown at 80 columns" in narrow
    assert "global batch 512 sequences" in wide  # the batch used, plan's default (issue 36 part 6)
    assert "not shown" not in wide and "goodput" in wide and "tokens/s" in wide
    # the layout is one cell on one line (it wrapped to one word per line before)
    assert all(re.search(r"tp\d+ pp\d+ dp\d+ .*z\d mbs\d", line) for line in rows)


def no_terminal(monkeypatch) -> None:
    """As in CI, even when pytest runs in a terminal: stdout is no tty."""
    import os

    def no_size(*args):
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", no_size)
    monkeypatch.setattr(os, "isatty", lambda fd: False)


def test_pipe_width_is_120(monkeypatch):
    """No COLUMNS and no terminal: wide enough that nothing is left out."""
    from planner.report.fit import terminal_columns

    monkeypatch.delenv("COLUMNS", raising=False)
    no_terminal(monkeypatch)
    assert terminal_columns() == 120


def test_json_is_not_affected_by_width():
    args = ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=2,mbs=1", "--global-batch", "8", "--json"]
    assert json.loads(run(80, *args)) == json.loads(run(200, *args))


def test_into_a_pipe_each_sentence_stays_on_one_line(monkeypatch):
    """No COLUMNS and no terminal: tables at 120 columns, but the memory verdict stays one line (grep)."""
    no_terminal(monkeypatch)
    result = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2"], env={"COLUMNS": None})
    line = next(text for text in result.stdout.splitlines() if text.startswith("memory: "))
    assert len(line) > 120 and line.endswith(("runs)", "before a long job"))


def test_a_narrow_table_keeps_the_largest_memory_term():
    """The memory table leaves out small terms first: an FSDP run whose transients (the fp32 logits and their
    gradient) are most of its memory keeps `transient` at 80 columns and drops the small sharded `grads`; a fixed
    order had dropped `transient` first, so the visible columns summed to a third of `allocated`."""
    from costmodels.estimate import estimate
    from costmodels.layout import Layout
    from costmodels.train_spec import TrainSpec
    import hardware_profiles as hp
    from planner.report.render import memory_optional, memory_table

    model, clus = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", num_nodes=1)
    train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=8192), "fsdp")
    e = estimate(model, clus, train, Layout(zero=3, mbs=8))
    order = memory_optional(e)
    assert order.index("grads") < order.index("reserved") < order.index("transient")
    caption = memory_table(e, 80).caption or ""
    assert "transient" not in caption.split("not shown at")[-1] and "grads" in caption
