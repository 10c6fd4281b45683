"""What the Megatron-LM script reader assumes for a flag left out, checked against megatron-core 0.19.2 (its
megatron/training/arguments.py parser and validate_args, and the config dataclasses the flags fill). Each test
reads a small launch script with and without a flag and fails if the reader prices a default Megatron does not run.
"""

from __future__ import annotations

import pytest

from costmodels.estimate import estimate
from planner.errors import UserError
from planner.files.native import load_native_text

DENSE = """torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \\
  --num-layers 8 --hidden-size 4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8 \\
  --seq-length 4096 --max-position-embeddings 4096 --vocab-size 128256 --normalization RMSNorm \\
  --position-embedding-type rope --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 \\
  --tensor-model-parallel-size 2 --sequence-parallel --micro-batch-size 1 --global-batch-size 16 --bf16 {extra}
"""
MOE = (" --swiglu --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2 --moe-grouped-gemm "
       "--moe-token-dispatcher-type alltoall --moe-permute-fusion")


def _read(extra: str = ""):
    return load_native_text(DENSE.format(extra=extra), "megatron", None, "dgx-h100", None)


def _peak(extra: str = "") -> int:
    p = _read(extra)
    return estimate(p.model, p.cluster, p.train, p.layout).memory.peak_bytes


# ---- --ffn-hidden-size left out ------------------------------------------------------------------------------------

def test_swiglu_without_ffn_hidden_size_is_megatrons_narrowed_width():
    """validate_args (arguments.py lines 1280-1289): with --swiglu the default MLP width is
    int((4h * 2 / 3) / 64) * 64 = 10880 for h = 4096, not 4h = 16384 (1.5x the MLP weights)."""
    assert _read("--swiglu").model.ffn_hidden_size == 10880
    assert _read("--swiglu --ffn-hidden-size 14336").model.ffn_hidden_size == 14336
    assert _read().model.ffn_hidden_size == 16384  # gelu: 4h
    assert _read("--quick-geglu").model.ffn_hidden_size == 16384  # only args.swiglu narrows it
    assert _peak("--swiglu") < _peak("--swiglu --ffn-hidden-size 16384")


def test_experts_without_their_width_take_the_swiglu_default():
    """arguments.py line 1596: moe_ffn_hidden_size = ffn_hidden_size after the --swiglu default is applied; the
    shared-expert width is counted in the same experts."""
    p = _read(MOE + " --moe-shared-expert-intermediate-size 21760")
    assert p.model.moe_ffn_hidden_size == 10880 and p.model.num_shared_experts == 2


def test_swiglu_default_of_zero_width_is_refused():
    with pytest.raises(UserError, match="--hidden-size 16 and no --ffn-hidden-size"):
        load_native_text(DENSE.format(extra="--swiglu").replace("--hidden-size 4096", "--hidden-size 16")
                         .replace("--num-attention-heads 32", "--num-attention-heads 8"), "megatron", None,
                         "dgx-h100", None)


# ---- --transformer-impl left out / local ---------------------------------------------------------------------------

def test_local_transformer_impl_runs_unfused_attention():
    """--transformer-impl local: megatron-core's own layer spec, whose core attention is DotProductAttention
    (backends.py LocalSpecProvider.core_attention): the s x s scores are kept whatever --attention-backend says."""
    assert _read().train.flash_attention is True  # default transformer_engine, backend auto
    assert _read("--transformer-impl local").train.flash_attention is False
    assert _read("--transformer-impl local --attention-backend flash").train.flash_attention is False
    assert _peak("--transformer-impl local") > _peak()
    with pytest.raises(UserError, match="--transformer-impl 'te'"):
        _read("--transformer-impl te")


# ---- sharding: torch FSDP2 and Megatron-FSDP -----------------------------------------------------------------------

FSDP2 = "--use-torch-fsdp2 --no-gradient-accumulation-fusion --untie-embeddings-and-output-weights"


def test_torch_fsdp2_shards_weights_gradients_and_states():
    """--use-torch-fsdp2 (torch_fully_sharded_data_parallel.py: fully_shard on every layer) was read as no sharding
    at all; its gradients stay in the weights' dtype (TorchFullyShardedDataParallelConfig, grad_reduce_in_fp32
    False)."""
    p = _read(FSDP2)
    assert p.layout.zero == 3 and p.train.grad_dtype == "bf16"
    assert _read(FSDP2 + " --torch-fsdp2-no-reshard-after-forward").layout.zero == 2
    assert _peak(FSDP2) < _peak("--untie-embeddings-and-output-weights")


