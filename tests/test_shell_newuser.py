"""What a new user's launch scripts taught the shell reader (planner.files.shell_tokens / shell_expand /
shell_eval / shell_unknown), each hand-checked against bash 5.2:

1. quotes inside `$( )` inside double quotes (`"test -f \\"$f\\""`), nested substitutions and backquotes, comments
   inside `$( )`, and `$((` arithmetic told from `$( (` subshells;
2. a value parplan cannot evaluate (`$(($(nvidia-smi ... | wc -l)-2))`) is ONE word wherever it goes, never
   split into flags, and a flag given it is named with the variable and the line that set it;
3. defaults a script sets for arguments it was not given (`if [ "$X" == "" ]; then X=3; fi`, `[ -z "$1" ] && ...`)
   are followed, parplan reading the script as run without arguments.
"""

from __future__ import annotations

import pytest

from planner.files.shell_tokens import closing, tokens
from planner.files.shellread import read_script
from planner.frameworks.megatron.flags import read_megatron

MEGATRON = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
            "--seq-length 128 --max-position-embeddings 128 --global-batch-size 16 --vocab-size 1000 "
            "--tokenizer-type NullTokenizer --bf16")


def _read(text: str, **kw):
    return read_script(text, every_branch=False, **kw)


# ---- 1. quotes and substitutions -----------------------------------------------------------------

def test_escaped_quote_inside_substitution_inside_double_quotes():
    """Megatron-DeepSpeed bert_with_pile/ds_pretrain_bert.sh: `if $(ssh -q worker-"$node" "test -f \\"$f\\""); then`
    (bash -n accepts it; parplan said 'unclosed $( or `')."""
    text = ('node=1\nif $(ssh -q worker-"$node" "test -f \\"$iteration_file\\""); then\n  echo found\nfi\n'
            + MEGATRON + " --micro-batch-size 1\n")
    sh = _read(text)
    assert sh.commands[-1][:2] == ["torchrun", "--nproc_per_node"]
    assert sh.warnings == []  # the condition runs ssh: undecided, and the branch only echoes


@pytest.mark.parametrize("text", [
    '$(echo "a \\" ) b")',  # an escaped quote inside "...": the `)` in it does not close
    '$(echo "$(echo ")")")',  # `$( )` inside "..." inside `$( )`, with its own quotes
    "$(echo \"`echo \\\")\\\"`\")",  # backquotes inside "...", escaped quotes inside them
    "$(echo ')' \"')\")",  # single quotes are literal inside "..."
    "$(echo a # a comment )\n)",  # a comment inside $( ) ends at the newline
    "$(echo ${#A} $# a#b)",  # `#` inside a word is no comment
])
def test_closing_skips_what_bash_skips(text):
    """Each closes at its last character: bash 5.2 runs `echo TEXT` for each (and `bash -n` refuses it cut short)."""
    assert closing(text, 1, "(", ")") == len(text) - 1


def test_nested_substitutions_in_double_quotes_are_one_word():
    words = tokens('X="$(echo "in $(echo "deep \\"q\\"")")" Y="x`echo \\"y\\"`z"\n')
    assert [w.text for w in words[:2]] == ['X=$(echo "in $(echo "deep \\"q\\"")")', 'Y=x`echo \\"y\\"`z']


def test_escaped_backquote_inside_backquotes():
    words = tokens("echo `echo \\`echo in\\``\n")
    assert words[1].text == "`echo \\`echo in\\``"


def test_arithmetic_is_told_from_a_subshell_in_a_substitution():
    """`$((2+3))` is arithmetic; `$((echo 8) | wc -l)` is a command substitution whose command starts with a
    subshell (bash runs it: it prints 1); both close at the same `)`."""
    from planner.files.shell_unknown import explain

    sh = _read("A=$((2+3))\nB=$((echo 8) | wc -l)\nC=$( (cd /; pwd) )\n")
    assert sh.scalars["A"] == "5"
    assert sh.scalars["B"] == "$((echo 8) | wc -l)" and sh.scalars["C"] == "$( (cd /; pwd) )"
    assert "prints" in explain(sh.opaque["B"].spans[0][2])


def test_arithmetic_division_truncates_toward_zero_as_bash_does():
    sh = _read("A=$(( -7 / 2 ))\nB=$(( -7 % 2 ))\nC=$(( 7 / 2 ))\n")
    assert (sh.scalars["A"], sh.scalars["B"], sh.scalars["C"]) == ("-3", "-1", "3")


# ---- 2. values parplan cannot evaluate -----------------------------------------------------------

UNKNOWN_GPUS = ("#!/bin/bash\nnum_gpus=$(($(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)-2))\n"
                "batch_size=$(( 16 / ${num_gpus} ))\n")


