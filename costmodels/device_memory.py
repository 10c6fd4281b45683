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
  published runs that report reserved peaks (benchmarks/calibrate_memory.py); with expandable segments
  it is the stack's expandable_fragmentation instead (costmodels.memory_semantics);
- device D = R + C + g N: what nvidia-smi shows for the process, while it stays within B = H - M;
- floor F = A + C + g N: the least the device can hold. When cudaMalloc fails, the caching allocator
  releases its cached free blocks and retries before it raises out-of-memory, so a run whose D would
  pass B still runs as long as F fits; nvidia-smi then shows the device near full (clamped here to B).
  Published runs at the edge show exactly this: the three that ran at 94-96% of their GPU (FlagPerf
  Llama 3 8B A800 pp2 dp4, Mixtral 8x7B H100 tp8 pp2, torchtitan DeepSeek-V3 16B ep1) have D above
  B and F below it. Fragmentation inside segments still in use is not counted in F, so F is a lower
  bound, and a run under such pressure pays a synchronising cudaFree on every retry;
- fits: F <= B on every stage (`allocator_pressure` when D > B on some stage). The planner asks more:
  no pressure, D <= B, affine in a stage's layer counts: P + (A - P)(1 + f) <= B - C - g N.
Source: PyTorch CUDA caching allocator (torch/cuda/memory.py: memory_reserved vs memory_allocated;
c10/cuda/CUDACachingAllocator.cpp: on a failed cudaMalloc, release_cached_blocks, then retry);
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
        """Whole-device bytes for an allocated peak of which `persistent` is allocated once, with memory
        to spare (the reserve grows unhindered)."""
        return self.reserved(allocated, persistent) + self.fixed_bytes

    def floor(self, allocated: float) -> float:
        """The least the device can hold for an allocated peak: A + C + g N (every cached free block
        released; fragmentation inside segments in use not counted)."""
        return allocated + self.fixed_bytes

    def seen(self, allocated: float, persistent: float = 0.0) -> tuple[float, float]:
        """(reserved, device) as torch and nvidia-smi report them: unhindered while the device use
        stays within the budget; at the budget when only the release of cached blocks keeps the run
        going (the floor fits, the unhindered use does not); unhindered when not even the floor fits."""
        device = self.device(allocated, persistent)
        if device > self.device_budget >= self.floor(allocated):
            device = self.device_budget
        return device - self.fixed_bytes, device

    @property
    def device_budget(self) -> int:
        """The most a GPU may hold: H - M."""
        return int(self.hbm_bytes - self.margin_bytes)

    @property
    def floor_budget(self) -> int:
        """The largest allocated peak that fits at all: H - M - C - g N."""
        return max(0, int(self.device_budget - self.fixed_bytes))

    def allocated_budget(self, persistent: float = 0.0) -> int:
        """The largest allocated peak that fits without allocator pressure, with `persistent` bytes of
        it allocated once: P + (H - M - C - g N - P) / (1 + f)."""
        room = self.device_budget - self.fixed_bytes
        return max(0, int(persistent + (room - persistent) / (1 + self.fragmentation)))


def device_terms(cluster: ClusterSpec, train: TrainSpec, lay: Layout) -> DeviceTerms:
    """The layout's device terms under its stack's memory semantics."""
    sem = train.stack_spec.memory
    fixed = (sem.context_mib + sem.nccl_mib_per_group * communicators(cluster, lay)) * MIB
    frag = sem.expandable_fragmentation if train.alloc_expandable else sem.fragmentation
    return DeviceTerms(frag, fixed, cluster.memory_reserve_gib * GIB, cluster.gpu_profile.hbm_bytes)
