"""Second round of gaps in reading Megatron-LM launch scripts (each test fails without its fix): arguments kept in
here-documents (`read -d '' X <<EOF`, `cat > F <<EOF` then `$(cat F)`), --cp-comm-type a2a+p2p and per-layer lists,
the account-for pipeline-split flags, the wording of a defaulted --moe-aux-loss-coeff, and a missing sourced file
whose name, under the script's prefix, is the script itself. Sources: bash 5.2 manual (read, here strings, command
substitution); megatron-core 0.19.2 arguments.py, transformer_config.py, transformer_block.py."""

from __future__ import annotations

import pytest
from cli_check import run_check as _check, write_config as _write

from planner.files.native import load_native
from planner.files.shellread import read_script


SHAPE = ("--num-layers {layers} --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
         "--group-query-attention --num-query-groups 8 --seq-length {seq} --max-position-embeddings {seq} --swiglu "
         "--normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
         "--disable-bias-linear --vocab-size 128256 --micro-batch-size 1 --global-batch-size 16 --bf16")


def _script(extra: str, layers: int = 32, seq: int = 8192, launch: str = "torchrun --nproc_per_node 8 --nnodes 2"):
    return f"#!/bin/bash\n{launch} pretrain_gpt.py {SHAPE.format(layers=layers, seq=seq)} {extra}\n"


# ---- 1. here-documents ------------------------------------------------------------------------------

HEREDOC_READ = """#!/bin/bash
read -r -d '' GPT_ARGS <<'ARGS'
{args}
ARGS
torchrun --nproc_per_node 8 pretrain_gpt.py $GPT_ARGS --mock-data
"""

HEREDOC_FILE = """#!/bin/bash
cat > /tmp/gpt_args.txt <<EOT
{args}
EOT
torchrun --nproc_per_node 8 pretrain_gpt.py {use} --mock-data
"""


def test_read_d_empty_takes_the_whole_here_document(tmp_path):
    args = SHAPE.format(layers=24, seq=2048).replace(" --", "\n--")
    prob = load_native(_write(tmp_path, HEREDOC_READ.format(args=args)), None, "dgx-h100", None)
    assert prob.model.num_layers == 24 and prob.model.seq_length == 2048


@pytest.mark.parametrize("use", ["$(cat /tmp/gpt_args.txt)", "$(< /tmp/gpt_args.txt)", "`cat /tmp//gpt_args.txt`"])
def test_a_file_the_script_wrote_is_read_back_by_cat(tmp_path, use):
    args = SHAPE.format(layers=40, seq=4096).replace(" --", "\n--")
    prob = load_native(_write(tmp_path, HEREDOC_FILE.format(args=args, use=use)), None, "dgx-h100", None)
    assert prob.model.num_layers == 40


def test_read_without_d_takes_the_first_line_and_splits_over_names():
    sh = read_script("read A B <<EOF\n  one two  three \nsecond\nEOF\nread -r C <<< 'x\\y'\nread D <<< 'x\\y'\n")
    assert sh.scalars["A"] == "one" and sh.scalars["B"] == "two  three"
    assert sh.scalars["C"] == "x\\y" and sh.scalars["D"] == "xy"  # without -r a backslash escapes


def test_read_d_empty_fails_at_end_of_input_as_bash_does():
    """`read -d ''` meets no NUL in a here-document: status 1, so `|| true` runs and `&&` does not."""
    sh = read_script("read -r -d '' X <<EOF || F=failed\na\nEOF\nread -r Y <<EOF && G=ok\nb\nEOF\n",
                     every_branch=False)
    assert sh.scalars["X"] == "a" and sh.scalars["F"] == "failed" and sh.scalars["G"] == "ok"


def test_other_command_substitutions_stay_unknown():
    sh = read_script("cat > a.txt <<EOF\n--x 1\nEOF\nU=$(cat other.txt)\nV=$(cat a.txt | head -1)\nW=$(cat a.txt)\n")
    assert sh.scalars["U"] == "$(cat other.txt)" and sh.scalars["V"].startswith("$(") and sh.scalars["W"] == "--x 1"


def test_appending_here_documents_add_to_the_file():
    sh = read_script("cat > a.txt <<EOF\n--x 1\nEOF\ncat >> ./a.txt <<EOF\n--y 2\nEOF\nW=$(< a.txt)\n")
    assert sh.scalars["W"] == "--x 1\n--y 2"


# ---- 2. --cp-comm-type -------------------------------------------------------------------------------

HCP = "--tensor-model-parallel-size 2 --sequence-parallel --context-parallel-size 8 "


def test_a2a_plus_p2p_is_priced_as_p2p_with_a_warning(tmp_path):
    path = _write(tmp_path, _script(HCP + "--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4"))
    prob = load_native(path, None, "dgx-h100", None)
    assert prob.layout.cp == 8 and prob.layout.cp_comm == "p2p"
    note = next(w for w in prob.warnings if "a2a+p2p" in w)
    assert "priced as p2p" in note and "groups of 2" in note and "over 4" in note and "understated" in note


