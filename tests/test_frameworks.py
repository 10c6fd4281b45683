"""`--framework`: capability tables (hardware_profiles/frameworks), the search restricted to what a
framework runs, its stack and exporter, and the context-parallel algorithms (p2p, a2a, allgather)."""

from __future__ import annotations

import concurrent.futures
import functools
import importlib.util
import json
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import hardware_profiles as hp
from costmodels import comm
from costmodels.framework import FRAMEWORKS, refusals
from costmodels.estimate import estimate
from costmodels.layout import Layout, LayoutError
from costmodels.timing import cp_layer_s, make_context
from costmodels.train_spec import TrainSpec
from planner.cli import app
from planner.exporters import FORMATS, render_all
from planner.exporters.common import plan_from_doc
from planner.frameworks.deepspeed.export import ds_config
from planner.files import loading
from planner.files.planfile import plan_document
from planner.files.shellread import find_launch, read_script
from planner.search.frameworks import runners

runner = CliRunner()
PROBLEMS = {"llama3-70b": ["--cluster", "dgx-h100", "--nodes", "8", "--global-batch", "128", "--seq-len", "8192"],
            "mixtral-8x7b": ["--cluster", "dgx-h100", "--nodes", "8", "--global-batch", "128", "--seq-len", "8192"]}


def _train(**kw) -> TrainSpec:
    return hp.resolve_train(TrainSpec(global_batch_size=kw.pop("gbs", 64), **kw))


# ---- the tables ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FRAMEWORKS)
def test_table_names_its_stack_exporter_and_sources(name):
    fw = hp.load_framework(name)
    assert fw.name == name and fw.sources
    assert hp.load_stack(fw.stack).framework == name  # priced with a stack of its own
    assert fw.export_format in FORMATS
    assert set(fw.zero_with_pp) <= set(fw.zero) | {0, 1}


@pytest.mark.parametrize("name, layout, needle", [
    ("deepspeed", Layout(tp=2, dp=4), "tp=2"),
    ("deepspeed", Layout(cp=2, cp_comm="p2p", dp=4), "cp_comm=p2p"),
    ("deepspeed", Layout(pp=2, zero=2, dp=4), "zero=2 with pp>1"),
    ("deepspeed", Layout(pp=2, vpp=2, dp=4), "vpp=2"),
    ("deepspeed", Layout(pp=2, cp=2, cp_comm="a2a", dp=2), "does not combine"),
    ("deepspeed", Layout(dp=8, recompute="selective"), "recompute=selective"),
    ("megatron", Layout(dp=8, zero=3, shard_group=4), "hybrid sharding"),
    ("megatron", Layout(pp=2, zero=3, dp=4), "zero=3 with pp>1"),
    ("torchtitan", Layout(cp=2, cp_comm="a2a", dp=4), "cp_comm=a2a"),
    ("fsdp", Layout(pp=2, dp=4), "pp=2"),
    ("fsdp", Layout(dp=8, zero=1), "zero=1"),
    ("fsdp", Layout(tp=2, dp=4), "tp=2"),
])
def test_refusals_name_the_rule(name, layout, needle):
    why = refusals(hp.load_framework(name), layout)
    assert any(needle in w for w in why), why


def test_torchtitan_splits_the_experts_over_tp_only_without_ep():
    """torchtitan 0.3 (models/common/moe_sharding.py) gives the routed experts the dense layers' tp sharding when
    ep = 1 and none when ep > 1: a MoE layout asking otherwise is refused; Megatron-Core chooses etp freely."""
    titan, megatron = hp.load_framework("torchtitan"), hp.load_framework("megatron")
    assert any("etp=2 with tp=2 ep=2" in w for w in refusals(titan, Layout(ep=2, etp=2, tp=2, dp=4), moe=True))
    assert any("(give etp=2)" in w for w in refusals(titan, Layout(tp=2, dp=4), moe=True))
    assert refusals(titan, Layout(tp=2, etp=2, dp=4), moe=True) == []
    assert refusals(titan, Layout(tp=2, ep=2, dp=4), moe=True) == []
    assert refusals(titan, Layout(tp=2, dp=4), moe=False) == []  # a dense model has no experts to split
    assert refusals(megatron, Layout(tp=2, dp=4), moe=True) == refusals(megatron, Layout(tp=2, etp=2, dp=4), moe=True) == []


