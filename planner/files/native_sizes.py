"""The cluster, model and spec helpers every native reader shares (moved out of planner.files.native, which
re-exports them: planner.files.accelerate_yaml and planner.files.parplan_launch reach them as native._cluster etc.).

A config says nothing of the GPUs it runs on, so --cluster is always needed; most also need --model. Sizes come from
the command line (--nodes, --gpus) over what a script's launcher or #SBATCH lines say (planner.files.shell_sbatch).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from costmodels.hardware_spec import ClusterSpec
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.errors import UserError
from planner.files import loading
from planner.files.said import heard_notes, note  # noqa: F401  (re-exported: the readers' warning lines)
from planner.files.safe_read import read_text
from planner.files.shell_sbatch import fewest_nodes, nodes_note, sbatch_options

__all__ = ["_cluster", "_layout", "_load_cluster", "_load_model", "_named", "_need_cluster", "_need_model",
           "_read_text", "_sbatch_gpus", "_sbatch_nodes", "_sized_cluster", "_train", "note"]


def _read_text(path: Path) -> str:
    """The config's text through planner.files.safe_read (a regular file, size-capped while reading, UTF-8)."""
    return read_text(path)


@contextmanager
def _named(path: Path):
    """Errors of the flag readers (which see text, not files) prefixed with the file's name."""
    try:
        yield
    except UserError as err:
        raise UserError(f"{path}: {err}") from None


def _sbatch_nodes(text, path: Path) -> Optional[int]:
    """`#SBATCH --nodes N` / `-N N` (or `sbatch --nodes=N` in the script) as a count: the fewest sbatch allocates
    for a range or list (`2-4`: 2, said on stderr); None when absent or a variable. `text`: the script, or its
    sbatch options already read."""
    with _named(path):
        options = text if isinstance(text, dict) else sbatch_options(text)
        value = options.get("--nodes", "")
        if "--nodes" in options and not value:  # `-N` then another option or nothing: sbatch "requires an argument"
            raise UserError("#SBATCH --nodes/-N is given without a node count")
        count = fewest_nodes(value)
    if nodes_note(value):
        note(str(path), nodes_note(value))
    return count


def _sbatch_gpus(text, path: Path) -> Optional[int]:
    """`#SBATCH --gpus-per-node N` (also `gpu:N` or `TYPE:N`, slurm's gres form) as a count; None when absent or
    not a literal number. A GB200 NVL72 job asks for its 4-GPU trays so (a new-user pass: -N 64 of them was read
    as 64 racks of 72)."""
    options = text if isinstance(text, dict) else sbatch_options(text)
    value = options.get("--gpus-per-node", "").rsplit(":", 1)[-1]
    if not value.isdigit() or int(value) < 1:
        return None
    return int(value)


def _need_cluster(cluster, path: Path, kind: str):
    if not cluster:
        raise UserError(f"{path}: --cluster is required for a {kind} config: it does not say which GPUs it "
                        "runs on (e.g. --cluster dgx-h100 [--nodes N])")
    return cluster


def _need_model(model, path: Path, kind: str) -> ModelSpec:
    if not model:
        raise UserError(f"{path}: --model is required for a {kind} config: it does not describe the model "
                        "(a preset such as llama3-8b, a spec file or a Hugging Face config.json)")
    return _load_model(model)


def _load_model(model) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else loading.load_model(model)


def _load_cluster(cluster, nodes: Optional[int] = None, gpus: Optional[int] = None) -> ClusterSpec:
    """A preset name or spec file (str), or an already loaded ClusterSpec, resized."""
    if isinstance(cluster, ClusterSpec):
        return loading.resize_cluster(cluster, nodes, gpus)
    return loading.load_cluster(cluster, nodes, gpus)


def _cluster(cluster, nodes: Optional[int], per_node: Optional[int] = None,
             script_nodes: Optional[int] = None, where: str = "", gpus: Optional[int] = None) -> ClusterSpec:
    """The cluster for a script: the command line's --nodes/--gpus win over what the script's
    environment defaults to (`NNODES=${SLURM_NNODES:-1}`), with a note saying so; else the script's
    torchrun --nnodes/--nproc-per-node (or #SBATCH --nodes)."""
    if nodes is not None and script_nodes is not None and nodes != script_nodes:
        note(where, f"--nodes {nodes} overrides the script's {script_nodes}")
    if gpus is not None:
        script_gpus = (script_nodes or 1) * per_node if per_node is not None else None
        if script_gpus is not None and script_gpus != gpus:
            note(where, f"--gpus {gpus} overrides the script's {script_gpus}")
        return _load_cluster(cluster, nodes, gpus)
    base = _load_cluster(cluster)
    if per_node is not None and per_node != base.gpus_per_node and per_node == base.gpus_per_host:
        if nodes is not None:  # --nodes counts NVLink domains; the script's nodes are hosts
            return _load_cluster(base, nodes)
        return _load_cluster(base, gpus=(script_nodes or 1) * per_node)  # hosts of GPUs: sized by the GPUs
    spec = _load_cluster(base, nodes if nodes is not None else script_nodes)
    if per_node is not None and per_node != spec.gpus_per_node:
        data = spec.model_dump()
        data["gpus_per_node"] = per_node
        spec = loading.validate(ClusterSpec, data, f"{where}: cluster with torchrun --nproc-per-node {per_node}")
    return spec


def _sized_cluster(cluster, nodes: Optional[int], world: Optional[int], path: Path, keys: str,
                   notes: Optional[ReadNotes] = None) -> ClusterSpec:
    """The cluster sized by --nodes, else by the GPU count the config implies, else (with `notes`, which
    records the assumption) the cluster as given, else an error."""
    base = _load_cluster(cluster)  # loaded once: a cluster file's warnings are said once
    if nodes is not None:
        return _load_cluster(base, nodes)
    if world is None and notes is not None:
        notes.assumed.append(f"the config does not fix the GPU count (it would with {keys}): {base.num_nodes} "
                             f"node(s) of {base.name}, {base.num_gpus} GPUs, assumed; set --nodes")
        return base
    if world is None:
        raise UserError(f"{path}: give --nodes: the config does not fix the GPU count (it would with {keys})")
    if world % base.gpus_per_node and world > base.gpus_per_node and base.gpus_per_host is None:
        raise UserError(f"{path}: the config implies {world} GPUs, not whole {base.gpus_per_node}-GPU nodes of "
                        f"{base.name!r}; give --nodes")
    return _load_cluster(base, gpus=world)  # whole nodes, part of one, or whole hosts of NVLink domains


def _train(data: dict, where: str) -> TrainSpec:
    """Validated, its stack (set by each reader from what the config runs) resolved to the profile."""
    return loading.train_from_data(data, f"{where}: training settings")


def _layout(data: dict, where: str) -> Layout:
    return loading.validate(Layout, data, f"{where}: layout")
