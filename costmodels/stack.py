"""Software stacks: what a training framework overlaps, how it recomputes, and its fitted efficiencies.

The same layout runs at different speeds in Megatron-LM of 2021 (no overlap at all), Megatron-Core
(TP communication overlap, overlapped gradient reduce and parameter gather), DeepSpeed (ZeRO with
bucketed prefetch) and torchtitan/FSDP2 (per-block FSDP units, torch.compile, async TP). A Stack
says which of these mechanisms run and carries the few efficiency numbers that are the stack's,
not the GPU's (host launch overhead, element-wise fusion, contention while communication runs).
Profiles live in hardware_profiles/stacks/*.yaml, each with the rows it was fitted on and its error.

Mechanism sources (read from each framework's argument parser / config classes):
- Megatron-LM `--overlap-grad-reduce`, `--overlap-param-gather`, `--tp-comm-overlap`,
  `--recompute-granularity selective` (core attention only): megatron/training/arguments.py;
  DDP bucket size max(40M, 1M * dp) parameters: megatron/core/distributed/distributed_data_parallel.py.
- DeepSpeed ZeRO-3 `stage3_prefetch_bucket_size` (5e7 elements), `reduce_bucket_size` (5e8),
  `overlap_comm`: deepspeed/runtime/zero/config.py.
- torchtitan: FSDP2 `fully_shard` per transformer block, `reshard_after_forward` (True without PP),
  per-op selective checkpointing (saves matmul outputs but every second one, attention, reductions:
  torchtitan/models/llama3/infra/parallelize.py `_save_list`), `torch.compile` per block, async TP
  (torch/_inductor/fx_passes/micro_pipeline_tp.py: which collectives fuse with a matmul).

Layout (issue 36): a Stack is its identity (name, family, framework, description) and four sections,
each a strict model of its own: `mechanisms` (costmodels/stack_mechanisms.py: what runs, read from
the framework's sources), `fitted` (costmodels/stack_fitted.py: what a script fits, each number
within a sourced range), `memory` (costmodels/memory_semantics.py: what the stack allocates, with its
own fitted terms and rows) and `provenance` (costmodels/stack_provenance.py: rows, script, date,
error). The YAML profiles have the same sections.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costmodels.memory_semantics import MemorySemantics
from costmodels.stack_fitted import (  # noqa: F401 - re-exported: their home was this module
    MAX_REL_ERROR, MIN_SCALE, ZERO3_CALL_OVERHEAD_MAX_S, Fitted, Fp8Efficiency, Fp8Recipe)
from costmodels.stack_mechanisms import Mechanisms
from costmodels.stack_provenance import Provenance, RegimeError  # noqa: F401 - re-exported

Framework = Literal["megatron", "deepspeed", "torchtitan", "fsdp"]
SECTIONS = {"mechanisms": Mechanisms, "fitted": Fitted, "provenance": Provenance}
SECTION_OF = {field: section for section, model in SECTIONS.items() for field in model.model_fields}


def nest_flat_keys(data: dict) -> dict:
    """`data` with every key of a section moved into that section (a flat mapping of the old layout, or
    a nested one with flat overrides: the flat value wins). Transitional, with Stack's forwarding: it
    lets profiles, plan files and code of the flat layout load for one release."""
    out = dict(data)
    for section in SECTIONS:
        moved = {k: v for k, v in data.items() if SECTION_OF.get(k) == section}
        held = out.get(section)
        held = held.model_dump() if isinstance(held, BaseModel) else {} if held is None else held
        if moved and isinstance(held, dict):  # else left as they are, for the validator to name them
            out[section] = {**held, **moved}
            for key in moved:
                del out[key]
    return out


class Stack(BaseModel):
    """One software stack: its mechanisms, its fitted efficiencies, its memory semantics and where its
    numbers come from."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$",
                      description="Stack name, e.g. megatron-core: letters, digits and . _ + - (at most 64).")
    family: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$", description="Stacks whose error bands are measured together (e.g. "
                                  "torchtitan with and without compile); null = the stack's own name.")
    framework: Framework = Field(..., description="The framework family that runs it.")
    description: str = Field("", description="What this stack is, in one sentence.")
    mechanisms: Mechanisms = Field(default_factory=Mechanisms, description="What the stack runs: overlaps, "
                                   "buckets, ZeRO-3 prefetch, MoE dispatch, recompute semantics (from its sources).")
    fitted: Fitted = Field(default_factory=Fitted, description="The efficiencies a script fits, each within its "
                           "range.")
    memory: MemorySemantics = Field(default_factory=MemorySemantics, description="What the stack allocates, "
                                    "reserves and keeps on the device beyond the papers' formulas.")
    provenance: Provenance = Field(default_factory=Provenance, description="Which rows and script fitted the "
                                   "numbers, when, their error and the held-out error per regime.")

    @model_validator(mode="before")
    @classmethod
    def _nest_flat(cls, data: Any) -> Any:
        return nest_flat_keys(data) if isinstance(data, dict) else data

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> "Stack":
        """A copy with `update` applied; a flat key (`gemm_scale`) updates its section (transitional
        forwarding, as the properties below). Like pydantic's model_copy, values are not validated."""
        if update and any(k in SECTION_OF for k in update):
            routed = {k: v for k, v in update.items() if k not in SECTION_OF}
            for section in SECTIONS:
                moved = {k: v for k, v in update.items() if SECTION_OF.get(k) == section}
                if moved:
                    held = routed.get(section, getattr(self, section))
                    routed[section] = held.model_copy(update=moved)
            update = routed
        return super().model_copy(update=update, deep=deep)

    @property
    def regime_name(self) -> str:
        """The name regimes group by: the family, else the stack's name."""
        return self.family or self.name


def _forwarded(section: str, field: str) -> property:
    """Transitional forwarding (one release): `stack.<field>` reads `stack.<section>.<field>`, so code of
    the flat layout (other branches, scripts) keeps working; new code names the section. A property
    over an attrgetter, not __getattr__: the cost model reads these in its inner loop (__getattr__ took
    ~1.6 us a read, 16x naming the section; the property ~1.7x)."""
    return property(attrgetter(f"{section}.{field}"), doc=f"Transitional: Stack.{section}.{field} (read it there).")


for _field, _section in SECTION_OF.items():
    setattr(Stack, _field, _forwarded(_section, _field))

DEFAULT_STACK = "megatron-core"
