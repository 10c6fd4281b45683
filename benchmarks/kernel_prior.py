"""The compute curve a GPU's kernels imply, used as the prior of its step-time fit.

    python benchmarks/kernel_prior.py     # the prior of every GPU profile with a kernel model

A fitted GPU curve (gemm_max, gemm_half_dim, attn_max: costmodels.compute.gemm_efficiency and
flash_efficiency) starts from this prior, and a leave-one-regime-out fold that removes every row of its
GPU keeps it (benchmarks/loro.py: "a stage left with no rows keeps the prior"). So a GPU generation
held out is priced by its spec sheet and the kernel model (costmodels.kernels: the generation's measured
ceiling, tile and wave quantization, the K and sequence ramps at their typical rates, at the clock a run holds
at its power limit: Generation.sustained), never by a start value picked by hand. The curve is a
least-squares fit, in relative error, of those sustained typical efficiencies over the shapes a transformer
layer runs:
- GEMMs: m = 4,096-16,384 tokens, k and n from 1,024 to 28,672 (hidden and FFN widths after TP);
- attention: causal, head dim 128, 64 heads, 2,048-32,768 keys, with attn_half_seq held at 512.
"""

from __future__ import annotations

import itertools
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hardware_profiles as hp  # noqa: E402
from costmodels import kernels  # noqa: E402
from costmodels.timing import kernel_spec  # noqa: E402

TOKENS = (4096, 8192, 16384)
WIDTHS = (1024, 2048, 4096, 8192, 16384, 28672)
KEYS = (2048, 4096, 8192, 16384, 32768)
ATTN_HALF_SEQ = 512.0


def _gemm_points(spec) -> np.ndarray:
    """(harmonic size d, typical kernel efficiency) per GEMM shape."""
    return np.array([(3.0 / (1 / m + 1 / k + 1 / n),
                      spec.gen.sustained * kernels.gemm_kernel_efficiency(spec, m, k, n, typical=True))
                     for m, k, n in itertools.product(TOKENS, WIDTHS, WIDTHS)])


def _attention_points(spec) -> np.ndarray:
    return np.array([(s, spec.gen.sustained * kernels.attention_kernel_efficiency(spec, 64, s, s, 128, typical=True))
                     for s in KEYS])


@lru_cache(maxsize=None)
def kernel_prior(gpu: str) -> dict[str, float]:
    """{gemm_max, gemm_half_dim, attn_max} fitted to the kernel model of `gpu` (a profile name)."""
    from scipy.optimize import least_squares

    spec = kernel_spec(hp.load_gpu(gpu), False)
    if spec is None:
        raise ValueError(f"{gpu}: no kernel model (its profile lacks sm_count or tensor_core_gen)")
    g = _gemm_points(spec)
    gemm = least_squares(lambda p: p[0] * g[:, 0] / (g[:, 0] + p[1]) / g[:, 1] - 1, [0.8, 1300.0],
                         bounds=([0.3, 1.0], [1.0, 1e5])).x
    a = _attention_points(spec)
    attn = least_squares(lambda p: p[0] * a[:, 0] / (a[:, 0] + ATTN_HALF_SEQ) / a[:, 1] - 1, [0.6],
                         bounds=([0.05], [1.0])).x
    return {"gemm_max": float(gemm[0]), "gemm_half_dim": float(gemm[1]), "attn_max": float(attn[0])}


def main() -> None:
    print("| GPU | gemm_max | gemm_half_dim | attn_max |\n|---|---|---|---|")
    for name in ("a100-80gb", "h100-sxm", "h200", "b200", "mi300x"):
        try:
            p = kernel_prior(name)
        except ValueError as e:
            print(f"| {name} | {e} | | |")
            continue
        print(f"| {name} | {p['gemm_max']:.3f} | {p['gemm_half_dim']:.0f} | {p['attn_max']:.3f} |")


if __name__ == "__main__":
    main()
