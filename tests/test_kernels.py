"""Kernel physics from the spec sheet (costmodels/kernels.py) and the MFU ceiling it puts on plans.

Sources: MAMF rows (best torch.mm over a shape sweep, stas00/ml-engineering @744d01e, vendored in
benchmarks/data/kernels/mamf.json); one H100's measured GEMMs and cuDNN attention
(benchmarks/data/measured/gpu_kernels_h100.csv, fitted by benchmarks/calibrate_kernels.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import llama_like
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hardware_profiles as hp
from costmodels import compute as cmp
from costmodels.errors import SpecError
from costmodels.estimate import estimate
from costmodels.kernels import (GENERATIONS, KernelSpec, attention_kernel_efficiency, gemm_kernel_efficiency,
                               head_dim_factor, wave_efficiency)
from costmodels.layout import Layout, LayoutError
from costmodels.model_spec import ModelSpec
from costmodels.timing import make_context
from costmodels.train_spec import TrainSpec

ROOT = Path(__file__).resolve().parents[1]
MAMF = {(r["gpu"], r["dtype"]): r["value"] for r in json.loads((ROOT / "benchmarks/data/kernels/mamf.json").read_text())["rows"]}
# generation -> (MAMF row, datasheet dense bf16 peak of that GPU)
CEILING_SOURCES = {"ampere": (("A100-SXM", "bf16"), 312.0), "hopper": (("H100-SXM", "bf16"), 989.0),
                   "blackwell": (("B200-SXM", "bf16"), 2250.0), "blackwell-ultra": (("B300-SXM", "bf16"), 2250.0), "cdna3": (("MI300X", "bf16"), 1307.4),
                   "cdna4": (("MI355X", "bf16"), 2516.6)}
KERNEL_GPUS = [g for g in hp.list_gpus() if hp.load_gpu(g).tensor_core_gen is not None]


@pytest.mark.parametrize("gen", sorted(CEILING_SOURCES))
def test_generation_ceiling_is_the_measured_mamf_over_the_datasheet_peak(gen):
    row, peak = CEILING_SOURCES[gen]
    assert GENERATIONS[gen].gemm_ceiling == pytest.approx(MAMF[row] / peak, abs=0.002)


def test_hopper_fp8_ceiling_is_mamf():
    assert GENERATIONS["hopper"].fp8_ceiling == pytest.approx(MAMF[("H100-SXM", "fp8 e4m3fn")] / 1979, abs=0.002)


def test_wave_quantization_hand_worked():
    """132 tiles fill one wave of an H100's 132 SMs; 133 need two, the second with one busy SM."""
    assert wave_efficiency(132, 132) == 1.0
    assert wave_efficiency(133, 132) == pytest.approx(133 / 264)


def test_a_second_wave_costs_what_the_h100_measured():
    """benchmarks/data/measured/gpu_waves_h100.csv: m = 1,408 (11 tiles), k = 4,096 on 132 SMs. n = 3,072 fills
    one wave of 128 x 256 tiles (132); n = 3,200 needs 143: measured 0.0609 against 0.0466 ms (+31%). The model
    puts the step at the same n and prices the shapes within 10% on average (benchmarks/calibrate_kernels.py)."""
    spec = KernelSpec(GENERATIONS["hopper"], 132)
    one, two = (2 * 1408 * n * 4096 / gemm_kernel_efficiency(spec, 1408, 4096, n) for n in (3072, 3200))
    assert two / one > 1.2 and 0.0609 / 0.0466 > 1.2
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import calibrate_kernels

    errors = calibrate_kernels.wave_errors(GENERATIONS["hopper"].k_half)
    assert sum(abs(e) for e in errors) / len(errors) < 0.12


