"""What communication costs when it runs beside compute.

Notation: f seconds of compute that the collective may hide behind, g seconds the collective takes
alone, kappa the stack's `overlap_slowdown` (compute stretched while NCCL kernels share its SMs and
HBM bandwidth).

Model: both start together; compute takes f + kappa * min(f, g) (slowed only while the collective
runs), the collective g; the pair ends with the later one. The time added to f is

    exposed(f, g) = max(f + kappa * min(f, g), g) - f,

which is g when nothing overlaps (f = 0), kappa * g when the collective is short (g <= f), and
g - f when it is long and kappa is small. Sources: contention of overlapped communication with
GEMMs is measured in the FSDP paper (Zhao et al., VLDB 2023, section 7.3: throughput drops when
too many all-gathers are issued ahead, "rate limiter") and in Megatron-Core's userbuffer TP
overlap, which reserves SMs for communication (TransformerEngine `ub_cfgs` num_sm); kappa is
fitted per stack, never assumed (hardware_profiles/stacks/*.yaml).
"""

from __future__ import annotations


def exposed_s(compute_s: float, comm_s: float, slowdown: float = 0.0) -> float:
    """Seconds a collective of `comm_s` adds to `compute_s` of compute it overlaps (see module doc)."""
    if comm_s <= 0:
        return 0.0
    f = max(compute_s, 0.0)
    return max(f + slowdown * min(f, comm_s), comm_s) - f
