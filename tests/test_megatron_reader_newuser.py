"""Megatron launch scripts a new user ran (each test fails without its fix): Mamba / hybrid launches refused by name,
BERT priced as a GPT with a warning and T5 / RETRO / ICT / VLM refused, fp32 training priced, --yaml-cfg read, torch's
one-process defaults for torchrun and python (and divisibility errors naming the file and the GPUs), and
Megatron-DeepSpeed-only flags accepted there. Sources: megatron-core 0.19.2 arguments.py, yaml_arguments.py,
core/models/{mamba,hybrid,bert}, num_microbatches_calculator.py; torch/distributed/run.py."""

from __future__ import annotations

import pytest
from cli_check import run_check as _check, write_config as _write

from planner.errors import UserError
from planner.files.native import load_native
from planner.frameworks.megatron import entry_points
from planner.frameworks.megatron import flags as mf

SHAPE = ("--num-layers 12 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 "
         "--micro-batch-size 2 --global-batch-size 16 --tokenizer-type NullTokenizer --vocab-size 32000 "
         "--lr 0.00015 --train-iters 1000")


def _script(extra: str = "--bf16", entry: str = "pretrain_gpt.py", launch: str = "torchrun --nproc_per_node 8"):
    return f"#!/bin/bash\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n{launch} {entry} \\\n    {SHAPE} \\\n    {extra}\n"


def _errors(message: str) -> list[str]:
    return [line for line in message.splitlines() if "error" in line]


# ---- 1. Mamba / hybrid ------------------------------------------------------------------------------

@pytest.mark.parametrize("entry, extra, shown", [
    ("pretrain_mamba.py", "--bf16", "entry point pretrain_mamba.py"),
    ("../../pretrain_mamba.py", "--bf16 --hybrid-attention-ratio 0.08 --hybrid-mlp-ratio 0.5",
     "--hybrid-mlp-ratio 0.5"),
    ("pretrain_gpt.py", "--bf16 --hybrid-override-pattern M-M-M*-", "--hybrid-override-pattern M-M-M*-"),
    ("pretrain_gpt.py", "--bf16 --hybrid-layer-pattern M*M*", "--hybrid-layer-pattern M*M*"),
    ("pretrain_gpt.py", "--bf16 --mamba-state-dim 128", "--mamba-state-dim 128"),
    ("pretrain_gpt.py", "--bf16 --spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec",
     "--spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec"),
])
def test_mamba_and_hybrid_launches_are_refused_naming_the_sign(tmp_path, entry, extra, shown):
    path = _write(tmp_path, _script(extra, entry), "mamba_train.sh")
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 2, message[-1500:]
    (line,) = _errors(message)
    assert "mamba_train.sh" in line and shown in line and "transformer layers only" in line


def test_hybrid_context_parallel_is_not_a_mamba_sign():
    """--hybrid-context-parallel is a context-parallel option of any GPT (arguments.py), not a hybrid model."""
    entry_points.refuse("pretrain_gpt.py", [("--hybrid-context-parallel", None)])


def test_an_argument_file_with_a_hybrid_pattern_is_refused(tmp_path):
    path = _write(tmp_path, SHAPE.replace(" --", "\n--") + "\n--bf16\n--hybrid-layer-pattern M-M*\n", "args.txt")
    with pytest.raises(UserError, match="--hybrid-layer-pattern M-M\\*"):
        mf.read_megatron(path.read_text(), path)


# ---- 2. BERT, T5 and the other entry points --------------------------------------------------------------

def test_bert_is_priced_as_a_gpt_of_its_shape_with_a_warning(tmp_path):
    path = _write(tmp_path, _script("--fp16 --bert-no-binary-head", "pretrain_bert.py"), "bert.sh")
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 0, message[-1500:]
    assert "bert.sh: pretrain_bert.py trains BERT" in message and "bidirectional" in message
    assert "binary head" not in message  # --bert-no-binary-head: no pooler or binary head to leave out


