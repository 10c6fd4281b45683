"""The Megatron launch parplan writes runs the FP8/FP4 recipe its plan priced, and `check` reads it back: before,
every FP8 export said only `--fp8-format hybrid` (Megatron's delayed/tensorwise scaling), so an nvfp4 plan of
Llama 3 8B on 16 B200 priced at 1.40 s was checked at 1.93 s. Megatron's recipes: megatron-core 0.19.2
enums.Fp8Recipe (delayed, tensorwise, mxfp8, blockwise) and TransformerConfig.fp4 (--fp4-format e2m1,
--fp4-recipe nvfp4); rowwise is torchao's, which Megatron does not run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
PLAN = ["plan", "llama3-8b", "--nodes", "2", "--global-batch", "128", "--precision", "fp8", "--framework", "megatron",
        "--top", "1"]


@pytest.mark.parametrize("recipe,cluster,flags", [
    ("nvfp4", "dgx-b200", "--fp4-format e2m1 --fp4-recipe nvfp4"),
    ("mxfp8", "dgx-b200", "--fp8-format hybrid --fp8-recipe mxfp8"),
    ("blockwise", "dgx-h100", "--fp8-format hybrid --fp8-recipe blockwise"),
])
def test_the_export_runs_the_recipe_priced_and_check_reads_it_back(tmp_path: Path, recipe, cluster, flags):
    out = tmp_path / "out"
    made = runner.invoke(app, [*PLAN, "--cluster", cluster, "--fp8-recipe", recipe, "--export", str(out),
                               "--format", "megatron"])
    assert made.exit_code == 0, made.stderr
    script = (out / "launch_megatron.sh").read_text()
    assert flags in " ".join(script.replace("\\\n", " ").split())
    checked = runner.invoke(app, ["check", str(out / "launch_megatron.sh"), "--cluster", cluster, "--nodes", "2",
                                  "--json"])
    assert checked.exit_code == 0, checked.stderr
    read = json.loads(checked.stdout)["read"]["train"]
    assert (read["precision"], read["fp8_recipe"]) == ("fp8", recipe)


def test_rowwise_is_not_written_as_a_megatron_launch(tmp_path: Path):
    made = runner.invoke(app, [*PLAN, "--cluster", "dgx-h100", "--fp8-recipe", "rowwise", "--export",
                               str(tmp_path / "out"), "--format", "megatron"])
    assert made.exit_code == 2 and "fp8_recipe=rowwise" in made.stderr and "torchao" in made.stderr


@pytest.mark.parametrize("flags,needle", [
    ("--bf16 --fp4-format e2m1 --fp8-format hybrid", "--fp4-format and --fp8-format are both given"),
    ("--bf16 --fp4-format e2m1 --fp4-recipe custom", "--fp4-recipe custom"),
    ("--fp4-format e2m1", "without --bf16 or --fp16"),
])
def test_fp4_flags_megatron_refuses_are_refused(tmp_path: Path, flags, needle):
    path = tmp_path / "train.sh"
    path.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
                    "--num-attention-heads 8 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
                    f"--global-batch-size 8 --vocab-size 32000 --tokenizer-type NullTokenizer {flags}\n")
    checked = runner.invoke(app, ["check", str(path), "--cluster", "dgx-b200"])
    assert checked.exit_code == 2 and needle in checked.stderr


@pytest.mark.parametrize("extra,needle", [
    (["--precision", "fp32"], "megatron: bf16, fp16, fp8; deepspeed: bf16, fp16; torchtitan: bf16; fsdp: bf16, fp16"),
    (["--precision", "fp8", "--framework", "deepspeed"], "(deepspeed: bf16, fp16)"),
])
def test_a_precision_no_framework_writes_is_named_not_blamed_on_memory(extra, needle):
    """Every layout was refused by the frameworks' precision rule, and plan answered "no stage split fits the
    78.6 GiB device budget" (exit 1)."""
    made = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--global-batch", "128",
                               *extra])
    assert made.exit_code == 2 and needle in made.stderr and "parplan estimate" in made.stderr


def test_fp8_with_every_framework_searched_still_plans():
    """`--framework any` searches the frameworks that train in fp8 (Megatron); the others' layouts are left out,
    not a refusal of the whole plan."""
    made = runner.invoke(app, ["plan", "llama3-8b", "--cluster", "dgx-h100", "--global-batch", "16", "--precision",
                               "fp8", "--top", "1", "--json"])
    assert made.exit_code == 0 and json.loads(made.stdout)["plans"][0]["layout"]


def test_an_fp4_format_megatron_does_not_define_is_refused(tmp_path: Path):
    """TransformerConfig.fp4 is Literal['e2m1']; another value was priced as nvfp4."""
    path = tmp_path / "train.sh"
    path.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
                    "--num-attention-heads 8 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
                    "--global-batch-size 8 --vocab-size 32000 --tokenizer-type NullTokenizer --bf16 --fp4-format e3m0\n")
    checked = runner.invoke(app, ["check", str(path), "--cluster", "dgx-b200"])
    assert checked.exit_code == 2 and "--fp4-format 'e3m0'" in checked.stderr
    path.write_text(path.read_text().replace("e3m0", "e2m1"))
    h100 = runner.invoke(app, ["check", str(path), "--cluster", "dgx-h100"])
    assert h100.exit_code == 2 and "train.sh: --fp4-format: NVFP4 needs FP4 tensor cores" in h100.stderr