def test_every_framework_runs_plain_zero3_data_parallelism_but_fsdp_no_zero1():
    assert runners(Layout(dp=8, zero=3), _train(), moe=False) == list(FRAMEWORKS)
    assert "fsdp" not in runners(Layout(dp=8, zero=1), _train(), moe=False)
    assert runners(Layout(tp=8, dp=1), _train(precision="fp16", optimizer="sgd"), moe=False) == ["megatron"]


# ---- context-parallel algorithms ----------------------------------------------------------------

def _cp_setup(cp: int, seq: int, alg: str, recompute: str = "none"):
    model = hp.load_model("llama3-8b")
    cluster = hp.load_cluster("dgx-h100", 2)
    train = _train(seq_length=seq, gbs=16)
    return model, cluster, train, Layout(cp=cp, cp_comm=alg, recompute=recompute)


def test_ulysses_is_four_all_to_alls_per_pass_by_hand():
    """Hand-worked: llama3-8b (32 heads x 128, 8 KV heads), cp=4 inside a node, 8,192 tokens: each rank
    holds 2,048 tokens; Q/K/V in = 2,048 x (4,096 + 2 x 1,024) x 2 B, output = 2,048 x 4,096 x 2 B; one
    forward + one backward pass, no recompute (Jacobs et al. 2023, section 3.1)."""
    model, cluster, train, lay = _cp_setup(4, 8192, "a2a")
    c = make_context(model, cluster, train, lay)
    qkv, out = 2048 * (4096 + 2048) * 2, 2048 * 4096 * 2
    one_pass = comm.all_to_all_s(c.links, 4, 1, qkv) + comm.all_to_all_s(c.links, 4, 1, out)
    assert cp_layer_s(model, cluster, train, lay) == pytest.approx(2 * one_pass, rel=1e-12)
    full = cp_layer_s(model, cluster, train, lay.model_copy(update={"recompute": "full"}))
    assert full == pytest.approx(3 * one_pass, rel=1e-12)  # the recomputed forward repeats it


def test_allgather_gathers_kv_forward_and_backward_and_reduce_scatters_gradients():
    model, cluster, train, lay = _cp_setup(4, 8192, "allgather")
    c = make_context(model, cluster, train, lay)
    gathered = 4 * 2048 * 2 * 1024 * 2  # every rank ends with all K and V
    one = comm.all_gather_s(c.links, 4, 1, gathered)
    assert cp_layer_s(model, cluster, train, lay) == pytest.approx(3 * one, rel=1e-12)


@given(cp=st.sampled_from([2, 4, 8]))
@settings(max_examples=6, deadline=None)
def test_ulysses_bytes_per_rank_constant_when_sequence_and_cp_grow_together(cp):
    """DeepSpeed-Ulysses' claim (section 3.1): with N/P fixed, per-rank all-to-all bytes stay constant;
    time changes only through the (n-1)/n share and per-peer latency, inside one node."""
    base = cp_layer_s(*_cp_setup(2, 2 * 4096, "a2a"))
    t = cp_layer_s(*_cp_setup(cp, cp * 4096, "a2a"))
    assert base * 0.9 <= t <= base * 1.9


def test_a2a_needs_heads_divisible_by_tp_times_cp():
    model = hp.load_model("llama3-8b")  # 32 heads, 8 KV heads
    cluster = hp.load_cluster("dgx-h100", 8)
    from costmodels.layout import resolve_layout
    with pytest.raises(LayoutError, match="cp_comm=a2a"):
        resolve_layout(model, cluster, _train(seq_length=8192), Layout(tp=8, cp=8, cp_comm="a2a"))
    resolve_layout(model, cluster, _train(seq_length=8192), Layout(tp=4, cp=8, cp_comm="a2a"))


def test_cross_node_ring_exposes_more_than_inside_a_node():
    model, cluster, train, _ = _cp_setup(2, 32768, "p2p")
    inside = cp_layer_s(model, cluster, train, Layout(tp=4, cp=2))
    across = cp_layer_s(model, cluster, train, Layout(tp=8, cp=2))
    assert across > inside


# ---- the search and the export ------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _planned(model: str, name: str) -> str:
    """The saved plan (JSON text) of `plan MODEL --framework NAME` on 64 H100, searched once per run."""
    saved = Path(tempfile.mkdtemp(prefix="parplan-fw-")) / "plan.json"
    res = runner.invoke(app, ["plan", model, *PROBLEMS[model], "--framework", name, "--top", "1",
                              "--save", str(saved)])
    assert res.exit_code == 0, res.output
    return saved.read_text()


