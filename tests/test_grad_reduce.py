"""The data-parallel gradient reduction moves the dtype the framework reduces in (Mechanisms.grad_reduce_bytes):
Megatron with --bf16 reduces fp32 gradients unless --grad-reduce-in-bf16 (accumulate_allreduce_grads_in_fp32),
torchtitan's FSDP2 reduce_dtype is float32; DeepSpeed and plain FSDP reduce in the weights' dtype. The time
model priced every reduction in 16 bits, half the bytes Megatron and torchtitan put on the wire."""

from __future__ import annotations

import pytest

import hardware_profiles as hp
from costmodels.layout import Layout, resolve_layout
from costmodels.step import step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec


def _train(stack: str, **kw) -> TrainSpec:
    return hp.resolve_train(TrainSpec(global_batch_size=64, **kw), stack)


@pytest.mark.parametrize("stack,precision,grad_dtype,want", [
    ("megatron-core", "bf16", None, 4), ("nemo", "fp8", None, 4), ("megatron-2021", "fp16", None, 2),
    ("megatron-core", "bf16", "bf16", 2), ("torchtitan", "bf16", None, 4), ("torchtitan-eager", "fp8", None, 4),
    ("deepspeed", "bf16", None, 2), ("fsdp", "bf16", None, 2), ("megatron-core", "fp32", None, 4),
    ("automodel", "bf16", None, 4)])
def test_reduction_dtype_per_framework(stack, precision, grad_dtype, want):
    assert _train(stack, precision=precision, grad_dtype=grad_dtype).grad_reduce_bytes_per_param == want


def test_an_exposed_megatron_reduction_takes_twice_the_16_bit_one():
    """Llama 3 8B, data-parallel all-reduce (ZeRO-0) over 16 H100 (two nodes), not overlapped: fp32 gradients
    take about twice as long on the wire as --grad-reduce-in-bf16's."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", num_nodes=2)

    def reduce_s(grad_dtype):
        train = _train("megatron-core", grad_dtype=grad_dtype, overlap_grad_reduce=False)
        lay = resolve_layout(model, cluster, train, Layout(zero=0, mbs=1))
        return step_time(make_context(model, cluster, train, lay)).dp_comm_exposed_s

    fp32, bf16 = reduce_s(None), reduce_s("bf16")
    assert 1.7 * bf16 <= fp32 <= 2.1 * bf16