def test_no_measured_h100_gemm_beats_the_bound():
    """The cap must be a bound: every measured H100 GEMM (92 shapes in bf16 and FP8 tensorwise, 21 across
    wave boundaries) runs at or under gemm_kernel_efficiency(typical=False)."""
    import csv

    ridge = 989e12 / (3350e9 * 0.85)
    files = [("gpu_kernels_h100.csv", ("gemm", "gemm_fp8")), ("gpu_waves_h100.csv", ("gemm",))]
    for name, kinds in files:
        with (ROOT / "benchmarks/data/measured" / name).open() as f:
            for r in csv.DictReader(f):
                kind = r.get("kind", "gemm")
                if kind not in kinds:
                    continue
                fp8 = kind == "gemm_fp8"
                spec = KernelSpec(GENERATIONS["hopper"], 132, fp8=fp8, flops_per_byte=ridge * (2 if fp8 else 1))
                m, n, k = float(r["m"]), float(r["n"]), float(r["k"])
                bound = gemm_kernel_efficiency(spec, m, k, n, typical=False) * (1979 if fp8 else 989)
                assert float(r["tflops"]) <= bound, (kind, m, n, k)


def test_no_measured_h100_attention_beats_the_bound():
    """cuDNN SDPA causal fwd+bwd rows (gpu_kernels_h100.csv, executed FLOPs) at or under the attention bound."""
    import csv

    spec = KernelSpec(GENERATIONS["hopper"], 132)
    with (ROOT / "benchmarks/data/measured/gpu_kernels_h100.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "attn" and r["pass"] == "fwd_bwd"]
    assert len(rows) == 12
    for r in rows:
        seq, bh, d = float(r["seq"]), float(r["batch"]) * float(r["heads"]), float(r["head_dim"])
        bound = attention_kernel_efficiency(spec, bh, seq, seq, d, typical=False) * 989
        assert float(r["tflops_causal_half"]) <= bound * 1.001, r


def test_head_dim_64_costs_what_the_h100_measured():
    """cuDNN SDPA fwd+bwd at 8k keys on our H100 (gpu_kernels_h100.csv): 399.35 TFLOP/s at head dim 64 against
    488.36 at 128: 0.818; the exps beside the matmuls give (1 + 512/1792) / (1 + 512/896) = 0.818."""
    assert head_dim_factor(GENERATIONS["hopper"], 64) == pytest.approx(399.35 / 488.36, abs=0.01)
    assert head_dim_factor(GENERATIONS["hopper"], 256) == 1.0


def test_blackwell_attention_ceiling_is_nvidias_sm100_fmha():
    """FlashMLA README @066b5ba (kernels.json): SM100 FMHA on B200, forward 1,460 and backward 1,000 TFLOP/s;
    backward does 2.5 x the forward's FLOPs."""
    assert GENERATIONS["blackwell"].attn_ceiling == pytest.approx(3.5 / (1 / 1460 + 2.5 / 1000) / 2250, abs=0.002)


def test_skinny_gemm_is_bound_by_hbm():
    """64 tokens through an 8192 x 8192 weight: 63 FLOPs per HBM byte, under the H100's ridge of 347:
    the bound is the roofline (0.181 of peak), not the tiles (0.803 x 0.5 padding x 64/132 busy SMs = 0.195)."""
    spec = KernelSpec(GENERATIONS["hopper"], 132, flops_per_byte=989e12 / (3350e9 * 0.85))
    eff = gemm_kernel_efficiency(spec, 64, 8192, 8192, typical=False)
    intensity = 2 * 64 * 8192 * 8192 / (2 * (64 * 8192 + 8192 * 8192) + 2 * 64 * 8192)
    assert eff == pytest.approx(intensity / spec.flops_per_byte)


def test_calibration_reproduces_the_constants():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import calibrate_kernels

    assert calibrate_kernels.main(["--check"]) == 0


def test_bf16_on_volta_is_one_spec_error():
    """Volta has fp16 tensor cores only (bf16 came with Ampere): bf16 there is refused, naming fp16."""
    cluster = hp.load_cluster("dgx-a100").model_copy(update={"gpu": hp.load_gpu("v100-sxm3-32gb")})
    model = llama_like(1024, 8, 8, 4, 4096, seq=1024)
    with pytest.raises(SpecError, match="no bf16 tensor cores.*fp16"):
        estimate(model, cluster, TrainSpec(global_batch_size=8), Layout(mbs=1))
    assert estimate(model, cluster, TrainSpec(global_batch_size=8, precision="fp16"), Layout(mbs=1)).fits


def test_every_gpu_with_a_generation_has_its_sm_count():
    assert {"a100-80gb", "h100-sxm", "b200", "b300", "gb200", "mi300x", "mi355x"} <= set(KERNEL_GPUS)
    assert all(hp.load_gpu(g).sm_count for g in KERNEL_GPUS)


def test_gb200_nvl72_is_one_nvlink_domain_of_72():
    c = hp.load_cluster("gb200-nvl72")
    assert (c.gpus_per_node, c.gpu_profile.name, c.scale_up_gb_per_s) == (72, "gb200", 900.0)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_gpu_preset_is_under_the_mfu_property():
    """The property below draws from KERNEL_GPUS: every GPU preset must be in it (a preset without a tensor-core
    generation would plan with no kernel cap at all)."""
    assert set(KERNEL_GPUS) == set(hp.list_gpus())


def executed_share(model, x, flash: bool) -> float:
    """Executed / counted FLOPs of one micro-batch's forward over the whole model (layers and logits): causal
    flash attention skips half the scores the MFU convention counts (costmodels.compute)."""
    counted = model.num_layers * cmp.layer_flops(model, x, False) + cmp.logits_flops(model, x)
    skipped = 0.5 * model.num_layers * cmp.attention_core_flops(model, x) if flash else 0.0
    return (counted - skipped) / counted


def _random_model(h: int, head_dim: int, groups: int, layers: int, ffn_ratio: float, gelu: bool, vocab: int,
                  seq: int) -> ModelSpec:
    heads = h // head_dim
    if gelu:
        return ModelSpec(name="gpt-like", num_layers=layers, hidden_size=h, num_attention_heads=heads,
                         ffn_hidden_size=4 * h, vocab_size=vocab, seq_length=seq)
    return llama_like(h, heads, max(heads // groups, 1), layers, int(h * ffn_ratio) // 128 * 128, vocab=vocab, seq=seq)


@given(gpu=st.sampled_from(KERNEL_GPUS), layers=st.sampled_from([8, 16]), h=st.sampled_from([1024, 2048, 4096, 8192]),
       head_dim=st.sampled_from([64, 128]), groups=st.sampled_from([1, 4, 8]), ffn_ratio=st.sampled_from([2.75, 3.5, 4.0]),
       gelu=st.booleans(), vocab=st.sampled_from([32000, 128256]), seq=st.sampled_from([1024, 2048, 4096, 8192]),
       tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2]), cp=st.sampled_from([1, 2]),
       zero=st.sampled_from([0, 1, 3]), mbs=st.sampled_from([1, 2]),
       recompute=st.sampled_from(["none", "selective", "full"]), nodes=st.sampled_from([1, 2]),
       stack=st.sampled_from(["megatron-core", "torchtitan", "deepspeed"]), flash=st.booleans(), fp8=st.booleans())
@SETTINGS
def test_mfu_stays_under_the_best_measured_gemm(gpu, layers, h, head_dim, groups, ffn_ratio, gelu, vocab, seq, tp, pp,
                                               cp, zero, mbs, recompute, nodes, stack, flash, fp8):
    """Plausibility (issue 35): no layout on any GPU preset beats the GPU's best measured dense GEMM (MAMF / dense
    peak, kernels.json; e.g. A100 271.2 / 312 = 86.9%, MI300X 668.4 / 1307.4 = 51.1%), for random models (GQA or
    not, SwiGLU or GELU, head dim 64/128, small or 128k vocabularies) and layouts (tp, pp, cp, ZeRO, recompute,
    one or two nodes, three stacks). Utilization on the FLOPs the GPU executes: parplan's MFU counts causal scores
    in full (PaLM convention) though flash attention skips half, so the reported MFU is scaled by executed /
    counted FLOPs of the whole model before the comparison. Under fp8 the MFU is against the FP8 peak and the
    ceiling is the FP8 MAMF (H100 1,402.6 / 1,979 = 70.9%). Both at the clock a run holds at its power limit
    (kernels.Generation.sustained: Hopper 0.93 of MAMF's sub-second rate, measured at 700 W; 1 elsewhere)."""
    profile = hp.load_gpu(gpu)
    fp8 = fp8 and profile.fp8_tflops is not None
    model = _random_model(h, head_dim, groups, layers, ffn_ratio, gelu, vocab, seq)
    cluster = hp.load_cluster("dgx-h100").model_copy(update={"gpu": profile, "num_nodes": nodes})
    train = hp.resolve_train(TrainSpec(global_batch_size=64, precision="fp8" if fp8 else "bf16",
                                       flash_attention=flash), stack)
    try:
        est = estimate(model, cluster, train, Layout(tp=tp, pp=pp, cp=cp, zero=zero, mbs=mbs, recompute=recompute))
    except (LayoutError, SpecError):
        return
    x = make_context(model, cluster, train, est.layout).x
    gen = GENERATIONS[profile.tensor_core_gen]
    ceiling = (gen.fp8_ceiling if fp8 else gen.gemm_ceiling) * gen.sustained  # MFU under fp8: against the FP8 peak
    assert est.throughput.mfu * executed_share(model, x, flash) <= ceiling


@given(gpu=st.sampled_from(KERNEL_GPUS), h=st.sampled_from([2048, 4096]), experts=st.sampled_from([8, 64, 128]),
       top_k=st.sampled_from([1, 2, 8]), expert_ffn=st.sampled_from([768, 1408, 14336]), shared=st.sampled_from([0, 1]),
       ep=st.sampled_from([1, 2, 4, 8]), tp=st.sampled_from([1, 2]), seq=st.sampled_from([2048, 4096]),
       mbs=st.sampled_from([1, 2, 4]), stack=st.sampled_from(["megatron-core", "torchtitan", "deepspeed"]),
       fp8=st.booleans())
@SETTINGS
def test_moe_mfu_stays_under_the_best_measured_gemm(gpu, h, experts, top_k, expert_ffn, shared, ep, tp, seq, mbs, stack,
                                                   fp8):
    """The same plausibility for MoE layouts (MFU on active FLOPs: router, top_k routed and shared experts), with
    expert parallelism, small experts and the grouped or per-expert GEMMs each stack runs."""
    profile = hp.load_gpu(gpu)
    fp8 = fp8 and profile.fp8_tflops is not None
    model = llama_like(h, h // 128, 8, 8, 4 * h, seq=seq, num_experts=experts, top_k=min(top_k, experts),
                       moe_ffn_hidden_size=expert_ffn, num_shared_experts=shared)
    cluster = hp.load_cluster("dgx-h100").model_copy(update={"gpu": profile, "num_nodes": 1})
    train = hp.resolve_train(TrainSpec(global_batch_size=64, precision="fp8" if fp8 else "bf16"), stack)
    try:
        est = estimate(model, cluster, train, Layout(tp=tp, ep=ep, mbs=mbs, zero=1))
    except (LayoutError, SpecError):
        return
    x = make_context(model, cluster, train, est.layout).x
    counted = model.num_layers * cmp.layer_flops(model, x, True) + cmp.logits_flops(model, x)
    executed = counted - 0.5 * model.num_layers * cmp.attention_core_flops(model, x)
    gen = GENERATIONS[profile.tensor_core_gen]
    assert est.throughput.mfu * executed / counted <= (gen.fp8_ceiling if fp8 else gen.gemm_ceiling) * gen.sustained


@pytest.mark.parametrize("gpu", KERNEL_GPUS)
def test_a_refit_cannot_lift_a_gpu_past_its_kernels(gpu):
    """A step-time fit that says every GEMM and attention runs at 100% of peak (gemm_max 1, attn_max 1, no
    half sizes: what an unconstrained refit can return) still plans under the generation's MAMF ceiling:
    the kernel bounds cap it (costmodels.compute.device_gemm_efficiency, attention_efficiency)."""
    base = hp.load_gpu(gpu)
    eff = base.efficiency.model_copy(update={"gemm_max": 1.0, "gemm_half_dim": 0.0, "attn_max": 1.0,
                                             "attn_half_seq": 1.0, "hbm": 1.0, "layer_overhead_s": 0.0})
    profile = base.model_copy(update={"efficiency": eff})
    model = llama_like(4096, 32, 8, 8, 14336, seq=8192)
    cluster = hp.load_cluster("dgx-h100").model_copy(update={"gpu": profile, "num_nodes": 1})
    train = TrainSpec(global_batch_size=64, precision="fp16" if base.tensor_core_gen == "volta" else "bf16")
    est = estimate(model, cluster, train, Layout(mbs=1))
    one = make_context(model, cluster, train, est.layout).x
    counted = cmp.layer_flops(model, one, False)
    executed = counted - 0.5 * cmp.attention_core_flops(model, one)
    assert est.throughput.mfu * executed / counted <= GENERATIONS[base.tensor_core_gen].gemm_ceiling


def _step_s(model, cluster, train, layout) -> float:
    return estimate(model, cluster, train, layout).time.step_s


def test_torchtitan_a100_llama3_8b_lands_in_the_published_range():
    """torchtitan docs/performance.md @157a12c56 (measured_runs.csv TT-036): Llama 3 8B, seq 8192, FSDP2 on
    64 A100 80GB, selective layer AC, local batch 1: 2,904 tokens/s per GPU, reported MFU 56.8% of 312 (53.9% in
    parplan's convention, which does not count the input embedding: tests/test_published_ranges.py)."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-a100", num_nodes=8)
    train = TrainSpec(global_batch_size=64, stack=hp.load_stack("torchtitan"))
    est = estimate(model, cluster, train, Layout(zero=3, mbs=1, recompute="selective"))
    assert 0.50 <= est.throughput.mfu <= 0.60


def test_mxfp8_gemms_run_at_the_fp8_rate():
    """torchtitan mxfp8.md on 8 power-limited B200 (measured_runs.csv TT-045..047), Llama 3 8B: MXFP8 with
    cuBLAS 9,969 tokens/s, with rceil 9,642, tensorwise 10,417: MXFP8 costs 4.5-8%, not the 25-31% that
    a 0.7 GEMM fraction priced. parplan prices the same GEMM rate and casts: within that band or under."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-b200")
    lay = Layout(zero=3, mbs=1)
    tensorwise, mx = (_step_s(model, cluster, TrainSpec(global_batch_size=8, precision="fp8", fp8_recipe=r,
                                                        stack=hp.load_stack("torchtitan")), lay) for r in ("tensorwise", "mxfp8"))
    assert 1.0 <= mx / tensorwise <= 1.08