@pytest.mark.parametrize("model", list(PROBLEMS))
@pytest.mark.parametrize("name", FRAMEWORKS)
def test_plan_for_a_framework_returns_a_layout_it_runs_and_exports_it(model, name, tmp_path):
    doc = json.loads(_planned(model, name))
    fw = hp.load_framework(name)
    lay = Layout.model_validate(doc["layout"])
    assert not refusals(fw, lay, doc["train"]["precision"], doc["train"]["optimizer"])
    assert hp.load_stack(doc["train"]["stack"]).framework == name
    files, refused = render_all(plan_from_doc(doc), fw.export_format)
    assert files and not refused
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(doc))
    res = runner.invoke(app, ["export", str(saved), "--framework", name, "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert {p.name for p in (tmp_path / "out").iterdir()} == set(files)
    check = runner.invoke(app, ["check", str(saved), "--framework", name])
    assert check.exit_code in (0, 1), check.output


@pytest.mark.parametrize("model", list(PROBLEMS))
def test_deepspeed_plans_pass_deepspeeds_config_class(model):
    ds = pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig
    doc = json.loads(_planned(model, "deepspeed"))
    cfg, lay = ds_config(plan_from_doc(doc)), doc["layout"]
    with mock.patch.object(ds.comm, "get_world_size", return_value=lay["dp"] * lay["cp"]), \
            mock.patch.object(ds.comm, "get_rank", return_value=0):
        parsed = DeepSpeedConfig(cfg)
    assert parsed.train_batch_size == doc["train"]["global_batch_size"]
    assert parsed.zero_optimization_stage == lay["zero"]


@pytest.mark.parametrize("model", list(PROBLEMS))
def test_fsdp_plans_pass_torchruns_parser(model, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from torch.distributed.run import config_from_args, get_args_parser
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    doc = json.loads(_planned(model, "fsdp"))
    files, _ = render_all(plan_from_doc(doc), "torchrun")
    (tmp_path / "launch.sh").write_text(files["launch_torchrun.sh"][0])
    argvs = find_launch(read_script((tmp_path / "launch.sh").read_text()), "torchrun")
    assert argvs
    for argv in argvs:
        parser = get_args_parser()
        parser.allow_abbrev = False
        config, _, cmd = config_from_args(parser.parse_args(argv))
        assert config.nproc_per_node == doc["cluster"]["gpus_per_node"]
        assert "--fsdp-sharding-strategy" in cmd


def test_any_lists_the_frameworks_of_each_plan():
    res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "16",
                              "--json"])
    data = json.loads(res.stdout)
    assert data["framework"] == "any"
    assert len(data["runs_on"]) == len(data["plans"])
    for plan, names in zip(data["plans"], data["runs_on"]):
        assert names == runners(Layout.model_validate(plan["layout"]), _train(), moe=False)


def test_estimate_with_a_framework_that_cannot_run_the_layout_exits_2():
    res = runner.invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "tp=8",
                              "--global-batch", "8", "--framework", "deepspeed"])
    assert res.exit_code == 2 and "--framework deepspeed" in res.output and "tp=8" in res.output


def test_framework_picks_its_stack_and_refuses_another_frameworks_stack():
    args = ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout", "dp=8,zero=3", "--global-batch", "8",
            "--json"]
    ds = json.loads(runner.invoke(app, args + ["--framework", "deepspeed"]).stdout)
    tt = json.loads(runner.invoke(app, args + ["--framework", "torchtitan"]).stdout)
    assert ds["time"]["step_s"] != tt["time"]["step_s"]
    bad = runner.invoke(app, args + ["--framework", "deepspeed", "--stack", "torchtitan"])
    assert bad.exit_code == 2 and "torchtitan stack" in bad.output


def test_unknown_framework_exits_2():
    res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--framework", "jax"])
    assert res.exit_code == 2 and "jax" in res.output