@pytest.mark.parametrize("extra, needle", [
    ("--use-torch-fsdp2 --untie-embeddings-and-output-weights", "--no-gradient-accumulation-fusion"),
    ("--use-torch-fsdp2 --no-gradient-accumulation-fusion", "--untie-embeddings-and-output-weights"),
    (FSDP2 + " --use-distributed-optimizer", "no --use-distributed-optimizer"),
    (FSDP2 + " --pipeline-model-parallel-size 2", "--pipeline-model-parallel-size 1"),
])
def test_torch_fsdp2_refusals_name_the_flag(extra, needle):
    with pytest.raises(UserError, match=f"--use-torch-fsdp2 needs .*{needle}"):
        _read(extra)


def test_megatron_fsdp_main_grads_default_to_the_weights_dtype():
    """Megatron-FSDP takes its main-gradient dtype from --megatron-fsdp-main-grads-dtype (default auto: the
    weights' dtype, param_and_grad_buffer.py _resolve_group_grad_dtype), not from accumulate_allreduce_grads_in_fp32
    (which it never reads): bf16 with --bf16 unless fp32 is asked for."""
    fsdp = "--use-megatron-fsdp --ckpt-format fsdp_dtensor"
    assert _read(fsdp).train.grad_dtype == "bf16"
    assert _read(fsdp + " --accumulate-allreduce-grads-in-fp32").train.grad_dtype == "bf16"
    assert _read(fsdp + " --megatron-fsdp-main-grads-dtype fp32").train.grad_dtype == "fp32"
    assert _peak(fsdp) < _peak(fsdp + " --megatron-fsdp-main-grads-dtype fp32")
    assert _read("--use-distributed-optimizer").train.grad_dtype == "fp32"  # DDP: fp32 main grads with --bf16
    with pytest.raises(UserError, match="--megatron-fsdp-main-grads-dtype 'fp64'"):
        _read(fsdp + " --megatron-fsdp-main-grads-dtype fp64")


def test_exported_megatron_fsdp_script_asks_for_the_fp32_grads_it_was_priced_with():
    from planner.frameworks.megatron.export import training_args

    class Plan:  # the fields training_args reads
        def __init__(self, p):
            self.train, self.layout, self.train_steps = p.train, p.layout, None

    p = _read("--use-megatron-fsdp --ckpt-format fsdp_dtensor --megatron-fsdp-main-grads-dtype fp32")
    args = training_args(Plan(p))
    assert ("--megatron-fsdp-main-grads-dtype", "fp32") in args
    assert ("--megatron-fsdp-main-grads-dtype", "fp32") not in training_args(Plan(_read("--use-distributed-optimizer")))


# ---- gradient dtype flags ------------------------------------------------------------------------------------------

def test_grad_reduce_in_bf16_wins_over_fp32_accumulation():
    """arguments.py lines 1190-1191: with --bf16, --grad-reduce-in-bf16 turns accumulate_allreduce_grads_in_fp32
    off even when that flag is given too."""
    assert _read("--grad-reduce-in-bf16 --accumulate-allreduce-grads-in-fp32").train.grad_dtype == "bf16"
    fp16 = DENSE.format(extra="--accumulate-allreduce-grads-in-fp32").replace("--bf16", "--fp16")
    assert load_native_text(fp16, "megatron", None, "dgx-h100", None).train.grad_dtype == "fp32"


def test_main_grads_dtype_beside_fp32_accumulation_is_refused():
    """arguments.py line 1187 asserts --main-grads-dtype fp32 when --accumulate-allreduce-grads-in-fp32 is given
    with --bf16; before, the script was priced with bf16 gradients."""
    lean = "--use-distributed-optimizer --use-precision-aware-optimizer --main-grads-dtype bf16"
    with pytest.raises(UserError, match="--main-grads-dtype bf16 with --accumulate-allreduce-grads-in-fp32"):
        _read(lean + " --accumulate-allreduce-grads-in-fp32")
    assert _read(lean).train.grad_dtype == "bf16"


