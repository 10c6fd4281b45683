"""Exporters (planner.exporters): files for every format pass the mirrored framework rules
(planner.exporters.check_written, from benchmarks/data/launch_formats.md), parse as bash/TOML/JSON,
never clobber without force, refuse what a target cannot express, quote everything that reaches a shell,
and carry a header with the plan's predicted numbers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.hardware_spec import GIB
from costmodels.memory import memory_train
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.files import loading
from planner.errors import UserError
from planner.exporters import FORMATS, ExportRefused, export, run_export
from planner.exporters.check_written import validate_export
from planner.files.planfile import plan_document
from tests.helpers import cluster

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
EVIL_NAME = "x'; touch PWNED; '"


def example(name: str) -> dict:
    return json.loads((EXAMPLES / f"{name}-plan.json").read_text())


def make_doc(model="llama3-8b", nodes=1, gbs=64, cluster="dgx-h100", train=None, **layout) -> dict:
    """A plan document for a given layout (estimate + plan_document, as `plan --save` writes)."""
    spec = model if isinstance(model, ModelSpec) else hp.load_model(model)
    clus = loading.load_cluster(cluster, nodes)
    tr = hp.resolve_train(TrainSpec(global_batch_size=gbs, **(train or {})))
    return plan_document(spec, clus, tr, estimate(spec, clus, tr, Layout(**layout)))


def moe_model(**kw) -> ModelSpec:
    base = dict(name="moe-test", num_layers=16, hidden_size=2048, num_attention_heads=16, num_kv_heads=4,
                ffn_hidden_size=8192, vocab_size=32000, seq_length=4096, activation="swiglu", norm="rmsnorm",
                position_embedding="rope", linear_bias=False, dropout=False, num_experts=16, top_k=2,
                moe_ffn_hidden_size=1024, num_shared_experts=1, first_k_dense_layers=1)
    return ModelSpec(**{**base, **kw})


# (id, document builder): layouts exercising every mapping branch
CASES = {
    "llama3-70b-example": lambda: example("llama3-70b"),
    "mixtral-8x7b-example": lambda: example("mixtral-8x7b"),
    # the 70B example's layout follows the planner; this one keeps tensor and context parallelism
    "70b-tp4-cp2-interleaved": lambda: make_doc("llama3-70b", nodes=8, gbs=128, train={"seq_length": 8192}, tp=4,
                                                sp=True, cp=2, pp=2, vpp=8, zero=1, mbs=1, recompute="full"),
    "8b-pp2-zero1-full": lambda: make_doc(pp=2, zero=1, mbs=1, recompute="full"),
    # fits every stack; its sequence (4096) is not the preset's (8192): a DeepSpeed JSON's comes from its launcher
    "8b-zero3-dp8": lambda: make_doc(zero=3, mbs=1, gbs=128, train={"seq_length": 4096}),
    "8b-tp2-interleaved": lambda: make_doc(nodes=2, tp=2, sp=True, pp=4, vpp=2, mbs=1, recompute="selective"),
    "8b-uneven-ends": lambda: make_doc(nodes=2, tp=2, sp=True, pp=4, stage_layers=[7, 9, 9, 7], mbs=1),
    "8b-uneven-vpp": lambda: make_doc(nodes=2, tp=2, sp=True, pp=4, vpp=2, stage_layers=[6, 10, 10, 6], mbs=1),
    "8b-layout-string": lambda: make_doc(nodes=2, tp=2, sp=True, pp=4, vpp=2, stage_layers=[6, 8, 10, 8], mbs=1),
    "8b-pp2-uneven": lambda: make_doc(tp=4, sp=True, pp=2, stage_layers=[15, 17], mbs=1, gbs=32),
    "moe-dense-first": lambda: make_doc(moe_model(), nodes=1, ep=4, zero=1, mbs=1, recompute="full"),
    "8b-fp32-grads-fp8": lambda: make_doc(tp=2, sp=True, zero=1, mbs=1, train={"grad_dtype": "fp32",
                                                                                  "precision": "fp8"}),
}


@pytest.fixture(params=list(CASES), scope="module")
def exported(request, tmp_path_factory):
    doc = CASES[request.param]()
    out = tmp_path_factory.mktemp(request.param)
    # the cases exercise the mappings, fitting or not (8b-zero3-dp8 fits no stack): force writes every format
    result = run_export(doc, "all", out, force=True)
    return request.param, doc, result


def test_every_validator_passes(exported):
    _, doc, result = exported
    assert result.written
    assert validate_export("all", result.written, doc) == []


def test_files_parse(exported):
    _, _, result = exported
    for path in result.written:
        if path.suffix in (".sh", ".sbatch"):
            run = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            assert run.returncode == 0, run.stderr
            assert os.access(path, os.X_OK)
            if shutil.which("shellcheck"):
                sc = subprocess.run(["shellcheck", "-S", "error", str(path)], capture_output=True, text=True)
                assert sc.returncode == 0, sc.stdout
        elif path.suffix == ".toml":
            tomllib.loads(path.read_text())
        elif path.suffix == ".json":
            json.loads(path.read_text())


# file -> format whose stack runs it (its header's numbers are that stack's)
FILE_FORMAT = {"launch_megatron.sh": "megatron", "launch_slurm.sbatch": "slurm", "launch_deepspeed.sh": "deepspeed",
               "hostfile": "deepspeed", "PLAN-NOTES.txt": "deepspeed", "launch_torchtitan.sh": "torchtitan",
               "torchtitan_0.2.toml": "torchtitan", "launch_torchrun.sh": "torchrun"}
# format -> the stack that runs it when the plan's stack is another framework's (torchrun: the plan's own)
RUN_STACK = {"megatron": "megatron-core", "slurm": "megatron-core", "deepspeed": "deepspeed", "torchtitan": "torchtitan"}


def expected_estimate(doc: dict, fmt: str):
    """The plan priced as the file of `fmt` runs: the framework's stack (issue 34: a DeepSpeed file quoted
    Megatron-Core's memory) and, for torchtitan, sequence parallelism with TP and ZeRO-1 run as ZeRO-2."""
    prob = loading.problem_from_plan(doc, "plan")
    stack = prob.train.stack_spec
    if fmt in RUN_STACK and stack.framework != hp.load_framework(fmt if fmt != "slurm" else "megatron").name:
        stack = hp.load_stack(RUN_STACK[fmt])
    lay = prob.layout
    if fmt == "torchtitan":
        lay = lay.model_copy(update={"sp": lay.tp > 1, "zero": 2 if lay.zero == 1 else lay.zero})
    train = prob.train.model_copy(update={"stack": stack})
    if fmt in ("megatron", "slurm"):  # the script states the gradient dtype of the stack's buffer
        train = memory_train(train, lay)
    return estimate(prob.model, prob.cluster, train, lay)