def test_nvfp4_runs_the_linear_gemms_at_the_fp4_peak():
    model, cluster, lay = hp.load_model("llama3-8b"), hp.load_cluster("dgx-b200"), Layout(zero=3, mbs=1)
    mx, fp4 = (_step_s(model, cluster, TrainSpec(global_batch_size=8, precision="fp8", fp8_recipe=r), lay)
               for r in ("mxfp8", "nvfp4"))
    assert fp4 < mx


def test_mxfp8_on_hopper_is_one_spec_error():
    train = TrainSpec(global_batch_size=8, precision="fp8", fp8_recipe="mxfp8")
    with pytest.raises(SpecError, match="mxfp8 needs block-scaled"):
        estimate(hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100"), train, Layout(zero=3))


def test_nvfp4_on_a_gpu_without_fp4_is_one_spec_error():
    train = TrainSpec(global_batch_size=8, precision="fp8", fp8_recipe="nvfp4")
    with pytest.raises(SpecError, match="fp4_tflops"):
        estimate(hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100"), train, Layout(zero=3))


@pytest.mark.parametrize("stack", ["megatron-2021", "megatron-core"])
def test_megatron_element_wise_fusion_stays_in_its_physical_range(stack):
    """costmodels.compute.elementwise_bytes already counts the kernels Megatron fuses (Apex LayerNorm,
    bias-dropout-add, bias-GeLU, scale-mask-softmax), so the fitted fusion scale may not fall under 0.8 (L2 hits
    on small tensors at most; benchmarks/calibrate.py BOUND_REASONS). Unbounded, the A100 fit took 0.357 and
    priced the missing element-wise time into the GEMM curve; megatron-core carries the value."""
    assert 0.8 <= hp.load_stack(stack).elementwise_scale <= 4.0


@pytest.mark.parametrize("cluster_name, same", [("dgx-a100", True), ("dgx-h100", False)])
def test_attention_kernel_differs_by_stack_only_where_the_generation_has_two(cluster_name, same):
    """On Ampere every stack runs FlashAttention-2 (FA3 and cuDNN's SM90 kernels need Hopper; SDPA's flash
    backend is FA2; Transformer Engine prefers its FA2 backend below SM90), so megatron-core and torchtitan
    price the same attention seconds there; on Hopper the stack's fitted attn_scale (FA2 in SDPA vs cuDNN in
    TE) still tells them apart. Before kernels.Generation.one_attention_kernel, megatron-core's A100 attention
    ran 1.45x faster than torchtitan's."""
    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster(cluster_name)
    times = []
    for stack in ("megatron-core", "torchtitan"):
        train = TrainSpec(global_batch_size=8, stack=hp.load_stack(stack))
        ctx = make_context(model, cluster, train, estimate(model, cluster, train, Layout(zero=3, mbs=1)).layout)
        times.append(cmp.attention_core_s(model, ctx.x, ctx.dev16, causal_skip=True))
    assert (times[0] == pytest.approx(times[1])) is same


def _sustained_rows():
    import csv  # noqa: PLC0415

    with (ROOT / "benchmarks/data/measured/gpu_sustained_h100.csv").open() as f:
        rows = list(csv.DictReader(f))
    out = {}
    for shape in dict.fromkeys(r["shape"] for r in rows):
        burst = next(float(r["tflops"]) for r in rows if r["shape"] == shape and r["phase"] == "burst")
        held = sorted((r for r in rows if r["shape"] == shape and r["phase"] == "sustained" and float(r["t_s"]) >= 10),
                      key=lambda r: float(r["tflops"]))
        mid = held[len(held) // 2]
        out[tuple(int(v) for v in shape.split("x"))] = (burst, float(mid["tflops"]), float(mid["power_w"]),
                                                          float(mid["power_limit_w"]), int(mid["sm_mhz"]))
    return out


def test_power_capped_h100_gemms_hold_close_to_a_short_benchmark():
    """Clocks under the power limit, measured (benchmarks/gpu/measure_sustained.py, one H100 SXM at its 700 W
    limit): after 10 s of back-to-back bf16 products at Llama 3 8B's shapes, 8,192 tokens, the board sits at the
    limit (695-701 W) with the SM clock at 1,305-1,380 MHz (1,980 max), and holds 671 / 691 / 673 TFLOP/s
    against 720 / 702 / 682 for MAMF's 100-product burst: 1.3-7% lower. So a short benchmark overstates a
    long run a little, not by the ~25% the Hopper step-time fit is missing; the kernel bound that caps the fitted
    curves (794 TFLOP/s; 739 with the sustained derate) stays above every sustained rate, and the typical rate
    (697-744) sits 4-8% above them,
    the same order as the A100 fit under its typical rate (tests/test_published_ranges.py)."""
    spec = KernelSpec(GENERATIONS["hopper"], 132, flops_per_byte=989e12 / (3350e9 * 0.85))
    rows = _sustained_rows()
    assert len(rows) == 3
    for (m, k, n), (burst, held, watts, limit, mhz) in rows.items():
        assert 0.92 <= held / burst <= 1.0
        assert watts >= 0.99 * limit and mhz < 1980
        assert held <= gemm_kernel_efficiency(spec, m, k, n, typical=False) * 989
        assert 1.0 <= gemm_kernel_efficiency(spec, m, k, n) * 989 / held <= 1.1


def test_no_h100_step_computes_faster_than_the_board_holds_at_its_power_limit():
    """One H100 at its 700 W limit ran back-to-back bf16 8192^3 products at 795 TFLOP/s for about a second, then at
    at most ~723 (gpu_sustained_h100.json mm8192, the 1 s samples after the first two). A training step's tensor
    work cannot beat that: a Llama 2 70B step (tp 1, ZeRO-3 over 32 GPUs, micro-batch 4, full recompute) was
    priced at 746 executed TFLOP/s while computing, because the kernel bound capping the fitted curve was the
    microbenchmark's (KernelSpec.sustained now derates it). The 500 W part's profile derates its peak already,
    so its bound is not derated twice."""
    from costmodels.timing import kernel_spec  # noqa: PLC0415

    held = json.loads((ROOT / "benchmarks/data/measured/gpu_sustained_h100.json").read_text())["mm8192"][2:]
    model, cluster = hp.load_model("llama2-70b"), hp.load_cluster("dgx-h100", num_nodes=4)
    est = estimate(model, cluster, TrainSpec(global_batch_size=512),
                   Layout(tp=1, pp=1, dp=32, zero=3, mbs=4, recompute="full"))
    t = est.time
    computing_tflops = est.throughput.hardware_tflops_per_gpu * t.step_s / (t.compute_s + t.recompute_s)
    assert computing_tflops <= max(held)
    assert kernel_spec(hp.load_gpu("h100-sxm"), False).sustained == GENERATIONS["hopper"].sustained
    assert kernel_spec(hp.load_gpu("h100-sxm-500w"), False).sustained == 1.0


def _h100_layer_ms(stack: str) -> float:
    """parplan's price of one Llama 3 8B layer, seq 8192, mbs 1, no recompute, forward + backward, on one
    700 W H100 (h100-sxm), with `stack`."""
    from costmodels.timing import layer_time  # noqa: PLC0415

    model, cluster = hp.load_model("llama3-8b"), hp.load_cluster("dgx-h100", num_nodes=1)
    train = hp.resolve_train(TrainSpec(global_batch_size=8), stack)
    ctx = make_context(model, cluster, train, estimate(model, cluster, train, Layout(zero=1, mbs=1)).layout)
    return layer_time(ctx, False).total_s * 1e3


def test_no_h100_layer_is_priced_faster_than_one_ran():
    """One Llama 3 8B layer run in eager PyTorch on one 700 W H100 (benchmarks/gpu/measure_layer.py,
    gpu_layer_h100.csv: seq 8192, mbs 1, no recompute, SDPA's FlashAttention-2 backend): 25.55 ms forward +
    backward, i.e. 55.5% MFU in parplan's convention (62.1% with cuDNN attention, 22.84 ms). parplan's
    torchtitan-eager price of the same layer is 37.4 ms: slower than the layer ran, never faster (the planner
    is not optimistic at the layer level). The 46% it is slower is the Hopper step-time fit: measured alone, the
    layer's GEMMs take 14.67 ms (731 TFLOP/s; priced 22.7), FA2 6.73 ms (0.29 of peak on executed FLOPs; priced
    10.0) and the rest 4.15 ms (priced 4.7), so its multi-GPU rows (500 W parts for torchtitan) lose the time
    somewhere other than one GPU's layer compute. Kept under 1.6x so a refit that moves it further shows."""
    import csv  # noqa: PLC0415

    with (ROOT / "benchmarks/data/measured/gpu_layer_h100.csv").open() as f:
        ran = {r["attention_backend"]: float(r["fwd_bwd_ms"]) for r in csv.DictReader(f) if r["part"] == "layer"}
    assert ran == {"flash": 25.55, "cudnn": 22.84}
    priced = _h100_layer_ms("torchtitan-eager")
    assert ran["flash"] <= priced <= 1.6 * ran["flash"]


def test_the_kernel_model_adds_up_to_the_measured_h100_layer_parts():
    """gpu_layer_h100.csv, the same layer's parts run alone: its 7 projection GEMMs on 8,192 rows take 14.67 ms
    forward + backward, the kernel model's typical rates give 15.18 (+3.5%); cuDNN causal attention at 32 heads x
    8,192 takes 3.83 ms, the typical rate gives 4.24 (+10.6%). The kernel model prices what one H100 does (a bit
    slow, never fast), so it is a fair judge of the step-time curves above it."""
    import csv  # noqa: PLC0415

    with (ROOT / "benchmarks/data/measured/gpu_layer_h100.csv").open() as f:
        ran = {(r["part"], r["attention_backend"]): float(r["fwd_bwd_ms"]) for r in csv.DictReader(f)}
    spec = KernelSpec(GENERATIONS["hopper"], 132, flops_per_byte=989e12 / (3350e9 * 0.85))
    h, kv, ffn, s = 4096, 1024, 14336, 8192
    shapes = [(h, h), (h, kv), (h, kv), (h, h), (h, ffn), (h, ffn), (ffn, h)]
    gemm_ms = sum(3 * 2 * s * k * n / (989e12 * gemm_kernel_efficiency(spec, s, k, n)) for k, n in shapes) * 1e3
    attn_ms = 3.5 * 2 * s * s * h / (989e12 * attention_kernel_efficiency(spec, 32, s, s, 128)) * 1e3
    assert 1.0 <= gemm_ms / ran[("gemms", "")] <= 1.1
    assert 1.0 <= attn_ms / ran[("attention", "cudnn")] <= 1.15


def test_a_curve_copied_from_another_generation_keeps_its_share_of_the_kernel_ceiling():
    """costmodels.timing.curve_transfer: MI300X's profile copies H100's fitted curve, a fraction of the spec peak;
    MI300X reaches 0.511 of its peak (668 of 1,307 TFLOP/s) where H100 reaches 0.803, so the copy is scaled by
    0.511 / 0.803. Before, a 70B layer's GEMMs priced MI300X faster than H200 (its best GEMM is 16% slower)."""
    from costmodels.layout import Layout, resolve_layout  # noqa: PLC0415
    from costmodels.timing import curve_transfer, layer_time, make_context  # noqa: PLC0415
    from costmodels.train_spec import TrainSpec  # noqa: PLC0415

    mi300x, h100 = hp.load_gpu("mi300x"), hp.load_gpu("h100-sxm")
    assert curve_transfer(mi300x) == pytest.approx((0.511 / 0.803, 0.40 / 0.573))
    assert curve_transfer(h100) == (1.0, 1.0)
    assert curve_transfer(mi300x.model_copy(update={"efficiency": mi300x.efficiency.model_copy(
        update={"curve_gen": None})})) == (1.0, 1.0)

    def layer_s(cluster: str) -> float:
        model, clus = hp.load_model("llama3-70b"), hp.load_cluster(cluster, 1)
        train = hp.resolve_train(TrainSpec(global_batch_size=64, seq_length=4096), "megatron-core")
        lay = resolve_layout(model, clus, train, Layout(tp=8, sp=True, recompute="selective"))
        return layer_time(make_context(model, clus, train, lay), False).compute_s

    assert layer_s("mi300x-node") > 1.1 * layer_s("hgx-h200")
