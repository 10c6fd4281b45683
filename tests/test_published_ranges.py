"""Plans against the utilization published runs reached on the same hardware (issue 35), each range from named
rows: benchmarks/data/measured/measured_runs.csv (torchtitan's A100 table, TT-036..043; its H100 FSDP2 rows) and
tests/data/published_a100_mfu.json (FlashAttention-2's end-to-end A100 training without activation checkpointing).

Every MFU here is parplan's convention (costmodels.compute: PaLM / Korthikanti Appendix A, causal scores counted
in full, the logits GEMM counted, the input-embedding lookup not). A published MFU in another convention is first
converted; test_torchtitan_a100_table_counts_the_input_embedding shows the one conversion this needs."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

import hardware_profiles as hp
from costmodels import compute as cmp
from costmodels.estimate import estimate
from costmodels.kernels import gemm_kernel_efficiency
from costmodels.layout import Layout, resolve_layout
from costmodels.params import total_params
from costmodels.step import step_time
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec

ROOT = Path(__file__).resolve().parents[1]
A100_PEAK = 312e12
with (ROOT / "benchmarks/data/measured/measured_runs.csv").open() as _f:
    ROWS = {r["id"]: r for r in csv.DictReader(_f)}
PUBLISHED = {r["id"]: r for r in json.loads((ROOT / "tests/data/published_a100_mfu.json").read_text())["rows"]}


def _flops_per_token(model, cluster, train, layout) -> float:
    """parplan's model FLOPs per token (three passes, no recompute) of the estimate of `layout`."""
    t = estimate(model, cluster, train, layout).throughput
    return t.model_tflops_per_gpu * 1e12 * cluster.num_gpus / t.tokens_per_s


def _reported_mfu(row: dict) -> float:
    return float(re.search(r"reported MFU ([\d.]+)%", row["notes"]).group(1)) / 100


def _tokens_per_gpu_s(row: dict) -> float:
    assert row["metric"] == "tokens_per_s_per_gpu"
    return float(row["value"])