def header_spec(text: str) -> dict:
    """The plan file on a header's `Spec:` line."""
    line = next(line for line in text.splitlines() if line.startswith(("# Spec: ", "Spec: ")))
    return json.loads(line.split("Spec: ", 1)[1])


def test_header_has_the_numbers_of_the_stack_that_runs_it(exported):
    _, doc, result = exported
    for path in result.written:
        if path.suffix == ".json":
            assert "parplan" not in path.read_text()  # ds_config.json stays clean
            continue
        fmt, text = FILE_FORMAT[path.name], path.read_text()
        want = expected_estimate(doc, fmt)
        device = f"peak {want.memory.device_bytes / GIB:.2f} GiB per GPU on the device"
        step = f"step time {want.time.step_s:.3f} s"
        stack = f"Priced with stack {want_stack(doc, fmt)} (what runs this file): "
        assert device in text and step in text and stack in text and "parplan 0." in text, path.name
        assert ("fits;" if want.fits else "DOES NOT FIT;") in text
        assert doc["model"]["name"] in text
        assert "Reproduce: parplan check " in text


def want_stack(doc: dict, fmt: str) -> str:
    return expected_estimate(doc, fmt).layout and _stack_name(doc, fmt)


def _stack_name(doc: dict, fmt: str) -> str:
    stack = loading.problem_from_plan(doc, "plan").train.stack_spec
    framework = {"slurm": "megatron"}.get(fmt, fmt)
    return stack.name if fmt == "torchrun" or stack.framework == framework else RUN_STACK[fmt]


def test_header_spec_reproduces_the_numbers(exported):
    """The Spec line is a plan file: estimating it gives the header's numbers exactly."""
    _, doc, result = exported
    for path in result.written:
        if path.suffix == ".json":
            continue
        prob = loading.problem_from_plan(header_spec(path.read_text()), path.name)
        got = estimate(prob.model, prob.cluster, prob.train, prob.layout)
        want = expected_estimate(doc, FILE_FORMAT[path.name])
        assert got.memory.device_bytes == want.memory.device_bytes and got.time.step_s == want.time.step_s


