"""Writing plan files: self-contained (inline specs), atomic, never clobbering without force.

The software stack is the exception: a shipped profile (hardware_profiles/stacks) is written by its
name, so that a refitted profile applies when the plan is read again; any other stack stays inline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Union

import hardware_profiles as hp
from costmodels.estimate import Estimate
from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.stack import Stack
from costmodels.train_spec import TrainSpec
from planner.files.guarded_write import Target, write_all

VERSION = "0.1.0"


def plan_document(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, plan: Estimate,
                  alternatives: list[Estimate] = (), reasons: list[str] = ()) -> dict:
    """A plan file's content: the four specs inline, the version, the estimate it was saved with,
    and (from `plan`) the runner-up layouts and the reasons the winner won."""
    layout = plan.layout.model_dump(mode="json")
    return {"parplan_version": VERSION, "model": model.model_dump(mode="json"),
            "cluster": cluster.model_dump(mode="json"), "train": train_document(train),
            "layout": layout, "estimate": plan.model_dump(mode="json"),
            "alternatives": [a.model_dump(mode="json") for a in alternatives], "reasons": list(reasons)}


def train_document(train: TrainSpec) -> dict:
    """The TrainSpec as a plan file holds it: the stack by name when it is a shipped profile."""
    doc = train.model_dump(mode="json")
    doc["stack"] = stack_reference(train.stack)
    return doc


def stack_reference(stack: Union[str, Stack, None]) -> Union[str, dict, None]:
    """A stack's name when it equals the shipped profile of that name, else the inline profile."""
    if not isinstance(stack, Stack):
        return stack
    if stack.name in hp.list_stacks() and hp.load_stack(stack.name) == stack:
        return stack.name
    return stack.model_dump(mode="json")


def write_atomic(path: Path, text: str, force: bool, mode: int = 0o666, option: str = "output") -> None:
    """Write `text` to `path` through planner.files.guarded_write: checked, atomic, never clobbering without
    force. `mode` (before the umask): 0o777 for scripts; `option` names the path in messages."""
    write_all([Target(Path(path), text, mode, option)], force)


def plan_text(doc: dict) -> str:
    """A plan document as the JSON text of a plan file."""
    return json.dumps(doc, indent=2) + "\n"


def save_plan(path: Path, doc: dict, force: bool, option: str = "--save") -> None:
    """Save a plan document as JSON."""
    write_atomic(path, plan_text(doc), force, option=option)