@pytest.mark.parametrize("entry, what", [("pretrain_t5.py", "T5, an encoder-decoder"), ("pretrain_retro.py", "RETRO"),
                                         ("pretrain_ict.py", "ICT"), ("pretrain_vlm.py", "vision-language"),
                                         ("examples/multimodal/train.py", "multimodal")])
def test_other_entry_points_are_refused_by_name(tmp_path, entry, what):
    text = _script("--bf16", entry)
    if entry == "pretrain_t5.py":  # T5's own layer flags (examples/t5/train_t5_220m_distributed.sh)
        text = text.replace("--num-layers 12", "--encoder-num-layers 12 --decoder-num-layers 12")
    path = _write(tmp_path, text, "train.sh")
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 2, message[-1500:]
    (line,) = _errors(message)
    assert "train.sh" in line and entry.rsplit("/", 1)[-1] in line and what in line


# ---- 3. fp32 --------------------------------------------------------------------------------------

def test_fp32_training_is_priced_not_refused(tmp_path):
    fp32 = load_native(_write(tmp_path, _script(""), "fp32.sh"), None, "dgx-h100", None)
    bf16 = load_native(_write(tmp_path, _script("--bf16"), "bf16.sh"), None, "dgx-h100", None)
    assert fp32.train.precision == "fp32" and not fp32.train.flash_attention
    assert fp32.train.weight_bytes_per_param == 4 and fp32.train.activation_scale == 2.0
    assert bf16.train.precision == "bf16"
    assert any("neither --bf16 nor --fp16" in w and "fp32" in w for w in fp32.warnings)
    code, message = _check(tmp_path / "fp32.sh", "--cluster", "dgx-h100")
    assert code == 0 and "priced (unless check --precision is given) as fp32 training" in message, message[-1500:]


def test_fp8_without_a_16_bit_precision_is_refused(tmp_path):
    code, message = _check(_write(tmp_path, _script("--fp8-format hybrid"), "fp8.sh"), "--cluster", "dgx-h100")
    assert code == 2 and "fp8.sh: --fp8-format hybrid without --bf16 or --fp16" in message, message[-1500:]


# ---- 4. --yaml-cfg --------------------------------------------------------------------------------

YAML = """\
language_model:
  num_layers: 6
  hidden_size: 512
  num_attention_heads: 8
  num_query_groups: null
  ffn_hidden_size: null
  add_bias_linear: False
  activation_func: swiglu
  normalization: "RMSNorm"
model_parallel:
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 1
  sequence_parallel: True
  bf16: True
  fp16: False
micro_batch_size: 2
global_batch_size: 32
seq_length: 2048
max_position_embeddings: 2048
untie_embeddings_and_output_weights: True
position_embedding_type: rope
tokenizer_type: NullTokenizer
vocab_size: 32000
use_distributed_optimizer: True
"""
YAML_LAUNCH = ("#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py "
               "--yaml-cfg examples/gpt3/gpt_config.yaml {extra}\n")


def _yaml_case(tmp_path, extra: str = "", yaml: str = YAML):
    (tmp_path / "examples" / "gpt3").mkdir(parents=True)
    (tmp_path / "examples" / "gpt3" / "gpt_config.yaml").write_text(yaml)
    return _write(tmp_path, YAML_LAUNCH.format(extra=extra), "train_gpt_yaml_cfg.sh")


def test_yaml_cfg_is_read_beside_the_script_and_wins_over_the_flags(tmp_path, monkeypatch):
    path = _yaml_case(tmp_path, "--num-layers 99 --fp16")
    monkeypatch.chdir(tmp_path.parent)  # not the script's folder: found beside the script
    prob = load_native(path, None, "dgx-h100", None)
    model, lay, train = prob.model, prob.layout, prob.train
    assert (model.num_layers, model.hidden_size, model.num_attention_heads) == (6, 512, 8)
    assert model.ffn_hidden_size == int(512 * 8 / 3 / 64) * 64 and model.activation == "swiglu"
    assert model.norm == "rmsnorm" and not model.linear_bias and not model.tied_embeddings
    assert (lay.tp, lay.sp, lay.zero, lay.mbs, train.global_batch_size, train.seq_length) == (2, True, 1, 2, 32, 2048)
    assert train.precision == "bf16"  # the YAML's, not the command line's --fp16
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 0, message[-1500:]
    assert "read from" in message and "--fp16, --num-layers" in message  # the ignored flags, named