def test_refusals_are_reported_for_all(exported):
    name, _, result = exported
    if name in ("70b-tp4-cp2-interleaved", "mixtral-8x7b-example"):
        assert "deepspeed" in result.refused
        assert any(k in result.refused["deepspeed"] for k in ("tensor", "context", "expert"))
    # torchtitan states uneven ends through first/last_stage_less_layers (planner.frameworks.torchtitan.export.stage_keys);
    # these two splits it cannot make without module names (was: every uneven split refused)
    if name in ("8b-uneven-vpp", "8b-layout-string"):
        assert "torchtitan" in result.refused


def test_megatron_mappings(tmp_path):
    doc = make_doc("mixtral-8x7b", nodes=8, gbs=256, cp=8, ep=8, dp=8, zero=3, mbs=16)  # every MoE/CP/FSDP flag
    text = _megatron_text(doc, tmp_path / "a")
    for flag in ("--num-experts 8", "--moe-router-topk 2", "--moe-ffn-hidden-size 14336",
                 "--moe-token-dispatcher-type alltoall", "--expert-model-parallel-size 8",
                 "--expert-tensor-parallel-size 1", "--context-parallel-size 8", "--use-megatron-fsdp",
                 "--data-parallel-sharding-strategy optim_grads_params"):
        assert flag in text
    assert "CUDA_DEVICE_MAX_CONNECTIONS=1" not in text  # Megatron-FSDP refuses it
    # the kernels the plan was priced with: one grouped GEMM (without it Megatron runs SequentialMLP) and the fused
    # permute (without it an atomic index_add backward): docs/moe.md, measured on Megatron-Core's MoE layer
    assert "--moe-grouped-gemm" in text and "--moe-permute-fusion" in text
    assert "--moe-grouped-gemm" not in _megatron_text(CASES["8b-tp2-interleaved"](), tmp_path / "dense")
    # Volta: validate_args refuses --moe-grouped-gemm below compute capability 8, and TE's fused permute needs Ampere
    volta = cluster(8, gpu=hp.load_gpu("v100-sxm3-32gb"))
    tr = hp.resolve_train(TrainSpec(global_batch_size=8, precision="fp16"))
    moe = moe_model(first_k_dense_layers=0, num_shared_experts=0)
    text = _megatron_text(plan_document(moe, volta, tr, estimate(moe, volta, tr, Layout(ep=8, mbs=1))), tmp_path / "v")
    assert "--num-experts 16" in text and "--moe-grouped-gemm" not in text and "--moe-permute-fusion" not in text
    text = _megatron_text(CASES["moe-dense-first"](), tmp_path / "b")
    assert "--moe-layer-freq '([0]*1+[1]*15)'" in text and "--moe-shared-expert-intermediate-size 1024" in text
    text = _megatron_text(CASES["8b-tp2-interleaved"](), tmp_path / "c")
    assert "--num-layers-per-virtual-pipeline-stage 4" in text and "export CUDA_DEVICE_MAX_CONNECTIONS=1" in text
    assert "--recompute-granularity selective" in text and "--recompute-method" not in text
    text = _megatron_text(CASES["8b-uneven-ends"](), tmp_path / "d")
    assert "--decoder-first-pipeline-num-layers 7" in text and "--decoder-last-pipeline-num-layers 7" in text
    text = _megatron_text(CASES["8b-uneven-vpp"](), tmp_path / "e")
    assert "--num-virtual-stages-per-pipeline-rank 2" in text
    text = _megatron_text(CASES["8b-layout-string"](), tmp_path / "f")
    assert "--pipeline-model-parallel-layout 'Et*3|t*4|t*5|t*4|t*3|t*4|t*5|t*4L'" in text
    text = _megatron_text(CASES["8b-fp32-grads-fp8"](), tmp_path / "g")
    assert "--fp8-format hybrid" in text and "--bf16" in text and "--accumulate-allreduce-grads-in-fp32" in text
    text = _megatron_text(CASES["8b-pp2-zero1-full"](), tmp_path / "h")
    assert "--use-distributed-optimizer" in text and "--recompute-num-layers 1" in text


