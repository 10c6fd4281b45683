"""What the time model predicts with no fitted compute curve: GEMMs and attention at the kernel model's
typical rates at the sustained clock (costmodels.kernels: the spec sheet, the generation's measured ceiling,
tile and wave quantization, the K and sequence ramps, Generation.sustained), beside the shipped (fitted)
model, per data set.

    python benchmarks/physics_only.py          # table over fitting + validation rows
    python benchmarks/physics_only.py --rows   # and every row

Why: a GPU or framework with no measured step times is priced by its spec sheet and the kernel model.
This table says how far that lands from real steps on the data sets we do have, so the gap a fitted
curve closes is visible and attributable (docs/kernels.md, "Kernel physics alone"). Everything but the
two compute curves stays as shipped: the stacks' element-wise fusion, overheads, collectives, overlap.

Rows: benchmarks/splits.py's fitting and validation rows (vTrain blocks with a role, measured runs,
production recipes); the frozen test split is never opened.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import splits  # noqa: E402
from predict import prepared, predict_s  # noqa: E402
from reference_data import vtrain  # noqa: E402

import hardware_profiles as hp  # noqa: E402
from costmodels import compute as cmp  # noqa: E402
from costmodels import kernels  # noqa: E402


def _kernel_gemm(dev, m: float, k: float, n: float) -> float:
    if dev.kernel is None:
        return cmp.gemm_efficiency(dev.eff, m, k, n)
    return dev.kernel.gen.sustained * kernels.gemm_kernel_efficiency(dev.kernel, m, k, n, typical=True)


def _kernel_attention(model, x, dev, keys=None) -> float:
    keys = x.seq if keys is None else keys  # a sliding-window layer's keys (costmodels.attention_window)
    if dev.kernel is None:
        return cmp.flash_efficiency(dev.eff, keys)
    heads = max(model.num_attention_heads / x.tp, 1.0)
    return dev.kernel.gen.sustained * kernels.attention_kernel_efficiency(dev.kernel, x.mbs * heads, x.seq / x.cp,
                                                                          keys, model.head_dim)


@contextlib.contextmanager
def kernel_physics():
    """Within the block, costmodels.compute prices GEMMs and fused attention at the kernel model's typical
    rates instead of the fitted curve capped by the kernel bound (the stack's gemm/attention scales and
    the GPU's fitted curve drop out; FP8 GEMMs use the generation's FP8 ceiling)."""
    saved = cmp.device_gemm_efficiency, cmp.attention_efficiency
    cmp.device_gemm_efficiency, cmp.attention_efficiency = _kernel_gemm, _kernel_attention
    try:
        yield
    finally:
        cmp.device_gemm_efficiency, cmp.attention_efficiency = saved


def cases() -> list:
    """Fitting and validation rows: (data set, label, case)."""
    out = [(c.dataset, c.label, c) for c in splits.measured() if splits.measured_role(c.row_id)]
    gpu = hp.load_gpu("a100-80gb")
    for which in ("single", "multi"):
        out += [(f"vtrain-{which}", c.label, c) for i, c in enumerate(vtrain(gpu, which))
                if splits.vtrain_role(which, i)]
    return out


def errors() -> list[tuple[str, str, str, float, float]]:
    """(data set, label, GPU, shipped error, kernel-physics error) per row; error = predicted / measured - 1."""
    rows = cases()
    pairs = prepared([c for _, _, c in rows])
    shipped = [predict_s(c, lay) / c.measured_s - 1 for c, lay in pairs]
    with kernel_physics():
        physics = [predict_s(c, lay) / c.measured_s - 1 for c, lay in pairs]
    return [(d, label, c.cluster.gpu_profile.name, s, p)
            for (d, label, c), s, p in zip(rows, shipped, physics)]


def table(rows) -> list[str]:
    """Markdown lines: per data set and GPU, rows, mean |error| and median signed error of both models."""
    groups = defaultdict(list)
    for d, _, gpu, s, p in rows:
        groups[(d, gpu)].append((s, p))
    lines = ["| data set | GPU | rows | shipped mean abs | shipped median | physics mean abs | physics median |",
             "|---|---|---|---|---|---|---|"]
    for (d, gpu), v in sorted(groups.items()):
        s, p = np.array(v).T
        lines.append(f"| {d} | {gpu} | {len(v)} | {np.mean(abs(s)):.1%} | {np.median(s):+.1%} | "
                     f"{np.mean(abs(p)):.1%} | {np.median(p):+.1%} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="print every row too")
    args = ap.parse_args()
    rows = errors()
    print("\n".join(table(rows)))
    if args.rows:
        for d, label, gpu, s, p in rows:
            print(f"{d:22s} {label:32s} {gpu:15s} shipped {s:+.1%} physics {p:+.1%}")


if __name__ == "__main__":
    main()
