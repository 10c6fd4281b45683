"""Gaps in reading Megatron-LM launch scripts that a tester found (each test fails without its fix):
#SBATCH -N, flags Megatron's argparse refuses (typos, other names), the layout Megatron refuses
(query groups vs tp), NeMo hydra launchers, FP8 on a GPU without it. Sources: megatron-core 0.19.2
megatron/training/arguments.py (vendored as planner/frameworks/megatron/mcore_flags.py),
megatron/core/transformer/transformer_config.py lines 1323-1345, sbatch(1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_check import run_check as _check, write_config as _write

from planner.errors import UserError
from planner.files.native import load_native
from planner.files.shell_sbatch import fewest_nodes, option_pairs
from planner.files.shellread import read_script
from planner.frameworks.megatron import flags as mf
from planner.frameworks.megatron import known_flags, mcore_flags

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "configs"
UNKNOWN = "not a Megatron-LM flag"

MIXTRAL = """#!/bin/bash
{sbatch}
#SBATCH --gpus-per-node=8
MODEL="--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \\
  --group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --swiglu \\
  --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights \\
  --disable-bias-linear --vocab-size 32000 --tokenizer-type NullTokenizer"
MOE="--num-experts 8 --moe-router-topk 2 --moe-grouped-gemm --moe-token-dispatcher-type alltoall \\
  --expert-model-parallel-size 4 --moe-aux-loss-coeff 1e-2"
TRAIN="--micro-batch-size 1 --global-batch-size 256 --bf16 --tensor-model-parallel-size 2 \\
  --pipeline-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer"
srun python -u pretrain_gpt.py $MODEL $MOE $TRAIN
"""

DENSE = """#!/bin/bash
torchrun --nproc_per_node 8 pretrain_gpt.py \\
    --tensor-model-parallel-size {tp} {extra} \\
    --num-layers 32 --hidden-size 4096 --num-attention-heads {heads} \\
    --seq-length 2048 --max-position-embeddings 2048 \\
    --micro-batch-size 1 --global-batch-size 64 --bf16 \\
    --vocab-size 32000 --tokenizer-type NullTokenizer