def test_export_without_a_format_writes_the_pricing_frameworks(tmp_path):
    """A plan saved with --framework fsdp is priced with the fsdp stack: export without --format writes torchrun's
    files (it used to exit 2 asking for --format), as --framework fsdp does."""
    saved = tmp_path / "p.json"
    assert runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch", "16",
                               "--framework", "fsdp", "--save", str(saved)]).exit_code == 0
    res = runner.invoke(app, ["export", str(saved), "--out", str(tmp_path / "a")])
    assert res.exit_code == 0 and (tmp_path / "a" / "launch_torchrun.sh").exists()
    assert "--format not given" in res.output
    res = runner.invoke(app, ["export", str(saved), "--out", str(tmp_path / "o"), "--framework", "fsdp"])
    assert res.exit_code == 0 and (tmp_path / "o" / "launch_torchrun.sh").exists()


def test_deepspeed_ulysses_export_reads_back(tmp_path: Path):
    saved, out = tmp_path / "p.json", tmp_path / "ds"
    res = runner.invoke(app, ["estimate", "llama3-8b", "--cluster", "dgx-h100", "--layout",
                              "cp=4,cp_comm=a2a,dp=2,zero=3", "--global-batch", "16", "--seq-len", "32768",
                              "--framework", "deepspeed", "--json"])
    assert res.exit_code in (0, 1), res.output
    doc_res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--global-batch",
                                  "16", "--seq-len", "32768", "--framework", "deepspeed", "--save", str(saved)])
    assert doc_res.exit_code == 0, doc_res.output
    doc = json.loads(saved.read_text())
    doc["layout"].update(cp=4, cp_comm="a2a", dp=2, zero=3, pp=1, vpp=1, stage_layers=None, mbs=1,
                         num_microbatches=None, schedule=None, shard_group=None)
    cfg = ds_config(plan_from_doc(doc))
    assert cfg["sequence_parallel_size"] == 4 and cfg["train_batch_size"] == 16
    (tmp_path / "q.json").write_text(json.dumps(doc))
    assert runner.invoke(app, ["export", str(tmp_path / "q.json"), "--framework", "deepspeed",  # fit or not
                               "--out", str(out), "--force"]).exit_code == 0
    back = runner.invoke(app, ["check", str(out / "ds_config.json"), "--model", "llama3-8b", "--cluster", "dgx-h100",
                               "--json"])
    assert back.exit_code in (0, 1), back.output
    lay = json.loads(back.stdout)["layout"]
    assert (lay["cp"], lay["cp_comm"], lay["dp"]) == (4, "a2a", 2)


# ---- fixed splits: CP-SAT equals the oracle -----------------------------------------------------

@given(layers=st.integers(4, 12), name=st.sampled_from(["deepspeed", "torchtitan"]), hbm=st.sampled_from([0.6, 8.0]))
@settings(max_examples=10, deadline=None)
def test_cpsat_keeps_the_framework_partitioners_split_and_equals_the_oracle(layers, name, hbm):
    """With a partitioner's splits imposed (DeepSpeed partition_method, torchtitan less_layers), CP-SAT
    picks only those, and its optimum equals plain enumeration (planner.search.brute)."""
    from helpers import cluster, llama_like
    from planner.search import cpsat
    from planner.search.brute import brute_force
    from planner.search.costing import Coster
    from planner.search.frameworks import space_options
    from planner.search.space import SpaceOptions, enumerate_layouts
    model = llama_like(256, 4, 2, layers, 512, vocab=4096, seq=512)
    gpu = hp.load_gpu("h100-sxm").model_copy(update={"hbm_gib": hbm})
    clus = cluster(4, gpu=gpu, memory_reserve_gib=0.0)
    train = hp.resolve_train(TrainSpec(global_batch_size=16), hp.load_framework(name).stack)
    opts = space_options(hp.load_framework(name), model, clus, train,
                         SpaceOptions(max_mbs=2, max_vpp=2, max_cp=1, recompute=("none",)))
    coster = Coster(model, clus, train)
    tables = [coster.table(c) for c in enumerate_layouts(model, clus, train, opts)]
    oracle, sol = brute_force(model, tables), cpsat.solve(model, tables, time_limit_s=30)
    assert (oracle is None) == (sol is None)
    if sol is not None:
        assert sol.objective == oracle[0]
        fixed = sol.table.layout.fixed_stages
        assert fixed is None or list(fixed) == sol.stage_layers


TT_REGISTRY = {"llama3-70b": ("llama3", "llama3_70b"),  # torchtitan's own config of the model
               "mixtral-8x7b": ("qwen3", "qwen3_30b_a3b")}  # no Mixtral there: a MoE config of its registry


