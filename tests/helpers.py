"""Small builders shared by tests: GPT-style models and synthetic clusters without presets."""

from __future__ import annotations

import shutil
import struct
import zlib

from costmodels.hardware_spec import ClusterSpec, GPUProfile
from costmodels.model_spec import ModelSpec

A100_80 = GPUProfile(name="a100-80gb-test", hbm_gib=80.0, hbm_gb_per_s=2039.0, bf16_tflops=312.0,
                     fp16_tflops=312.0, sources=["published_numbers.md section 5"])


def gpt(h: int, a: int, layers: int, vocab: int = 51200, seq: int = 2048, **kw) -> ModelSpec:
    """A Megatron GPT: LayerNorm, GELU with f = 4h, biases, learned positions, tied embeddings, dropout."""
    return ModelSpec(name=kw.pop("name", f"gpt-{h}"), num_layers=layers, hidden_size=h, num_attention_heads=a,
                     vocab_size=vocab, seq_length=seq, tied_embeddings=True, **kw)


def llama_like(h: int, a: int, kv: int, layers: int, ffn: int, vocab: int = 32000, seq: int = 4096,
               **kw) -> ModelSpec:
    """A Llama-style model: RMSNorm, SwiGLU, RoPE, no biases, untied, no dropout."""
    return ModelSpec(name=kw.pop("name", f"llama-{h}"), num_layers=layers, hidden_size=h, num_attention_heads=a,
                     num_kv_heads=kv, ffn_hidden_size=ffn, vocab_size=vocab, seq_length=seq, activation="swiglu",
                     norm="rmsnorm", position_embedding="rope", linear_bias=False, dropout=False, **kw)


def cluster(num_gpus: int, per_node: int = 8, gpu: GPUProfile = A100_80, **kw) -> ClusterSpec:
    """A cluster of `num_gpus` GPUs (one partial node when fewer than `per_node`)."""
    if num_gpus < per_node:
        per_node = num_gpus
    return ClusterSpec(name="test", gpu=gpu, gpus_per_node=per_node, num_nodes=num_gpus // per_node,
                       scale_up_gb_per_s=300.0, scale_out_gb_per_s=25.0, **kw)


def chromium() -> str | None:
    """The headless browser of the screenshot tests (.ci/run installs Debian's chromium)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def png_distinct_rows(png: bytes) -> int:
    """Distinct scanlines of an 8-bit RGB(A) PNG (a blank page has one)."""
    pos, chunks, width, channels = 8, [], 0, 4
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, channels = struct.unpack(">I", data[:4])[0], {2: 3, 6: 4}[data[9]]
        elif kind == b"IDAT":
            chunks.append(data)
        pos += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    stride = 1 + width * channels
    return len({raw[i + 1:i + stride] for i in range(0, len(raw), stride)})


# A Megatron launch of an 8-expert MoE over 16 H100 (EP 8, all-to-all dispatcher); `{extra}` takes the flags a
# test adds (tests/test_ep_overlap.py, tests/test_moe_balance.py).
MOE_MEGATRON_SCRIPT = """torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py \\
  --num-layers 8 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention \\
  --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000 --swiglu \\
  --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights \\
  --disable-bias-linear --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 14336 \\
  --expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall --use-distributed-optimizer \\
  --micro-batch-size 1 --global-batch-size 64 --bf16 {extra}
"""
