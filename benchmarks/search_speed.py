"""Search speed on a ladder of problems, and what plain enumeration would have to do instead.

    python benchmarks/search_speed.py            # print the table
    python benchmarks/search_speed.py --write    # also write docs/performance.md

For each problem: layouts in the space, how many the memory bound and the time bound remove,
how many reach CP-SAT, wall time of the whole search (top 1 and top 3), and the brute-force
oracle (planner.search.brute) over the same space: the number of (layout, stage split) pairs it must
evaluate, and its time where that is under ORACLE_LIMIT pairs.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hardware_profiles as hp  # noqa: E402
from costmodels.train_spec import TrainSpec  # noqa: E402
from planner.search.brute import brute_force  # noqa: E402
from planner.search.costing import Coster  # noqa: E402
from planner.search import frameworks as fws  # noqa: E402
from planner.search import search  # noqa: E402
from planner.search.space import enumerate_layouts  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "performance.md"
ORACLE_LIMIT = 3_000_000
TIME_LIMIT_S = 30.0  # `parplan plan --time-limit`'s default
LADDER = [  # name, model, cluster, nodes (or GPUs of one node when below 1), global batch, sequence, framework
    ("Megatron GPT 1.7B, 4 A100", "megatron-1.7b", "dgx-a100", -4, 32, 2048, None),
    ("Llama 3 8B, 8 H100", "llama3-8b", "dgx-h100", 1, 64, 8192, None),
    ("Llama 3 70B, 64 H100", "llama3-70b", "dgx-h100", 8, 128, 8192, None),
    ("Llama 3 70B, 64 H100, torchtitan", "llama3-70b", "dgx-h100", 8, 512, None, "torchtitan"),
    ("Mixtral 8x7B, 64 H100", "mixtral-8x7b", "dgx-h100", 8, 256, 4096, None),
    ("GPT-3 175B, 1,536 A100", "gpt3-175b", "dgx-a100", 192, 1536, 2048, None),
    ("Llama 3 70B, 1,024 H100", "llama3-70b", "dgx-h100", 128, 1024, 8192, None),
    ("Llama 3.1 405B, 16,384 H100", "llama3.1-405b", "dgx-h100", 2048, 2048, 8192, None),
    ("Qwen3 235B-A22B, 32,768 H100", "qwen3-235b-a22b", "dgx-h100", 4096, 512, None, None),
    ("GPT-OSS 120B, 256 B200", "gpt-oss-120b", "dgx-b200", 32, 512, None, "megatron"),
    ("Llama 4 Maverick, 256 B200", "llama4-maverick", "dgx-b200", 32, 512, None, "megatron"),
]


def oracle_pairs(model, cluster, train, opts) -> int:
    """(layout, stage split) pairs plain enumeration evaluates: sum of C(L - pp(v-1) - 1, pp - 1), the
    splits with at least v layers a stage (planner.search.brute.splits)."""
    L = model.num_layers
    return sum(1 if lay.fixed_stages is not None else math.comb(L - lay.pp * (lay.vpp - 1) - 1, lay.pp - 1)
               for lay in enumerate_layouts(model, cluster, train, opts))


def oracle_seconds(model, cluster, train, opts) -> float:
    """Wall time of brute_force over every table of the space."""
    start = time.perf_counter()
    coster = Coster(model, cluster, train)
    brute_force(model, [coster.table(lay) for lay in enumerate_layouts(model, cluster, train, opts)])
    return time.perf_counter() - start


def run_row(name, model_name, cluster_name, nodes, gbs, seq, framework=None) -> dict:
    model, cluster = hp.load_model(model_name), hp.load_cluster(cluster_name, max(nodes, 1))
    if nodes < 0:  # part of one node
        cluster = cluster.model_copy(update={"gpus_per_node": -nodes})
    fw = fws.load(framework)
    train = hp.resolve_train(TrainSpec(global_batch_size=gbs, seq_length=seq), fw.stack if fw else None)
    opts = fws.space_options(fw, model, cluster, train)  # what `parplan plan --framework` searches
    keep = fws.keep(fw, train, moe=model.is_moe)
    cpu = time.process_time()
    one = search(model, cluster, train, top=1, time_limit_s=TIME_LIMIT_S, opts=opts, keep=keep)
    cpu = time.process_time() - cpu
    three = search(model, cluster, train, top=3, time_limit_s=TIME_LIMIT_S, opts=opts, keep=keep)
    pairs = oracle_pairs(model, cluster, train, opts)
    oracle = oracle_seconds(model, cluster, train, opts) if pairs <= ORACLE_LIMIT else None
    s = one.stats
    win = one.plans[0] if one.plans else None
    return dict(name=name, gpus=cluster.num_gpus, layouts=s.layouts_considered, memory=s.memory_pruned,
                bound=s.bound_pruned, tables=s.tabled, solver=s.solver_candidates, models=s.solver_models,
                top1=one.seconds, cpu1=cpu,
                top3=three.seconds, status=one.status, pairs=pairs, oracle=oracle,
                winner=_layout(win) if win else "-", mfu=win.throughput.mfu if win else float("nan"))


def _layout(e) -> str:
    lay = e.layout
    extra = "".join(f" {k}={getattr(lay, k)}" for k in ("cp", "ep", "vpp") if getattr(lay, k) > 1)
    return f"tp={lay.tp} pp={lay.pp} dp={lay.dp}{extra} zero={lay.zero} mbs={lay.mbs} rc={lay.recompute}"


def markdown(rows: list[dict]) -> str:
    """The table of docs/performance.md."""
    head = ("| problem | GPUs | layouts | cannot fit | provably slower | tables | to CP-SAT | CP-SAT models | "
            "search s (top 1) | CPU s (top 1) | search s (top 3) | status | oracle pairs | oracle s |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        oracle = f"{r['oracle']:.1f}" if r["oracle"] is not None else "not run"
        lines.append(f"| {r['name']} | {r['gpus']:,} | {r['layouts']:,} | {r['memory']:,} | {r['bound']:,} | "
                     f"{r['tables']:,} | {r['solver']:,} | {r['models']} | {r['top1']:.2f} | {r['cpu1']:.2f} | "
                     f"{r['top3']:.2f} | "
                     f"{r['status']} | {r['pairs']:.3g} | {oracle} |")
    lines += ["", "| problem | winner | MFU |", "|---|---|---|"]
    lines += [f"| {r['name']} | {r['winner']} | {r['mfu']:.1%} |" for r in rows]
    return "\n".join(lines)


HEADER = """# Search performance

