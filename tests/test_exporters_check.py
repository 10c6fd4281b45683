"""`parplan check` of every file parplan writes reproduces its header (issue 34 section 7).

Each file's header quotes the memory and step time of the stack that runs it and the `parplan check`
line that reproduces them (planner/exporters/pricing.py). These tests run that very line on the
written file and compare with the plan priced independently (tests/test_exporters.expected_estimate):
peak and device bytes within 1%, exit 0 when it fits and 1 when not. They also hold the export's fit
rule: a layout that does not fit the stack running the file exits 1 with one line, unless --force."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from costmodels.hardware_spec import GIB
from planner.cli import app
from planner.exporters import ExportDoesNotFit, export, run_export
from tests.test_exporters import CASES, example, expected_estimate, header_spec, make_doc, moe_model

runner = CliRunner()

# (format, file check reads): every format parplan writes (DeepSpeed: the JSON and its launcher)
FILES = [("megatron", "launch_megatron.sh"), ("slurm", "launch_slurm.sbatch"), ("deepspeed", "ds_config.json"),
         ("deepspeed", "launch_deepspeed.sh"), ("torchrun", "launch_torchrun.sh"),
         ("torchtitan", "torchtitan_0.2.toml"), ("torchtitan", "launch_torchtitan.sh")]
HEADER_OF = {"ds_config.json": "launch_deepspeed.sh"}  # JSON holds no comments: its launcher's header

PLANS = {
    # the plan: sequence 4096 where the preset has 8192; DeepSpeed's stack does not fit it
    "llama3-8b-example": lambda: example("llama3-8b"),
    "8b-seq4096-zero3": CASES["8b-zero3-dp8"],
    "8b-pp2-zero1-full": CASES["8b-pp2-zero1-full"],  # torchtitan runs ZeRO-1 as FSDP2 without resharding
    "8b-tp2-sp-pp4-interleaved": CASES["8b-tp2-interleaved"],  # DeepSpeed refuses tp
    # Megatron's script has no --tp-comm-overlap with sp=0, so check infers megatron-core: the line says --stack nemo
    "8b-nemo-tp2-no-sp": lambda: make_doc(tp=2, sp=False, zero=1, mbs=1, gbs=64,
                                          train={"stack": "nemo", "seq_length": 4096}),
    "8b-torchtitan-eager": lambda: make_doc(zero=3, mbs=1, gbs=64, train={"stack": "torchtitan-eager",
                                                                          "seq_length": 4096}),
    "moe-not-a-preset": lambda: make_doc(moe_model(), nodes=1, ep=4, zero=1, mbs=1, recompute="full"),
    "405b-torchtitan-ends": lambda: make_doc("llama3.1-405b", nodes=64, gbs=512, tp=8, sp=True, pp=16,
                                             stage_layers=[7] + [8] * 14 + [7], mbs=1, zero=1, recompute="full"),
}


@pytest.fixture(scope="module", params=list(PLANS))
def written(request, tmp_path_factory):
    doc = PLANS[request.param]()
    out = tmp_path_factory.mktemp(request.param)
    result = run_export(doc, "all", out, force=True)
    return doc, out, result


def reproduce_args(out: Path, name: str) -> list[str]:
    """The header's `Reproduce: parplan check ...` line as arguments, the file and any MODEL.json made real."""
    text = (out / HEADER_OF.get(name, name)).read_text()
    line = next(line for line in text.splitlines() if "Reproduce: parplan check " in line)
    words = shlex.split(line.split("Reproduce: parplan ", 1)[1])
    words[1] = str(out / name)
    if "MODEL.json" in words:  # not a preset: the Spec line's model, saved to a file
        model = out / "MODEL.json"
        model.write_text(json.dumps(header_spec(text)["model"]))
        words[words.index("MODEL.json")] = str(model)
    return words


