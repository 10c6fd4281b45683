"""The published JSON Schema: spec files people write and the JSON parplan prints.

`parplan schema` prints one document whose `$defs` hold ModelSpec, GPUProfile, ClusterSpec,
TrainSpec, Stack (`--stack-file`), Layout (inputs), PlanFile (what --save writes and estimate/check/export/report read),
Estimate (one layout's estimate, as plan's `plans` hold them), EstimateOutput (`estimate --json`: an Estimate with
`warnings`, and `whole_run` with `--tokens`), CheckOutput (`check --json`), PlanOutput (`plan --json`), ExportOutput
(`export --json`), ReportOutput (`report --json`), SweepOutput (`sweep --json`), CalibrateOutput (`calibrate --json`),
ErrorOutput (what any command prints under `--json` when it stops on an error), RunSpec and WholeRun (the whole
run, costmodels.whole_run). It is generated from the Pydantic models, so it cannot drift from what the loaders
accept.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from costmodels.estimate import Estimate
from costmodels.hardware_spec import ClusterSpec, GPUProfile
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.stack import Stack
from costmodels.train_spec import TrainSpec
from costmodels.whole_run import RunSpec, WholeRun
from planner.schema_runs import CalibrateOutput, ErrorOutput, SweepOutput


class ClusterPreset(BaseModel):
    """A cluster preset with overrides, e.g. {preset: dgx-h100, num_nodes: 8}."""

    model_config = ConfigDict(extra="allow")
    preset: str = Field(..., description="Cluster preset name (parplan hardware).")


class PlanFile(BaseModel):
    """A plan file: each part a preset name or an inline spec (model also a Hugging Face config.json)."""

    model_config = ConfigDict(extra="forbid")
    model: Union[str, ModelSpec, dict] = Field(..., description="Preset name, ModelSpec or Hugging Face config.")
    cluster: Union[str, ClusterPreset, ClusterSpec] = Field(..., description="Preset name, preset + overrides, spec.")
    train: TrainSpec
    layout: Optional[Union[Layout, str]] = Field(None, description="Layout or a layout string (tp=8,pp=4,...).")
    parplan_version: Optional[str] = None
    estimate: Optional[Estimate] = Field(None, description="The estimate the plan was saved with.")
    alternatives: list[Estimate] = Field(default_factory=list, description="Runner-up layouts from `plan`.")
    reasons: list[str] = Field(default_factory=list, description="Why the winner won.")
    search: Optional[dict] = None


class SearchInfo(BaseModel):
    """What the search looked at."""

    model_config = ConfigDict(extra="allow")
    seconds: float
    layouts_considered: int


class PlanOutput(BaseModel):
    """`plan --json`."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["optimal", "feasible", "infeasible"]
    plans: list[Estimate]
    search: SearchInfo
    reasons: list[str]
    validated_alternative: Optional[Estimate] = Field(
        None, description="When the winner's accuracy regime is not validated: the fastest layout that fits in "
        "a validated one (null when the winner is validated or none fits).")
    framework: str = Field("any", description="The --framework searched: megatron, deepspeed, torchtitan, fsdp "
                           "or any.")
    runs_on: list[list[str]] = Field(default_factory=list, description="runs_on[i]: the frameworks whose "
                                     "capability tables accept plans[i] (hardware_profiles/frameworks).")
    whole_run: Optional[WholeRun] = Field(None, description="With --tokens: the winner's whole run (days, "
                                          "GPU-hours, energy, cost, checkpoint interval, goodput); null otherwise.")
    warnings: list[str] = Field(default_factory=list, description="Also on stderr: what the inputs hold that is not "
                                "priced (the Hugging Face config reader's notes, each 'WHERE: LINE'), a cluster "
                                "file's likely slips, a winner the time limit left unproven, and the export formats "
                                "left out or forced.")


