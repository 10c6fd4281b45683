"""Fit the memory model's free numbers on the declared rows (benchmarks/memory_splits.py).

Usage: python benchmarks/calibrate_memory.py
Three stages, each written into hardware_profiles/stacks/*.yaml (`memory:`) before the next:
Fragmentation f applies to the dynamic part of the allocated peak only, R = P + (A - P)(1 + f), with P
the states allocated once (costmodels.device_memory), so each fit is of (R - A) / (A - P):
1. Megatron fragmentation: the mean of (max reserved - max allocated) / (max allocated - allocated at
   rest) over the Megatron logs that print all three (no prediction enters: the rest is measured).
2. torch fragmentation (torchtitan, FSDP, AutoModel, DeepSpeed: PyTorch's caching allocator): the
   median of (measured reserved - predicted A) / (predicted A - predicted P) on the torch fitting rows.
3. Device terms: measured device - predicted reserved = C + g N on the device fitting rows (g
   communicators per rank; all Megatron), least squares with C, N >= 0 and each within its physical
   range (CONTEXT_MAX_MIB, NCCL_MAX_MIB). Megatron stacks take C (which
   also holds whatever those runs allocate outside PyTorch's allocator: Transformer Engine and cuBLAS
   workspaces, userbuffers) and N; the torch stacks take N and the measured context. When the rows cannot
   separate C from N (C's standard error exceeds the measured context), C is the measurement
   (benchmarks/data/measured/gpu_memory_h100.csv: a PyTorch process after its first GEMM on one H100,
   benchmarks/gpu/measure_memory.py) for every stack, and only N is fitted.
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from memory_accuracy import predict  # noqa: E402
from memory_data import load_memory_cases, logged_rest_bytes  # noqa: E402
from memory_splits import DEVICE, MEGATRON_FRAGMENTATION, TORCH_FRAGMENTATION  # noqa: E402

from benchmarks.stack_yaml import STACKS, read_profile, write_profile  # noqa: E402
import hardware_profiles as hp  # noqa: E402
from costmodels.device_memory import communicators, device_terms  # noqa: E402
from costmodels.estimate import estimate  # noqa: E402

MEGATRON = ("megatron-core", "megatron-2021", "nemo")
TORCH = ("torchtitan", "torchtitan-eager", "fsdp", "automodel", "deepspeed")
MIB = 2**20
GPU_CSV = Path(__file__).resolve().parent / "data" / "measured" / "gpu_memory_h100.csv"
# Physical ranges of the device terms (the fit is held inside them; what the rows need beyond is the model's
# error, left visible as bias rather than hidden in a context of 7 GiB):
# - C, the CUDA context and library workspaces of one training process: 0.3-0.6 GiB of CUDA context on
#   Hopper/Ampere, cuBLAS/cuBLASLt workspaces (32 MiB per handle and stream on Hopper), cuDNN and Transformer
#   Engine workspaces, TE userbuffers under --tp-comm-overlap (one sequence x hidden buffer per overlapped
#   GEMM): 0.5-3 GiB. Source: CUDA C++ Programming Guide (context), cuBLAS docs (CUBLAS_WORKSPACE_CONFIG),
#   benchmarks/gpu/measure_memory.py (a plain PyTorch process after its first GEMM).
# - N, one NCCL communicator's buffers: NCCL_BUFFSIZE 4 MiB x 2 peers (ring) x up to 32 channels, per protocol
#   in use (Simple; LL, LL128 smaller): 0.1-1 GiB. Source: NCCL environment docs (NCCL_BUFFSIZE,
#   NCCL_MAX_NCHANNELS).
CONTEXT_MAX_MIB = 3072.0
NCCL_MAX_MIB = 1024.0
TORCH_CONTEXT_MIB = 1024.0  # an allowance, not measured: replaced by the GPU measurement when present


def update_stacks(names, values: dict, note: str) -> None:
    """Set `values` in the memory section of each stack in `names`, appending `note` to fitted_on."""
    for name in names:
        path = STACKS / f"{name}.yaml"
        head, data = read_profile(path)
        mem = data.setdefault("memory", {})
        mem.update(values)
        notes = [n for n in mem.get("fitted_on", "").split(" | ") if n and not n.startswith(note.split(":")[0])]
        mem["fitted_on"] = " | ".join(notes + [note])
        write_profile(path, head, data)
    hp.forget_loaded()  # the next stage predicts with what was just written


def megatron_fragmentation() -> float:
    """Mean measured (R - A) / (A - rest) of the Megatron fitting logs."""
    cases = {c.case_id: c for c in load_memory_cases()}
    fractions = []
    for i in sorted(MEGATRON_FRAGMENTATION):
        allocated, rest = cases[i].measured_bytes, logged_rest_bytes(i)
        fractions.append((cases[i + ":reserved"].measured_bytes - allocated) / (allocated - rest))
    return statistics.mean(fractions)


def torch_fragmentation() -> float:
    """Median of (measured R - predicted A) / (predicted A - predicted P) on the torch fitting rows."""
    fractions = []
    for c in load_memory_cases():
        if c.case_id in TORCH_FRAGMENTATION:
            mem = estimate(c.model, c.cluster, c.train, c.layout).memory
            stage = mem.stages[mem.peak_stage]
            fractions.append((c.measured_bytes - stage.total_bytes) / (stage.total_bytes - stage.persistent_bytes))
    return max(0.0, statistics.median(fractions))


def fit_device_terms() -> tuple[float, float, tuple[float, float]]:
    """(C, N) in MiB from the device rows, least squares with both >= 0, and their standard errors
    (how well the rows determine them: rows with the same number of communicators cannot split C from N)."""
    rows, rhs = [], []
    for c in load_memory_cases():
        if c.case_id in DEVICE:
            est = estimate(c.model, c.cluster, c.train, c.layout)
            dev = device_terms(c.cluster, c.train, est.layout)
            reserved = max(dev.reserved(s.total_bytes, s.persistent_bytes) for s in est.memory.stages)
            rows.append([1.0, communicators(c.cluster, est.layout)])
            rhs.append((c.measured_bytes - reserved) / MIB)  # the reserve unhindered: a row under allocator
            # pressure (reserve held at the GPU's size) would otherwise feed the fit its own cap
    a, b = np.array(rows), np.array(rhs)
    sol = np.linalg.lstsq(a, b, rcond=None)[0]
    if sol.min() < 0:  # clamp one term at zero and refit the other
        fits = [(float(np.mean(b)), 0.0), (0.0, float(np.sum(a[:, 1] * b) / np.sum(a[:, 1] ** 2)))]
        sol = min(fits, key=lambda s: float(np.sum((a @ np.array(s) - b) ** 2)))
    se = standard_errors(a, b, np.array(sol))
    measured = torch_context_mib() if GPU_CSV.exists() else None
    if measured is not None and se[0] > measured:  # the rows cannot tell C from N: C measured, N fitted
        sol = np.array([measured, _fit_nccl(a, b, measured)])
    elif sol[0] > CONTEXT_MAX_MIB:  # past its physical range: C held at the bound, N refitted within its own
        sol = np.array([CONTEXT_MAX_MIB, _fit_nccl(a, b, CONTEXT_MAX_MIB)])
    return max(0.0, float(sol[0])), max(0.0, float(sol[1])), se


def _fit_nccl(a: np.ndarray, b: np.ndarray, context_mib: float) -> float:
    """N by least squares with C fixed, held within 0..NCCL_MAX_MIB."""
    n = float(np.sum(a[:, 1] * (b - context_mib)) / np.sum(a[:, 1] ** 2))
    return min(NCCL_MAX_MIB, max(0.0, n))


def standard_errors(a: np.ndarray, b: np.ndarray, sol: np.ndarray) -> tuple[float, float]:
    """Standard errors of a least-squares solution (residual variance x (A^T A)^-1); inf without spare rows
    or with a singular design."""
    spare = len(b) - a.shape[1]
    if spare <= 0 or np.linalg.matrix_rank(a) < a.shape[1]:
        return float("inf"), float("inf")
    r = b - a @ sol
    cov = float(r @ r) / spare * np.linalg.inv(a.T @ a)
    return tuple(float(x) for x in np.sqrt(np.diag(cov)))


def expandable_fragmentation() -> Optional[float]:
    """(R - A) / (A - P) of the H100 measurement's `base-expandable` row (PYTORCH_CUDA_ALLOC_CONF=
    expandable_segments:True; P = the states allocated at rest), None without the measurement."""
    if not GPU_CSV.exists():
        return None
    with open(GPU_CSV) as fh:
        row = next((r for r in csv.DictReader(fh) if r.get("name") == "base-expandable"), None)
    if row is None or not row.get("peak_reserved_bytes"):
        return None
    reserved, allocated, rest = (float(row[k]) for k in ("peak_reserved_bytes", "peak_allocated_bytes",
                                                          "static_allocated_bytes"))
    return round((reserved - allocated) / (allocated - rest), 4)


def torch_context_mib() -> float:
    """Device memory of a plain PyTorch process after its first GEMM, MiB (the H200 measurement)."""
    path = GPU_CSV
    if not path.exists():
        return TORCH_CONTEXT_MIB
    with open(path) as fh:
        values = [float(r["after_first_gemm_bytes"]) for r in csv.DictReader(fh) if r.get("after_first_gemm_bytes")]
    return round(statistics.median(values) / MIB, 1) if values else TORCH_CONTEXT_MIB


def main() -> None:
    update_stacks(MEGATRON + TORCH, {"fitted_on": ""}, "")  # each run writes its stages' notes afresh
    f_meg = round(megatron_fragmentation(), 4)
    update_stacks(MEGATRON, {"fragmentation": f_meg},
                  f"fragmentation: measured (max reserved - max allocated) / (max allocated - allocated at rest) of "
                  f"{', '.join(sorted(MEGATRON_FRAGMENTATION))} (physical range 0-0.5: the caching allocator "
                  f"rounds blocks to 2 MiB / 20 MiB segments and keeps freed ones, PyTorch CUDA semantics notes)")
    f_torch = round(torch_fragmentation(), 4)
    update_stacks(TORCH, {"fragmentation": f_torch},
                  f"fragmentation: median (measured reserved - predicted allocated) / predicted dynamic part of "
                  f"{', '.join(sorted(TORCH_FRAGMENTATION))}")
    ctx, nccl, (se_ctx, se_nccl) = fit_device_terms()
    note = (f"device terms: least squares of measured device - predicted reserved on {', '.join(sorted(DEVICE))} "
            f"(standard errors: context {se_ctx:.0f} MiB, NCCL {se_nccl:.0f} MiB per communicator; physical ranges, "
            f"held: context 512-{CONTEXT_MAX_MIB:.0f} MiB, NCCL 100-{NCCL_MAX_MIB:.0f} MiB per communicator)")
    measured = GPU_CSV.exists() and abs(ctx - torch_context_mib()) < 0.1
    update_stacks(MEGATRON, {"context_mib": round(ctx, 1), "nccl_mib_per_group": round(nccl, 1)},
                  note + (f"; context measured, not fitted: the rows leave it undetermined (standard error above "
                          f"the measured value), so it is the median device use of a PyTorch process after its "
                          f"first GEMM in {GPU_CSV.name} (CUDA context + cuBLAS workspace, H100, torch 2.11)"
                          if measured else ""))
    update_stacks(TORCH, {"context_mib": torch_context_mib(), "nccl_mib_per_group": round(nccl, 1)},
                  note + " (NCCL only), context " + (f"median of benchmarks/data/measured/{GPU_CSV.name}"
                                                      if GPU_CSV.exists() else "1 GiB allowance, not measured"))
    f_exp = expandable_fragmentation()
    if f_exp is not None:  # physical range 0-0.2: 2 MiB pages, holes only inside pages in use
        update_stacks(MEGATRON + TORCH, {"expandable_fragmentation": min(0.2, f_exp)},
                      f"expandable_fragmentation: measured (max reserved - max allocated) / (max allocated - "
                      f"allocated at rest) of the base-expandable row of {GPU_CSV.name} (H100, torch 2.11; the "
                      f"same run with the default allocator: base)")
    print(f"fragmentation megatron {f_meg:.4f}, torch {f_torch:.4f}, expandable {f_exp}; context {ctx:.0f} ± "
          f"{se_ctx:.0f} MiB, "
          f"NCCL {nccl:.0f} ± {se_nccl:.0f} MiB per communicator")


if __name__ == "__main__":
    main()
