"""Every Megatron flag that changes memory is read and priced, or warned about (issue 34).

Flag names and defaults: megatron-core 0.16.1's config dataclasses (tests/data/megatron_core_0.16.1_config_fields.txt,
see its header) and planner/frameworks/megatron/flag_table.py. Each test compares one script with and without a flag:
it fails if the flag is read but ignored (identical numbers), which is the symptom users met.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from costmodels.estimate import estimate
from planner.errors import UserError
from planner.frameworks.megatron import flag_table as table
from planner.files.native import load_native_text

FIELDS = Path(__file__).parent / "data" / "megatron_core_0.16.1_config_fields.txt"
# What can change per-GPU memory: recompute, offload, low precision, dtypes, MoE, CUDA graphs, FSDP, buffers...
MEMORY = re.compile(r"recompute|offload|fp8|fp4|dtype|^moe_|cuda_graph|fsdp|buffer|grad_reduce|param_gather|"
                    r"precision|^mtp|activation|capacity|checkpoint|cpu_|distribute_saved|sharding|memory|cache|"
                    r"wgrad|store|fusion")

BASE = """torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \\
  --num-layers 8 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention \\
  --num-query-groups 8 --seq-length 4096 --vocab-size 128256 --swiglu --normalization RMSNorm \\
  --position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear \\
  --attention-dropout 0 --hidden-dropout 0 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \\
  --sequence-parallel --use-distributed-optimizer --micro-batch-size 1 --global-batch-size 16 --bf16 {extra}
