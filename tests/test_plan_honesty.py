"""`parplan plan` says only what its searches show (auditors' findings on plan's status and reasons).

1. `--framework any` merges four searches: its status is "optimal" only when every one finished, and its
   time-limit note names the searches the limit cut (an unloaded winner may sit in a search cut under load).
2. A search cut before it found a layout says so and to raise --time-limit; it claims no "nothing fits" from
   a memory bound below the budget, and makes no memory suggestion.
3. When every layout was searched and none fits although the least memory lower bound is within the budget,
   the reasons say so (not "above the budget"), the example's peak lists every part that adds up to it, and
   each suggestion is one shown to fit (a GPU with more usable memory than this one, more GPUs).
4. The validated alternative is the fastest validated layout of any framework's search, as --validated-only
   finds, not of the winner's framework alone.

Fast: tiny models, searches of one GPU, and SearchResults built by hand.
"""

from __future__ import annotations

import re

import hardware_profiles as hp
import pytest
from helpers import cluster, llama_like

from costmodels.estimate import estimate
from costmodels.layout import Layout
from costmodels.train_spec import TrainSpec
from planner.plan_any import merge_found, merged_status
from planner.report.render import alternative_lines
from planner.search import frameworks as fws
from planner.search import search
from planner.search.engine import SearchResult, SearchStats
from planner.search.explain import min_memory_bound, time_limit_note, why_nothing_fits
from planner.search.space import SpaceOptions

GIB = 2**30
H100 = hp.load_gpu("h100-sxm")
MODEL = llama_like(256, 4, 4, 2, 1024)
CLUSTER = cluster(8, gpu=H100)
TRAIN = TrainSpec(global_batch_size=8)
PAIRS = {fw.name: (fw, tr) for fw, tr in fws.priced_frameworks(TRAIN, False)}


def _estimate(name: str):
    """tp=1 dp=8 ZeRO-3 priced with framework `name`'s stack (validated for torchtitan alone at 8 H100s)."""
    return estimate(MODEL, CLUSTER, PAIRS[name][1], Layout(tp=1, dp=8, zero=3))


def _result(status: str, plans=(), cut=(), layouts: int = 100, bound=None) -> SearchResult:
    stats = SearchStats(layouts_considered=layouts, truncated=bool(cut), cut=list(cut), smallest_memory_bound=bound)
    return SearchResult(status, list(plans), [p.time.step_s for p in plans], 0.1, stats, None if cut else 0.0)


def _found(name: str, result: SearchResult, alternative=None) -> tuple:
    fw, tr = PAIRS[name]
    return fw, tr, result, alternative, [f"{name}'s own reasons"]


def test_any_mode_is_not_optimal_when_another_search_was_cut():
    """The winner's search finished (optimal) while Megatron's was cut before it found anything: a faster
    layout may be there, so the merged status is feasible and the note names the cut search."""
    found = [_found("megatron", _result("feasible", cut=["enumeration", "costing"])),
             _found("deepspeed", _result("optimal", [_estimate("deepspeed")])),
             _found("torchtitan", _result("infeasible")), _found("fsdp", _result("infeasible"))]
    merged, _, reasons, train, _ = merge_found(found, TRAIN, 1, moe=False)
    assert merged.status == "feasible" and merged.gap is None and merged.stats.truncated
    assert merged.stats.cut == ["megatron enumeration", "megatron costing"]
    assert "megatron enumeration" in reasons[0] and "not proven optimal" in reasons[0]
    assert train.stack_spec.name == "deepspeed" and merged.stats.layouts_considered == 400
    found[0] = _found("megatron", _result("infeasible"))  # Megatron's search finished: proven again
    merged, _, reasons, _, _ = merge_found(found, TRAIN, 1, moe=False)
    assert merged.status == "optimal" and not merged.stats.cut and not any("time limit" in r for r in reasons)


def test_nothing_found_while_a_search_was_cut_is_no_proof():
    """The default framework's search proved nothing fits, DeepSpeed's was cut: not "infeasible", and the first
    reason says which search was cut and that the lines below are the default search's."""
    found = [_found("megatron", _result("infeasible")), _found("deepspeed", _result("feasible", cut=["enumeration"])),
             _found("torchtitan", _result("infeasible")), _found("fsdp", _result("infeasible"))]
    merged, alternative, reasons, _, runs_on = merge_found(found, TRAIN, 1, moe=False)
    assert merged.status == "feasible" and merged.plans == [] and alternative is None and runs_on == []
    assert "deepspeed enumeration" in reasons[0] and "not a proof that nothing fits" in reasons[0]
    assert "--time-limit" in reasons[0] and reasons[1:] == ["megatron's own reasons"]


