"""Writing plan files: self-contained (inline specs), atomic, never clobbering without force."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from costmodels.estimate import Estimate
from costmodels.hardware_spec import ClusterSpec
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.errors import UserError

VERSION = "0.1.0"


def plan_document(model: ModelSpec, cluster: ClusterSpec, train: TrainSpec, plan: Estimate) -> dict:
    """A plan file's content: the four specs inline, the version and the estimate it was saved with."""
    layout = plan.layout.model_dump(mode="json")
    return {"parplan_version": VERSION, "model": model.model_dump(mode="json"),
            "cluster": cluster.model_dump(mode="json"), "train": train.model_dump(mode="json"),
            "layout": layout, "estimate": plan.model_dump(mode="json")}


def write_atomic(path: Path, text: str, force: bool) -> None:
    """Write `text` to `path` through a temporary file and a rename; refuse to overwrite without force."""
    if path.exists() and not force:
        raise UserError(f"{path} exists; pass --force to overwrite it")
    if path.parent and not path.parent.exists():
        raise UserError(f"folder {str(path.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_plan(path: Path, model, cluster, train, plan: Estimate, force: bool) -> None:
    """Save the winning plan as JSON."""
    write_atomic(path, json.dumps(plan_document(model, cluster, train, plan), indent=2) + "\n", force)
