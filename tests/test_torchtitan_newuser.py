"""A new user's torchtitan files (new-user pass): torchtitan 0.1/0.2 launchers read as torchtitan runs them
(planner/frameworks/torchtitan/config_launch.py: the TOML --job.config_file names, then the line's overrides,
the GPUs from torchrun/NGPU), and a torchtitan pipeline's micro-batches held to torch's rules, not Megatron's
(costmodels/layout.py keeps m % pp for Megatron stacks; planner/frameworks/torchtitan/schedules.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import hardware_profiles as hp
from costmodels.estimate import estimate
from costmodels.pipeline import bubble_s
from costmodels.layout import Layout, LayoutError, resolve_layout
from planner.cli import app
from planner.errors import UserError
from planner.files import loading
from planner.files.native import detect, load_native
from planner.frameworks.deepspeed.auto import ReadNotes
from planner.frameworks.torchtitan import config_launch, schedules

TOML = """[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 4
seq_len = 2048
[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 1
[activation_checkpoint]
mode = "full"
[compile]
components = ["model", "loss"]
"""
RUN_LINE = ("#!/bin/bash\nCONFIG_FILE=./train_configs/llama3_8b.toml ./run_train.sh \\\n"
            "    --parallelism.tensor_parallel_degree 2 --training.local_batch_size=2 \\\n"
            "    --activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op \\\n"
            "    --compile.enable\n")
SLURM = """#!/bin/bash
#SBATCH --nodes=2
CONFIG_FILE=${CONFIG_FILE:-"./train_configs/llama3_8b.toml"}
srun torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d -m torchtitan.train \\
    --job.config_file ${CONFIG_FILE} "$@"
"""


def _files(tmp_path: Path, script: str, name: str = "launch.sh", toml: str = TOML) -> Path:
    (tmp_path / "train_configs").mkdir(exist_ok=True)
    (tmp_path / "train_configs" / "llama3_8b.toml").write_text(toml)
    path = tmp_path / name
    path.write_text(script)
    return path


def _load(path: Path, nodes=None):
    notes = ReadNotes()
    return load_native(path, None, "dgx-h100", nodes, notes=notes), notes.notes


def _check(*args: str):
    return CliRunner().invoke(app, ["check", *args])


# ---- 1: torchtitan 0.1/0.2 launchers ------------------------------------------------------------------------------

def test_run_train_line_reads_the_toml_then_the_overrides(tmp_path: Path):
    """`CONFIG_FILE=... ./run_train.sh --a.b v`: the TOML, then the overrides (space or =, a bare bool); without a
    run_train.sh beside, torchtitan 0.2's (NGPU 8 on one node, PYTORCH_ALLOC_CONF expandable_segments)."""
    path = _files(tmp_path, RUN_LINE)
    assert detect(path, path.read_text()) == "torchtitan"
    prob, notes = _load(path)
    lay, train = prob.layout, prob.train
    assert (prob.cluster.num_gpus, lay.tp, lay.mbs, lay.recompute) == (8, 2, 2, "selective")
    assert train.stack_spec.name == "torchtitan" and train.expandable_segments  # --compile.enable; run_train's env
    said = " ".join(notes)
    assert "./train_configs/llama3_8b.toml" in said and "--parallelism.tensor_parallel_degree 2" in said
    assert "run_train.sh assumed" in said


def test_run_train_beside_the_script_is_read_with_the_line_env(tmp_path: Path):
    """A run_train.sh beside the script runs as written: its NGPU default, the line's NGPU over it."""
    _files(tmp_path, "")
    (tmp_path / "run_train.sh").write_text(config_launch.RUN_TRAIN_02.replace('NGPU:-"8"', 'NGPU:-"4"'))
    path = tmp_path / "launch.sh"
    path.write_text(RUN_LINE)
    assert _load(path)[0].cluster.num_gpus == 4
    path.write_text("NGPU=2 " + RUN_LINE.split("\n", 1)[1])
    assert _load(path)[0].cluster.num_gpus == 2


def test_run_train_itself_and_the_slurm_launcher(tmp_path: Path, monkeypatch):
    """torchtitan's own run_train.sh (CONFIG_FILE from the environment) and multinode_trainer.slurm
    (srun torchrun --nnodes 2 --nproc_per_node 8: 16 GPUs); "$@" with no arguments adds nothing."""
    slurm = _files(tmp_path, SLURM, "multinode_trainer.slurm")
    prob, _ = _load(slurm)
    assert (prob.cluster.num_gpus, prob.layout.tp, prob.layout.mbs) == (16, 1, 4)
    script = tmp_path / "run_train.sh"
    script.write_text("#!/usr/bin/bash\nset -ex\nexport CONFIG_FILE=./train_configs/llama3_8b.toml\n"
                      + config_launch.RUN_TRAIN_02)
    assert _load(script)[0].cluster.num_gpus == 8


def test_job_file_relative_to_the_script_then_the_working_directory(tmp_path: Path, monkeypatch):
    line = "torchrun --nproc_per_node=8 -m torchtitan.train --job.config_file=train_configs/llama3_8b.toml\n"
    (tmp_path / "a").mkdir()
    path = _files(tmp_path / "a", line)
    elsewhere = tmp_path / "b"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _load(path)[0].layout.mbs == 4  # beside the script
    moved = elsewhere / "train_configs"
    (path.parent / "train_configs").rename(moved)
    assert _load(path)[0].layout.mbs == 4  # in the working directory


def test_a_later_job_file_is_not_read(tmp_path: Path):
    """torchtitan loads the first --job.config_file: run_train.sh's own, before "$@"; a note says so."""
    path = _files(tmp_path, RUN_LINE.replace("--compile.enable", "--compile.enable --job.config_file other.toml"))
    prob, notes = _load(path)
    assert prob.layout.tp == 2 and any("--job.config_file other.toml later on the line is not read" in n for n in notes)


def test_missing_job_file_exits_2_naming_it(tmp_path: Path):
    path = tmp_path / "launch.sh"
    path.write_text("CONFIG_FILE=./train_configs/nope.toml ./run_train.sh --training.local_batch_size 2\n")
    result = _check(str(path), "--cluster", "dgx-h100", "--nodes", "1")
    assert result.exit_code == 2, result.output
    assert "--job.config_file ./train_configs/nope.toml" in result.output and "no such file" in result.output
    assert "Traceback" not in result.output and "Megatron" not in result.output
    path.write_text("torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file $MY_CFG\n")
    result = _check(str(path), "--cluster", "dgx-h100", "--nodes", "1")
    assert result.exit_code == 2 and "$MY_CFG" in result.output and "unset" in result.output


def test_bad_override_is_named_with_the_script_and_the_toml(tmp_path: Path):
    path = _files(tmp_path, RUN_LINE.replace("tensor_parallel_degree 2", "tensor_parallel_degree two"))
    with pytest.raises(UserError) as err:
        _load(path)
    msg = str(err.value)
    assert "launch.sh" in msg and "llama3_8b.toml" in msg and "parallelism.tensor_parallel_degree='two'" in msg


def test_list_and_string_overrides_take_the_toml_types(tmp_path: Path):
    """0.2's tyro reads list[str] as one comma-separated word and a str stays a str (selective_ac_option "2")."""
    line = ("torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file ./train_configs/llama3_8b.toml "
            "--compile.components loss --activation_checkpoint.selective_ac_option 2 --compile.no-enable\n")
    path = _files(tmp_path, line, toml=TOML.replace('mode = "full"', 'mode = "selective"\nselective_ac_option = "op"'))
    cfg, world, alloc, label = config_launch.job_config(path.read_text(), path, [])
    assert cfg["compile"] == {"components": ["loss"], "enable": False}
    assert cfg["activation_checkpoint"]["selective_ac_option"] == "2" and world == 8 and alloc == {}
    assert str(label).endswith("launch.sh: ./train_configs/llama3_8b.toml")


def test_megatron_scripts_stay_megatron(tmp_path: Path):
    text = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --train.py-note\n"
    assert detect(tmp_path / "m.sh", text) == "megatron"
    assert not config_launch.is_job_launch("bash run_train.sh --num-layers 4\n")


# ---- 2: micro-batches per pipeline step: torch's rule for torchtitan, Megatron's for Megatron ---------------------

def _pp_toml(schedule: str, local: int, pp: int = 4, size: int = 1) -> str:
    return TOML.replace("local_batch_size = 4", f"local_batch_size = {local}").replace(
        "tensor_parallel_degree = 1", f"tensor_parallel_degree = 1\npipeline_parallel_degree = {pp}\n"
        f"pipeline_parallel_schedule = \"{schedule}\"\npipeline_parallel_microbatch_size = {size}")


def _toml_problem(tmp_path: Path, text: str, nodes: int = 1):
    path = tmp_path / "job.toml"
    path.write_text(text)
    return _load(path, nodes)


def test_interleaved_with_fewer_microbatches_than_ranks_is_estimated(tmp_path: Path):
    """Interleaved1F1B, pp=4, 2 micro-batches: torch runs it (rounds max(1, 2 // 4) = 1); Megatron's m % pp rule no
    longer refuses it, and a note says how much the interleaved bubble formula is low for it."""
    prob, notes = _toml_problem(tmp_path, _pp_toml("Interleaved1F1B", 2))
    result = estimate(prob.model, prob.cluster, prob.train, prob.layout)
    assert (result.layout.vpp, result.layout.num_microbatches, result.layout.schedule) == (2, 2, "interleaved")
    assert any("bubble of 2.5 micro-batch times per rank (priced so), against 1.5" in n for n in notes)


@pytest.mark.parametrize("schedule,local,size,words", [
    ("Interleaved1F1B", 9, 1, "multiple of its rounds max(1, 9 // pipeline_parallel_degree=4) = 2"),
    ("InterleavedZeroBubble", 9, 1, "multiple of its rounds"),
    ("1F1B", 2, 1, "Schedule1F1B needs at least pipeline_parallel_degree=4"),
    ("DualPipeV", 7, 1, "ScheduleDualPipeV needs at least its 8 stages"),
    ("GPipe", 6, 4, "not divisible by parallelism.pipeline_parallel_microbatch_size=4"),
])
def test_torch_refusals_name_the_file_and_keys(tmp_path: Path, schedule, local, size, words):
    with pytest.raises(UserError) as err:
        _toml_problem(tmp_path, _pp_toml(schedule, local, size=size))
    msg = str(err.value)
    assert "job.toml" in msg and words in msg and "training.local_batch_size" in msg
    assert f"pipeline_parallel_schedule='{schedule}'" in msg


@pytest.mark.parametrize("schedule,local", [("ZBVZeroBubble", 9), ("Interleaved1F1B", 10), ("GPipe", 1),
                                            ("Interleaved1F1B", 7), ("1F1B", 4), ("DualPipeV", 8)])
def test_what_torch_runs_is_read(tmp_path: Path, schedule, local):
    prob, _ = _toml_problem(tmp_path, _pp_toml(schedule, local))
    estimate(prob.model, prob.cluster, prob.train, prob.layout)


def test_megatron_rule_stays_for_megatron_stacks():
    model, cluster = loading.load_model("llama3-8b"), loading.load_cluster("dgx-h100", 1)
    lay = Layout(pp=4, vpp=2, mbs=1)
    for stack, refused in (("megatron-core", True), ("nemo", True), ("torchtitan", False)):
        train = hp.resolve_train(loading.train_from_data({"global_batch_size": 4}, "t"), stack)
        if refused:
            with pytest.raises(LayoutError, match=r"divisible by pp=4 \(Megatron\)"):
                resolve_layout(model, cluster, train, lay)
        else:
            assert resolve_layout(model, cluster, train, lay).num_microbatches == 2
    with pytest.raises(LayoutError, match="Megatron"):  # the default stack (megatron-core)
        resolve_layout(model, cluster, loading.train_from_data({"global_batch_size": 4}, "t"), lay)


def test_bubble_note_matches_torchs_own_order():
    """The note's bubble, (v*p - 1 - n(v - 1))/v micro-batch times, is what torch's Interleaved1F1B order gives
    (its _schedule_visualizer, F = 1, B = 2, each op waiting for the one before it in the pipeline)."""
    visualizer = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
    sched = schedules.lookup("Interleaved1F1B", Path("x"))
    for p, n, v in ((8, 4, 2), (8, 7, 2), (4, 2, 4), (8, 1, 2)):
        ops = visualizer.get_schedule_ops("Interleaved1F1B", p, n, num_stages_per_rank=v)
        span = _span(ops, p * v) / (3 * v)  # in whole micro-batch times of one rank
        note = schedules.few_microbatches(sched, p, v, n)
        assert f"a bubble of {span - n:g} micro-batch times" in note
        assert bubble_s([1.0] * p, v, None, n) == pytest.approx(span - n)  # and the step time prices it
    assert schedules.few_microbatches(sched, 4, 2, 4) is None  # n >= p: the formula holds
    ops = visualizer.get_schedule_ops("Interleaved1F1B", 4, 4, num_stages_per_rank=2)
    assert bubble_s([1.0] * 4, 2, None, 4) == pytest.approx(_span(ops, 8) / 6 - 4) == 1.5


def _span(ops, stages: int) -> float:
    """Makespan of per-rank op orders, each op after its rank's previous one and its pipeline predecessor."""
    cost, done, clock = {"FORWARD": 1.0, "FULL_BACKWARD": 2.0}, {}, [0.0] * len(ops)
    queues = [[a for a in rank if a is not None] for rank in ops]
    while any(queues):
        left = sum(map(len, queues))
        for r, queue in enumerate(queues):
            while queue:
                a = queue[0]
                kind, s, mb = a.computation_type.name, a.stage_index, a.microbatch_index
                need = ([("FORWARD", s - 1, mb)] if s else []) if kind == "FORWARD" else (
                    [("FORWARD", s, mb)] + ([("FULL_BACKWARD", s + 1, mb)] if s < stages - 1 else []))
                if any(d not in done for d in need):
                    break
                clock[r] = max([clock[r]] + [done[d] for d in need]) + cost[kind]
                done[(kind, s, mb)] = clock[r]
                queue.pop(0)
        assert sum(map(len, queues)) < left, "the order deadlocks"
    return max(clock)