@pytest.mark.parametrize("fmt,name", FILES, ids=[n for _, n in FILES])
def test_check_of_each_written_file_gives_its_header(written, fmt, name):
    doc, out, result = written
    if fmt in result.refused:
        pytest.skip(f"{fmt} refuses this plan: {result.refused[fmt]}")
    if not (out / name).exists():  # torchtitan_0.2.toml of a plan 0.2.x cannot run: not written, said in the script
        assert "torchtitan_0.2.toml not written" in (out / "launch_torchtitan.sh").read_text()
        return
    run = runner.invoke(app, reproduce_args(out, name) + ["--json"])
    assert run.exit_code in (0, 1), run.output
    got = json.loads(run.stdout)
    want = expected_estimate(doc, fmt)
    for key in ("peak_bytes", "device_bytes"):
        assert abs(got["memory"][key] - getattr(want.memory, key)) <= 0.01 * getattr(want.memory, key), key
    assert abs(got["time"]["step_s"] - want.time.step_s) <= 0.01 * want.time.step_s
    assert run.exit_code == (0 if want.fits else 1)
    header = (out / HEADER_OF.get(name, name)).read_text()
    assert f"{got['memory']['device_bytes'] / GIB:.2f} GiB per GPU on the device" in header


def test_reproduce_line_names_a_stack_check_would_not_infer(tmp_path):
    doc = PLANS["8b-nemo-tp2-no-sp"]()
    run_export(doc, "all", tmp_path, force=True)
    assert "--stack nemo" in " ".join(reproduce_args(tmp_path, "launch_megatron.sh"))
    assert "--stack" not in reproduce_args(tmp_path, "launch_torchtitan.sh")  # nemo is not torchtitan's: its default
    assert "--stack" not in reproduce_args(tmp_path, "launch_torchrun.sh")  # PARPLAN_TRAIN names nemo


def test_deepspeed_json_takes_the_launchers_sequence(tmp_path):
    """The issue's symptom: check of the DeepSpeed export read the preset's 8192 tokens, not the plan's 4096."""
    doc = example("llama3-8b")
    assert doc["train"]["seq_length"] == 4096 and doc["model"]["seq_length"] == 8192
    export(doc, "deepspeed", tmp_path, force=True)
    run = runner.invoke(app, ["check", str(tmp_path / "ds_config.json"), "--model", "llama3-8b", "--cluster",
                              "dgx-h100", "--json"])
    want = expected_estimate(doc, "deepspeed")
    assert json.loads(run.stdout)["memory"]["peak_bytes"] == want.memory.peak_bytes
    (tmp_path / "launch_deepspeed.sh").unlink()  # without its launcher a DeepSpeed JSON has no sequence length
    alone = runner.invoke(app, ["check", str(tmp_path / "ds_config.json"), "--model", "llama3-8b", "--cluster",
                                "dgx-h100", "--json"])
    assert json.loads(alone.stdout)["memory"]["peak_bytes"] > want.memory.peak_bytes