def _parplan_mfu(row_id: str) -> float:
    """A torchtitan A100 row's MFU in parplan's convention: its tokens/s per GPU x parplan's FLOPs per token."""
    row = ROWS[row_id]
    model = hp.load_model(row["model"]).model_copy(update={"seq_length": int(row["seq_len"])})
    cluster = hp.load_cluster("dgx-a100", num_nodes=int(row["num_gpus"]) // 8)
    per_token = _flops_per_token(model, cluster, TrainSpec(global_batch_size=int(row["global_batch_seqs"])),
                                 Layout(zero=3, mbs=int(row["micro_batch"])))
    return _tokens_per_gpu_s(row) * per_token / A100_PEAK


@pytest.mark.parametrize("row_id", ["TT-036", "TT-037", "TT-039"])
def test_torchtitan_a100_table_counts_the_input_embedding(row_id):
    """torchtitan docs/performance.md @157a12c56 (Apr 2024) MFU: 6 x ALL parameters + 12 x layers x heads x head
    dim x seq per token (get_num_flop_per_token's form with the input embedding NOT excluded; inferred: it
    reproduces the table's 56.8% / 58.2% (Llama 3 8B) and 61.1% (Llama 2 13B) to 0.1 point). parplan's count,
    which leaves the input lookup out (no FLOPs; 525M parameters in Llama 3 8B), gives 53.9% / 55.2% / 60.4%. The
    A100 range below is therefore 53.9-55.2%, not the 56.8-58.2% printed in the table."""
    row = ROWS[row_id]
    model = hp.load_model(row["model"]).model_copy(update={"seq_length": int(row["seq_len"])})
    seq = int(row["seq_len"])
    torchtitan_per_token = 6 * total_params(model) + 12 * model.num_layers * model.q_width * seq
    assert _tokens_per_gpu_s(row) * torchtitan_per_token / A100_PEAK == pytest.approx(_reported_mfu(row), abs=0.0006)
    embedding_share = 6 * model.vocab_size * model.hidden_size / torchtitan_per_token
    assert _parplan_mfu(row_id) == pytest.approx(_reported_mfu(row) * (1 - embedding_share), abs=0.001)


def test_torchtitan_a100_llama3_8b_runs_are_priced_in_their_range():
    """TT-036/037 (Llama 3 8B, seq 8192, FSDP2 on 64 A100 80GB, local batch 1, selective AC, eager): 53.9% and
    55.2% in parplan's convention. Their layout, as benchmarks/measured_data.py reads it (stack torchtitan-eager,
    per-op selective recompute), lands within 5% of that range."""
    row = ROWS["TT-036"]
    model = hp.load_model("llama3-8b")
    cluster = hp.load_cluster("dgx-a100", num_nodes=8)
    train = hp.resolve_train(TrainSpec(global_batch_size=int(row["global_batch_seqs"])), "torchtitan-eager")
    mfu = estimate(model, cluster, train, Layout(zero=3, mbs=1, recompute="selective")).throughput.mfu
    low, high = _parplan_mfu("TT-036"), _parplan_mfu("TT-037")
    assert 0.95 * low <= mfu <= 1.05 * high


def test_llama3_8b_on_two_dgx_a100_lands_in_the_published_a100_range():
    """`parplan plan llama3-8b --cluster dgx-a100 --nodes 2` at the CLI's default batch (512): the winner is
    megatron-core, tp1 pp1 dp16, ZeRO-2, mbs 1, NO recompute, fused kernels, priced at ~70.6% MFU.

    The published range for that layout: floor 55.2%, TT-037 in parplan's convention (the same model, GPU and
    sequence, which also recomputes half its matmuls and gathers every parameter over 64 GPUs: work this plan does
    not do); top 72.1%, FlashAttention-2's end-to-end A100 training without activation checkpointing and with fused
    kernels throughout (tests/data/published_a100_mfu.json: "up to 225 TFLOPs/sec per A100, equivalent to 72% model
    FLOPs utilization (we don't need any activation checkpointing)"). Issue 35's 50-60% came from runs that
    recompute (TT-036/037; Narayanan et al. 2021 Table 1, full recompute, 44-52% hardware FLOPs) and from
    torchtitan's embedding-inclusive MFU; no published A100 run without recompute sits there. The mechanisms checked
    and found priced (docs/kernels.md, "Llama 3 8B on A100"): GEMMs at the kernel model's typical rate for these
    shapes (test below), causal FA2 at 0.38 of executed FLOPs (under FA2's published 50-73%), element-wise work,
    DP reduce-scatters hidden behind 1.4 s of backward per micro-batch."""
    from planner.cli_common import DEFAULT_PLAN_BATCH  # noqa: PLC0415
    from planner.search import search  # noqa: PLC0415

    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-a100", num_nodes=2)
    best = search(model, cluster, TrainSpec(global_batch_size=DEFAULT_PLAN_BATCH)).plans[0]
    assert best.layout.recompute == "none"
    assert _parplan_mfu("TT-037") <= best.throughput.mfu <= PUBLISHED["fa2-readme-gpt3-no-ac"]["mfu"]


def test_llama3_8b_with_recompute_on_two_dgx_a100_stays_under_the_no_recompute_plan():
    """The same 16 A100 with the recompute the published 50-60% runs use: selective and full recompute are priced
    slower than none, and full recompute (a whole extra forward: Narayanan's regime) lands in 50-60%."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-a100", num_nodes=2)
    train = TrainSpec(global_batch_size=512)
    mfu = {rc: estimate(model, cluster, train, Layout(zero=2, mbs=1, recompute=rc)).throughput.mfu
           for rc in ("none", "selective", "full")}
    assert mfu["full"] < mfu["selective"] < mfu["none"]
    assert 0.50 <= mfu["full"] <= 0.60


@pytest.mark.parametrize("name, m, k, n", [("qkv", 8192, 4096, 6144), ("proj", 8192, 4096, 4096),
                                           ("gate+up", 8192, 4096, 28672), ("down", 8192, 14336, 4096),
                                           ("logits", 8192, 4096, 128256)])
def test_a100_gemm_fit_agrees_with_the_kernel_model_at_llama3_8b_shapes(name, m, k, n):
    """Two independent sources for the same GEMM: the A100 step-time curve (fitted on 1,500 vTrain Megatron rows,
    seq 2048, GPT shapes) and the kernel model (A100's MAMF 271.2 / 312 = 0.869, its 108 SMs' tile and wave
    quantization, the K ramp measured on H100). At Llama 3 8B's layer shapes on 8,192 tokens the fit is never
    faster than the kernel model's typical rate and at most 12% slower (qkv -1%, proj -4%, gate+up -1%, logits
    -0.4%; down -9%: K = 14,336 is long, which the harmonic-size curve does not reward): the 74-77% of peak the
    A100 GEMMs run at is what the spec sheet, MAMF and the shapes give, not a leftover of the fit."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-a100", num_nodes=2)
    train = TrainSpec(global_batch_size=512)
    dev = make_context(model, cluster, train, estimate(model, cluster, train, Layout(zero=2, mbs=1)).layout).dev16
    fitted, typical = cmp.device_gemm_efficiency(dev, m, k, n), gemm_kernel_efficiency(dev.kernel, m, k, n)
    assert 0.88 * typical <= fitted <= typical


