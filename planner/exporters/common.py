"""Shared pieces of the exporters: the plan being exported, the header every file carries, and
safe rendering of shell scripts and TOML strings.

Source: benchmarks/data/launch_formats.md (all sections) for what each file must contain;
docs/design.md sections 2-4 for the plan's vocabulary. Everything that reaches a shell script
goes through `shq` (shlex.quote) or is a fixed string written here; comment text is reduced to
printable characters so that no name can end a comment line early.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Optional, Sequence, Union

from costmodels.estimate import estimate
from costmodels.outputs import Estimate
from costmodels.hardware_spec import GIB, ClusterSpec
from costmodels.layout import Layout, LayoutError, resolve_layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.search import stage_split
from planner.errors import UserError
from planner.files.loading import problem_from_plan
from planner.exporters.pricing import priced_lines
from planner.files.planfile import VERSION
from planner.safetext import terminal_controls, visible


class ExportRefused(UserError):
    """The target framework cannot express this plan; the message says why."""


@dataclass(frozen=True)
class ExportPlan:
    """A plan ready to export: specs, the resolved layout and the predicted numbers."""

    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    layout: Layout  # resolved: dp, schedule, stage_layers, num_microbatches filled
    peak_bytes: int
    step_s: float
    estimate: Optional[Estimate] = None  # under the stack that runs the file (planner.exporters.pricing)
    fmt: str = ""  # the format it was priced for ("" = the plan as saved)
    tokens: Optional[float] = None  # export --tokens: the run's token budget, which sets its optimizer steps

    @property
    def train_steps(self) -> Optional[int]:
        """Optimizer steps of a --tokens run: the budget over the tokens of one step, rounded up; None without."""
        if self.tokens is None:
            return None
        return max(1, math.ceil(self.tokens / (self.train.global_batch_size * self.seq)))

    @property
    def fits(self) -> bool:
        """Fits the GPU under the stack that runs the file (True when not priced for a format)."""
        return self.estimate is None or self.estimate.fits

    @property
    def seq(self) -> int:
        """Training sequence length in tokens."""
        return self.train.seq_len(self.model)

    @property
    def nodes(self) -> int:
        """Hosts the launchers start (torchrun --nnodes, SLURM --nodes, hostfile lines): the cluster's nodes, or
        its hosts where a node's NVLink domain spans several (GB200 NVL72: 72 a rack of 4 GPUs each)."""
        return self.cluster.num_hosts

    @property
    def gpus_per_node(self) -> int:
        """GPUs one host drives (torchrun --nproc-per-node, SLURM --gpus-per-node)."""
        return self.cluster.host_gpus

    @property
    def world(self) -> int:
        """All GPUs of the run."""
        return self.cluster.num_gpus

    @property
    def uniform_stages(self) -> bool:
        """Every pipeline rank holds the same number of layers."""
        return len(set(self.layout.stage_layers)) == 1


def plan_from_doc(doc: dict) -> ExportPlan:
    """Load a plan document (planner.files.planfile.plan_document) and resolve its layout."""
    if not isinstance(doc, dict):
        raise UserError(f"plan: expected a plan document (a mapping), got {type(doc).__name__}")
    prob = problem_from_plan(doc, "plan")
    if prob.layout is None:
        raise UserError("plan: the plan file has no 'layout'; export needs one (save it with plan --save)")
    try:  # a layout whose pp does not divide the layers takes the split the planner chooses
        layout, _ = stage_split.complete(prob.model, prob.cluster, prob.train, prob.layout)
        lay = resolve_layout(prob.model, prob.cluster, prob.train, layout)
    except LayoutError as err:
        raise UserError(f"plan: layout: {err}") from None
    peak, step = _predicted(doc, prob.model, prob.cluster, prob.train, lay)
    return ExportPlan(prob.model, prob.cluster, prob.train, lay, peak, step)


