"""The launch-script reader (planner.files.shellread / shell_tokens / shell_expand / shell_eval): what bash
would make of the constructs launch scripts use, hand-worked against bash's rules (bash(1): Parameter
Expansion, Word Splitting, Arithmetic Expansion, Here Documents, Conditional Expressions)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import UserError
from planner.frameworks.megatron import vocab as mv
from planner.frameworks.megatron.flags import read_megatron
from planner.files.native import load_native
from planner.files.shellread import read_script


def _cmd(text: str, **kw) -> list[str]:
    sh = read_script(text, every_branch=False, **kw)
    return sh.commands[-1]


def test_unquoted_expansion_is_split_quoted_is_not():
    text = 'GPT_ARGS="--num-layers 32  --hidden-size 8"\n'
    assert _cmd(text + "python pretrain_gpt.py $GPT_ARGS") == ["python", "pretrain_gpt.py", "--num-layers", "32",
                                                              "--hidden-size", "8"]
    assert _cmd(text + 'python pretrain_gpt.py "$GPT_ARGS"')[2] == "--num-layers 32  --hidden-size 8"


def test_array_items_holding_a_flag_and_its_value():
    """mlm_llama3_8b_fp8.sh: DTYPE_ARGS+=("--fp8-format hybrid" ...) expanded unquoted: argparse sees two words."""
    text = 'A=(--bf16)\nA+=("--fp8-format hybrid" "--vocab-size 50304")\n'
    assert _cmd(text + "torchrun x.py ${A[@]}")[2:] == ["--bf16", "--fp8-format", "hybrid", "--vocab-size", "50304"]
    assert _cmd(text + 'torchrun x.py "${A[@]}"')[2:] == ["--bf16", "--fp8-format hybrid", "--vocab-size 50304"]
    assert _cmd('E=()\ntorchrun x.py "${E[@]}" end') == ["torchrun", "x.py", "end"]


def test_parameter_expansion_forms():
    sh = read_script('A=${UNSET:-"a b"}\nB=${B:=7}\nC=$(( (2+6)*4 / 2 ))\nD=${1:-first}\nE=${2:-second}\n'
                     'F=${SET:+alt}\nSET=1\nG=${SET:+alt}\nH=${#A}\n', every_branch=False, args=["one"])
    got = {k: sh.scalars[k] for k in "ABCDEFGH"}
    assert got == {"A": "a b", "B": "7", "C": "16", "D": "one", "E": "second", "F": "", "G": "alt", "H": "3"}


def test_unknown_stays_as_written():
    sh = read_script("N=$SLURM_JOB_ID\nM=$(hostname)\nK=$((X*2))", every_branch=False)
    assert (sh.scalars["N"], sh.scalars["M"], sh.scalars["K"]) == ("$SLURM_JOB_ID", "$(hostname)", "$((X*2))")


def test_if_elif_on_known_values():
    text = ('SIZE=3.6B\nif [ ${SIZE} == "1.7B" ]; then\n  TP=1\nelif [ ${SIZE} == "3.6B" ]; then\n  TP=2\n'
            'else\n  TP=8\nfi\n[[ "$TP" == 2 ]] && OK=yes || OK=no\n'
            'if [ "$TP" -gt 1 ] && [ -n "$SIZE" ]; then BIG=1; fi\n')
    sh = read_script(text, every_branch=False)
    assert (sh.scalars["TP"], sh.scalars["OK"], sh.scalars.get("BIG")) == ("2", "yes", "1")
    assert sh.warnings == []


def test_undecidable_condition_takes_no_branch_and_warns_once():
    text = 'if [ -f "$X" ]; then\n  TP=4\nfi\nif [ ! -f a.py ]; then\n  echo missing\n  exit 1\nfi\nTP=${TP:-1}\n'
    sh = read_script(text, every_branch=False)
    assert sh.scalars["TP"] == "1" and not sh.exited
    assert len(sh.warnings) == 1 and "line 1" in sh.warnings[0] and "no branch taken" in sh.warnings[0]


def test_loops_are_skipped_with_a_warning_and_exit_stops():
    sh = read_script("for i in 1 2; do\n  N=$i\ndone\nA=1\nexit 0\nA=2\n", every_branch=False)
    assert sh.scalars == {"A": "1"} and "for loop" in sh.warnings[0]


def test_source_beside_the_script(tmp_path):
    (tmp_path / "CONFIG.sh").write_text('PARAMS="--num-layers ${NLS}"\n')
    script = tmp_path / "run.sh"
    script.write_text("NLS=24\n. `pwd`/CONFIG.sh\nsource $(dirname $0)/missing.sh\npython x.py $PARAMS\n")
    sh = read_script(script.read_text(), script, every_branch=False)
    assert sh.commands[-1] == ["python", "x.py", "--num-layers", "24"]
    assert len(sh.warnings) == 1 and "missing.sh" in sh.warnings[0]


def test_source_never_reads_outside_the_script_folder(tmp_path):
    (tmp_path / "secret.sh").write_text("X=1\n")
    inner = tmp_path / "sub"
    inner.mkdir()
    sh = read_script("source ../secret.sh\n", inner / "run.sh", every_branch=False)
    assert "X" not in sh.scalars and "not found beside the script" in sh.warnings[0]


def test_self_sourcing_script_is_bounded(tmp_path):
    script = tmp_path / "loop.sh"
    script.write_text("A=x$A\nsource loop.sh\n")
    sh = read_script(script.read_text(), script, every_branch=False)
    assert len(sh.scalars["A"]) <= 8 and any("nested" in w for w in sh.warnings)


def test_slurm_variables_from_sbatch_lines():
    sh = read_script("#!/bin/bash\n#SBATCH --nodes=3\n#SBATCH --gres=gpu:4\nN=$SLURM_NNODES\nJ=$SLURM_JOB_NUM_NODES\n"
                     "G=$SLURM_GPUS_ON_NODE\n", every_branch=False)
    assert (sh.scalars["N"], sh.scalars["J"], sh.scalars["G"]) == ("3", "3", "4")


def test_heredoc_configs_are_kept_expanded():
    text = ('MBS=2\nF=./ds.json\ncat <<EOT > $F\n{"mbs": $MBS,\n "x": "$(date)"}\nEOT\n'
            "cat <<'RAW' > raw.txt\n$MBS\nRAW\ncat <<-TAB > t\n\tA $MBS\n\tTAB\nB=1\n")
    sh = read_script(text, every_branch=False)
    assert sh.files == {"./ds.json": '{"mbs": 2,\n "x": "$(date)"}\n', "raw.txt": "$MBS\n", "t": "A 2\n"}
    assert sh.scalars["B"] == "1"


def test_bash_c_and_sbatch_heredoc_run_as_child_scripts():
    text = ('CMD="pretrain_gpt.py --num-layers 2"\nL="python -m torch.distributed.run --nnodes 2"\n'
            'srun --jobid 1 bash -c "$L --node_rank \\$SLURM_PROCID $CMD"\n'
            'sbatch --nodes=5 <<EOF\n#!/bin/bash\nsrun torchrun b.py ${CMD}\nEOF\n')
    sh = read_script(text, every_branch=False)
    assert ["python", "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", "$SLURM_PROCID",
            "pretrain_gpt.py", "--num-layers", "2"] in sh.commands
    assert ["srun", "torchrun", "b.py", "pretrain_gpt.py", "--num-layers", "2"] in sh.commands
    assert sh.sbatch["--nodes"] == "5"


def test_bloom_launch_is_found_through_bash_c():
    """bs_tr11_176B.slurm: python load_ratios.py runs first; the launch is python -u -m torch.distributed.run
    inside `srun ... bash -c "$LAUNCHER --node_rank \\$SLURM_PROCID $CMD"`; single quotes inside GPT_ARGS
    are removed by that second parse, as bash does."""
    from pathlib import Path
    path = Path(__file__).parent / "data" / "configs" / "bs_tr11_176B.slurm"
    a = read_megatron(path.read_text(), path)
    assert a.launcher == "torchrun" and a.flags["--num-layers"] == "70"
    assert a.flags["--pp-partition-method"] == "type:transformer|embedding"
    assert ("--nnodes", "24") in [(f, v) for f, v in zip(a.torchrun, a.torchrun[1:])]


def test_statement_and_word_bounds_still_hold():
    with pytest.raises(UserError, match="bounded"):
        read_script("A=x\n" + "A=$A$A\n" * 40, every_branch=False)
    with pytest.raises(UserError, match="unclosed"):
        read_script('A="x\n', every_branch=False)
    with pytest.raises(UserError, match="never ends"):
        read_script("cat <<EOT\nbody\n", every_branch=False)


@pytest.mark.parametrize("tokenizer,model,tp,div,want", [
    ("GPT2BPETokenizer", None, 8, 128, 51200),  # 50257 -> multiple of 1024
    ("GPT2BPETokenizer", None, 1, 128, 50304),
    ("BertWordPieceLowerCase", None, 1, 128, 30592),
    ("Llama2Tokenizer", None, 1, 128, 32000),
    ("HuggingFaceTokenizer", "meta-llama/Meta-Llama-3-8B", 2, 128, 128256),  # 128256 = 501 * 256
    ("HuggingFaceTokenizer", "deepseek-ai/DeepSeek-V3", 1, 3232, 129280),  # mlm_mfsdp_deepseek_v3: 40 * 3232
])
def test_vocab_from_tokenizer_padded_as_megatron(tokenizer, model, tp, div, want):
    flags = f"--tokenizer-type {tokenizer} --tensor-model-parallel-size {tp} --make-vocab-size-divisible-by {div}"
    flags += f" --tokenizer-model {model}" if model else ""
    assert mv.vocab_size(read_megatron(flags)) == want


def test_vocab_fallbacks_and_the_error():
    # megatron-core 0.19.2 pads the NullTokenizer's --vocab-size like any tokenizer's, unless --no-pad-vocab-size
    assert mv.vocab_size(read_megatron("--tokenizer-type NullTokenizer --vocab-size 1000")) == 1024
    assert mv.vocab_size(read_megatron("--tokenizer-type NullTokenizer --vocab-size 1000 --no-pad-vocab-size")) == 1000
    assert mv.vocab_size(read_megatron("--vocab-file v.json --merge-file m.txt --tensor-model-parallel-size 4")) \
        == 50688  # GPT-2 BPE implied by the merge file: 50257 -> multiple of 512
    assert mv.vocab_size(read_megatron("--tokenizer-type PretrainedFromHF --tokenizer-name-or-path org/x "
                                       "--pad-vocab-size-to 250880")) == 250880
    with pytest.raises(UserError, match="--tokenizer-type SentencePieceTokenizer --tokenizer-model sp.model: .*"
                                        "add --vocab-size to the script or give --model"):
        mv.vocab_size(read_megatron("--tokenizer-type SentencePieceTokenizer --tokenizer-model sp.model"))


SHAPELESS = ("torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --seq-length 2048 --micro-batch-size 1 "
             "--tensor-model-parallel-size 2 --bf16 --tokenizer-type SentencePieceTokenizer\n")


def test_model_overrides_the_script_shape(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(SHAPELESS)
    with pytest.raises(UserError, match=r"is missing \(Megatron needs it\)"):
        load_native(path, None, "dgx-h100", None)
    prob = load_native(path, "llama3-8b", "dgx-h100", None)
    assert prob.model.num_layers == 32 and prob.layout.tp == 2


def test_command_line_nodes_and_gpus_win(tmp_path, capsys):
    path = tmp_path / "run.sh"
    path.write_text("NNODES=${SLURM_NNODES:-1}\n" + SHAPELESS.replace("--nnodes 1", "--nnodes $NNODES"))
    assert load_native(path, "llama3-8b", "dgx-h100", None).cluster.num_gpus == 8
    assert load_native(path, "llama3-8b", "dgx-h100", 2).cluster.num_gpus == 16
    assert "--nodes 2 overrides the script's 1" in capsys.readouterr().err
    assert load_native(path, "llama3-8b", "dgx-h100", None, gpus=4).cluster.num_gpus == 4
    assert "--gpus 4 overrides the script's 8" in capsys.readouterr().err


ITEM = st.text(alphabet="abcXYZ019-_=.:/", min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(ITEM, min_size=1, max_size=3), max_size=6))
def test_array_expansion_matches_bash(items):
    """`A=("w1 w2" ...)`: "${A[@]}" gives the items, ${A[@]} gives every blank-separated word of them."""
    quoted = " ".join('"' + " ".join(words) + '"' for words in items)
    text = f"A=({quoted})\ncmd \"${{A[@]}}\"\ncmd ${{A[@]}}\n"
    sh = read_script(text, every_branch=False)
    assert sh.commands[0][1:] == [" ".join(words) for words in items]
    assert sh.commands[1][1:] == [w for words in items for w in words]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab$(){}[]\"'`\\;&|<>=-#!:+*/%@ \n\t", max_size=80))
def test_any_text_is_read_or_refused_with_a_user_error(text):
    try:
        read_script(text, every_branch=False)
        read_script(text)
    except UserError:
        pass


@pytest.mark.parametrize("text,needle", [
    ("if true; then\n" * 3000 + "A=1\n" + "fi\n" * 3000, "nested more than 64"),
    ("{\n" * 3000 + "A=1\n" + "}\n" * 3000, "nested more than 64"),
    ("A=" + "${X:-" * 3000 + "1" + "}" * 3000 + "\n", "nested more than 16"),
    ('A="' + "${" * 20000 + '"\n', "unclosed ${"),  # scanned once, not once per ${
    ('A="' + "$(" * 20000 + '"\n', "unclosed $("),
    ("cat <<E > f\n" + "${" * 20000 + "\nE\n", "unclosed ${"),
])
def test_hostile_nesting_is_refused_not_a_recursion_error(text, needle):
    with pytest.raises(UserError, match=needle.replace("$", r"\$").replace("{", r"\{").replace("(", r"\(")):
        read_script(text, every_branch=False)


@pytest.mark.parametrize("zero,precision,want", [
    (0, '"bf16": {"enabled": true}', (1, "fp32")),  # BF16_Optimizer: ZeRO-1 equivalent, fp32 grad buffer
    (1, '"bf16": {"enabled": true}', (1, None)),
    (0, '"fp16": {"enabled": true}', (0, None)),
    (2, '"fp16": {"enabled": true}', (2, None)),
])
def test_megatron_deepspeed_zero_and_gradients(tmp_path, zero, precision, want):
    """deepspeed/runtime/bf16_optimizer.py (0.19.8): bf16 + stage 0 keeps fp32 master/Adam on 1/dp and a whole
    fp32 gradient buffer; any other combination is DeepSpeed's ZeRO stage with the weights' gradient dtype."""
    flag = "--bf16" if "bf16" in precision else "--fp16"
    path = tmp_path / "run.slurm"
    path.write_text(f"Z={zero}\nCFG=./ds.json\ncat <<EOT > $CFG\n{{\"train_batch_size\": 64, "
                    f"\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {{\"stage\": $Z}}, {precision}}}\n"
                    "EOT\npython -m torch.distributed.run --nproc_per_node 8 --nnodes 1 pretrain_gpt.py "
                    "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 --micro-batch-size 1 "
                    f"--vocab-size 1000 --tensor-model-parallel-size 2 {flag} --checkpoint-activations "
                    "--deepspeed --deepspeed_config $CFG --zero-stage $Z\n")
    prob = load_native(path, None, "dgx-a100", None)
    assert (prob.layout.zero, prob.train.grad_dtype) == want
    assert (prob.layout.mbs, prob.train.global_batch_size, prob.layout.recompute) == (2, 64, "full")
    assert prob.train.stack_spec.name == "megatron-2021"


def test_deepspeed_launcher_sizes_the_cluster(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("deepspeed --num_nodes 2 --num_gpus 4 pretrain_gpt.py --num-layers 4 --hidden-size 256 "
                    "--num-attention-heads 8 --seq-length 512 --micro-batch-size 1 --vocab-size 1000 --bf16\n")
    prob = load_native(path, None, "dgx-h100", None)
    assert (prob.cluster.num_nodes, prob.cluster.gpus_per_node) == (2, 4)


def test_script_without_any_launch_says_so(tmp_path):
    path = tmp_path / "submit.sh"
    path.write_text("source ./settings.sh\nsbatch --nodes=2 job.sh\n")
    with pytest.raises(UserError, match="no Megatron launch found.*see the warnings above"):
        load_native(path, None, "dgx-h100", None)


def test_a_long_sourced_path_keeps_its_file_name_whole(tmp_path):
    deep = tmp_path / ("d" * 150)
    deep.mkdir()
    script = deep / "run.sh"
    sh = read_script("source $(dirname $0)/missing.sh\n", script, every_branch=False)
    assert len(sh.warnings) == 1 and "/missing.sh'" in sh.warnings[0] and "..." in sh.warnings[0]


def test_clipped_keeps_short_words_and_the_file_name_of_long_paths():
    from planner.safetext import clipped

    assert clipped("/a/b/missing.sh") == "/a/b/missing.sh"
    long_path = "/" + "d" * 200 + "/missing.sh"
    shown = clipped(long_path, limit=40)
    assert len(shown) == 40 and shown.endswith("d/missing.sh") and shown.startswith("/ddd") and "..." in shown
    assert clipped("x" * 100, limit=20) == "x" * 10 + "..." + "x" * 10