def test_megatron_tp_comm_overlap_only_with_sequence_parallelism(tmp_path):
    """Megatron asserts that --tp-comm-overlap has --sequence-parallel (megatron/training/arguments.py):
    the flag is written with sp=1 and left out with sp=0, where the time model prices no overlap."""
    on = {"tp_comm_overlap": True}
    with_sp = _megatron_text(make_doc(nodes=1, gbs=8, train=on, tp=8, sp=True), tmp_path / "a")
    without = _megatron_text(make_doc(nodes=1, gbs=8, train=on, tp=8, sp=False), tmp_path / "b")
    assert "--tp-comm-overlap" in with_sp and "--sequence-parallel" in with_sp
    assert "--tp-comm-overlap" not in without and "--sequence-parallel" not in without


def _megatron_text(doc: dict, out: Path) -> str:
    """The Megatron script of `doc`, fitting or not (these tests look at the flags)."""
    return export(doc, "megatron", out, force=True)[0].read_text()


def test_deepspeed_config(tmp_path):
    doc = CASES["8b-pp2-zero1-full"]()
    paths = export(doc, "deepspeed", tmp_path, force=False)
    assert {p.name for p in paths} == {"ds_config.json", "hostfile", "launch_deepspeed.sh", "PLAN-NOTES.txt"}
    cfg = json.loads((tmp_path / "ds_config.json").read_text())
    lay = doc["layout"]
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * lay["dp"]
    assert cfg["pipeline"]["stages"] == 2 and cfg["zero_optimization"]["stage"] == 1
    assert "activation_checkpointing" in cfg and cfg["bf16"] == {"enabled": True}
    assert "auto" not in json.dumps(cfg)
    assert "--num_nodes 1" in (tmp_path / "launch_deepspeed.sh").read_text()


def test_torchtitan_mapping(tmp_path):
    """The interleaved tp2 pp4 plan with FSDP (zero 2) gets both files; with DDP (zero 0) beside tp/pp, which
    torchtitan 0.2.x cannot run as priced, only the 0.3 script, which says why."""
    export(CASES["8b-tp2-interleaved"](), "torchtitan", tmp_path / "ddp", force=False)
    assert not (tmp_path / "ddp" / "torchtitan_0.2.toml").exists()
    assert "torchtitan_0.2.toml not written" in (tmp_path / "ddp" / "launch_torchtitan.sh").read_text()
    doc = make_doc(nodes=2, tp=2, sp=True, pp=4, vpp=2, mbs=1, recompute="selective", zero=2)
    export(doc, "torchtitan", tmp_path, force=False)
    cfg = tomllib.loads((tmp_path / "torchtitan_0.2.toml").read_text())
    par = cfg["parallelism"]
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert par["pipeline_parallel_layers_per_stage"] == 4 and par["data_parallel_shard_degree"] == 2
    assert cfg["training"]["local_batch_size"] == doc["layout"]["num_microbatches"]
    sh = (tmp_path / "launch_torchtitan.sh").read_text()
    assert "--training.disable_cuda_graphs" in sh and "activation-checkpoint:selective" in sh
    assert "--config llama3_8b" not in sh and "llama3_8b" in sh and "0.3.0" in sh


def test_hsdp_exports_to_torchtitan_and_reads_back(tmp_path):
    """HSDP (shard inside a node, replicate across): torchtitan's dp_shard x dp_replicate; `check` reads
    the TOML back as the same shard group; Megatron and DeepSpeed refuse it with the reason."""
    doc = make_doc(nodes=2, zero=3, shard_group=8, mbs=1, gbs=64)
    export(doc, "torchtitan", tmp_path, force=False)
    par = tomllib.loads((tmp_path / "torchtitan_0.2.toml").read_text())["parallelism"]
    assert (par["data_parallel_shard_degree"], par["data_parallel_replicate_degree"]) == (8, 2)
    from planner.files.native import load_native

    back = load_native(tmp_path / "torchtitan_0.2.toml", "llama3-8b", "dgx-h100", 2)
    assert back.layout.shard_group == 8 and back.layout.zero == 3
    for fmt, reason in (("megatron", "shard_group=8"), ("deepspeed", "shard_group=8")):
        with pytest.raises(ExportRefused, match=reason):
            export(doc, fmt, tmp_path / fmt, force=False)


def test_no_clobber_then_force(tmp_path):
    doc = example("llama3-70b")
    first = export(doc, "all", tmp_path, force=False)
    before = {p: p.read_text() for p in first}
    (tmp_path / "launch_megatron.sh").write_text("# mine\n")
    with pytest.raises(UserError, match="--force"):
        export(doc, "all", tmp_path, force=False)
    assert (tmp_path / "launch_megatron.sh").read_text() == "# mine\n"
    assert all(p.read_text() == before[p] for p in first if p.name != "launch_megatron.sh")
    assert export(doc, "all", tmp_path, force=True) == first
    assert (tmp_path / "launch_megatron.sh").read_text() == before[tmp_path / "launch_megatron.sh"]


