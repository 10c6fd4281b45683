"""From the allocated peak to what the GPU holds: the allocator's reserve, the CUDA context, NCCL.

Notation: A allocated peak of one GPU (costmodels.memory: what torch.cuda.max_memory_allocated
reports), f the stack's fragmentation, C its CUDA context and library workspaces, N its NCCL
buffers per communicator, g the communicators a rank uses, H the GPU's memory, M the cluster's
safety margin (`memory_reserve_gib`).
- peak reserved R = A (1 + f): torch.cuda.max_memory_reserved (the caching allocator keeps freed
  blocks; f is fitted on published runs that report both, or on reserved peaks);
- device D = R + C + g N: what nvidia-smi shows for the process;
- fits: D <= H - M. The planner uses the same rule as a budget on A: (H - M - C - g N) / (1 + f).
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

    def reserved(self, allocated: float) -> float:
        """Peak reserved bytes for an allocated peak."""
        return allocated * (1 + self.fragmentation)

    def device(self, allocated: float) -> float:
        """Whole-device bytes for an allocated peak."""
        return self.reserved(allocated) + self.fixed_bytes

    @property
    def allocated_budget(self) -> int:
        """The largest allocated peak that fits: (H - M - C - g N) / (1 + f)."""
        room = self.hbm_bytes - self.margin_bytes - self.fixed_bytes
        return max(0, int(room / (1 + self.fragmentation)))


def device_terms(cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> DeviceTerms:
    """The layout's device terms under its stack's memory semantics."""
    sem = train.stack_spec.memory
    fixed = (sem.context_mib + sem.nccl_mib_per_group * communicators(cluster, lay)) * MIB
    return DeviceTerms(sem.fragmentation, fixed, cluster.memory_reserve_gib * GIB, cluster.gpu_profile.hbm_bytes)