@pytest.mark.parametrize("model", list(PROBLEMS))
def test_torchtitan_plans_pass_torchtitans_config_manager(model):
    """torchtitan 0.3.0's ConfigManager (tyro over its Trainer.Config, then its own validation) parses
    the exported command line; needs the validate-titan extra (torchtitan imports triton)."""
    pytest.importorskip("triton")
    config_module = pytest.importorskip("torchtitan.config")
    doc = json.loads(_planned(model, "torchtitan"))
    files, _ = render_all(plan_from_doc(doc), "torchtitan")
    argv = find_launch(read_script(files["launch_torchtitan.sh"][0]), "torchrun")[0]
    args = argv[argv.index("torchtitan.train") + 1:]
    for flag, value in zip(("--module", "--config"), TT_REGISTRY[model]):
        args[args.index(flag) + 1] = value
    cfg = config_module.ConfigManager().parse_args(args)
    lay = doc["layout"]
    assert (cfg.parallelism.tensor_parallel_degree, cfg.parallelism.context_parallel_degree,
            cfg.parallelism.pipeline_parallel_degree) == (lay["tp"], lay["cp"], lay["pp"])
    assert cfg.training.global_batch_size == doc["train"]["global_batch_size"]


def test_runs_on_checks_the_stage_split_a_partitioner_builds():
    train = _train()
    even, ends = Layout(pp=4, dp=2, stage_layers=[8, 8, 8, 8]), Layout(pp=4, dp=2, stage_layers=[7, 9, 9, 7])
    odd = Layout(pp=4, dp=2, stage_layers=[8, 6, 10, 8])
    assert {"megatron", "deepspeed", "torchtitan"} <= set(runners(even, train, moe=False))
    assert runners(ends, train, moe=False) == ["megatron", "torchtitan"]  # torchtitan: first/last_stage_less_layers
    assert runners(odd, train, moe=False) == ["megatron"]  # only Megatron takes any counts


def test_hardware_lists_the_frameworks():
    data = json.loads(runner.invoke(app, ["hardware", "--json"]).stdout)
    assert [r["name"] for r in data["frameworks"]] == sorted(FRAMEWORKS)
    assert all(r["sources"] for r in data["frameworks"])
    assert "Frameworks" in runner.invoke(app, ["hardware"]).stdout


@settings(max_examples=400, deadline=None)
@given(fw=st.sampled_from(sorted(FRAMEWORKS)), tp=st.sampled_from([1, 2]), cp=st.sampled_from([1, 2]),
       cp_comm=st.sampled_from(["p2p", "a2a", "allgather"]), ep=st.sampled_from([1, 2]), etp=st.sampled_from([1, 2]),
       pp=st.sampled_from([1, 2]), vpp=st.sampled_from([1, 2]), zero=st.integers(0, 3),
       shard=st.sampled_from([None, 2, 8]), recompute=st.sampled_from(["none", "selective", "full"]),
       precision=st.sampled_from(["bf16", "fp16", "fp8", "fp32"]), optimizer=st.sampled_from(["adam", "sgd"]),
       ep_overlap=st.booleans(), moe=st.booleans())
def test_the_searchs_quick_verdict_is_the_refusals(fw, tp, cp, cp_comm, ep, etp, pp, vpp, zero, shard, recompute,
                                                  precision, optimizer, ep_overlap, moe):
    """costmodels.framework.runs (what the search asks of every candidate) says yes exactly where refusals
    (what the messages name) is empty."""
    from costmodels.framework import runs  # noqa: PLC0415
    from planner.search.space import Candidate  # noqa: PLC0415

    caps = hp.load_framework(fw)
    lay = Candidate(tp=tp, sp=False, cp=cp, cp_comm=cp_comm, ep=ep, etp=etp, pp=pp, vpp=vpp, dp=8, zero=zero, mbs=1,
                    recompute=recompute, schedule="1f1b", num_microbatches=4, shard_group=shard)
    assert runs(caps, lay, precision, optimizer, ep_overlap, moe) == (not refusals(caps, lay, precision, optimizer,
                                                                                ep_overlap, moe))


# ---- Megatron's own argument validation (last: its check runs beside the tests above) ----------------