def test_nothing_found_while_the_default_search_itself_was_cut_is_no_proof():
    """The default framework's own search was the one cut (DeepSeek-V3 on 2,048 H800 at --time-limit 60): the
    first reason said "no framework's search found a layout that fits", read as a proof; it names the cut."""
    found = [_found("megatron", _result("feasible", cut=["costing"])), _found("deepspeed", _result("infeasible")),
             _found("torchtitan", _result("infeasible")), _found("fsdp", _result("infeasible"))]
    _, _, reasons, _, _ = merge_found(found, TRAIN, 1, moe=False)
    assert "megatron costing" in reasons[0] and "not a proof that nothing fits" in reasons[0]
    assert not reasons[0].startswith("no framework's search found")


@pytest.mark.parametrize("found_any, statuses, expected", [
    (True, ["optimal", "infeasible"], "optimal"), (True, ["optimal", "feasible"], "feasible"),
    (True, ["feasible", "optimal"], "feasible"), (False, ["infeasible", "infeasible"], "infeasible"),
    (False, ["infeasible", "feasible"], "feasible")])
def test_merged_status(found_any, statuses, expected):
    assert merged_status(found_any, statuses) == expected


def test_validated_alternative_comes_from_any_framework():
    """Megatron's winner is not validated and Megatron has no validated layout (alternative None); torchtitan's
    slower winner is validated: that is the alternative (what --validated-only finds)."""
    megatron, titan = _estimate("megatron"), _estimate("torchtitan")
    assert not megatron.uncertainty.validated and titan.uncertainty.validated
    assert megatron.time.step_s < titan.time.step_s
    found = [_found("megatron", _result("optimal", [megatron]), None), _found("deepspeed", _result("infeasible")),
             _found("torchtitan", _result("optimal", [titan])), _found("fsdp", _result("infeasible"))]
    merged, alternative, _, _, _ = merge_found(found, TRAIN, 1, moe=False)
    assert merged.plans[0] is megatron and alternative is titan
    found[0] = _found("megatron", _result("infeasible"))  # torchtitan's validated layout wins: no alternative
    merged, alternative, _, _, _ = merge_found(found, TRAIN, 1, moe=False)
    assert merged.plans[0] is titan and alternative is None


def test_cut_search_claims_nothing_from_a_bound_below_the_budget():
    """Cut before any layout was found, with the least memory bound far below the budget: the reasons say the
    search was cut and to raise --time-limit; no "nothing fits", no memory suggestion."""
    bound = min_memory_bound(MODEL, CLUSTER, TRAIN, SpaceOptions())
    assert bound[0] < 70 * GIB
    result = _result("feasible", cut=["costing"], layouts=300, bound=bound)
    reasons = why_nothing_fits(MODEL, CLUSTER, TRAIN, result)
    text = " ".join(reasons)
    assert "not a proof that nothing fits" in text and "--time-limit" in text
    assert not any(r.startswith("nothing fits") for r in reasons)
    assert not re.search(r"above the [\d.]+ GiB", text)
    assert not any(word in text for word in ("more HBM", "more GPUs", "shorter sequence"))


def _gib(text: str, label: str) -> float:
    return float(re.search(rf"{label} ([\d.]+)", text).group(1))