def test_export_of_a_layout_that_does_not_fit_exits_1(tmp_path):
    """llama3-8b example: fits Megatron-Core (75.0 of 78.6 GiB on the device) but not DeepSpeed (88.2)."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(example("llama3-8b")))
    run = runner.invoke(app, ["export", str(plan), "--format", "deepspeed", "--out", str(tmp_path / "ds")])
    assert run.exit_code == 1 and not (tmp_path / "ds").exists()
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "does not fit under stack deepspeed" in lines[0] and "--force" in lines[0]
    forced = runner.invoke(app, ["export", str(plan), "--format", "deepspeed", "--out", str(tmp_path / "ds"),
                                 "--force"])
    assert forced.exit_code == 0 and "warning: deepspeed written with --force" in forced.stderr
    assert "DOES NOT FIT" in (tmp_path / "ds" / "launch_deepspeed.sh").read_text()
    fits = runner.invoke(app, ["export", str(plan), "--format", "megatron", "--out", str(tmp_path / "mg")])
    assert fits.exit_code == 0


def test_export_all_skips_the_formats_that_do_not_fit(tmp_path):
    doc = example("llama3-8b")
    result = run_export(doc, "all", tmp_path, force=False)
    assert "does not fit under stack deepspeed" in result.refused["deepspeed"]
    assert not (tmp_path / "ds_config.json").exists() and (tmp_path / "launch_megatron.sh").exists()
    nothing = make_doc(zero=3, mbs=2, gbs=128)  # 8192 tokens x 2: no stack fits it
    with pytest.raises(ExportDoesNotFit, match="fits under no format's stack"):
        run_export(nothing, "all", tmp_path / "none", force=False)
    assert not (tmp_path / "none").exists()


def test_plan_export_exits_1_when_the_winner_does_not_fit_the_targets_stack(tmp_path):
    """plan prices the winner with megatron-core (the issue's llama3-8b plan: zero3, mbs 2, 4096 tokens);
    --format deepspeed runs it under DeepSpeed's stack, where it does not fit: exit 1, one line, nothing
    written; --force writes it."""
    args = ["plan", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "32", "--seq-len", "4096",
            "--time-limit", "5", "--top", "1", "--format", "deepspeed", "--save", str(tmp_path / "plan.json")]
    run = runner.invoke(app, args + ["--export", str(tmp_path / "x")])
    assert run.exit_code == 1, run.output
    lines = [line for line in run.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "does not fit under stack deepspeed" in lines[0]
    assert not (tmp_path / "x" / "ds_config.json").exists() and not (tmp_path / "plan.json").exists()
    forced = runner.invoke(app, args + ["--export", str(tmp_path / "x"), "--force"])
    assert forced.exit_code == 0 and (tmp_path / "x" / "ds_config.json").exists()
    assert not expected_estimate(json.loads((tmp_path / "plan.json").read_text()), "deepspeed").fits


@pytest.mark.parametrize("name,edit,message", [
    ("launch_deepspeed.sh", ("--num_nodes 1", "--num_nodes x1"), "--num_nodes 'x1' must be a whole number"),
    ("launch_deepspeed.sh", ("--seq-length 4096", "--seq-length 4k"), "--seq-length '4k' must be a whole number"),
    ("launch_deepspeed.sh", ('"$HERE/ds_config.json"', '"$HERE/other.json"'), "no other.json beside the script"),
    ("launch_torchrun.sh", ("export PARPLAN_TRAIN='{", "export PARPLAN_TRAIN='{{"), "PARPLAN_TRAIN is not JSON"),
    ("launch_torchrun.sh", ("--zero-stage 3", "--zero-stage 7"), "zero"),
    ("launch_torchtitan.sh", ("--nnodes \"$NNODES\"", "--nnodes 2"), "--nnodes 2 but --nodes 1"),
])
def test_bad_edits_of_parplan_scripts_exit_2_with_one_line(tmp_path, name, edit, message):
    export(CASES["8b-zero3-dp8"](), "all", tmp_path, force=True)
    path = tmp_path / name
    text = path.read_text()
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1]))
    run = runner.invoke(app, ["check", str(path), "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1"])
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.exit_code == 2 and len(lines) == 1 and message in lines[0], run.stderr


def test_a_plan_on_part_of_a_node_writes_the_cluster_its_check_lines_name(tmp_path, monkeypatch):
    """`plan --gpus 4` exported: every header's Reproduce line names CLUSTER.json, which is now written beside the
    files (it was not, and torchtitan's and torchrun's launches could not be checked against dgx-h100's 8 GPUs)."""
    out = tmp_path / "out"
    res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "4", "--global-batch", "64",
                              "--framework", "torchtitan", "--export", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "CLUSTER.json").read_text())["gpus_per_node"] == 4
    monkeypatch.chdir(out)
    for name in ("launch_torchtitan.sh", "torchtitan_0.2.toml"):
        line = next(ln for ln in (out / name).read_text().splitlines() if "Reproduce: parplan check " in ln)
        run = runner.invoke(app, shlex.split(line.split("Reproduce: parplan ", 1)[1]) + ["--json"])
        assert run.exit_code == 0, run.output
        assert json.loads(run.stdout)["read"]["cluster"]["num_gpus"] == 4


def test_a_stack_that_is_not_shipped_is_written_as_the_stack_file_its_check_line_names(tmp_path):
    """`--stack-file STACK.yaml` on every header of a plan priced with a user's stack: the file is now written."""
    import hardware_profiles as hp  # noqa: PLC0415

    mine = hp.load_stack("torchtitan").model_dump(mode="json")
    (tmp_path / "mine.json").write_text(json.dumps({**mine, "name": "mystack"}))
    out = tmp_path / "out"
    res = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--framework",
                              "torchtitan", "--stack-file", str(tmp_path / "mine.json"), "--export", str(out)])
    assert res.exit_code == 0, res.output
    assert "--stack-file STACK.yaml" in (out / "launch_torchtitan.sh").read_text()
    assert json.loads((out / "STACK.yaml").read_text())["name"] == "mystack"