Generated by `python benchmarks/search_speed.py --write` on the 2-core development machine, shared with
other work while it ran: "search s" (wall) moves with the load, "CPU s" (this process's CPU time, CP-SAT's
threads included) less so; compare rows of one run only. "search s" is the wall time of
`planner.search.search` (enumeration, bounds, integer tables, CP-SAT, re-estimation of the winners).
"layouts" counts every candidate (a framework's fixed stage splits each count); "cannot fit" and
"provably slower" are those the memory and step-time lower bounds remove, "tables" the integer tables
built, "to CP-SAT" the candidates the solver sees (those with one split only, pp = 1 or a split the
framework's partitioner fixes, are settled by their exact objective without a model), "CP-SAT models" the
models solved for the top 1 (0: every pipeline degree was settled by its candidates' memory-aware bounds,
planner.search.tables.capacity_bound, and OR-Tools was never imported). "oracle pairs" is
what plain enumeration (`planner.search.brute`) must evaluate: every layout times every stage split, sum
of C(L - pp(v-1) - 1, pp - 1); it is run only where that is below 3 million pairs. Each search runs under
`parplan plan`'s default time limit (30 s); "feasible" means it stopped there.

GPT-OSS 120B on 256 B200 is the largest space here: 21,561 integer tables (a weak step-time bound: its
pipelined candidates' data-parallel exposure is priced only once a split is known) and groups of 1,015 and
1,395 candidates at pp 16 and 8. Before 2026-11-27 the top 3 took 34.5 s with no time limit, and
`parplan plan` answered "feasible" with a layout of 0.908 s per step where the optimum (same cost model) was
0.754 s. Three changes (the first also stopped pricing an all-MoE model's sends behind a dense layer it does
not have, which took the optimum to 0.692 s):
- the pipeline sends' shortest layer forward is cached on the layer's fields (it was recomputed for every
  pp, vpp, dp and micro-batch count: 8 s of its 10 s of costing);
- a group whose joint CP-SAT model would take longer to build than its 1 s budget goes one candidate at a
  time, best bound first (each joint model had taken 1.6-2.0 s and not settled);
- what one solve proves about single candidates serves the next two of the top 3 (planner.search.settled).

Llama 4 Maverick on 256 B200 has the slowest top 3: its interleaved dense and MoE layers over virtual chunks
settle each pipelined candidate in a model of its own (relaxation and cuts, then the exact model, which takes up
to 11 s for one candidate). Its top 3 took 175 s before 2026-11-27; solving each candidate up to the third best's
objective (planner.search.settled's ceiling) lets the second and third solves reuse the first's proofs.

How the search stays fast while exact: every per-layout cost is cached on the candidate fields its cost
function reads (planner/search/memo.py watches each call and files the result in a decision tree: no
hand-written cache keys); candidates that differ only in a framework's fixed stage split share one bound;
the memory bound needs no layer time, so layer times are computed only for layouts that can fit; those
are ordered by a floor of the step-time bound (layer times without ZeRO-3's per-micro-batch collectives,
whose cache keys leave out pp, dp and the shard group), and the exact bound is priced lazily, from a heap,
only for candidates whose floor is not past the K-th best split found: tables are built in the order of
the exact bound (as without the floor) until that split beats the next bound. A framework's split group
builds one integer table for all its splits. `plan`'s validated alternative filters the candidates the
first search kept instead of enumerating the space again. A pipeline degree whose candidates' bounds with
memory (the least slowest-stage time given what each stage can hold) all exceed the best found needs no
CP-SAT model; OR-Tools is imported only when a model is built, and then without pandas. `plan --framework
any` runs its four framework searches in forked worker processes where two CPUs are free. A framework's
`keep` declares the whole choices it refuses (planner.search.frameworks.refuses: Megatron's ZeRO-2 with
pipelining, torchtitan's expert splits other than its own, DeepSpeed's and FSDP's missing degrees), and the enumeration counts those
layouts instead of building them (every statistic stays that of the whole space). The bounds of a model
whose layers are all MoE price no dense layer (its coefficient is 0: the same bound, bit for bit); a
candidate's Context shares the problem's devices, links and stack; the memory bound evaluates a layer's
states once per layer kind; and Python's cyclic garbage collector is paused while a search runs (its
collections, set off by millions of short-lived acyclic objects, took a sixth of the largest searches) and
resumes with what the search kept moved to its oldest generation, unwalked; a Coster holds no reference
cycle, so a worker frees its caches by reference counting before the collector resumes.

"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write docs/performance.md")
    args = parser.parse_args()
    rows = []
    for row in LADDER:
        rows.append(run_row(*row))
        print(f"done: {row[0]}", file=sys.stderr)
    text = markdown(rows)
    print(text)
    if args.write:
        DOC.write_text(HEADER + text + "\n")


if __name__ == "__main__":
    main()