def test_bound_within_budget_but_nothing_fits_says_so_with_every_part():
    """A 256k-token sequence on one H100: the least memory bound (about 3 GiB) is within the budget, but the
    loss's logits (a transient) take over 100 GiB once priced in full. The first reason must not call the
    bound above the budget; the example's parts add up to its peak; each GPU named has more usable memory
    than the H100 (not the H100 itself, nor the H800 of the same HBM) and fits the example."""
    seq = 262144
    model, one = llama_like(256, 4, 4, 2, 1024, vocab=128256, seq=seq), cluster(1, gpu=H100)
    train = TrainSpec(global_batch_size=1, seq_length=seq)
    result = search(model, one, train, top=1, time_limit_s=5)
    assert result.status == "infeasible" and not result.stats.truncated
    reasons = why_nothing_fits(model, one, train, result)
    need = result.stats.smallest_memory_bound[0]
    assert need < one.usable_bytes
    assert reasons[0].startswith("nothing fits") and "within the" in reasons[0] and "above the" not in reasons[0]
    peak_line = reasons[1]
    parts = [_gib(peak_line, p) for p in ("weights", "grads", "optimizer", "activations", "other", "transient")]
    peak = float(re.search(r"peaks at ([\d.]+) GiB", peak_line).group(1))
    assert _gib(peak_line, "transient") > 100 and abs(sum(parts) - peak) <= 0.3
    gpus = next(r for r in reasons if r.startswith("a GPU with more HBM"))
    named = re.findall(r"([\w-]+) \(([\d.]+) GiB: ([\d.]+) GiB on the device\)", gpus)
    assert named and not {"h100-sxm", "h800"} & {n for n, _, _ in named}
    for name, hbm, device in named:
        usable = float(hbm) - one.memory_reserve_gib
        assert usable > H100.hbm_gib - one.memory_reserve_gib and float(device) <= usable
    assert not any("reaches" in r for r in reasons)  # a bound reached is no proof of a fit


def test_time_limit_note_keeps_a_proven_winner_proven():
    """The time limit cut only the validated alternative's search: the winner is still optimal."""
    result = _result("optimal", [_estimate("megatron")])
    result.stats.cut = ["validated alternative"]
    note = time_limit_note(result)
    assert note and "not proven optimal" not in note[0] and "proven optimal" in note[0]


def test_no_validated_alternative_found_in_time_is_not_none_fits():
    win = _estimate("megatron")
    assert "no layout that fits falls in a validated regime" in alternative_lines(win, None)[0]
    cut = alternative_lines(win, None, unfinished=True)[0]
    assert "time limit" in cut and "no layout that fits" not in cut


def test_sweep_point_is_not_optimal_when_another_search_was_cut(monkeypatch):
    """sweep plans each point as plan does (planner.sweep.plan_point): it took the fastest framework's status
    alone, so a point whose Megatron search the limit cut read "optimal"."""
    from planner import sweep  # noqa: PLC0415

    results = {"megatron": _result("feasible", cut=["enumeration"]),
               "deepspeed": _result("optimal", [_estimate("deepspeed")]),
               "torchtitan": _result("infeasible"), "fsdp": _result("infeasible")}
    monkeypatch.setattr(sweep, "_search", lambda job, fw, tr, start: results[fw.name])
    job = sweep.PointJob(0, "h100", MODEL, CLUSTER, TRAIN, None, 5.0, any_mode=True)
    point = sweep.plan_point(job)
    assert point.status == "feasible" and point.cut == ["megatron enumeration"] and point.framework == "deepspeed"
    results["megatron"] = _result("infeasible")
    assert sweep.plan_point(job).status == "optimal"


def test_suggestions_name_only_layouts_the_framework_runs():
    """Llama 3 70B on one 8-GPU node with --framework fsdp: nothing fits, and the "more GPUs" suggestion named
    tp=8 pp=4 (a Megatron layout plain FSDP cannot run) because the suggestions searched every framework's space.
    With the framework's rules they name one FSDP runs: ZeRO-3 over 32 GPUs."""
    from typer.testing import CliRunner  # noqa: PLC0415

    import json  # noqa: PLC0415
    from planner.cli import app  # noqa: PLC0415
    from planner.files.loading import parse_layout  # noqa: PLC0415

    out = CliRunner().invoke(app, ["plan", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "1", "--framework",
                                   "fsdp", "--json"])
    assert out.exit_code == 1, out.stderr
    line = next(r for r in json.loads(out.stdout)["reasons"] if r.startswith("more GPUs"))
    lay = parse_layout(re.search(r"\): (.*) fits at", line).group(1))
    assert (lay.tp, lay.pp, lay.zero) == (1, 1, 3), line


def test_min_memory_bound_keeps_to_the_framework():
    """The least-memory layout of a keep that refuses context parallelism has cp = 1, where the unrestricted one
    (ZeRO-3 over cp = 8) has more, and needs at least as much memory."""
    model, clus = llama_like(1024, 8, 8, 8, 4096), cluster(8, gpu=H100)
    free = min_memory_bound(model, clus, TRAIN, SpaceOptions())
    kept = min_memory_bound(model, clus, TRAIN, SpaceOptions(), keep=lambda lay: lay.cp == 1)
    assert free[1].cp > 1 and kept[1].cp == 1 and kept[0] >= free[0]