def test_single_format_refusals(tmp_path):
    with pytest.raises(ExportRefused, match="zero=2 with pp=2"):
        export(make_doc(pp=2, zero=2, mbs=1), "deepspeed", tmp_path, force=False)
    with pytest.raises(ExportRefused, match="tensor parallelism"):
        export(CASES["70b-tp4-cp2-interleaved"](), "deepspeed", tmp_path, force=False)
    with pytest.raises(ExportRefused, match="stage_layers"):  # was 8b-uneven-ends, which torchtitan now writes
        export(CASES["8b-layout-string"](), "torchtitan", tmp_path, force=False)
    assert not list(tmp_path.iterdir())
    with pytest.raises(UserError, match="--format"):
        export(example("llama3-70b"), "nemo", tmp_path, force=False)


def test_validators_catch_mistakes(tmp_path):
    doc = CASES["8b-tp2-interleaved"]()
    paths = export(doc, "all", tmp_path, force=False)
    script = tmp_path / "launch_megatron.sh"
    good = script.read_text()
    script.write_text(good.replace("export CUDA_DEVICE_MAX_CONNECTIONS=1", ""))
    assert any("CUDA_DEVICE_MAX_CONNECTIONS" in p for p in validate_export("megatron", paths, doc))
    script.write_text(good.replace("--global-batch-size 64", "--global-batch-size 63"))
    assert any("global" in p for p in validate_export("megatron", paths, doc))
    script.write_text(good.replace("--num-layers-per-virtual-pipeline-stage 4", "--num-layers-per-virtual-pipeline-stage 3"))
    assert validate_export("megatron", paths, doc)
    script.write_text(good.replace("--nproc-per-node", "--nproc"))
    assert any("abbreviated" in p for p in validate_export("megatron", paths, doc))
    doc = make_doc(nodes=2, tp=2, sp=True, pp=4, vpp=2, mbs=1, recompute="selective", zero=2)  # a 0.2 TOML
    paths = export(doc, "torchtitan", tmp_path / "titan", force=False)
    toml = tmp_path / "titan" / "torchtitan_0.2.toml"
    toml.write_text(toml.read_text().replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 4"))
    assert any("world" in p for p in validate_export("torchtitan", paths, doc))


def test_deepspeed_validator_catches_batch(tmp_path):
    doc = CASES["8b-zero3-dp8"]()
    paths = export(doc, "deepspeed", tmp_path, force=True)  # does not fit: force writes it
    cfg_path = tmp_path / "ds_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["train_batch_size"] += 1
    cfg["gradient_accumulation_steps"] = "auto"
    cfg_path.write_text(json.dumps(cfg))
    problems = validate_export("deepspeed", paths, doc)
    assert any("auto" in p for p in problems) and any("train_batch_size" in p for p in problems)
    (tmp_path / "hostfile").write_text("a slots=8\na slots=8\nb\n")
    assert len([p for p in validate_export("deepspeed", paths, doc) if "hostfile" in p]) >= 2


# ---- injection ----------------------------------------------------------------------------------

STUB = """#!/usr/bin/env bash
{ printf '%s\\0' "$(basename "$0")" "$@"; printf '\\1\\0'; } >> "$STUB_LOG"
if [ "$(basename "$0")" = scontrol ]; then echo node-a; echo node-b; fi
"""


def _stubs(folder: Path) -> Path:
    folder.mkdir()
    for name in ("torchrun", "srun", "scontrol", "deepspeed"):
        (folder / name).write_text(STUB)
        (folder / name).chmod(0o755)
    return folder


def _calls(log: Path) -> list[list[str]]:
    calls, cur = [], []
    for item in log.read_text().split("\0")[:-1]:
        if item == "\1":
            calls.append(cur)
            cur = []
        else:
            cur.append(item)
    return calls


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("name", [EVIL_NAME, "y\ntouch PWNED5 # \u2028 `touch PWNED6` $HOME \"q\""])
def test_injection_is_inert(tmp_path, name):
    evil = ModelSpec(name=name, num_layers=8, hidden_size=1024, num_attention_heads=8, vocab_size=32000,
                     seq_length=2048)
    doc = make_doc(evil, nodes=2, gbs=64, zero=1, mbs=1)
    out = tmp_path / "out dir $(touch PWNED2)"
    paths = export(doc, "all", out, force=False)
    names = {p.name for p in paths}  # the 9 launch files and MODEL.json, the spec their check lines name
    assert len(names) == 10 and "MODEL.json" in names and validate_export("all", paths, doc) == []
    stubs, work, log = _stubs(tmp_path / "stubs"), tmp_path / "work", tmp_path / "calls.log"
    work.mkdir()
    data = "data dir $(touch PWNED3) `touch PWNED4`"
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(log), "DATA_PATH": data,
           "SLURM_NNODES": "2", "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node-[a-b]",
           "TT_MODULE": "llama3", "TT_CONFIG": "llama3_debugmodel"}
    for path in paths:
        if path.suffix in (".sh", ".sbatch"):
            run = subprocess.run(["bash", str(path)], cwd=work, env=env, capture_output=True, text=True)
            assert run.returncode == 0, (path.name, run.stderr)
    leftovers = [p for p in tmp_path.rglob("PWNED*")] + [p for p in Path.cwd().glob("PWNED*")]
    assert leftovers == []
    calls = {c[0] + (":" + c[1] if c[0] == "srun" else ""): c for c in _calls(log)}
    megatron = next(c for c in _calls(log) if c[0] == "torchrun" and "--wandb-exp-name" in c)
    assert _after(megatron, "--wandb-exp-name") == name and _after(megatron, "--data-path") == data
    slurm = calls["srun:torchrun"]
    assert _after(slurm, "--wandb-exp-name") == name and _after(slurm, "--rdzv-endpoint") == "node-a:29500"
    assert _after(calls["deepspeed"], "--model-name") == name
    assert _after(calls["deepspeed"], "--deepspeed_config") == str(out / "ds_config.json")
    plain = [c for c in _calls(log) if c[0] == "torchrun" and "--model-name" in c]
    assert plain and all(_after(c, "--model-name") == name for c in plain)
    assert tomllib.loads((out / "torchtitan_0.2.toml").read_text())["job"]["description"] == name
    for path in paths:  # a name cannot end a header comment early: newlines become '?'
        if path.suffix in (".json", ".txt"):
            continue
        lines = path.read_text().split("\n")
        header = lines[:next(i for i, line in enumerate(lines) if not line.startswith("#"))]
        assert any("Model: " in line for line in header), path.name
        assert "PWNED5" not in name or any("y?touch PWNED5" in line for line in header), path.name


