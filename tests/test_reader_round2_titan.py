"""Round 2 of the config readers, torchtitan side: every pipeline schedule torch defines is read (priced as the
closest one parplan models, with a note), a 0.3 launch line names its model preset, PYTORCH_CUDA_ALLOC_CONF of a
launch line is read, and an MX converter on a GPU without block-scaled tensor cores is refused naming the file
and its setting (a Megatron --fp8-recipe mxfp8 likewise).

Sources: torch 2.13 torch/distributed/pipelining/schedules.py (get_schedule_class, the schedule classes' rank
orders), torchtitan 0.2.2 distributed/pipeline_parallel.py (stages per rank, the V placement), torchtitan 0.3.0
models/*/config_registry.py (config names and flavors); see planner/frameworks/torchtitan/schedules.py, flavors.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from costmodels.activations import inflight_microbatches
from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.deepspeed.auto import ReadNotes, TrainerFlags
from planner.frameworks.torchtitan.config_values import titan_split

PP = ("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 8\nseq_len = 2048\n"
      "[parallelism]\ndata_parallel_shard_degree = 2\npipeline_parallel_degree = 4\n"
      "pipeline_parallel_microbatch_size = 1\npipeline_parallel_schedule = \"{schedule}\"\n")


def _toml(tmp_path: Path, text: str, cluster: str = "dgx-h100", model=None, flags=TrainerFlags()):
    path = tmp_path / "job.toml"
    path.write_text(text)
    notes = ReadNotes()
    return load_native(path, model, cluster, None, flags, notes), notes.notes


def _schedule(tmp_path: Path, name: str):
    return _toml(tmp_path, PP.format(schedule=name))


def test_v_schedules_place_two_stages_per_rank_in_a_v(tmp_path: Path):
    counts = titan_split(8, 32, 1, 1)  # llama3 8B: 32 layers over 4 ranks x 2 stages, first/last one lighter
    for name in ("ZBVZeroBubble", "DualPipeV", "zbvzerobubble"):  # torch matches names in any case
        prob, notes = _schedule(tmp_path, name)
        lay = prob.layout
        assert (lay.schedule, lay.vpp) == ("interleaved", 2), name
        assert lay.stage_layers == [counts[r] + counts[7 - r] for r in range(4)], name
        assert any("in a V" in n and "slower than the run" in n and "at or above" in n for n in notes), notes


def test_zero_bubble_and_bfs_are_priced_as_their_closest_schedule(tmp_path: Path):
    counts = titan_split(8, 32, 1, 1)
    loop = [counts[r] + counts[r + 4] for r in range(4)]
    prob, notes = _schedule(tmp_path, "InterleavedZeroBubble")
    assert (prob.layout.schedule, prob.layout.vpp, prob.layout.stage_layers) == ("interleaved", 2, loop)
    assert any("priced as Interleaved1F1B" in n and "weight gradient" in n for n in notes)
    prob, notes = _schedule(tmp_path, "LoopedBFS")  # every forward before any backward: GPipe's memory
    assert (prob.layout.schedule, prob.layout.vpp, prob.layout.stage_layers) == ("gpipe", 1, loop)
    assert any("priced as GPipe" in n for n in notes)
    prob, notes = _schedule(tmp_path, "Interleaved1F1B")
    assert prob.layout.schedule == "interleaved" and not any("pipeline_parallel_schedule" in n for n in notes)


def test_only_names_torch_does_not_run_are_refused(tmp_path: Path):
    with pytest.raises(UserError, match=r"job.toml: parallelism.pipeline_parallel_schedule='ZeroBubbleV'.*DualPipeV"):
        _schedule(tmp_path, "ZeroBubbleV")
    with pytest.raises(UserError, match="pipeline_parallel_schedule_csv"):
        _schedule(tmp_path, "PipelineScheduleSingle")
    csv = PP.format(schedule="PipelineScheduleSingle") + "pipeline_parallel_schedule_csv = \"s.csv\"\n"
    prob, notes = _toml(tmp_path, csv)
    assert prob.layout.schedule == "1f1b" and any("CSV's order is not read" in n for n in notes)


def test_compiled_stage_modules_are_named_for_zero_bubble_schedules(tmp_path: Path):
    text = PP.format(schedule="ZBVZeroBubble") + "[compile]\nenable = true\ncomponents = [\"model\"]\n"
    _, notes = _toml(tmp_path, text)
    assert any("refuses compiled stage modules" in n for n in notes)


def _torch_peak(cls, p: int, v: int, m: int, rank: int) -> int:
    """Peak chunk activations in flight on `rank` of torch's own rank order for `cls` (F +1; B, or W after I, -1)."""
    from torch.distributed.pipelining import schedules as S  # noqa: PLC0415

    sched = object.__new__(cls)
    sched.pp_group_size, sched._n_microbatches, sched.n_local_stages, sched.rank = p, m, v, rank
    sched.num_stages = sched._num_stages = p * v
    sched.number_of_rounds = max(1, m // p)
    sched.microbatches_per_round = m // sched.number_of_rounds
    sched._stages = [object()] * v
    live = best = 0
    for action in sched._calculate_single_rank_operations(rank):
        subs = [] if action is None else (action.sub_actions if action.computation_type == S.OVERLAP_F_B else [action])
        for sub in subs:
            live += {S.FORWARD: 1, S.FULL_BACKWARD: -1, S.BACKWARD_WEIGHT: -1}.get(sub.computation_type, 0)
            best = max(best, live)
    return best


def test_in_flight_claims_hold_for_torchs_rank_orders():
    """schedules.py's directions: Interleaved1F1B's first rank holds at least what any rank holds under the
    zero-bubble schedules, and LoopedBFS holds GPipe's m micro-batches (costmodels.activations)."""
    S = pytest.importorskip("torch.distributed.pipelining.schedules")
    try:
        for p, v, m in ((2, 2, 4), (4, 2, 8), (8, 2, 16), (4, 3, 8)):
            first = inflight_microbatches("interleaved", 0, p, v, m) * v
            for cls in (S.ScheduleInterleavedZeroBubble, S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV):
                if cls is not S.ScheduleInterleavedZeroBubble and v != 2:
                    continue
                assert max(_torch_peak(cls, p, v, m, r) for r in range(p)) <= first, (cls.__name__, p, m)
            bfs = [_torch_peak(S.ScheduleLoopedBFS, p, v, m, r) for r in range(p)]
            assert bfs == [inflight_microbatches("gpipe", r, p, 1, m) * v for r in range(p)]
    except (AttributeError, TypeError, KeyError) as exc:  # torch's private rank-order API moved
        pytest.skip(f"torch's schedule internals differ: {exc}")


LAUNCH = ('export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"\n'
          "torchrun --nproc_per_node=8 --nnodes=4 -m torchtitan.train --module llama3 --config llama3_70b \\\n"
          "  --parallelism.tensor_parallel_degree 8 --parallelism.data_parallel_shard_degree 4\n")


def _launch(tmp_path: Path, text: str, model=None):
    path = tmp_path / "launch.sh"
    path.write_text(text)
    notes = ReadNotes()
    return load_native(path, model, "dgx-h100", None, notes=notes), notes.notes


def test_a_03_launch_line_names_its_model_preset(tmp_path: Path):
    prob, notes = _launch(tmp_path, LAUNCH)
    assert prob.model.name == "llama3-70b" and any("--config llama3_70b" in n for n in notes)
    prob, _ = _launch(tmp_path, "MODULE=qwen3 CONFIG=qwen3_32b NGPU=8 ./run_train.sh --training.local_batch_size=1\n")
    assert prob.model.name == "qwen3-32b"
    prob, _ = _launch(tmp_path, LAUNCH, model="llama3-8b")  # --model overrides
    assert prob.model.name == "llama3-8b"


def test_without_a_preset_the_message_names_what_was_found(tmp_path: Path):
    with pytest.raises(UserError, match="launch.sh: --model is required.*--module llama3 --config llama3_debugmodel"):
        _launch(tmp_path, LAUNCH.replace("llama3_70b", "llama3_debugmodel"))
    with pytest.raises(UserError, match="job.toml: --model is required.*flavor 'debugmodel'"):
        _toml(tmp_path, PP.format(schedule="1F1B").replace('"8B"', '"debugmodel"'))


def test_alloc_conf_of_a_launch_line_is_read(tmp_path: Path):
    assert _launch(tmp_path, LAUNCH)[0].train.expandable_segments is True
    inline = LAUNCH.replace('export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"\n',
                            "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,expandable_segments:True ")
    assert _launch(tmp_path, inline)[0].train.expandable_segments is True
    bare = LAUNCH.split("\n", 1)[1]
    assert _launch(tmp_path, bare)[0].train.expandable_segments is None


MX = PP.format(schedule="1F1B").replace("[training]", "converters = [\"mx\"]\n[training]")


def test_mx_on_hopper_names_the_file_and_its_converters(tmp_path: Path):
    with pytest.raises(UserError, match=r'job.toml: model.converters \["mx"\]: MX block scaling .*hopper'):
        _toml(tmp_path, MX)
    assert _toml(tmp_path, MX, cluster="dgx-b200")[0].train.fp8_recipe == "mxfp8"
    assert _toml(tmp_path, MX, flags=TrainerFlags(precision="bf16"))[0].train.fp8_recipe == "mxfp8"  # --precision


MEGATRON = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 "
            "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000 --swiglu "
            "--normalization RMSNorm --micro-batch-size 1 --global-batch-size 8 --bf16 --fp8-format e4m3 "
            "--fp8-recipe mxfp8\n")


def test_megatron_mxfp8_on_hopper_names_the_file_and_flag(tmp_path: Path):
    path = tmp_path / "train.sh"
    path.write_text(MEGATRON)
    with pytest.raises(UserError, match=r"train.sh: --fp8-recipe mxfp8: MX block scaling .*hopper"):
        load_native(path, None, "dgx-h100", None)
    assert load_native(path, None, "dgx-b200", None).train.fp8_recipe == "mxfp8"
    read = load_native(path, None, "dgx-h100", None, TrainerFlags(precision="bf16"))  # check replaces the precision
    assert read.train.fp8_recipe == "mxfp8"
