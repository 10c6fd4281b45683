"""What a report shows, computed once from a plan document: the estimate, per-stage times, the
pipeline timelines, the device mesh and its groups. Pictures (HTML, terminal) only draw this."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from costmodels import comm
from costmodels.estimate import Estimate, estimate
from costmodels.layout import resolve_layout
from costmodels.schedule_timeline import Block, simulate
from costmodels.timing import make_context, stage_time
from costmodels.whole_run import RunSpec, WholeRun, whole_run
from planner.search.explain import layout_text
from planner.errors import UserError
from planner.files.loading import problem_from_plan
from planner.report.render import pct
from planner.safetext import visible

MAX_DRAWN_MICROBATCHES = 24
MAX_SIMULATED_STAGES = 128  # the timeline simulation grows with the square of the stages (pp=10,000: minutes)


@dataclass
class ReportData:
    """Everything the pictures need."""

    title: str
    sentence: str
    plan: Estimate
    alternatives: list[Estimate]
    reasons: list[str]
    timelines: dict[str, list[Block]]  # schedule name -> blocks (the chosen one first); {} past MAX_SIMULATED_STAGES
    drawn_microbatches: int
    groups: list[tuple[str, int, int, bool]]  # (name, size, stride, crosses nodes)
    gpus_per_node: int
    num_nodes: int
    days: Optional[float]
    whole_run: Optional[WholeRun] = None  # with a token budget: costmodels.whole_run


def _timelines(model, cluster, train, lay) -> tuple[dict[str, list[Block]], int]:
    """Simulated schedules, the chosen one first, and the micro-batches drawn; none past
    MAX_SIMULATED_STAGES (the pictures say so)."""
    if lay.pp > MAX_SIMULATED_STAGES:
        return {}, 0
    ctx = make_context(model, cluster, train, lay)
    stage_s = [stage_time(ctx, i).total_s for i in range(lay.pp)]
    m = min(lay.num_microbatches, MAX_DRAWN_MICROBATCHES)
    if lay.vpp > 1:
        m = max(lay.pp, m - m % lay.pp)
    chosen = lay.schedule
    out = {chosen: simulate(chosen, stage_s, m, lay.vpp)}
    for other in ("1f1b", "gpipe") if lay.pp > 1 else ():  # one stage: every schedule is the same timeline
        blocks = simulate(other, stage_s, m, 1)
        if other != chosen and all(blocks != drawn for drawn in out.values()):
            out[other] = blocks
    return out, m


def picked(count: int, most: int, keep: int = 0) -> list[int]:
    """At most `most` (+1 for `keep`) indices of `count`, evenly spread, first and last included, and
    `keep` (the peak stage): what a picture of thousands of stages draws."""
    if count <= most:
        return list(range(count))
    step = (count - 1) / (most - 1)
    return sorted({round(i * step) for i in range(most)} | {keep})


def _groups(lay, gpus_per_node: int) -> list[tuple[str, int, int, bool]]:
    """(name, size, stride, crosses nodes) of each communication group with more than one rank: tp, cp, dp,
    pp in Megatron's rank order, and the experts' etp and ep (Megatron-Core's expert order tp-ep-dp-pp
    inside a pipeline stage, etp innermost)."""
    strides = {"tp": 1, "cp": lay.tp, "dp": lay.tp * lay.cp, "pp": lay.tp * lay.cp * lay.dp, "etp": 1,
               "ep": lay.etp}
    sizes = {"tp": lay.tp, "cp": lay.cp, "dp": lay.dp, "pp": lay.pp, "etp": lay.etp, "ep": lay.ep}
    return [(k, sizes[k], strides[k], comm.ranks_per_node(sizes[k], strides[k], gpus_per_node) < sizes[k])
            for k in ("tp", "cp", "dp", "pp", "etp", "ep") if sizes[k] > 1]


def build(doc: dict, tokens: Optional[float] = None, run: Optional[RunSpec] = None, where: str = "plan") -> ReportData:
    """Re-estimate the plan document's layout and gather what the pictures show; with a token budget
    (`run`, else `tokens` with the default failure assumptions) the whole run too. `where`: the plan file's name,
    for errors."""
    prob = problem_from_plan(doc, where)
    if prob.layout is None:
        raise UserError(f"{where}: a report needs a plan file with a 'layout' (plan --save writes one)")
    model, cluster, train = prob.model, prob.cluster, prob.train
    plan = estimate(model, cluster, train, prob.layout)
    lay = resolve_layout(model, cluster, train, prob.layout)
    timelines, drawn = _timelines(model, cluster, train, lay)
    alternatives = [Estimate.model_validate(a) for a in doc.get("alternatives", [])]
    t, mem = plan.throughput, plan.memory
    name, gpu = visible(model.name), visible(cluster.gpu_profile.name)  # names from files: shown, never obeyed
    sentence = (f"{name} on {cluster.num_gpus:,} x {gpu}: {layout_text(plan.layout)}, "
                f"allocated peak {mem.peak_bytes / 2**30:.1f} of the {mem.unhindered_usable_bytes / 2**30:.1f} GiB allocated "
                f"budget, step "
                f"{plan.time.step_s:.2f} s{_band_short(plan)}, {t.tokens_per_s:,.0f} tokens/s, MFU {t.mfu:.1%}"
                + ("" if plan.fits else ". DOES NOT FIT"))
    run = run if run is not None else RunSpec(tokens=float(tokens)) if tokens else None
    whole = whole_run(plan, model, cluster, train, run) if run is not None else None
    days = whole.days if whole is not None else None
    reasons = [visible(r) for r in doc.get("reasons", [])]
    return ReportData(f"parplan: {name} on {cluster.num_gpus:,} GPUs", sentence, plan, alternatives,
                      reasons, timelines, drawn, _groups(lay, cluster.gpus_per_node),
                      cluster.gpus_per_node, cluster.num_nodes, days, whole)


def report_json(data: ReportData) -> dict:
    """What `report --json` prints (planner.schema.ReportOutput): the numbers the pictures draw, raw seconds."""
    return {"title": data.title, "summary": data.sentence, "plan": data.plan.model_dump(mode="json"),
            "alternatives": [a.model_dump(mode="json") for a in data.alternatives], "reasons": data.reasons,
            "groups": [{"name": name, "size": size, "stride": stride, "crosses_nodes": crosses}
                       for name, size, stride, crosses in data.groups],
            "timelines": {name: [dataclasses.asdict(b) for b in blocks] for name, blocks in data.timelines.items()},
            "drawn_microbatches": data.drawn_microbatches, "gpus_per_node": data.gpus_per_node,
            "num_nodes": data.num_nodes,
            "whole_run": data.whole_run.model_dump(mode="json") if data.whole_run is not None else None}


def drawn_text(d: ReportData) -> str:
    """'24 of 64 micro-batches' (the timeline simulates at most MAX_DRAWN_MICROBATCHES), '8 micro-batches'."""
    total = d.plan.layout.num_microbatches
    return (f"{d.drawn_microbatches} of {total} micro-batches" if total and total > d.drawn_microbatches
            else f"{d.drawn_microbatches} micro-batches")


def misfit_line(e: Estimate) -> str:
    """'' when the plan fits, else why it does not (a plan file whose cluster or stack changed since it was saved)."""
    if e.fits:
        return ""
    m = e.memory
    return (f"this layout does not fit: {m.peak_bytes / 2**30:.1f} GiB at its peak against a "
            f"{m.unhindered_usable_bytes / 2**30:.1f} GiB allocated budget (the plan file's cluster, stack or settings "
            "differ from the search's, or it was written by hand)")


def _band_short(e: Estimate) -> str:
    """' ± 6%' (the median held-out error of the layout's regime), '' without a band."""
    u = e.uncertainty
    return "" if u is None or u.rel_error_p50 is None else f" ± {pct(u.rel_error_p50)}"


def rank_coordinates(rank: int, lay) -> dict[str, int]:
    """Megatron rank order: tp innermost, then cp, dp, pp outermost; for the experts (Megatron-Core's
    expert rank generator, order tp-ep-dp-pp with tp = etp) etp innermost, then ep, then edp, inside the
    rank's pipeline stage."""
    stage_ranks = lay.tp * lay.cp * lay.dp
    local = rank % stage_ranks
    return {"tp": rank % lay.tp, "cp": rank // lay.tp % lay.cp, "dp": rank // (lay.tp * lay.cp) % lay.dp,
            "pp": rank // stage_ranks, "etp": local % lay.etp, "ep": local // lay.etp % lay.ep,
            "edp": local // (lay.etp * lay.ep)}