def _predicted(doc: dict, model, cluster, train, lay) -> tuple[int, float]:
    est = doc.get("estimate")
    try:
        return int(est["memory"]["peak_bytes"]), float(est["time"]["step_s"])
    except (TypeError, KeyError, ValueError):
        result = estimate(model, cluster, train, lay)
        return result.memory.peak_bytes, result.time.step_s


# ---- header -------------------------------------------------------------------------------------

def printable(text: object) -> str:
    """`text` with every non-printable character (newlines, escapes, controls) replaced by '?'."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def check_names(plan: ExportPlan) -> None:
    """Refuse names holding terminal control characters (escape sequences, carriage returns, bidi
    overrides): launch files carry names as values, and `cat` would replay them on a terminal.
    Newlines and other characters that shell quoting keeps inert are left alone."""
    names = [("model.name", plan.model.name), ("cluster.name", plan.cluster.name),
             ("cluster.gpu.name", plan.cluster.gpu_profile.name)]
    for field_name, name in names:
        bad = terminal_controls(name)
        if bad:
            raise UserError(f"plan: {field_name} '{visible(name)}' holds terminal control characters "
                            f"({', '.join(bad)}); launch files cannot carry them: rename it")


def layout_string(lay: Layout) -> str:
    """The layout in parplan's --layout syntax (planner.files.loading.parse_layout reads it back)."""
    stages = ":".join(str(n) for n in lay.stage_layers)
    text = (f"tp={lay.tp},sp={int(lay.sp)},cp={lay.cp},cp_comm={lay.cp_comm},ep={lay.ep},etp={lay.etp},pp={lay.pp},"
            f"vpp={lay.vpp},dp={lay.dp},zero={lay.zero},mbs={lay.mbs},recompute={lay.recompute},"
            f"schedule={lay.schedule},stage_layers={stages}")
    if lay.recompute_modules:
        text += f",recompute_modules={':'.join(lay.recompute_modules)}"
    if lay.recompute_num_layers:
        text += f",recompute_num_layers={lay.recompute_num_layers},recompute_method={lay.recompute_method}"
    if lay.chunk_layers is not None:
        text += f",chunk_layers={':'.join(str(n) for n in lay.chunk_layers)}"
    return text


def header_lines(plan: ExportPlan, target: str, check_file: Optional[str] = None) -> list[str]:
    """What every exported file says first: the plan, parplan's version, and (priced for a format) the
    memory and step time under the stack that runs the file, the `parplan check` line that reproduces
    them and the exact spec (planner.exporters.pricing); `check_file` names the file check reads."""
    c, lay = plan.cluster, plan.layout
    head = [
        f"Generated by parplan {VERSION} for {target}. Edit only the places marked EDIT.",
        f"Model: {printable(plan.model.name)}; cluster: {printable(c.name)}, {c.num_nodes} "
        f"node{'s' if c.num_nodes != 1 else ''} x {c.gpus_per_node} GPUs = {plan.world} x {printable(c.gpu_profile.name)}"
        + (f" ({plan.nodes} hosts of {plan.gpus_per_node})" if plan.gpus_per_node != c.gpus_per_node else ""),
        f"Layout: {layout_string(lay)}, num_microbatches={lay.num_microbatches}",
        f"Batch: {plan.train.global_batch_size} sequences x {plan.seq} tokens, "
        f"precision {plan.train.precision}, optimizer {plan.train.optimizer}",
    ]
    if plan.train_steps is not None:
        head.append(f"Length: {plan.tokens:.4g} tokens = {plan.train_steps:,} steps of "
                    f"{plan.train.global_batch_size * plan.seq:,} tokens (export --tokens: Megatron's --train-iters "
                    "and torchtitan's training.steps are set to it; give other training scripts this step count)")
    if plan.estimate is not None:
        return head + priced_lines(plan, check_file)
    return head + [
        f"Predicted peak memory: {plan.peak_bytes / GIB:.2f} GiB per GPU "
        f"(device budget {c.usable_bytes / GIB:.2f} GiB); predicted step time: {plan.step_s:.3f} s",
    ]