"""


def _errors(message: str) -> list[str]:
    return [line for line in message.splitlines() if line.startswith("parplan: error")]


# ---- 1. sbatch's node count -----------------------------------------------------------------------

@pytest.mark.parametrize("line", ["#SBATCH -N 4", "#SBATCH -N4", "#SBATCH --nodes=4", "#SBATCH --nodes 4"])
def test_sbatch_node_count_in_every_spelling(tmp_path, line):
    prob = load_native(_write(tmp_path, MIXTRAL.format(sbatch=line)), None, "dgx-h100", None)
    assert prob.cluster.num_nodes == 4 and prob.layout.ep == 4


def test_sbatch_node_range_takes_the_fewest_and_says_so(tmp_path, capsys):
    prob = load_native(_write(tmp_path, MIXTRAL.format(sbatch="#SBATCH --nodes=2-4")), None, "dgx-h100", None)
    assert prob.cluster.num_nodes == 2
    assert "#SBATCH --nodes=2-4: sbatch allocates one of these node counts, at least 2" in capsys.readouterr().err


def test_no_node_count_anywhere_is_said_not_a_bare_gpu_count(tmp_path):
    code, message = _check(_write(tmp_path, MIXTRAL.format(sbatch="")), "--cluster", "dgx-h100")
    assert code == 2 and len(_errors(message)) == 1
    assert "needs a multiple of 16 GPUs" in message and "no node count" in message and "--nodes" in message


@pytest.mark.parametrize("value, fewest", [("4", 4), ("2-4", 2), ("1,4,8", 1), ("3-15:4", 3), ("$N", None),
                                           ("<NODES>", None), ("", None)])
def test_fewest_nodes(value, fewest):
    assert fewest_nodes(value) == fewest


@pytest.mark.parametrize("value", ["-3", "2-", "0", "1,,2", "99999999999999"])
def test_a_node_count_sbatch_refuses_is_bad_input(value):
    with pytest.raises(UserError, match=r"#SBATCH --nodes="):
        fewest_nodes(value)


def test_sbatch_short_options_and_command_line():
    assert option_pairs(["-N4", "-n", "32", "-J", "x", "--exclusive"]) == [
        ("--nodes", "4"), ("--ntasks", "32"), ("--job-name", "x"), ("--exclusive", "")]
    sh = read_script("sbatch -N2 --exclusive job.sh\nN=$SLURM_NNODES\n", every_branch=False)
    assert sh.sbatch["--nodes"] == "2"
    sh = read_script("#SBATCH -N 3\nN=$SLURM_NNODES\n", every_branch=False)
    assert sh.scalars["N"] == "3"


# ---- 2. and 3. flags Megatron's argparse refuses --------------------------------------------------

def test_vendored_flags_name_their_source_and_match_megatron_core_0_19_2():
    doc = mcore_flags.__doc__
    assert "megatron-core 0.19.2" in doc and "megatron/training/arguments.py" in doc
    assert len(mcore_flags.FLAGS) == 847 and mcore_flags.SWITCHES <= mcore_flags.FLAGS
    assert {"--tensor-model-parallel-size", "--num-virtual-stages-per-pipeline-rank", "--fp8-format"} <= \
        mcore_flags.FLAGS
    assert "--virtual-pipeline-model-parallel-size" not in mcore_flags.FLAGS  # arguments.py: no CLI argument


def test_misspelled_layout_flag_is_bad_input_naming_the_flag_meant(tmp_path):
    path = _write(tmp_path, DENSE.format(tp=1, heads=32, extra="--tensor-model-paralel-size 8"))
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 2 and len(_errors(message)) == 1
    assert "--tensor-model-paralel-size 8: not a Megatron-LM flag (did you mean --tensor-model-parallel-size?)" \
        in message and "megatron-core 0.19.2 would refuse it at launch" in message and "run.sh" in message


@pytest.mark.parametrize("extra, meant", [("--tensor_model_parallel_size 2", "--tensor-model-parallel-size"),
                                          ("--micro-bach-size 2", "--micro-batch-size"),
                                          ("--virtual-pipeline-model-parallel-size 2",
                                           "--num-virtual-stages-per-pipeline-rank")])
def test_other_spellings_of_priced_flags_are_bad_input(tmp_path, extra, meant):
    code, message = _check(_write(tmp_path, DENSE.format(tp=2, heads=32, extra=extra)), "--cluster", "dgx-h100")
    assert code == 2 and f"did you mean {meant}?" in message


def test_unknown_flag_is_one_warning_and_the_check_goes_on(tmp_path):
    path = _write(tmp_path, DENSE.format(tp=2, heads=32, extra="--totally-unknown-flag 7 --lr-decay-styl cosine"))
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code in (0, 1)
    assert ("--totally-unknown-flag is not a Megatron-LM flag; Megatron-LM as of megatron-core 0.19.2 would refuse it "
            "at launch (an older release may have had it); ignored" in message)
    assert "--lr-decay-styl is not a Megatron-LM flag (did you mean --lr-decay-style?)" in message


def test_json_carries_the_warnings_the_reader_printed(tmp_path):
    """`check --json`'s "warnings" holds the reader's stderr lines (a flag Megatron would refuse): a CI script that
    reads only the document sees them; the text output still prints each once."""
    import json  # noqa: PLC0415

    from typer.testing import CliRunner  # noqa: PLC0415

    from planner.cli import app  # noqa: PLC0415

    path = _write(tmp_path, DENSE.format(tp=2, heads=32, extra="--lr-decay-styl cosine"))
    doc = json.loads(CliRunner().invoke(app, ["check", str(path), "--cluster", "dgx-h100", "--json"]).stdout)
    assert [w for w in doc["warnings"] if "--lr-decay-styl is not a Megatron-LM flag" in w] == \
        [f"{path}: --lr-decay-styl is not a Megatron-LM flag (did you mean --lr-decay-style?); Megatron-LM as of "
         "megatron-core 0.19.2 would refuse it at launch (an older release may have had it); ignored"]
    _, message = _check(path, "--cluster", "dgx-h100")
    assert message.count("--lr-decay-styl is not") == 1


def test_virtual_stages_flag_of_megatron_core_is_read(tmp_path):
    extra = "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"
    text = DENSE.format(tp=2, heads=32, extra=extra)
    prob = load_native(_write(tmp_path, text), None, "dgx-h100", 1)
    assert (prob.layout.pp, prob.layout.vpp) == (2, 2)


def test_argument_file_is_vetted_too(tmp_path):
    path = _write(tmp_path, "--num-layers 24\n--hidden-size 1024\n--num-attention-heads 16\n--seq-length 1024\n"
                            "--micro-batch-size 1\n--bf16\n--tensor-model-paralel-size 2\n", "args.txt")
    with pytest.raises(UserError, match="did you mean --tensor-model-parallel-size"):
        mf.read_megatron(path.read_text(), path)


def _public_scripts() -> list[Path]:
    return sorted(p for p in CONFIGS.iterdir() if p.suffix in (".sh", ".slurm"))


@pytest.mark.parametrize("path", _public_scripts(), ids=lambda p: p.name)
def test_public_scripts_give_no_unknown_flag(path):
    """Real public scripts (tests/data/configs): Megatron-LM, Megatron-DeepSpeed, 2021 Megatron ran them."""
    args = mf.read_megatron(path.read_text(), path)
    assert not [w for w in args.shell.warnings if UNKNOWN in w]
    if args.launcher is not None:
        assert known_flags.unknown(args.pairs) == []


def test_every_flag_the_reader_reads_is_accepted():
    """A flag parplan prices is never warned of as unknown (megatron/*.py's a.int/a.str/a.has literals)."""
    read = set()
    for module in (ROOT / "planner" / "frameworks" / "megatron").glob("*.py"):
        read |= set(re.findall(r"""a\.(?:int|str|has|require_int)\(["'](--[A-Za-z0-9_-]+)""", module.read_text()))
    assert read and not read - known_flags.ACCEPTED


def test_parplans_own_megatron_exports_give_no_unknown_flag(tmp_path):
    from planner.exporters import export
    from tests.test_exporters import CASES

    for name, case in CASES.items():
        out = tmp_path / name
        export(case(), "megatron", out, force=False)
        script = out / "launch_megatron.sh"
        args = mf.read_megatron(script.read_text(), script)
        assert known_flags.unknown(args.pairs) == [], name


# ---- 5. query groups and tp, as megatron-core 0.19.2 checks them ----------------------------------

def _gqa(tp: int, heads: int, groups: int) -> str:
    return DENSE.format(tp=tp, heads=heads, extra=f"--group-query-attention --num-query-groups {groups} "
                                                  "--kv-channels 128")


@pytest.mark.parametrize("tp, heads, groups, needle", [
    (16, 96, 12, "--num-query-groups 12 is neither a multiple nor a divisor of --tensor-model-parallel-size 16"),
    (3, 32, 32, "--num-attention-heads 32 is not a multiple of --tensor-model-parallel-size 3"),
    (3, 48, 48, "the MLP width (4 x --hidden-size) 16384 is not divisible by --tensor-model-parallel-size 3")])
def test_a_split_megatron_refuses_names_both_flags_and_a_divisor_runs(tmp_path, tp, heads, groups, needle):
    """transformer_config.py lines 1323-1345 refuse these; they accept 8 query groups on tp 16 (a divisor:
    attention.py lines 353-358 replicate each KV head over 2 ranks), which is priced."""
    code, message = _check(_write(tmp_path, _gqa(tp, heads, groups)), "--cluster", "dgx-h100", "--nodes", "6")
    assert code == 2 and needle in message and "run.sh" in message and len(_errors(message)) == 1
    prob = load_native(_write(tmp_path, _gqa(16, 64, 8), "ok.sh"), None, "dgx-h100", 2)
    assert (prob.layout.tp, prob.model.num_kv_heads) == (16, 8)


# ---- 7. NeMo hydra launchers ----------------------------------------------------------------------

NEMO = """#!/bin/bash
python /opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py \\
    --config-path=/opt/NeMo/conf --config-name=megatron_gpt_config \\
    trainer.devices=8 trainer.num_nodes=2 model.micro_batch_size=1 \\
    model.tensor_model_parallel_size=4 model.pipeline_model_parallel_size=2 model.sequence_parallel=True \\
    model.num_layers=40 model.hidden_size=5120 model.num_attention_heads=40
"""


def test_nemo_hydra_launcher_is_refused_naming_what_is_read(tmp_path):
    code, message = _check(_write(tmp_path, NEMO), "--cluster", "dgx-h100")
    assert code == 2 and len(_errors(message)) == 1
    assert "NeMo hydra launcher" in message and "pretrain_gpt.py" in message
    assert "--layout tp=4,pp=2,mbs=1,sp=1" in message and "--num-attention-heads is missing" not in message


# ---- 8. FP8 on a GPU without it -------------------------------------------------------------------

def test_fp8_on_a100_names_the_file_and_the_flag(tmp_path):
    path = _write(tmp_path, DENSE.format(tp=2, heads=32, extra="--fp8-format hybrid"))
    code, message = _check(path, "--cluster", "dgx-a100")
    assert code == 2 and len(_errors(message)) == 1
    assert "run.sh: --fp8-format hybrid: gpu 'a100-80gb'" in message and "no fp8 peak" in message
    code, message = _check(path, "--cluster", "dgx-a100", "--precision", "bf16")
    assert code in (0, 1), message


def test_cpu_offloading_num_layers_alone_turns_offload_on(tmp_path):
    """megatron-core 0.19.2 has no --cpu-offloading flag: arguments.py lines 1869-1870."""
    text = DENSE.format(tp=2, heads=32, extra="--cpu-offloading-num-layers 4")
    prob = load_native(_write(tmp_path, text), None, "dgx-h100", 1)
    assert prob.train.activation_offload_layers == 4


def test_a_node_option_without_a_count_is_bad_input(tmp_path):
    """`#SBATCH -N -3` reads -N with no value (the next word is an option), which sbatch refuses; it was
    taken for no node count at all, and the run priced on the cluster's default size."""
    code, message = _check(_write(tmp_path, MIXTRAL.format(sbatch="#SBATCH -N -3")), "--cluster", "dgx-h100")
    assert code == 2 and "#SBATCH --nodes/-N is given without a node count" in message


def test_a_layout_rule_the_flags_break_names_the_file(tmp_path):
    """Megatron asserts an interleaved schedule's micro-batch count divides by pp; check says which file set it."""
    extra = "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"
    path = _write(tmp_path, DENSE.format(tp=2, heads=32, extra=extra).replace("--global-batch-size 64",
                                                                              "--global-batch-size 6"))
    code, message = _check(path, "--cluster", "dgx-h100", "--nodes", "1")
    assert code == 2 and f"{path}: interleaved schedule (vpp=2) needs num_microbatches=" in message


def test_model_over_a_script_says_it_replaces_the_shape_flags(tmp_path):
    code, message = _check(_write(tmp_path, DENSE.format(tp=2, heads=32, extra="")), "--cluster", "dgx-h100",
                           "--model", "llama2-7b")
    assert code in (0, 1)
    assert "--model llama2-7b overrides the script's model flags (--num-layers 32, --hidden-size 4096, ...)" in message


HEREDOC = """#!/bin/bash
NODES=4
sbatch {opts}<<{quote}EOT{quote}
#!/bin/bash
#SBATCH --nodes=$NODES
#SBATCH --gpus-per-node=8
srun python pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 \\
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 2048 --micro-batch-size 1 \\
  --global-batch-size 64 --bf16 --vocab-size 32000 --tokenizer-type NullTokenizer
EOT
"""


def test_sbatch_here_document_directives_are_read_after_expansion(tmp_path):
    """An unquoted `sbatch <<EOT` body is expanded by the submitting shell before sbatch reads its #SBATCH lines;
    a quoted one is not, and an sbatch command-line option wins over both."""
    def nodes(opts: str, quote: str) -> int:
        path = _write(tmp_path, HEREDOC.format(opts=opts, quote=quote))
        return load_native(path, None, "dgx-h100", None).cluster.num_nodes

    assert nodes("", "") == 4
    assert nodes("--nodes=8 ", "") == 8
    with pytest.raises(UserError, match="give --nodes N"):
        nodes("", "'")