# ---- full recompute without its method and layer count -------------------------------------------------------------

@pytest.mark.parametrize("extra, needle", [
    ("--recompute-granularity full", "--recompute-method uniform|block and --recompute-num-layers N"),
    ("--recompute-granularity full --recompute-method block", "needs --recompute-num-layers N"),
    ("--recompute-granularity full --recompute-num-layers 1", "needs --recompute-method uniform|block:"),
])
def test_full_recompute_without_method_or_layers_is_refused(extra, needle):
    """TransformerConfig.__post_init__ (transformer_config.py lines 1736-1747) raises: Megatron has no default
    method nor layer count for full recompute; before, every layer was priced recomputed one at a time."""
    with pytest.raises(UserError, match=needle.replace("|", r"\|")):
        _read(extra)
    assert _read("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1").layout.recompute \
        == "full"


# ---- --overlap-param-gather left out -------------------------------------------------------------------------------

def _dp_exposed_s(extra: str) -> float:
    p = load_native_text(DENSE.replace("--nnodes 1", "--nnodes 4").format(extra=extra), "megatron", None,
                         "dgx-h100", None)
    return estimate(p.model, p.cluster, p.train, p.layout).time.dp_comm_exposed_s


def test_without_overlap_param_gather_the_weight_gather_is_exposed():
    """Megatron's default is off (arguments.py: store_true): the distributed optimizer all-gathers the updated
    weights after the step, which nothing hides. Before, a script with --overlap-grad-reduce alone was priced with
    the gather overlapped, as the megatron-core stack's default."""
    base = "--use-distributed-optimizer --overlap-grad-reduce"
    both = _read(base + " --overlap-param-gather").train
    assert both.param_gather_overlap and not _read(base).train.param_gather_overlap
    assert _dp_exposed_s(base) > _dp_exposed_s(base + " --overlap-param-gather")


@pytest.mark.parametrize("extra, missing", [("--overlap-param-gather --overlap-grad-reduce", "--use-distributed"),
                                            ("--overlap-param-gather --use-distributed-optimizer", "--overlap-grad")])
def test_overlap_param_gather_without_its_companions_is_refused(extra, missing):
    """validate_args (arguments.py lines 990-995) asserts the distributed optimizer (or Megatron-FSDP) and
    --overlap-grad-reduce beside it."""
    with pytest.raises(UserError, match=f"--overlap-param-gather needs {missing}"):
        _read(extra)


# ---- --vocab-size (NullTokenizer) --------------------------------------------------------------------------------

def test_an_explicit_vocab_size_is_padded_as_megatron_pads_it():
    """megatron-core 0.19.2 build_tokenizer: the NullTokenizer has --vocab-size tokens, padded to a multiple of
    --make-vocab-size-divisible-by (128) x tp unless --no-pad-vocab-size: 32000 at tp 2 -> 32000 (a multiple of
    256), at tp 8 -> 32768."""
    tp8 = DENSE.replace("--tensor-model-parallel-size 2", "--tensor-model-parallel-size 8").replace(
        "--vocab-size 128256", "--vocab-size 32000")

    def vocab(text: str) -> int:
        return load_native_text(text, "megatron", None, "dgx-h100", None).model.vocab_size

    assert vocab(tp8.format(extra="")) == 32768
    assert vocab(tp8.format(extra="--no-pad-vocab-size")) == 32000
    assert vocab(DENSE.replace("--vocab-size 128256", "--vocab-size 32000").format(extra="")) == 32000


@pytest.mark.parametrize("extra, named", [
    ("--vocab-size 32000 --no-pad-vocab-size=yes", "--no-pad-vocab-size is a switch"),
    ("--swiglu --num-experts 8 --moe-router-topk 2 --disable-bias-linear --moe-token-dispatcher-type flex "
     "--moe-flex-dispatcher-backend weird", "--moe-flex-dispatcher-backend 'weird'"),
])
def test_values_megatrons_argparse_refuses_exit_2_naming_the_flag(extra, named):
    """Switch flags take no value and the flex backend is one of deepep, hybridep, ncclep (megatron-core 0.19.2
    TransformerConfig Literal): Megatron's argparse exits on either, and so does the reader."""
    with pytest.raises(UserError, match=named):
        _read(extra)
