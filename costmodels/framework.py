"""What each training framework can run: a capability table per framework, and the reasons a layout
falls outside it.

A framework (Megatron-LM/Megatron-Core, DeepSpeed, torchtitan, plain torch FSDP) runs a subset of
the layouts parplan can cost. The tables are data (hardware_profiles/frameworks/*.yaml), each row
citing the argument parser or config class it was read from; this module holds the spec and one
pure check, `refusals`, that names every rule a layout breaks. The planner filters its search space
with it (`plan --framework X`), and the exporters' own refusals (planner.exporters) are the finer
checks of the same promise: a plan found for X is written in X's terms.

Notation: tp, sp, cp, ep, etp, pp, vpp, zero, shard_group, recompute as in costmodels.layout;
cp_comm is the context-parallel algorithm (costmodels.layout.CpComm).
"""

from __future__ import annotations

from typing import Any, Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field

from costmodels.layout import CpComm, Recompute
from costmodels.stack import Framework

FRAMEWORKS: tuple[str, ...] = get_args(Framework)  # the framework families a Stack names


class FrameworkCaps(BaseModel):
    """One framework's capability table (hardware_profiles/frameworks/NAME.yaml)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: Framework = Field(..., description="Framework name (the --framework value).")
    description: str = Field(..., description="One line: what runs it and how parplan writes its launch files.")
    stack: str = Field(..., description="Default software-stack profile (hardware_profiles/stacks) whose "
                       "mechanisms and fitted efficiencies price this framework's layouts.")
    export_format: str = Field(..., description="The exporter (--format) that writes this framework's files.")
    tp: bool = Field(..., description="Tensor parallelism (with sequence parallelism).")
    cp_comm: list[CpComm] = Field(..., description="Context-parallel algorithms it runs; empty = no cp.")
    ep: bool = Field(..., description="Expert parallelism.")
    etp: bool = Field(..., description="Expert tensor parallelism other than 1.")
    etp_rule: Literal["free", "tp-without-ep"] = Field(
        "free", description="How a MoE layout's etp follows its other degrees: free (1 or tp at any ep, Megatron-Core "
        "--expert-tensor-parallel-size), or tp-without-ep (the routed experts are split over the whole tp group when "
        "ep = 1 and not split when ep > 1, as torchtitan 0.3 shards them).")
    pp: bool = Field(..., description="Pipeline parallelism.")
    vpp: bool = Field(..., description="Interleaved (virtual) pipeline stages.")
    pp_with_cp: bool = Field(True, description="Pipeline and context parallelism together.")
    stage_split: Literal["any", "deepspeed-partition", "torchtitan-layers-per-stage"] = Field(
        "any", description="Who splits the layers over pipeline stages: any split parplan chooses (written as "
        "explicit counts), only what DeepSpeed's PipelineModule partition methods produce, or only what "
        "torchtitan's layers_per_stage and first/last_stage_less_layers build.")
    zero: list[int] = Field(..., description="ZeRO stages it runs without pipelining (0 = plain DDP).")
    zero_with_pp: list[int] = Field(..., description="ZeRO stages it runs with pp > 1.")
    hsdp: bool = Field(..., description="Hybrid sharding (shard_group smaller than dp*cp).")
    recompute: list[Recompute] = Field(..., description="Activation recompute modes.")
    recompute_modules: bool = Field(False, description="Selective recompute of named modules other than the "
                                    "attention core (Megatron-Core --recompute-modules; Layout.recompute_modules).")
    ep_comm_overlap: bool = Field(False, description="MoE all-to-all beside another micro-batch's compute "
                                  "(TrainSpec.ep_comm_overlap; Megatron-Core --overlap-moe-expert-parallel-comm, "
                                  "which asserts no full recompute and, with pp > 1, interleaved stages).")
    precisions: list[str] = Field(..., description="Training precisions (bf16, fp16, fp8).")
    precision_why: str = Field("", description="Why another precision is refused, where the framework itself "
                               "trains in it but parplan's files cannot say so (torchtitan's FP8 is a model "
                               "converter chosen in code); empty = the framework does not train in it.")
    optimizers: list[str] = Field(..., description="Optimizers its launch files can name.")
    sources: list[str] = Field(..., min_length=1, description="Where each rule was read (file: function/field).")


def refusals(fw: FrameworkCaps, lay: Any, precision: str = "bf16", optimizer: str = "adam",
             ep_overlap: bool = False, moe: bool = False) -> list[str]:
    """Every rule of `fw` that `lay` (a Layout or a search Candidate) breaks, one phrase each; empty
    when the framework runs it. `ep_overlap`: the run asks for TrainSpec.ep_comm_overlap; `moe`: the model has
    routed experts (etp_rule). Rules every framework shares (divisibility, a2a heads) are costmodels.layout's."""
    rules = _degree_rules(fw, lay) + [etp_refusal(fw, lay, moe)] + _choice_rules(fw, lay, precision, optimizer) \
        + _ep_overlap_rules(fw, lay, ep_overlap)
    return [why for why in rules if why]


def _etp_wanted(fw: FrameworkCaps, lay: Any, moe: bool) -> Optional[int]:
    """The etp `fw` runs this MoE layout's experts with, or None where etp is the layout's choice."""
    if not moe or fw.etp_rule == "free":
        return None
    return lay.tp if lay.ep == 1 else 1


