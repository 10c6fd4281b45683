"""What one GEMM or one fused-attention kernel can reach on a GPU, from its spec sheet.

A GPU enters through its spec sheet (SM count, dense peak per dtype, HBM bandwidth) and its
tensor-core generation (`GENERATIONS`: the achievable fraction of peak that the best-shaped GEMM
reaches, the tile shapes its libraries use, the attention kernel's ceiling). Nothing here is fitted
to step times: this is the kernel physics that the step-time fit (hardware_spec.Efficiency) may not
exceed (costmodels.compute caps its curve with it).

GEMM (m x k) @ (k x n), 2mkn FLOPs:
- tile and wave quantization: the output is cut into tm x tn tiles, one CTA each; ceil(tiles / SMs)
  waves run, the last one partly idle; the library picks the tile shape that wastes least (cuBLAS /
  CUTLASS heuristics; NVIDIA "Matrix Multiplication Background User's Guide", sections 2.3-2.4);
- the K loop: each tile pays a prologue and epilogue of about `k_half` K-steps' time, so
  efficiency rises as k / (k + k_half) (fitted on the H100 measurements: benchmarks/calibrate_kernels.py);
- the ceiling: the best measured torch.mm efficiency of the generation (MAMF, ml-engineering),
  which already includes clocks under power limits;
- roofline: the kernel cannot be faster than reading A and B and writing C once at the achieved HBM
  rate (skinny GEMMs: small m, as in decode or small expert batches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Generation:
    """Tensor-core generation parameters shared by every GPU of it (sources in `GENERATIONS`)."""

    gemm_ceiling: float  # best measured dense 16-bit GEMM / dense peak (MAMF)
    fp8_ceiling: float  # the same for FP8 (tensorwise torch._scaled_mm); 0 = no FP8 tensor cores
    tiles: tuple[tuple[int, int], ...]  # output tile shapes (tm, tn) its GEMM libraries choose among
    k_half: float  # K at which the per-tile prologue/epilogue halves efficiency
    attn_ceiling: float  # fused attention fwd+bwd, executed FLOPs / 16-bit peak, long sequences
    attn_half_seq: float  # keys per query tile at which attention reaches half its ceiling
    attn_tile_q: int = 128  # query rows per attention CTA
    tensor_per_exp: float = 0.0  # dense 16-bit tensor FLOPs per special-function exp, per SM and clock (0: none)
    one_attention_kernel: bool = False  # every stack runs the same fused attention kernel here (see below)
    sustained: float = 1.0  # tensor-core rate over hours at the power limit / the microbenchmarks' rate (below)
    sustained_tdp_w: float = 0.0  # the power limit `sustained` was measured at (0: not measured)
    tensor_per_sm_clock: float = 0.0  # dense 16-bit tensor-core FLOPs per SM (CU) per clock (0: unknown)


# Ceilings: kernels.json dense_gemm rows (stas00/ml-engineering @744d01e, compute/accelerator/README.md,
# MAMF = best torch.mm over a shape sweep) divided by the datasheet dense peak:
#   ampere    A100-SXM bf16 271.2 / 312 = 0.869 (physical range 0.80-0.90: A100-PCIe 252.9 / 312 = 0.81);
#   hopper    H100-SXM bf16 794.5 / 989 = 0.803, fp8 1402.6 / 1979 = 0.709 (H200 fp8 1453.4 / 1979 = 0.734;
#             GH200 at 900 W bf16 828.6 / 989 = 0.838: range 0.80-0.84);
#   blackwell B200-SXM bf16 1745 / 2250 = 0.776, fp8 3432.5 / 4500 = 0.763 (B300 1769 / 2250 = 0.786;
#             GB200 per die 1822 / 2500 = 0.729: range 0.73-0.79);
#   cdna3     MI300X bf16 668.4 / 1307.4 = 0.511 (ROCm 6.3; ROCm 6.1 gave 450: 0.344);
#   cdna4     MI355X bf16 1565 / 2516.6 = 0.622;
#   volta     no MAMF row: 0.80 of the V100 125 TFLOP/s peak, an assumption (range 0.7-0.85).
# k_half 512 (range 300-900: the fit is flat within 10% of its error there) and attn_half_seq 1,722
# (range 1,000-3,000) fitted on the H100 rows (92 GEMM shapes plus 21 across wave boundaries, 10 attention)
# by benchmarks/calibrate_kernels.py; other generations
# carry them (an assumption: no per-shape table for them in hand).
# Tiles: CUTLASS/cuBLAS default SM80 128x128 and 128x256, SM90 (WGMMA) 128x128, 128x256, 256x128, SM100
# (tcgen05, 2-SM) 256x128 and 256x256; CDNA (hipBLASLt) 256x256 and 128x128.
# Attention (hopper): cuDNN SDPA causal fwd+bwd on H100, benchmarks/data/measured/gpu_kernels_h100.csv,
# 566.6 executed TFLOP/s at 32k keys, 32 heads, head dim 128: 0.573 (FlashAttention-3, Shah et al. 2024,
# reaches 75% in forward only); ampere: FlashAttention-2 "50-73% of the theoretical maximum on A100"
# (Dao 2023; fwd+bwd at the lower end of that range: 0.55 taken, range 0.50-0.73); blackwell/cdna: no
# per-sequence table in hand: the hopper fraction, a stated assumption.
# blackwell attention 0.488: SM100 FMHA on B200 as NVIDIA reports it (FlashMLA README @066b5ba, kernels.json):
# forward 1,460 and backward 1,000 TFLOP/s at head dims 192/128; fwd+bwd with backward = 2.5 x forward's
# FLOPs: 3.5 / (1/1460 + 2.5/1000) = 1,099 TFLOP/s = 0.488 of 2,250 (range 0.45-0.55). blackwell-ultra (B300):
# MAMF 1,769 / 2,250 = 0.786, fp8 3,353.3 / 4,500 = 0.745; twice Blackwell's exp throughput (NVIDIA
# "Inside NVIDIA Blackwell Ultra": "2x attention-layer acceleration" from doubled SFU exponentials); no
# attention table: Blackwell's 0.488 kept (a floor: the doubled exp rate can only help).
# tensor_per_exp: dense 16-bit tensor-core FLOPs per SM per clock (volta 1,024, ampere 2,048, hopper 4,096,
# blackwell 8,192: the architecture whitepapers' per-SM rates) over the 16 exp2 results per SM per clock of
# the special function units (CUDA C++ Programming Guide, arithmetic instruction throughput table; 32 on
# Blackwell Ultra). Head dim: flash attention spends 14d tensor FLOPs (forward 4d, backward 10d) and 2 exps
# (softmax, and its recompute in backward) per score; the measured H100 cuDNN rows drop from 488 TFLOP/s at
# head dim 128 to 399 at 64 (0.82 x), which the exps run beside the matmuls without overlap give exactly:
# (1 + 2*256/(14*128)) / (1 + 2*256/(14*64)) = 0.82. Above 128, smaller tiles (shared memory) eat the gain
# (256: 0.875 x measured), so the factor is held at 1 there. CDNA: no exp rate in hand (0: no head-dim term).
# one_attention_kernel: the stacks differ in attention kernel only where a generation has a faster one than
# FlashAttention-2 (Stack.attn_scale: cuDNN's SM90 kernels or FlashAttention-3 in Transformer Engine against
# FA2 in PyTorch SDPA, fitted on H100 rows). On Ampere FA2 is the fast kernel every stack runs: FA3 needs SM90
# (Shah et al. 2024, "Hopper only"), PyTorch SDPA's flash backend is FA2 (aten/src/ATen/native/transformers/
# cuda/flash_attn), and Transformer Engine prefers its FlashAttention (FA2) backend below SM90
# (transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend), so there the
# scale does not apply: without this, megatron-core's A100 attention ran 1.45x torchtitan's for the same kernel.
# sustained: the ceilings and ramps above are microbenchmark rates (MAMF times each shape for well under a second,
# after warm-up); a training run holds the board at its power limit for hours, and the SM clock with it. Measured
# on one H100 SXM at 700 W (benchmarks/data/measured/gpu_sustained_h100.json and .csv): one GPT layer shard run
# forward+backward for 20 s ran its GEMMs at 0.93 x their typical rate here; back-to-back 8192-wide GEMMs held
# 672-691 TFLOP/s at 1,320-1,350 MHz for 30-45 s, 0.90-0.95 x typical. Hopper 0.93 (physical range 0.88-1.0).
# Other generations: not measured, 1.0 (no derating assumed; a sustained run can only be slower).
# Applied where a step time is priced from kernels alone (benchmarks/kernel_prior.py, physics_only.py) and to
# tensor-core work only (GEMMs, attention); memory-bound kernels run on the HBM clock, which does not throttle.
# It also derates the GEMM bound that caps the fitted step-time curve (KernelSpec.sustained, costmodels.compute):
# the first second of back-to-back 8192^3 products ran at 795 TFLOP/s (MAMF's rate), then the 700 W limit held
# 660-710 for 25 s (gpu_sustained_h100.json mm8192), so no GEMM of a training step runs at the microbenchmark
# bound. Only on parts at the power limit it was measured at (sustained_tdp_w): a part whose profile derates
# its peak for a lower limit (h100-sxm-500w: 869 = 989 x 0.878, from the same measured clocks) already has it.
# tensor_per_sm_clock: the whitepapers' per-SM dense 16-bit rates (above), which the datasheet peaks reproduce:
# V100 125 T / (80 SMs x 1.53 GHz) = 1,021; A100 312 / (108 x 1.41) = 2,049; H100 989 / (132 x 1.83) = 4,094;
# B200 2,250 / (148 x 1.86) = 8,173; MI300X 1,307 / (304 CUs x 2.1) = 2,048; MI355X 2,517 / (256 x 2.4) = 4,096.
# It turns a datasheet peak back into SMs x clock (costmodels.strided).
GENERATIONS: dict[str, Generation] = {
    "volta": Generation(0.80, 0.0, ((128, 128), (128, 256)), 512.0, 0.40, 1722.0, tensor_per_exp=64.0,
                       tensor_per_sm_clock=1024.0),
    "ampere": Generation(0.869, 0.0, ((128, 128), (128, 256), (256, 128)), 512.0, 0.55, 1722.0,
                         tensor_per_exp=128.0, one_attention_kernel=True, tensor_per_sm_clock=2048.0),
    "hopper": Generation(0.803, 0.709, ((128, 128), (128, 256), (256, 128)), 512.0, 0.573, 1722.0,
                         tensor_per_exp=256.0, sustained=0.93, sustained_tdp_w=700.0, tensor_per_sm_clock=4096.0),
    "blackwell": Generation(0.776, 0.763, ((256, 128), (256, 256), (128, 256)), 512.0, 0.488, 1722.0,
                            tensor_per_exp=512.0, tensor_per_sm_clock=8192.0),
    "blackwell-ultra": Generation(0.786, 0.745, ((256, 128), (256, 256), (128, 256)), 512.0, 0.488, 1722.0,
                                  tensor_per_exp=256.0, tensor_per_sm_clock=8192.0),
    "cdna3": Generation(0.511, 0.511, ((256, 256), (128, 128)), 512.0, 0.40, 1722.0, tensor_per_sm_clock=2048.0),
    "cdna4": Generation(0.622, 0.622, ((256, 256), (128, 128)), 512.0, 0.45, 1722.0, tensor_per_sm_clock=4096.0),
}


@dataclass(frozen=True)
class KernelSpec:
    """One GPU at one GEMM precision: what its kernels can reach (None fields: unknown, no cap)."""

    gen: Generation
    sm_count: int
    fp8: bool = False  # the GEMMs run on FP8 tensor cores (ceiling fp8_ceiling, 1-byte operands)
    flops_per_byte: float = 0.0  # dense peak / achieved HBM bytes per second (roofline ridge)
    sustained: float = 1.0  # Generation.sustained where this part runs at the power limit it was measured at


def wave_efficiency(tiles: float, sm_count: int) -> float:
    """Busy fraction of the SMs over the waves of `tiles` equal CTAs: tiles / (ceil(tiles/SMs) * SMs)."""
    if tiles <= 0:
        return 1.0
    return tiles / (math.ceil(tiles / sm_count) * sm_count)


def tile_efficiency(m: float, n: float, tm: int, tn: int, sm_count: int, waves: bool = True) -> float:
    """Useful fraction of the work of one tile shape: padding of the edge tiles times, with `waves`, the
    wave quantization (without: a stream-K schedule that splits the last wave's tiles along K)."""
    tiles_m, tiles_n = math.ceil(m / tm), math.ceil(n / tn)
    padding = (m * n) / (tiles_m * tm * tiles_n * tn)
    return padding * (wave_efficiency(tiles_m * tiles_n, sm_count) if waves else 1.0)


# Narrow tiles the libraries add for few rows (cuBLAS / CUTLASS 64 x N kernels): in the bound only.
NARROW_TILES = ((64, 128), (64, 256))


def gemm_kernel_efficiency(spec: KernelSpec, m: float, k: float, n: float, typical: bool = True) -> float:
    """Fraction of dense peak one (m x k) @ (k x n) GEMM reaches: ceiling x best tile's quantization x
    k / (k + k_half), and no faster than moving its operands once through HBM (roofline).

    typical=False gives the bound costmodels.compute caps the step-time fit with: no K ramp (a fitted
    median), no wave tail (cuBLAS's stream-K kernels split it: on our H100, 143 tiles of 128 x 256 ran at
    80% of the rate of 132, not the 54% whole waves give) and narrow 64-row tiles too; no measured H100
    shape beats it (tests/test_kernels.py)."""
    gen = spec.gen
    ceiling = gen.fp8_ceiling if spec.fp8 else gen.gemm_ceiling
    if typical:
        quant = max(tile_efficiency(m, n, tm, tn, spec.sm_count) for tm, tn in gen.tiles)
    else:
        quant = max(tile_efficiency(m, n, tm, tn, spec.sm_count, waves=False) for tm, tn in gen.tiles + NARROW_TILES)
    eff = ceiling * quant * (k / (k + gen.k_half) if typical else 1.0)
    if spec.flops_per_byte <= 0:
        return eff
    elem = 1.0 if spec.fp8 else 2.0
    intensity = 2.0 * m * k * n / (elem * (m * k + k * n) + 2.0 * m * n)  # FLOPs per HBM byte
    return min(eff, intensity / spec.flops_per_byte)


def exp_share(gen: Generation, head_dim: float) -> float:
    """Time of flash attention's exps over the time of its matmuls, per score: 2 exps against 14*head_dim
    tensor FLOPs, at tensor_per_exp tensor FLOPs per exp: 2 * tensor_per_exp / (14 * head_dim)."""
    return 2.0 * gen.tensor_per_exp / (14.0 * head_dim)


def head_dim_factor(gen: Generation, head_dim: float) -> float:
    """The attention ceiling's change from head dim 128 (where it is measured) to `head_dim`: the exps run
    beside the matmuls without overlap, (1 + exp_share(128)) / (1 + exp_share(d)), held at 1 above 128."""
    d = min(head_dim, 128.0)
    return (1.0 + exp_share(gen, 128.0)) / (1.0 + exp_share(gen, d))


def attention_kernel_efficiency(spec: KernelSpec, batch_heads: float, seq_q: float, seq_kv: float,
                                head_dim: float = 128.0, typical: bool = True) -> float:
    """Fraction of 16-bit peak fused causal attention reaches, forward and backward together, on executed
    FLOPs: attn_ceiling x head_dim_factor x wave quantization of its (batch x heads x query tiles) CTAs x
    seq_kv / (seq_kv + attn_half_seq) (a query tile's fixed cost over the keys it visits); typical=False
    leaves out that fitted ramp and the wave tail (persistent causal schedulers balance it): the bound,
    which no measured H100 row beats (tests/test_kernels.py)."""
    gen = spec.gen
    if not typical:
        return gen.attn_ceiling * head_dim_factor(gen, head_dim)
    tiles = batch_heads * math.ceil(seq_q / gen.attn_tile_q)
    ramp = seq_kv / (seq_kv + gen.attn_half_seq)
    return gen.attn_ceiling * head_dim_factor(gen, head_dim) * wave_efficiency(tiles, spec.sm_count) * ramp