@pytest.fixture(scope="module")
def megatron_site(tmp_path_factory):
    """Megatron-Core 0.19.2 unpacked (benchmarks/megatron_crosscheck.py): its own parse_args and
    validate_args run on CPU; skipped without torch or when the wheel cannot be downloaded."""
    pytest.importorskip("torch")
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "megatron_crosscheck.py"
    spec = importlib.util.spec_from_file_location("megatron_crosscheck", path)
    mc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mc)
    root = tmp_path_factory.getbasetemp() / "megatron-core-wheel"  # one download per session, shared by modules
    root.mkdir(exist_ok=True)
    try:
        wheel = mc.fetch_wheel(root)
    except (RuntimeError, OSError) as err:
        pytest.skip(f"megatron-core wheel not available: {err}")
    return mc, root / "site", mc.unpack(wheel, root / "site")


def _plan_script(model: str) -> tuple[str, int]:
    """The Megatron launch script of `plan MODEL --framework megatron`, and its world size."""
    doc = json.loads(_planned(model, "megatron"))
    files, _ = render_all(plan_from_doc(doc), "megatron")
    return files["launch_megatron.sh"][0], doc["cluster"]["num_nodes"] * doc["cluster"]["gpus_per_node"]


@functools.lru_cache(maxsize=None)
def _overlap_script(sp: bool) -> tuple[str, int]:
    """llama3-8b tp=8 on one node with TP overlap asked for, sequence parallelism `sp`: script, world size."""
    model, clus = hp.load_model("llama3-8b"), loading.load_cluster("dgx-h100", 1)
    train = hp.resolve_train(TrainSpec(global_batch_size=8, tp_comm_overlap=True))
    doc = plan_document(model, clus, train, estimate(model, clus, train, Layout(tp=8, sp=sp)))
    return render_all(plan_from_doc(doc), "megatron")[0]["launch_megatron.sh"][0], 8


@pytest.fixture(scope="module", autouse=True)
def megatron_started(request, tmp_path_factory):
    """Megatron's check of every script below (megatron_verdicts), started before the module's first test when
    a selected test needs it, and left to run beside the tests before the Megatron ones: all scripts checked in
    one interpreter (Megatron imported once, a forked child per script: benchmarks/megatron_crosscheck.check_many;
    a fresh interpreter per script cost ~6 s each on the 2-core CI machine), which imports torch and Megatron
    (~7 s) in a child process that the tests here never wait on until they read its verdicts. Yields
    (script keys, future of their verdicts); the skip or error that stopped it; None when no test asks."""
    if not any("megatron_verdicts" in item.fixturenames for item in request.session.items
               if getattr(item, "module", None) is request.module):
        yield None
        return
    try:
        mc, site, stubs = request.getfixturevalue("megatron_site")
        scripts = {("plan", m): _plan_script(m) for m in PROBLEMS}
        scripts.update({("overlap", sp): _overlap_script(sp) for sp in (True, False)})
        jobs = []
        for i, (text, world) in enumerate(scripts.values()):
            path = tmp_path_factory.mktemp(f"megatron-{i}") / "launch_megatron.sh"
            path.write_text(text)
            jobs.append(mc.job_for(path, world, site, stubs))
    except (Exception, pytest.skip.Exception) as err:  # raised by megatron_verdicts, to the tests that ask
        yield err
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # the thread only waits on the child
        yield list(scripts), pool.submit(mc.check_many, jobs)


@pytest.fixture(scope="module")
def megatron_verdicts(megatron_started) -> dict:
    """Megatron's verdict on every script (megatron_started), by key."""
    assert megatron_started is not None, "megatron_started saw no selected test ask for the verdicts"
    if isinstance(megatron_started, BaseException):
        raise megatron_started
    keys, verdicts = megatron_started
    return dict(zip(keys, verdicts.result()))


@pytest.mark.parametrize("model", list(PROBLEMS))
def test_megatron_plans_pass_megatrons_argument_validation(model, megatron_verdicts):
    ok, why = megatron_verdicts[("plan", model)]
    assert ok, why


@pytest.mark.parametrize("sp", [True, False])
def test_megatron_plans_pass_argument_validation_with_tp_comm_overlap(sp, megatron_verdicts):
    """With TP overlap asked for, sp=1 writes --tp-comm-overlap and sp=0 leaves it out: Megatron's
    validate_args asserts the flag has --sequence-parallel, so either script must pass it."""
    assert ("--tp-comm-overlap" in _overlap_script(sp)[0]) == sp
    ok, why = megatron_verdicts[("overlap", sp)]
    assert ok, why