def test_yaml_cfg_in_the_working_directory(tmp_path, monkeypatch):
    _yaml_case(tmp_path)
    script = _write(tmp_path / "examples", YAML_LAUNCH.format(extra=""), "run.sh")
    monkeypatch.chdir(tmp_path)
    assert load_native(script, None, "dgx-h100", None).model.num_layers == 6


def test_a_missing_yaml_cfg_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, message = _check(_write(tmp_path, YAML_LAUNCH.format(extra=""), "y.sh"), "--cluster", "dgx-h100")
    assert code == 2, message[-1500:]
    (line,) = _errors(message)
    assert "y.sh: --yaml-cfg examples/gpt3/gpt_config.yaml: not found" in line


def test_a_key_the_yaml_lacks_names_the_yaml(tmp_path):
    path = _yaml_case(tmp_path, yaml=YAML.replace("  num_attention_heads: 8\n", ""))
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 2 and "gpt_config.yaml (--yaml-cfg) sets no num_attention_heads" in message, message[-1500:]


# ---- 5. the GPUs torchrun and python start ---------------------------------------------------------

def test_torchrun_without_nproc_per_node_starts_one_process_per_node(tmp_path):
    text = _script("--fp16", launch="torchrun").replace("--global-batch-size 16", "--global-batch-size 8")
    path = _write(tmp_path, text)
    prob = load_native(path, None, "dgx-h100", None)
    assert prob.cluster.num_gpus == 1
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 0 and "torchrun without --nproc_per_node starts 1 process" in message, message[-1500:]


def test_python_alone_is_one_process_but_not_under_srun(tmp_path):
    alone = load_native(_write(tmp_path, _script("--fp16", launch="python"), "a.sh"), None, "dgx-h100", None)
    assert alone.cluster.num_gpus == 1
    under = _script("--fp16", launch="srun python").replace("#!/bin/bash\n", "#!/bin/bash\n#SBATCH --nodes=2\n")
    assert load_native(_write(tmp_path, under, "b.sh"), None, "dgx-h100", None).cluster.num_gpus == 16


def test_a_batch_megatron_refuses_names_the_file_and_the_gpus(tmp_path):
    path = _write(tmp_path, _script("--fp16").replace("--global-batch-size 16", "--global-batch-size 8"), "gbs.sh")
    code, message = _check(path, "--cluster", "dgx-h100")
    assert code == 2, message[-1500:]
    assert ("gbs.sh: --global-batch-size 8 is not a multiple of --micro-batch-size 2 x data-parallel size 8 "
            "on 8 GPU(s)") in message


def test_a_world_size_megatron_refuses_names_the_file_and_the_gpus(tmp_path):
    text = _script("--fp16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 3")
    path = _write(tmp_path, text, "world.sh")
    code, message = _check(path, "--cluster", "dgx-h100", "--nodes", "1")
    assert code == 2, message[-1500:]
    (line,) = _errors(message)
    assert "world.sh: the layout needs a multiple of 6 GPUs" in line and "runs on 8 GPU(s)" in line


# ---- 6. Megatron-DeepSpeed's own flags ------------------------------------------------------------

MDS_ONLY = "--lr-decay-tokens 300000000000 --lr-warmup-tokens 375000000 --train-tokens 300000000000 " \
           "--no-async-tensor-model-parallel-allreduce"


def test_megatron_deepspeed_only_flags_are_not_warned_in_a_megatron_deepspeed_launch(tmp_path):
    args = mf.read_megatron(_script(f"--fp16 --deepspeed --deepspeed_config ds.json {MDS_ONLY}"))
    assert not [w for w in args.shell.warnings if "not a Megatron-LM flag" in w]
    plain = mf.read_megatron(_script(f"--fp16 {MDS_ONLY}"))  # Megatron-LM refuses them: still said
    assert len([w for w in plain.shell.warnings if "not a Megatron-LM flag" in w]) == 4
