"""From the allocated peak to what the GPU holds: the allocator's reserve, the CUDA context, NCCL.

Notation: A allocated peak of one GPU (costmodels.memory: what torch.cuda.max_memory_allocated
reports), P its persistent part (model states allocated once and kept: memory.persistent_state_bytes),
f the stack's fragmentation, C its CUDA context and library workspaces, N its NCCL
buffers per communicator, g the communicators a rank uses, H the GPU's memory, M the cluster's
safety margin (`memory_reserve_gib`).
- peak reserved R = P + (A - P)(1 + f): torch.cuda.max_memory_reserved. The caching allocator keeps
  freed blocks, and what is freed and re-allocated every step (activations, gathered buffers,
  transients) leaves holes; states allocated once at start-up do not (torchtitan's DeepSeek-V3 16B
  log: the reserve grows by exactly the 14.9 GiB of Adam moments when they appear). f is fitted on
  published runs that report reserved peaks (benchmarks/calibrate_memory.py);
- device D = R + C + g N: what nvidia-smi shows for the process;
- fits: D <= H - M on every stage. The planner uses the same rule, affine in a stage's layer counts:
  P + (A - P)(1 + f) <= H - M - C - g N.
Source: PyTorch CUDA caching allocator (torch/cuda/memory.py: memory_reserved vs memory_allocated);
NCCL environment docs (NCCL_BUFFSIZE, 4 MiB per channel and peer); numbers and rows in
costmodels.memory_semantics and the stack profiles.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.memory_semantics import MIB
from costmodels.train_spec import TrainSpec

GIB = 2**30


def communicators(cluster: ClusterSpec, lay: Layout) -> int:
    """Process groups of more than one rank that a GPU communicates in: tp, cp, pp, data parallel,
    and for MoE models expert parallel and expert-data parallel (each its own NCCL communicator)."""
    edp = cluster.num_gpus // (lay.etp * lay.ep * lay.pp)
    sizes = (lay.tp, lay.cp, lay.pp, lay.dp * lay.cp, lay.ep, edp if lay.ep > 1 else 1)
    return sum(1 for n in sizes if n > 1)


@dataclass(frozen=True)
class DeviceTerms:
    """What separates an allocated peak from the device's use, for one layout."""

    fragmentation: float
    fixed_bytes: float  # CUDA context + NCCL buffers
    margin_bytes: float
    hbm_bytes: int

    def reserved(self, allocated: float, persistent: float = 0.0) -> float:
        """Peak reserved bytes for an allocated peak of which `persistent` is allocated once."""
        return persistent + (allocated - persistent) * (1 + self.fragmentation)

    def device(self, allocated: float, persistent: float = 0.0) -> float:
        """Whole-device bytes for an allocated peak of which `persistent` is allocated once."""
        return self.reserved(allocated, persistent) + self.fixed_bytes

    @property
    def device_budget(self) -> int:
        """The most a GPU may hold: H - M."""
        return int(self.hbm_bytes - self.margin_bytes)

    def allocated_budget(self, persistent: float = 0.0) -> int:
        """The largest allocated peak that fits with `persistent` bytes of it allocated once:
        P + (H - M - C - g N - P) / (1 + f)."""
        room = self.device_budget - self.fixed_bytes
        return max(0, int(persistent + (room - persistent) / (1 + self.fragmentation)))


def device_terms(cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> DeviceTerms:
    """The layout's device terms under its stack's memory semantics."""
    sem = train.stack_spec.memory
    fixed = (sem.context_mib + sem.nccl_mib_per_group * communicators(cluster, lay)) * MIB
    return DeviceTerms(sem.fragmentation, fixed, cluster.memory_reserve_gib * GIB, cluster.gpu_profile.hbm_bytes)