def etp_refusal(fw: FrameworkCaps, lay: Any, moe: bool) -> str:
    """Why `fw` does not split this MoE layout's experts over etp ranks as it asks (etp_rule), or ''."""
    want = _etp_wanted(fw, lay, moe)
    if want is None or lay.etp == want:
        return ""
    return (f"etp={lay.etp} with tp={lay.tp} ep={lay.ep}: {fw.name} (0.3.0, what parplan writes) splits the routed "
            f"experts over the whole tp group when ep = 1 and not at all when ep > 1 (give etp={want})")


def _ep_overlap_rules(fw: FrameworkCaps, lay: Any, ep_overlap: bool) -> list[str]:
    if not ep_overlap or lay.ep <= 1:
        return []
    if not fw.ep_comm_overlap:
        return [f"ep_comm_overlap: {fw.name} has no all-to-all overlap"]
    return [f"ep_comm_overlap with recompute=full: {fw.name} refuses it" if lay.recompute == "full" else "",
            f"ep_comm_overlap with pp={lay.pp} without vpp: {fw.name} refuses it" if lay.pp > 1 and lay.vpp == 1 else ""]


def _ep_overlap_runs(fw: FrameworkCaps, lay: Any) -> bool:
    return fw.ep_comm_overlap and lay.recompute != "full" and (lay.pp == 1 or lay.vpp > 1)


def runs(fw: FrameworkCaps, lay: Any, precision: str = "bf16", optimizer: str = "adam",
         ep_overlap: bool = False, moe: bool = False) -> bool:
    """`not refusals(fw, lay, precision, optimizer, ep_overlap, moe)`, without building the phrases: the search asks
    it of every candidate (hundreds of thousands per plan). The same rules in the same order as _degree_rules,
    etp_refusal, _choice_rules and _ep_overlap_rules; tests/test_frameworks.py holds the two equal over random layouts."""
    if ep_overlap and lay.ep > 1 and not _ep_overlap_runs(fw, lay):
        return False
    if (lay.tp > 1 and not fw.tp) or (lay.ep > 1 and not fw.ep) or (lay.etp > 1 and not fw.etp):
        return False
    want = _etp_wanted(fw, lay, moe)
    if want is not None and lay.etp != want:
        return False
    if lay.cp > 1 and (not fw.cp_comm or lay.cp_comm not in fw.cp_comm or (lay.pp > 1 and not fw.pp_with_cp)):
        return False
    if (lay.pp > 1 and not fw.pp) or (lay.vpp > 1 and not fw.vpp):
        return False
    if lay.zero not in (fw.zero_with_pp if lay.pp > 1 else fw.zero) or lay.recompute not in fw.recompute:
        return False
    if not fw.recompute_modules and named_modules(lay):
        return False
    if precision not in fw.precisions or optimizer not in fw.optimizers:
        return False
    return fw.hsdp or lay.replicas <= 1


def named_modules(lay: Any) -> list[str]:
    """The selective-recompute modules a layout names beyond the attention core every framework's selective
    mode recomputes (empty for None, ["core_attn"], or no selective recompute)."""
    mods = getattr(lay, "recompute_modules", None)
    if lay.recompute != "selective" or not mods or list(mods) == ["core_attn"]:
        return []
    return list(mods)


def _degree_rules(fw: FrameworkCaps, lay: Any) -> list[str]:
    name = fw.name
    return [
        f"tp={lay.tp}: {name} has no tensor parallelism here" if lay.tp > 1 and not fw.tp else "",
        f"cp={lay.cp}: {name} has no context parallelism" if lay.cp > 1 and not fw.cp_comm else "",
        (f"cp_comm={lay.cp_comm}: {name} runs cp with {', '.join(fw.cp_comm)}"
         if lay.cp > 1 and fw.cp_comm and lay.cp_comm not in fw.cp_comm else ""),
        f"ep={lay.ep}: {name} has no expert parallelism here" if lay.ep > 1 and not fw.ep else "",
        f"etp={lay.etp}: {name} has no expert tensor parallelism" if lay.etp > 1 and not fw.etp else "",
        f"pp={lay.pp}: {name} has no pipeline parallelism" if lay.pp > 1 and not fw.pp else "",
        f"vpp={lay.vpp}: {name} has no interleaved pipeline schedule" if lay.vpp > 1 and not fw.vpp else "",
        (f"pp={lay.pp} with cp={lay.cp}: {name} does not combine them" if lay.pp > 1 and lay.cp > 1
         and not fw.pp_with_cp else ""),
    ]


def _choice_rules(fw: FrameworkCaps, lay: Any, precision: str, optimizer: str) -> list[str]:
    name, zeros = fw.name, fw.zero_with_pp if lay.pp > 1 else fw.zero
    hybrid = lay.replicas > 1
    return [
        (f"zero={lay.zero}{' with pp>1' if lay.pp > 1 else ''}: {name} runs ZeRO stages "
         f"{', '.join(map(str, zeros))}" if lay.zero not in zeros else ""),
        f"shard_group={lay.shard_group}: {name} has no hybrid sharding here" if hybrid and not fw.hsdp else "",
        (f"recompute={lay.recompute}: {name} offers {', '.join(fw.recompute)}"
         if lay.recompute not in fw.recompute else ""),
        (f"recompute_modules={':'.join(named_modules(lay))}: {name} cannot name the modules it recomputes"
         if named_modules(lay) and not fw.recompute_modules else ""),
        (f"precision={precision}: {fw.precision_why or name + ' trains in ' + ', '.join(fw.precisions)}"
         if precision not in fw.precisions else ""),
        f"optimizer={optimizer}: {name}'s launch files name {', '.join(fw.optimizers)}"
        if optimizer not in fw.optimizers else "",
    ]