def comment_block(lines: Sequence[str], prefix: str = "# ") -> str:
    """Lines as comments in a '#'-comment language (shell, TOML, hostfile), one per line."""
    return "".join(f"{prefix}{printable(line)}".rstrip() + "\n" for line in lines)


# ---- shell rendering ----------------------------------------------------------------------------

class Raw(str):
    """A shell word written as is (a variable reference in double quotes); never user text."""


Word = Union[str, int, Raw]
Arg = tuple  # (flag, value-or-None)


def shq(value: Word) -> str:
    """One shell word: Raw verbatim, anything else through shlex.quote."""
    return value if isinstance(value, Raw) else shlex.quote(str(value))


def dashed(value: Word) -> bool:
    """A value argparse would read as an option of its own (a name like '--num-layers=1')."""
    return not isinstance(value, (Raw, int)) and str(value).startswith("-")


def flag_value(flag: str, value: Union[Word, tuple]) -> list[Word]:
    """[flag, value] as two words, or one word `flag=value` when the value starts with '-'; a tuple value is
    several words after the flag (an argparse nargs="+" option, e.g. Megatron's --recompute-modules)."""
    if isinstance(value, tuple):
        return [flag, *value]
    return [f"{flag}={value}"] if dashed(value) else [flag, value]


def flag_lines(args: Sequence[Arg], indent: str = "    ") -> list[str]:
    """`--flag value` pairs, one per line, each value quoted (`--flag=value` when it starts with '-')."""
    out = []
    for flag, value in args:
        words = [flag] if value is None else flag_value(flag, value)
        out.append(indent + " ".join(shq(w) if i or len(words) == 1 else str(w) for i, w in enumerate(words)))
    return out


def bash_array(name: str, args: Sequence[Arg]) -> str:
    """A bash array assignment holding `args`, one pair a line."""
    body = "\n".join(flag_lines(args))
    return f"{name}=(\n{body}\n)\n"


def command(words: Sequence[Word], indent: str = "    ") -> str:
    """A command broken with backslashes: the program, then one `--flag value` pair (or word) a line."""
    parts = [shq(w) for w in words]
    lines, i = [parts[0]], 1
    while i < len(parts):
        word = str(words[i])
        nxt = str(words[i + 1]) if i + 1 < len(parts) else "-"
        pair = word.startswith("-") and not nxt.startswith("-") and "[@]" not in nxt
        lines.append(f"{parts[i]} {parts[i + 1]}" if pair else parts[i])
        i += 2 if pair else 1
    return (" \\\n" + indent).join(lines) + "\n"


def script(plan: ExportPlan, target: str, body: str, extra_header: Sequence[str] = ()) -> str:
    """A bash script: shebang, header comments, strict mode, body."""
    head = comment_block(header_lines(plan, target) + list(extra_header))
    return f"#!/usr/bin/env bash\n{head}set -euo pipefail\n\n{body}"


# ---- TOML rendering -----------------------------------------------------------------------------

def toml_str(text: str) -> str:
    """A TOML basic string: quotes, backslashes and every control character escaped."""
    out = []
    for ch in str(text):
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(value: object) -> str:
    """A TOML value for bool, int, float, str or a list of them."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return toml_str(str(value))


def toml_table(name: str, items: Sequence[tuple[str, object]], notes: Optional[dict] = None) -> str:
    """`[name]` followed by `key = value` lines (with an optional trailing comment per key)."""
    lines = [f"[{name}]"]
    for key, value in items:
        note = (notes or {}).get(key)
        tail = f"  # {printable(note)}" if note else ""
        lines.append(f"{key} = {toml_value(value)}{tail}")
    return "\n".join(lines) + "\n"