def test_unknown_value_is_one_word_never_flags():
    """Megatron-DeepSpeed's `num_gpus=$(($(ds_ssh nvidia-smi ... | wc -l)-2))`: parplan warned that --query-gpu,
    --format and '-l)-2))' were not Megatron flags, then read `--micro-batch-size '$(('."""
    text = UNKNOWN_GPUS + MEGATRON + " --micro-batch-size ${batch_size} --save /ckpt/run_g${num_gpus}\n"
    args = read_megatron(text)
    argv = args.shell.commands[-1]
    assert argv[argv.index("--micro-batch-size") + 1] == "$(( 16 / ${num_gpus} ))"
    assert argv[-1] == "/ckpt/run_g$(($(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)-2))"
    assert not any(w.startswith("--query") or w.startswith("--format") or w.startswith("-l)") for w in argv)
    assert not any("not a Megatron-LM flag" in w for w in args.shell.warnings)


def test_flag_given_an_unknown_value_names_the_variable_and_its_line():
    text = UNKNOWN_GPUS + MEGATRON + " --micro-batch-size ${batch_size}\n"
    notes = [w for w in _read(text).warnings if "--micro-batch-size" in w]
    assert len(notes) == 1
    note = notes[0]
    assert note.startswith("line 4: --micro-batch-size batch_size (set on line 3 to $(( 16 / ${num_gpus} )))")
    assert "a value parplan cannot evaluate" in note and "num_gpus, set on line 2" in note
    assert "nvidia-smi" in note and "write the number in the script" in note


def test_unknown_value_inside_a_known_one_keeps_the_rest_split():
    """`ARGS="--nproc_per_node $(nvidia-smi -L | wc -l) --nnodes 2"`: the known words split as bash splits them,
    the unknown output stays one word."""
    sh = _read('ARGS="--nproc_per_node $(nvidia-smi -L | wc -l) --nnodes 2"\nB=$ARGS\ntorchrun $B x.py\n')
    assert sh.commands[-1] == ["torchrun", "--nproc_per_node", "$(nvidia-smi -L | wc -l)", "--nnodes", "2", "x.py"]


def test_a_test_on_an_unknown_value_is_not_decided():
    """`X=$(hostname)`: parplan used to compare the written text `$(hostname)` and take the else branch."""
    sh = _read('X=$(hostname)\nif [ "$X" == "" ]; then\n  TP=1\nelse\n  TP=2\nfi\n')
    assert "TP" not in sh.scalars
    assert any("cannot decide" in w for w in sh.warnings)


def test_an_unknown_value_reassigned_keeps_its_origin():
    sh = _read("A=$(nproc)\nB=$A\nC=${B}x\n")
    mark = sh.opaque["C"].spans[0][2]
    assert (mark.name, mark.line, sh.scalars["C"]) == ("A", "line 1", "$(nproc)x")
    sh = _read("A=$(nproc)\nA=4\n")
    assert sh.scalars["A"] == "4" and "A" not in sh.opaque


# ---- 3. defaults for arguments not given ---------------------------------------------------------

DSCHAT = ('OUTPUT=$1\nZERO_STAGE=$2\nif [ "$OUTPUT" == "" ]; then\n    OUTPUT=./output_step1_llama2_7b\nfi\n'
          'if [ "$ZERO_STAGE" == "" ]; then\n    ZERO_STAGE=3\nfi\nmkdir -p $OUTPUT\n'
          "deepspeed main.py --model_name_or_path meta-llama/Llama-2-7b-hf --zero_stage $ZERO_STAGE --deepspeed "
          "--output_dir $OUTPUT\n")


def test_dschat_defaults_for_missing_arguments_are_followed():
    """DeepSpeed-Chat's run_llama2_7b.sh: parplan said '--zero_stage $2: a value parplan cannot evaluate'."""
    sh = _read(DSCHAT)
    assert (sh.scalars["OUTPUT"], sh.scalars["ZERO_STAGE"]) == ("./output_step1_llama2_7b", "3")
    assert sh.commands[-1][-4:] == ["3", "--deepspeed", "--output_dir", "./output_step1_llama2_7b"]
    assert sh.warnings == []


def test_given_arguments_win_over_the_defaults():
    sh = _read(DSCHAT, args=["out", "2"])
    assert (sh.scalars["OUTPUT"], sh.scalars["ZERO_STAGE"]) == ("out", "2")


