"""`parplan check` on native configs (planner.files.native): exported Megatron scripts, DeepSpeed JSON and
torchtitan 0.2.x TOML read back give the plan's predicted peak memory within 1%; bad inputs give a
UserError naming the flag or key and the value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from costmodels.estimate import estimate
from planner.files import loading
from planner.errors import UserError
from planner.exporters import export
from planner.files.native import detect, load_native, titan_split
from tests.test_exporters import CASES

# (case, format, file, needs --model, torchtitan expresses zero exactly)
ROUND_TRIPS = [
    (case, "megatron", "launch_megatron.sh") for case in CASES
] + [
    (case, "slurm", "launch_slurm.sbatch") for case in ("llama3-70b-example", "mixtral-8x7b-example")
] + [
    ("8b-pp2-zero1-full", "deepspeed", "ds_config.json"), ("8b-zero3-dp8", "deepspeed", "ds_config.json"),
    ("llama3-70b-example", "torchtitan", "torchtitan_0.2.toml"),
    ("mixtral-8x7b-example", "torchtitan", "torchtitan_0.2.toml"),
    ("8b-zero3-dp8", "torchtitan", "torchtitan_0.2.toml"),
    ("8b-tp2-interleaved", "torchtitan", "launch_torchtitan.sh"),  # 0.2.x cannot run it: no TOML written
]


def _model_file(doc: dict, folder: Path) -> str:
    path = folder / "model.json"
    path.write_text(json.dumps(doc["model"]))
    return str(path)


@pytest.mark.parametrize("case,fmt,name", ROUND_TRIPS, ids=[f"{c}-{f}" for c, f, _ in ROUND_TRIPS])
def test_round_trip_peak_memory(case, fmt, name, tmp_path):
    doc = CASES[case]()
    export(doc, fmt, tmp_path / "out", force=False)
    model = None if fmt in ("megatron", "slurm") else _model_file(doc, tmp_path)
    prob = load_native(tmp_path / "out" / name, model, "dgx-h100", None)
    result = estimate(prob.model, prob.cluster, prob.train, prob.layout)
    # the reader picks the config's own stack (its memory semantics differ): compare under that stack
    planned = loading.problem_from_plan(doc, "plan")
    train = planned.train.model_copy(update={"stack": prob.train.stack_spec})
    lay = planned.layout
    if fmt == "torchtitan":  # as the file runs it (planner.exporters.pricing.runs_layout): FSDP2's ZeRO-1 is ZeRO-2
        lay = lay.model_copy(update={"sp": lay.tp > 1, "zero": 2 if lay.zero == 1 else lay.zero})
    want = estimate(planned.model, planned.cluster, train, lay).memory.peak_bytes
    assert abs(result.memory.peak_bytes - want) <= 0.01 * want
    assert prob.cluster.num_gpus == doc["cluster"]["num_nodes"] * doc["cluster"]["gpus_per_node"]
    assert result.layout.dp == doc["layout"]["dp"]


def test_detection(tmp_path):
    assert detect(Path("a.toml"), "") == "torchtitan"
    assert detect(Path("a.json"), "{}") == "deepspeed"
    assert detect(Path("run.sh"), "torchrun pretrain_gpt.py --num-layers 2") == "megatron"
    with pytest.raises(UserError, match="not a plan file"):
        detect(Path("notes.txt"), "hello")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


MEGATRON_ARGS = """# a hand-written argument file
--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096
--vocab-size 32000 --micro-batch-size 1 --global-batch-size 64 --bf16 --tensor-model-parallel-size 2
"""


def test_megatron_argument_file(tmp_path):
    path = _write(tmp_path, "args.txt", MEGATRON_ARGS)
    prob = load_native(path, None, "dgx-h100", 1)
    assert prob.layout.tp == 2 and prob.model.num_layers == 32 and prob.train.grad_dtype == "fp32"
    with pytest.raises(UserError, match="--cluster is required"):
        load_native(path, None, None, None)


@pytest.mark.parametrize("change,message", [
    (("--num-layers 32", "--num-layers thirty"), "--num-layers 'thirty'"),
    (("--bf16", "--fp16 --bf16"), "--bf16 and --fp16"),
    (("--vocab-size 32000", ""), "gives no --vocab-size; add --vocab-size to the script or give --model"),
    (("--bf16", "--bf16 --recompute-granularity partial"), "--recompute-granularity 'partial'"),
    (("--bf16", "--bf16 --normalization BatchNorm"), "--normalization 'BatchNorm'"),
    (("--bf16", "--bf16 --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*3|t*3L'"),
     "--pipeline-model-parallel-layout"),
])
def test_megatron_errors_name_the_flag(tmp_path, change, message):
    path = _write(tmp_path, "run.sh", MEGATRON_ARGS.replace(*change))
    with pytest.raises(UserError, match=message.replace("*", r"\*").replace("|", r"\|")):
        load_native(path, None, "dgx-h100", 1)


def test_torchrun_nodes_overridden(tmp_path, capsys):
    """The command line wins over the script (issue 34): --nodes 3 replaces torchrun --nnodes 2, said on stderr."""
    text = f"torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py {MEGATRON_ARGS.splitlines()[1]} " \
           f"{MEGATRON_ARGS.splitlines()[2]}"
    path = _write(tmp_path, "run.sh", text)
    assert load_native(path, None, "dgx-h100", None).cluster.num_nodes == 2
    assert "overrides" not in capsys.readouterr().err
    assert load_native(path, None, "dgx-h100", 3).cluster.num_nodes == 3
    assert "--nodes 3 overrides the script's 2" in capsys.readouterr().err


DS = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
      "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}


def test_deepspeed_derives_nodes_and_checks_batch(tmp_path):
    path = _write(tmp_path, "ds.json", json.dumps(DS))
    prob = load_native(path, "llama3-8b", "dgx-h100", None)
    assert prob.cluster.num_gpus == 8 and prob.layout.zero == 2 and prob.layout.mbs == 2
    with pytest.raises(UserError, match="--model is required"):
        load_native(path, None, "dgx-h100", None)
    with pytest.raises(UserError, match="train_batch_size=64 but"):
        load_native(path, "llama3-8b", "dgx-h100", 2)
    # "auto" takes the Trainer's default (GAS 1), which then breaks the explicit train_batch_size as the
    # Trainer's own mismatch check would; parameter offload needs ZeRO-3; both 16-bit modes on is refused
    for key, value, message in [("gradient_accumulation_steps", "auto", r"= 2\*1\*8 = 16"),
                                ("zero_optimization", {"stage": 2, "offload_param": {"device": "cpu"}},
                                 "offload_param.device='cpu' needs zero_optimization.stage 3"),
                                ("fp16", {"enabled": True}, "both true")]:
        bad = _write(tmp_path, "bad.json", json.dumps({**DS, key: value}))
        with pytest.raises(UserError, match=message):
            load_native(bad, "llama3-8b", "dgx-h100", 1)
    pipe = _write(tmp_path, "pipe.json", json.dumps({**DS, "pipeline": {"stages": 2}}))
    with pytest.raises(UserError, match="stage=2 with pipeline.stages=2"):
        load_native(pipe, "llama3-8b", "dgx-h100", 2)


def test_torchtitan_errors(tmp_path):
    base = "[parallelism]\ndata_parallel_shard_degree = 8\n[training]\nlocal_batch_size = 1\nseq_len = 4096\n"
    path = _write(tmp_path, "job.toml", base)
    prob = load_native(path, "llama3-8b", "dgx-h100", None)
    # torchtitan 0.2's defaults: FSDP, activation_checkpoint mode selective with selective_ac_option "2" (every
    # 2nd layer checkpointed): full recompute of 16 of the 32 layers
    lay = prob.layout
    assert (lay.zero, lay.recompute, lay.recompute_method, lay.recompute_num_layers) == (3, "full", "block", 16)
    bad = _write(tmp_path, "bad.toml", base.replace("= 8", "= 3"))
    with pytest.raises(UserError, match="must equal the 8 GPUs"):
        load_native(bad, "llama3-8b", "dgx-h100", 1)
    with pytest.raises(UserError, match="invalid TOML"):
        load_native(_write(tmp_path, "broken.toml", "[parallelism\n"), "llama3-8b", "dgx-h100", 1)


def test_titan_split_matches_torchtitan():
    # values from torchtitan 0.2.2's generate_llm_fqn_per_model_part, run on these arguments; by default
    # the embedding and the output count as one layer each
    assert titan_split(4, 32, 1, 1) == [8, 9, 8, 7]
    assert titan_split(4, 32, 0, 0) == [8, 8, 8, 8]
    assert titan_split(6, 80, 1, 1) == [13, 14, 14, 14, 13, 12]
    assert titan_split(8, 126, 1, 1) == [15, 16, 16, 16, 16, 16, 16, 15]


def test_a_plan_file_renamed_without_its_suffix_is_still_a_plan(tmp_path):
    """`check plan_noext`: the plan --save writes, renamed without .json, was read as a DeepSpeed config (exit 2)."""
    from planner.files.native import is_native  # noqa: PLC0415

    saved = Path(__file__).resolve().parents[1] / "docs" / "examples" / "llama3-8b-plan.json"
    renamed = tmp_path / "plan_noext"
    renamed.write_text(saved.read_text())
    script = tmp_path / "run"
    script.write_text("torchrun pretrain_gpt.py --num-layers 2\n")
    assert not is_native(renamed) and is_native(script)