def test_formats_constant():
    assert FORMATS == ("megatron", "deepspeed", "torchrun", "torchtitan", "slurm")


def test_offload_is_written_as_planned(tmp_path):
    """TrainSpec.offload_* reach the files that run them: DeepSpeed's zero_optimization offload devices,
    Megatron's --optimizer-cpu-offload (with --use-precision-aware-optimizer, which megatron-core 0.19.2's
    validate_args asserts) and its fraction; what a framework cannot say is refused with the reason."""
    ds = make_doc(zero=3, mbs=1, gbs=64, train={"seq_length": 4096, "offload_optimizer": "cpu",
                                                "offload_params": "nvme"})
    export(ds, "deepspeed", tmp_path / "ds", force=True)
    zero = json.loads((tmp_path / "ds" / "ds_config.json").read_text())["zero_optimization"]
    assert zero["offload_optimizer"] == {"device": "cpu"} and zero["offload_param"]["device"] == "nvme"
    with pytest.raises(ExportRefused, match="offload_params=nvme"):
        export(ds, "megatron", tmp_path / "mg0", force=True)
    mg = make_doc(zero=1, mbs=1, gbs=64, train={"seq_length": 4096, "offload_optimizer": "cpu",
                                                "offload_optimizer_fraction": 0.5})
    text = _megatron_text(mg, tmp_path / "mg")
    assert "--optimizer-cpu-offload" in text and "--use-precision-aware-optimizer" in text
    assert "--optimizer-offload-fraction 0.5" in text
    with pytest.raises(ExportRefused, match="offload_optimizer_fraction=0.5"):
        export(mg, "deepspeed", tmp_path / "ds2", force=True)
    with pytest.raises(ExportRefused, match="enable_cpu_offload"):
        export(mg, "torchtitan", tmp_path / "tt", force=True)
    plain = make_doc(zero=1, mbs=1, gbs=64, train={"seq_length": 4096})
    assert '"device": "none"' in export(plain, "deepspeed", tmp_path / "ds3", force=True)[0].read_text()