def test_a100_attention_is_priced_no_faster_than_flashattention2_publishes():
    """FlashAttention-2 (Dao 2023): "50-73% of the theoretical maximum FLOPs/s on A100" (kernels.json); its
    backward runs at the low end. parplan's A100 causal attention at seq 8192, head dim 128 runs at 0.38 of peak on
    executed FLOPs: under that range, so attention is not where a too-fast A100 plan would come from."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-a100", num_nodes=2)
    train = TrainSpec(global_batch_size=512)
    ctx = make_context(model, cluster, train, estimate(model, cluster, train, Layout(zero=2, mbs=1)).layout)
    assert cmp.attention_efficiency(model, ctx.x, ctx.dev16) <= 0.50


@pytest.mark.parametrize("stack", ["megatron-core", "nemo", "deepspeed"])
def test_no_h100_fitted_stack_factor_leaks_into_a100_compute(stack):
    """A stack fixes mechanisms (overlaps, buckets, fusion, recompute policy); a GPU enters through its spec sheet,
    its generation and its own fitted curve. The A100 curve was fitted with megatron-2021 on vTrain and Korthikanti
    rows, so a stack running the same GEMM and attention kernels (Megatron-Core with TE, NeMo, DeepSpeed's Hugging
    Face models through cuBLAS and FlashAttention-2) prices the same A100 compute seconds for the same layout once
    its element-wise fusion (a mechanism: DeepSpeed's eager models do not fuse) is Megatron's: any factor fitted
    on H100 rows (gemm_scale, attn_scale) would show here as a difference. Flash attention is named, since
    megatron-2021 defaults to none."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-a100", num_nodes=2)

    def compute_s(name: str, fused: bool = False) -> float:
        train = hp.resolve_train(TrainSpec(global_batch_size=512, flash_attention=True), name)
        if fused:
            stack = train.stack_spec
            mega = hp.load_stack("megatron-2021").fitted.elementwise_scale
            train = train.model_copy(update={"stack": stack.model_copy(update={
                "fitted": stack.fitted.model_copy(update={"elementwise_scale": mega})})})
        return estimate(model, cluster, train, Layout(zero=1, mbs=1)).time.compute_s

    assert compute_s(stack, fused=True) == pytest.approx(compute_s("megatron-2021"), rel=1e-9)


def test_deepspeeds_eager_models_are_no_faster_than_torchtitans_compiled_ones():
    """DeepSpeed runs Hugging Face models in eager PyTorch (the stack's memory semantics); the same ZeRO-3 layout
    under compiled torchtitan fuses the element-wise work. Before the deepspeed stack took eager element-wise
    kernels it priced Llama 3 8B on 8 H100 at 42.1% MFU against torchtitan's 40.6% (a new-user pass)."""
    model, cluster = hp.load_model("llama3-8b").model_copy(update={"seq_length": 4096}), hp.load_cluster("dgx-h100")
    lay = Layout(dp=8, zero=3, mbs=2, recompute="full")

    def mfu(name: str) -> float:
        train = hp.resolve_train(TrainSpec(global_batch_size=128), name)
        return estimate(model, cluster, train, lay).throughput.mfu

    assert mfu("deepspeed") < mfu("torchtitan")