@pytest.mark.parametrize("types, priced, why", [("a2a " * 16 + "p2p " * 16, "a2a", "tie"),
                                                ("a2a " * 10 + "p2p " * 22, "p2p", "majority"),
                                                ("a2a+p2p " * 16 + "p2p " * 16, "p2p", "majority")])
def test_a_per_layer_list_is_priced_as_one_type_and_said(tmp_path, types, priced, why):
    path = _write(tmp_path, _script(HCP + f"--cp-comm-type {types} --hierarchical-context-parallel-sizes 2 4"))
    prob = load_native(path, None, "dgx-h100", None)
    assert prob.layout.cp_comm == priced
    note = next(w for w in prob.warnings if "per layer" in w)
    counts = ", ".join(f"{types.split().count(t)} {t}" for t in dict.fromkeys(types.split()))
    assert why in note and f"({counts})" in note


@pytest.mark.parametrize("flags, says", [
    ("--cp-comm-type p2p a2a+p2p --hierarchical-context-parallel-sizes 2 4", "2 types for 32 layers"),
    ("--cp-comm-type a2a+p2p", "needs --hierarchical-context-parallel-sizes"),
    ("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2", "product 4 is not --context-parallel-size 8"),
    ("--cp-comm-type ring", "--cp-comm-type 'ring': Megatron runs p2p, a2a, allgather (all_gather) or a2a+p2p")])
def test_what_megatron_refuses_names_the_file_and_flag(tmp_path, flags, says):
    code, message = _check(_write(tmp_path, _script(HCP + flags)), "--cluster", "dgx-h100")
    assert code == 2 and says in message and "run.sh" in message


# ---- 3. the account-for pipeline split -----------------------------------------------------------------

ACCOUNT = ("--pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split "
           "--account-for-loss-in-pipeline-split ")


def test_embedding_and_loss_count_as_a_layer_each(tmp_path):
    prob = load_native(_write(tmp_path, _script(ACCOUNT, layers=30)), None, "dgx-h100", None)
    assert prob.layout.stage_layers == [7, 8, 8, 7]


def test_with_virtual_stages_the_first_and_last_chunks_are_lighter(tmp_path):
    path = _write(tmp_path, _script(ACCOUNT + "--num-layers-per-virtual-pipeline-stage 2", layers=30))
    prob = load_native(path, None, "dgx-h100", None)
    assert prob.layout.vpp == 4 and prob.layout.stage_layers == [7, 8, 8, 7]
    assert prob.layout.chunk_layers[0] == 1 and prob.layout.chunk_layers[-1] == 1 and sum(prob.layout.chunk_layers) == 30


@pytest.mark.parametrize("extra, layers", [("--pipeline-model-parallel-size 4 --account-for-loss-in-pipeline-split", 30),
                                           ("--pipeline-model-parallel-size 4", 30)])
def test_a_split_megatron_refuses_names_the_file_and_the_flags_that_fix_it(tmp_path, extra, layers):
    code, message = _check(_write(tmp_path, _script(extra, layers=layers)), "--cluster", "dgx-h100")
    assert code == 2 and "run.sh" in message and "stage_layers" not in message
    assert "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split" in message
    assert "--decoder-first-pipeline-num-layers 8 --decoder-last-pipeline-num-layers 8" in message


def test_account_flags_beside_an_uneven_first_stage_are_refused(tmp_path):
    code, message = _check(_write(tmp_path, _script(ACCOUNT + "--decoder-first-pipeline-num-layers 6", layers=30)),
                           "--cluster", "dgx-h100")
    assert code == 2 and "cannot be given with --decoder-first-pipeline-num-layers" in message


# ---- 5. --moe-aux-loss-coeff left to Megatron's default -------------------------------------------------

def test_a_defaulted_aux_loss_coefficient_is_worded_as_the_default(tmp_path):
    moe = "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8"
    prob = load_native(_write(tmp_path, _script(moe, launch="torchrun --nproc_per_node 8")), None, "dgx-h100", None)
    note = next(w for w in prob.warnings if "aux-loss-coeff" in w)
    assert "not set in the script" in note and "Megatron's default" in note


# ---- 6. a missing sourced file is never the script itself ------------------------------------------------

def test_a_missing_sourced_file_is_not_the_script_under_its_own_prefix(tmp_path):
    path = _write(tmp_path, "#!/bin/bash\nsource ./missing_env.sh\nTP=2\n", "c02b_missing_env.sh")
    sh = read_script(path.read_text(), path, every_branch=False)
    assert any("not found beside the script" in w for w in sh.warnings)
    assert not any("nested" in w or "read 'c02b_missing_env.sh'" in w for w in sh.warnings)
    assert sh.scalars["TP"] == "2"


@pytest.mark.parametrize("kind", ["yarn", "mrope"])
def test_rope_variants_are_read_as_rope(tmp_path, kind):
    """megatron-core 0.16 GPTModel takes position_embedding_type yarn and mrope (GPT-OSS and DeepSeek-V3 recipes run
    yarn): rotary embeddings with other frequencies, priced as rope."""
    text = _script("").replace("--position-embedding-type rope", f"--position-embedding-type {kind}")
    prob = load_native(_write(tmp_path, text), None, "dgx-h100", None)
    assert prob.model.position_embedding == "rope"