class EstimateOutput(Estimate):
    """`estimate --json`: one Estimate with the warnings, and `whole_run` when --tokens is given."""

    whole_run: Optional[WholeRun] = Field(None, description="With --tokens: the whole run of this layout.")
    warnings: list[str] = Field(default_factory=list, description="Also on stderr: the Hugging Face config reader's "
                                "notes and a cluster file's likely slips, then a layout priced by default or one the "
                                "stack's framework cannot run.")


class CheckOutput(EstimateOutput):
    """`check --json`: the estimate of the configuration as read, with what the reading assumed and noted."""

    assumed: list[str] = Field(default_factory=list, description="Every default taken where the configuration "
                               "says nothing (a DeepSpeed \"auto\" value, a sequence length, the GPU count).")
    notes: list[str] = Field(default_factory=list, description="What the configuration sets and how it was priced, "
                             "or that it is not priced.")
    read: dict = Field(default_factory=dict, description="What was read: the model, cluster and training settings "
                       "priced.")
    strict_fits: Optional[bool] = Field(None, description="With --strict: fits without allocator pressure (the exit "
                                        "code's verdict; `fits` stays the memory model's).")


class ExportOutput(BaseModel):
    """`export --json`: what was written (the files themselves say their memory, step time and check line)."""

    model_config = ConfigDict(extra="forbid")
    format: str = Field(..., description="The format exported: megatron, deepspeed, torchrun, torchtitan, slurm or "
                        "all.")
    out: str = Field(..., description="The folder written into.")
    written: list[str] = Field(..., description="Paths written, in order.")
    refused: dict[str, str] = Field(default_factory=dict, description="Format -> why it was not written (it cannot "
                                    "express the layout, or the layout does not fit its stack).")
    forced: dict[str, str] = Field(default_factory=dict, description="Format -> why it does not fit, written anyway "
                                   "with --force.")
    warnings: list[str] = Field(default_factory=list, description="Also on stderr: the refused and forced lines.")


class GroupOut(BaseModel):
    """One communication group of the device mesh, in Megatron's rank order."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="tp, cp, dp, pp, etp or ep.")
    size: int = Field(..., description="Ranks in the group.")
    stride: int = Field(..., description="Rank distance between neighbours of the group.")
    crosses_nodes: bool = Field(..., description="The group spans more than one node (scale-up domain).")


class BlockOut(BaseModel):
    """One forward (F) or backward (B) of one micro-batch chunk on one pipeline rank."""

    model_config = ConfigDict(extra="forbid")
    rank: int
    kind: Literal["F", "B"]
    microbatch: int
    chunk: int
    start_s: float = Field(..., description="Seconds from the step start.")
    end_s: float


class ReportOutput(BaseModel):
    """`report --json`: what the pictures draw."""

    model_config = ConfigDict(extra="forbid")
    title: str
    summary: str = Field(..., description="The report's one-sentence answer.")
    plan: Estimate
    alternatives: list[Estimate]
    reasons: list[str]
    groups: list[GroupOut]
    timelines: dict[str, list[BlockOut]] = Field(..., description="Schedule -> simulated blocks, the plan's schedule "
                                                  "first; empty past 128 pipeline stages.")
    drawn_microbatches: int = Field(..., description="Micro-batches simulated (at most 24).")
    gpus_per_node: int
    num_nodes: int
    whole_run: Optional[WholeRun] = Field(None, description="With --tokens: the plan's whole run.")
    html: Optional[str] = Field(None, description="The HTML file written with -o, else null.")


MODELS = [ModelSpec, GPUProfile, ClusterSpec, TrainSpec, Stack, Layout, PlanFile, Estimate, PlanOutput, EstimateOutput,
          CheckOutput, ExportOutput, ReportOutput, SweepOutput, CalibrateOutput, ErrorOutput, RunSpec, WholeRun]


def json_schema() -> dict:
    """One JSON Schema document with every model under $defs."""
    _, schema = models_json_schema([(m, "validation") for m in MODELS], ref_template="#/$defs/{model}")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "parplan specs and outputs"
    schema["description"] = __doc__.strip().split("\n\n")[1]
    return schema
