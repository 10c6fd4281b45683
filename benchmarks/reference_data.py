"""The published measurements parplan is calibrated and validated against, as parplan problems.

Each loader returns Cases: the model, cluster, train spec and layout of one published run and
its measured step time in seconds. Run conditions come from benchmarks/data (README, NOTES.md,
published_numbers.md); every assumption the sources leave open is named here.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import hardware_profiles as hp
from costmodels.hardware_spec import ClusterSpec, GPUProfile
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec

MEGATRON_2021 = "megatron-2021"  # the stack of Narayanan's, Korthikanti's and vTrain's runs


def megatron_2021_train(**fields) -> TrainSpec:
    """A TrainSpec on the megatron-2021 stack (no overlap): fp16, classic attention, fp32 main gradients
    all-reduced in fp32 (--accumulate-allreduce-grads-in-fp32), as the stack's memory semantics assume
    (grad_buffer_bytes 4). Assumed: none of the sources states the gradient dtype. Refit with it and the
    4-NIC NCCL row (commits 9335d96, 397bb51), held out: vtrain-multi 8.4 -> 7.8%, Narayanan 6.0 -> 5.6%."""
    return hp.resolve_train(TrainSpec(precision="fp16", grad_dtype="fp32", flash_attention=False, **fields),
                            MEGATRON_2021)

REF = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Case:
    """One published run."""

    dataset: str
    label: str
    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    layout: Layout
    measured_s: float


def gpt(h: int, a: int, layers: int, vocab: int, seq: int) -> ModelSpec:
    """Megatron GPT: LayerNorm, GELU, f = 4h, biases, learned positions, tied embeddings, dropout."""
    return ModelSpec(name=f"gpt-h{h}-l{layers}", num_layers=layers, hidden_size=h, num_attention_heads=a,
                     vocab_size=vocab, seq_length=seq, tied_embeddings=True)


def preset_latencies(preset: str) -> dict:
    """The NCCL per-step latencies (fitted by benchmarks/calibrate_nccl.py) of a cluster preset."""
    c = hp.load_cluster(preset)
    return {"scale_up_latency_us": c.scale_up_latency_us, "scale_out_latency_us": c.scale_out_latency_us}


def a100_cluster(gpu: GPUProfile, gpus: int, scale_out_gb_per_s: float) -> ClusterSpec:
    """DGX-A100-like nodes of 8 GPUs (a smaller single node when fewer GPUs), NVLink 3 at 300 GB/s,
    the dgx-a100 preset's fitted collective latencies."""
    per = min(gpus, 8)
    return ClusterSpec(name="a100-ref", gpu=gpu, gpus_per_node=per, num_nodes=gpus // per,
                       scale_up_gb_per_s=300.0, scale_out_gb_per_s=scale_out_gb_per_s,
                       **preset_latencies("dgx-a100"))


def narayanan(gpu: GPUProfile) -> list[Case]:
    """Narayanan et al. SC'21 Table 1: fp16, full recompute, no flash attention, vocabulary 51,200,
    sequence 2,048, 8 x 200 Gb/s HDR per node (25 GB/s per GPU); interleaved where a virtual-stage
    size is given. Gradient all-reduce not overlapped (Megatron-LM of 2021). Step time from eq. (3)."""
    cases = []
    with open(REF / "narayanan2021_table1.csv") as fh:
        for r in csv.DictReader(fh):
            h, a, L = int(r["hidden_size"]), int(r["num_attention_heads"]), int(r["num_layers"])
            tp, pp, gpus, B, b = (int(r[k]) for k in ("tp", "pp", "num_gpus", "global_batch", "micro_batch"))
            lvs = r["layers_per_virtual_stage"]
            vpp = (L // pp) // int(lvs) if lvs else 1
            s, V = 2048, 51200
            flops = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
            step = flops / (gpus * float(r["achieved_tflops_per_gpu"]) * 1e12)
            cases.append(Case(
                "narayanan2021", f"{r['params_billion']}B", gpt(h, a, L, V, s),
                a100_cluster(gpu, gpus, 25.0),
                megatron_2021_train(global_batch_size=B),
                Layout(tp=tp, pp=pp, vpp=vpp, mbs=b, recompute="full"), step))
    return cases


def _vtrain_vocab(tp: int) -> int:
    """GPT-2 BPE (50,257) padded to a multiple of 128 * tp, as Megatron does."""
    mult = 128 * tp
    return math.ceil(50257 / mult) * mult


def vtrain(gpu: GPUProfile, which: str) -> list[Case]:
    """vTrain measured Megatron runs (vtrain/NOTES.md): GPT, fp16, full recompute, 1F1B, classic
    attention (assumed: no flash), no gradient bucketing (all-reduce exposed), 4 x HDR per node
    (100 GB/s per node = 12.5 GB/s per GPU)."""
    cases = []
    with open(REF / "vtrain" / f"ground_truth_{which}.csv") as fh:
        for i, r in enumerate(csv.DictReader(fh)):
            g = lambda k: int(float(r[k]))  # noqa: E731
            tp, dp, pp = g("tensor parallelism"), g("data parallelism"), g("pipeline parallelism")
            h, a, L, s = g("hidden size"), g("attention heads"), g("# layers"), g("sequence length")
            cases.append(Case(
                f"vtrain-{which}", f"row{i + 2}", gpt(h, a, L, _vtrain_vocab(tp), s),
                a100_cluster(gpu, g("# GPUs"), 12.5),
                megatron_2021_train(global_batch_size=g("global batch")),
                Layout(tp=tp, pp=pp, dp=dp, mbs=g("micro batch"), recompute="full"),
                float(r["iteration time (ms)"]) / 1e3))
    return cases


KORTHIKANTI_TABLE4 = [  # experiment, sp, recompute, forward ms, backward ms (22B layer, A100)
    ("no recompute", False, "none", 7.7, 11.9),
    ("sequence parallel", True, "none", 7.2, 11.8),
    ("full recompute", False, "full", 7.7, 19.5),
    ("selective recompute", False, "selective", 7.7, 13.2),
    ("selective + sequence parallel", True, "selective", 7.2, 13.1),
]


def korthikanti_layer(gpu: GPUProfile) -> list[tuple[str, ModelSpec, ClusterSpec, TrainSpec, Layout, float]]:
    """Korthikanti et al. Table 4: one 22B layer (h 6144, a 64, s 2048, b 4, t 8) on A100, fwd + bwd ms."""
    model = gpt(6144, 64, 48, 51200, 2048)
    cluster = a100_cluster(gpu, 8, 25.0)
    train = megatron_2021_train(global_batch_size=4)
    return [(name, model, cluster, train, Layout(tp=8, sp=sp, mbs=4, recompute=rc), (f + b) / 1e3)
            for name, sp, rc, f, b in KORTHIKANTI_TABLE4]