@pytest.mark.parametrize("text", [
    'TP=$1\nif [ -z "$TP" ]; then\n    TP=2\nfi\n',
    'TP=$1\n[ -z "$TP" ] && TP=2\n',
    'TP=$1\n[ -n "$TP" ] || TP=2\n',
    'if [ -z "$1" ]; then TP=2; else TP=$1; fi\n',
    'if [ "$1" != "" ]; then TP=$1; elif [ "$2" = "" ]; then TP=2; fi\n',
    'TP=${1}\nif [[ $TP == "" ]]; then TP=2; fi\n',  # no word splitting inside [[ ]]: the empty word stays
    'TP=$1\nTP=${TP:-2}\n',
    'if test -z "$1"; then TP=2; fi\n',
])
def test_megatron_default_for_a_missing_argument(text):
    """misc/mlm_positional_default.sh said "--tensor-model-parallel-size '$1': expected a whole number"."""
    args = read_megatron(text + MEGATRON + " --micro-batch-size 1 --tensor-model-parallel-size $TP\n")
    assert args.int("--tensor-model-parallel-size") == 2
    assert args.shell.warnings == []


def test_an_argument_with_no_default_stays_as_written():
    """Without a default the flag still says which argument it needed (DeepSpeed-Chat's message names `$2`)."""
    sh = _read("ZERO_STAGE=$2\ndeepspeed main.py --zero_stage $ZERO_STAGE --output_dir $1/out\n")
    assert sh.commands[-1][2:] == ["--zero_stage", "$2", "--output_dir", "$1/out"]


def test_integer_tests_on_known_values():
    text = ("A=4\nif test $A -eq 4; then B=eq; fi\nif [ $A -ne 4 ]; then C=ne; else C=same; fi\n"
            "[ $A -lt 5 ] && D=lt\n[ $A -le 3 ] || E=gt3\n[ -n \"$A\" ] && F=set\n")
    sh = _read(text)
    assert [sh.scalars.get(k) for k in "BCDEF"] == ["eq", "same", "lt", "gt3", "set"]


def test_a_usage_check_on_missing_arguments_does_not_end_the_reading():
    """`[ -z "$1" ] && { echo usage; exit 1; }`: run without arguments the script would stop; parplan reads on
    (with one warning) so the launch after it is still read."""
    for guard in ('if [ -z "$1" ]; then\n  echo "usage: $0 TP"\n  exit 1\nfi\n',
                  '[ -z "$1" ] && { echo usage; exit 1; }\n', '[ -n "$1" ] || exit 1\n'):
        sh = _read(guard + "TP=${1:-2}\ntorchrun x.py --tp $TP\n")
        assert sh.commands[-1] == ["torchrun", "x.py", "--tp", "2"], guard
        assert any("exits here when run without arguments" in w for w in sh.warnings)


def test_conditions_parplan_cannot_decide_still_take_no_branch():
    """A file test, a command's status, `$#` or an unknown variable: no branch, as before."""
    for cond in ('[ -f "$X" ]', "$(ssh w true)", "[ $# -lt 1 ]", '[ "$SLURM_JOB_ID" == "" ]',
                 '[ "$1" -gt 2 ]'):  # "" is no integer: bash refuses, parplan does not guess
        sh = _read(f"if {cond}; then\n  TP=4\nelse\n  TP=8\nfi\n")
        assert "TP" not in sh.scalars, cond


def test_deep_nesting_is_one_error_line_not_a_crash():
    from planner.errors import UserError

    text = "X=" + '"$(echo ' * 150 + ')"' * 150 + "\n"
    with pytest.raises(UserError, match="nested more than"):
        _read(text)
    assert _read("X=" + '"$(echo ' * 20 + ')"' * 20 + "\n").scalars["X"].startswith('$(echo "$(echo')


def test_unknown_value_says_where_a_flag_value_came_from():
    """For the flag readers (planner.files.shell_unknown.origin): the variable, its line, and why."""
    from planner.files.shell_unknown import origin as unknown_value

    sh = _read(UNKNOWN_GPUS + "ZERO=$2\nX=4\n")
    why = unknown_value(sh, "$(( 16 / ${num_gpus} ))")
    assert why.startswith("batch_size (set on line 3 to $(( 16 / ${num_gpus} ))): a value parplan cannot evaluate")
    assert "num_gpus, set on line 2" in why
    zero = unknown_value(sh, "$2")
    assert "ZERO (set on line 4 to $2)" in zero and "run without arguments" in zero
    assert "argument $3" in unknown_value(sh, "$3")
    assert unknown_value(sh, "4") is None and unknown_value(sh, None) is None


def test_a_glob_inside_double_brackets_joined_by_and_still_matches():
    """`[[ foo == f* && a == a ]]`: bash matches the glob in either operand of && (the split once lost `[[`)."""
    from planner.files.shell_cond import decide
    assert decide(["[[", "foo", "==", "f*", "&&", "a", "==", "a", "]]"], "[[") is True
    assert decide(["[[", "!", "foo", "==", "f*", "]]"], "[[") is False
    assert decide(["[", "foo", "==", "f*", "]"], "[") is False  # no globs in [ ]