"""
MOE = " --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 4096 --expert-model-parallel-size 2"


def _problem(extra: str = "", env: str = ""):
    return load_native_text(env + BASE.format(extra=extra), "megatron", None, "dgx-h100", None)


def _stage0(extra: str = "", env: str = ""):
    p = _problem(extra, env)
    return estimate(p.model, p.cluster, p.train, p.layout).memory.stages[0]


def _memory_fields() -> list[str]:
    lines = [line.split()[1] for line in FIELDS.read_text().splitlines() if line and not line.startswith("#")]
    return sorted({f for f in lines if MEMORY.search(f)})


@pytest.mark.parametrize("field", _memory_fields())
def test_every_memory_flag_megatron_defines_is_classified(field):
    flag = table.field_flag(field)
    assert flag is None or table.verdict(flag) is not None, f"{flag} (config field {field}) is in no table"


def test_tables_do_not_overlap_and_legacy_flags_are_classified():
    groups = [set(table.PRICED), set(table.MODEL), set(table.HARMLESS), set(table.WARNED)]
    assert sum(map(len, groups)) == len(set().union(*groups))
    assert all(table.verdict(f) for f in table.LEGACY)


def test_grad_reduce_in_bf16_halves_the_gradient_buffer():
    # the symptom: parplan's own exporter writes --grad-reduce-in-bf16 and grads stayed at 4 bytes
    fp32, bf16 = _stage0(), _stage0("--grad-reduce-in-bf16")
    assert bf16.grads_bytes * 2 == pytest.approx(fp32.grads_bytes, rel=1e-6)
    assert _problem("--accumulate-allreduce-grads-in-fp32").train.grad_dtype == "fp32"


def test_precision_aware_optimizer_dtypes_shrink_the_states():
    base = _stage0()
    lean = _stage0("--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --main-grads-dtype bf16")
    assert lean.optimizer_bytes == pytest.approx(base.optimizer_bytes * 8 / 12, rel=1e-6)  # 4 + 2 + 2 of 4 + 4 + 4
    assert lean.grads_bytes * 2 == pytest.approx(base.grads_bytes, rel=1e-6)
    ignored = _stage0("--exp-avg-dtype bf16")  # Megatron reads the dtypes only with the precision-aware optimizer
    assert ignored.optimizer_bytes == base.optimizer_bytes


def test_fp8_weights_and_activations():
    bf16, fp8 = _stage0(), _stage0("--fp8-format hybrid")
    assert fp8.activations_bytes < bf16.activations_bytes  # TE keeps GEMM inputs in FP8
    assert fp8.weights_bytes == pytest.approx(2 * bf16.weights_bytes, rel=1e-6)  # + FP8 copy and transpose (2 B)
    gathered = _stage0("--fp8-format hybrid --fp8-param-gather")
    assert gathered.weights_bytes == pytest.approx(bf16.weights_bytes, rel=1e-6)  # 1 B weight + 1 B transpose
    assert _problem("--fp8-param-gather").train.fp8_param_gather is False  # without FP8 Megatron ignores it


def test_recompute_modules_and_legacy_checkpoint_flags():
    none = _stage0().activations_bytes
    core = _stage0("--recompute-granularity selective").activations_bytes
    mlp = _stage0("--recompute-granularity selective --recompute-modules core_attn,mlp").activations_bytes
    assert core == none  # flash attention: core attention recompute frees nothing
    assert mlp < core
    legacy = _problem("--checkpoint-activations --activations-checkpoint-method block --activations-checkpoint-num-layers 1")
    assert (legacy.layout.recompute, legacy.layout.recompute_method, legacy.layout.recompute_num_layers) == \
        ("full", "block", 1)
    assert _problem("--recompute-activations").layout.recompute == "selective"
    moe = [_stage0(MOE + " --recompute-granularity selective --recompute-modules " + m).activations_bytes
           for m in ("core_attn", "moe_act", "moe")]
    assert moe[0] > moe[1] > moe[2]


def test_recompute_num_layers_hand_worked():
    """4 layers per rank, one chunk. block N=4 = every layer one by one = plain full recompute; block N=2 keeps
    two layers whole; uniform N=2 keeps 2 inputs, not 4, and rebuilds two layers at once."""
    full = _stage0("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
    block4 = _stage0("--recompute-granularity full --recompute-method block --recompute-num-layers 4")
    block2 = _stage0("--recompute-granularity full --recompute-method block --recompute-num-layers 2")
    none = _stage0()
    assert block4.activations_bytes == full.activations_bytes
    assert full.activations_bytes < block2.activations_bytes < none.activations_bytes
    uniform2 = _stage0("--recompute-granularity full --recompute-method uniform --recompute-num-layers 2")
    assert uniform2.activations_bytes != full.activations_bytes


def test_activation_offload_and_optimizer_offload_flags():
    base = _stage0().activations_bytes
    off = _stage0("--cpu-offloading --cpu-offloading-num-layers 2").activations_bytes
    assert off < base
    train = _problem("--optimizer-cpu-offload --optimizer-offload-fraction 0.5").train
    assert (train.offload_optimizer, train.offload_optimizer_fraction) == ("cpu", 0.5)
    with pytest.raises(UserError, match="--optimizer-offload-fraction"):
        _problem("--optimizer-cpu-offload --optimizer-offload-fraction 2")


def test_fused_loss_dispatcher_and_allocator_are_read():
    assert _problem("--cross-entropy-loss-fusion").train.fused_loss is True
    assert _problem(MOE + " --moe-token-dispatcher-type flex").train.moe_dispatcher == "alltoall"
    env = "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
    assert _problem(env=env).train.alloc_expandable is True
    assert _problem().train.alloc_expandable is False


def test_unpriced_flags_warn_once_each_and_bad_values_name_the_flag():
    p = _problem("--enable-cuda-graph --fp8-dot-product-attention --moe-permute-fusion")
    assert [w.split()[0] for w in p.warnings] == ["--enable-cuda-graph", "--fp8-dot-product-attention"]
    assert _problem().warnings == []
    with pytest.raises(UserError, match="--recompute-modules 'attn'"):
        _problem("--recompute-granularity selective --recompute-modules attn")
    with pytest.raises(UserError, match="--recompute-method 'random'"):
        _problem("--recompute-granularity full --recompute-method random")


def test_megatron_deepspeed_bf16_optimizer_is_zero1_and_legacy_recompute_is_full():
    """BLOOM's tr11-176B-ml.slurm (bigscience-workshop/bigscience, train/tr11-176B-ml): --deepspeed --zero-stage 0
    --bf16 runs DeepSpeed's BF16_Optimizer, "its own zero stage 1 equivalent" (the script's comment), and
    --checkpoint-activations recomputes every layer. Both were read as nothing: 131.7 GiB for a run that trained."""
    p = _problem("--deepspeed --deepspeed_config ds.json --zero-stage 0 --deepspeed-activation-checkpointing "
                 "--checkpoint-activations")
    assert (p.layout.zero, p.layout.recompute, p.train.grad_dtype) == (1, "full", "fp32")
    assert [w.split()[0] for w in p.warnings] == ["--deepspeed_config"]
    assert _problem("--deepspeed --zero-stage 2").layout.zero == 2
    with pytest.raises(UserError, match="--zero-stage 4"):
        _problem("--deepspeed --zero-stage 4")


def test_recompute_modules_given_as_separate_words_are_all_read():
    """--recompute-modules is argparse nargs='+': `--recompute-modules mlp moe layernorm` names three
    modules (NVIDIA's Megatron-FSDP DeepSeek-V3 script), not one followed by stray words."""
    from planner.frameworks.megatron.flags import layout_data, model_data, read_megatron
    script = ("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
              "--vocab-size 1000 --micro-batch-size 1 --bf16 --recompute-granularity selective "
              "--recompute-modules mlp moe layernorm --use-distributed-optimizer\n")
    args = read_megatron(script)
    assert layout_data(args, model_data(args))["recompute_modules"] == ["mlp", "moe", "layernorm"]
    assert args.has("--use-distributed-optimizer")


MDS_LLAMA2 = """torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --tensor-model-parallel-size 2 \\
  --pipeline-model-parallel-size 2 --num-layers 24 --hidden-size 2048 --ffn-hidden-size 5504 \\
  --num-attention-heads 16 --micro-batch-size 4 --global-batch-size 32 --seq-length 2048 \\
  --max-position-embeddings 2048 --vocab-size 32000 --bf16 --no-query-key-layer-scaling --attention-dropout 0 \\
  --hidden-dropout 0 --use-rotary-position-embeddings --untie-embeddings-and-output-weights --swiglu \\
  --normalization {norm} --disable-bias-linear --num-key-value-heads 4 --zero-stage=0 --deepspeed
"""


@pytest.mark.parametrize("norm, expected", [("rmsnorm", "rmsnorm"), ("layernorm", "layernorm"),
                                            ("RMSNorm", "rmsnorm")])
def test_megatron_deepspeed_llama_flags_are_read_in_their_own_spelling(norm, expected):
    """Microsoft Megatron-DeepSpeed's examples_deepspeed/pretrain_llama2_distributed.sh writes
    `--normalization rmsnorm` (lower case), `--use-rotary-position-embeddings` and `--num-key-value-heads 4`.
    The first was refused ("parplan knows LayerNorm, RMSNorm") and the other two were dropped: learned
    positions and 16 KV heads, 1.27 B parameters for a 1.19 B model."""
    from costmodels.params import total_params

    p = load_native_text(MDS_LLAMA2.format(norm=norm), "megatron", None, "dgx-a100", None)
    assert (p.model.norm, p.model.position_embedding, p.model.num_kv_heads) == (expected, "rope", 4)
    assert total_params(p.model) == pytest.approx(1.194e9, rel=1e-3)
    with pytest.raises(UserError, match="--normalization 'batchnorm'.*rmsnorm"):
        load_native_text(MDS_LLAMA2.format(norm="batchnorm"), "megatron", None, "dgx-a100", None)


def test_megatron_deepspeed_attention_kernel_and_ulysses_are_read():
    """Megatron-DeepSpeed runs Megatron's unfused core attention (the s x s scores stored) unless a
    --use-flash-attn* flag picks FlashAttention; examples_deepspeed/sequence_parallel's
    ds_pretrain_gpt_1.3B_seq_parallel_32k.sh shards the 32k sequence over --ds-sequence-parallel-size 4
    (DeepSpeed-Ulysses, all-to-all). Both were read as flash attention on one whole sequence per GPU."""
    script = MDS_LLAMA2.format(norm="rmsnorm")
    assert not load_native_text(script, "megatron", None, "dgx-a100", None).train.flash_attention
    p = load_native_text(script.replace("--deepspeed", "--deepspeed --use-flash-attn-v2 --ds-sequence-parallel-size 2"),
                         "megatron", None, "dgx-a100", None)
    assert p.train.flash_attention and (p.layout.cp, p.layout.cp_comm) == (2, "a2a")