def _ds_zero3_llama8b_step_s() -> float:
    """Issue 35's DeepSpeed case: Llama 3 8B at seq 4096, global batch 32, ZeRO-3, mbs 2, full recompute, 16 H100."""
    model = hp.load_model("llama3-8b").model_copy(update={"seq_length": 4096})
    cluster = hp.load_cluster("dgx-h100", num_nodes=2)
    train = hp.resolve_train(TrainSpec(global_batch_size=32), "deepspeed")
    lay = resolve_layout(model, cluster, train, Layout(zero=3, mbs=2, recompute="full"))
    return step_time(make_context(model, cluster, train, lay)).step_s


RECIPES = {r["id"]: r for r in json.loads((ROOT / "benchmarks/data/measured/production_recipes_h100.json")
                                          .read_text())["rows"]}


def deepspeed_zero3_8b_range() -> tuple[float, float]:
    """Tokens/s per GPU that Llama 3 8B under ZeRO-3 with full recompute may run at on DGX H100 (700 W).

    No DeepSpeed ZeRO-3 run on H100 is published in ../shared/reference/measured (its DeepSpeed rows are
    ZeRO++ and ZeRO-3 Offload on V100, DeepSpeed-MoE on A100). The range is bounded by the same model's
    sharded runs on H100:
    - floor: half the bottom of torchtitan's FSDP2 table (Dec 2024, TT-001, 002, 004, 005: bf16, selective AC,
      seq 8192, 5,605-6,667 tokens/s per GPU on 500 W parts): ZeRO-3 moves the same 3 x 16 GB per step, and
      full recompute plus DeepSpeed's per-module hooks may cost up to half;
    - ceiling: Megatron-Bridge's Megatron-FSDP recipe on 8 DGX-H100 GPUs (mb2511-h100-llama3-8b-fsdp, FP8
      current scaling, no recompute, 14,451 tokens/s per GPU) with full recompute's extra forward (x 3/4): a
      bf16 run cannot beat an FP8 one of the same model on the same GPU. The 500 W table is no ceiling for
      a 700 W part (its authors place its peak between the SXM's and the NVL's)."""
    rows = [ROWS[i] for i in ("TT-001", "TT-002", "TT-004", "TT-005")]
    assert all(r["model"] == "llama3-8b" and r["precision"] == "bf16" and r["sharding"] == "fsdp-full" for r in rows)
    fsdp = RECIPES["mb2511-h100-llama3-8b-fsdp"]
    assert fsdp["model"] == "llama3-8b" and fsdp["precision"] == "fp8" and "recompute=none" in fsdp["layout"]
    return 0.5 * min(map(_tokens_per_gpu_s, rows)), fsdp["value"] * 3 / 4


def test_deepspeed_zero3_llama3_8b_on_16_h100_lands_in_the_published_range():
    """Issue 35's DeepSpeed case (it was 970 tokens/s per GPU, 33.8 s a step) lands in
    deepspeed_zero3_8b_range: 2,802.5-10,838 tokens/s per GPU."""
    low, high = deepspeed_zero3_8b_range()
    assert (low, high) == (2802.5, 10838.25)
    tokens_per_gpu_s = 32 * 4096 / _ds_zero3_llama8b_step_s() / 16
    assert low <= tokens_per_gpu_s <= high


def test_megatron_2021_stack_prices_the_attention_it_had():
    """Narayanan et al. SC'21 Table 1 (vendored narayanan2021_table1.csv): the 1.7B model on 32 A100, tp 1, dp 32,
    micro-batch 16, batch 512, full recompute, reached 137 TFLOP/s per GPU (hardware FLOPs). Megatron-LM of 2021
    had no fused flash attention (it predates Dao et al. 2022), so `--stack megatron-2021` defaults to the stored
    scores (Stack.flash_attention false). With flash attention assumed it was priced at 201 TFLOP/s (+46%); now
    within 15%, bf16 as the CLI's default precision (the table ran fp16, the same tensor-core rate)."""
    model, cluster = hp.load_model("megatron-1.7b"), hp.load_cluster("dgx-a100", num_nodes=4)
    train = hp.resolve_train(TrainSpec(global_batch_size=512), "megatron-2021")
    assert train.flash is False and hp.resolve_train(TrainSpec(global_batch_size=8)).flash is True
    assert train.model_copy(update={"flash_attention": True}).flash is True
    est = estimate(model, cluster, train, Layout(tp=1, pp=1, dp=32, mbs=16, recompute="full"))
    assert abs(est.throughput.hardware_tflops_per_gpu / 137 - 1) <= 0.15
