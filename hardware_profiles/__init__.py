"""Sourced preset data: GPU profiles, cluster presets and model presets, one YAML file each.

Every YAML file carries a `sources` list naming where each number comes from. Model files keep
their sources beside the spec (the key is removed before validation, since ModelSpec is strict).
Files are read with `yaml.safe_load` only.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Optional

import yaml

from costmodels.model_spec import ModelSpec

if TYPE_CHECKING:  # each imported where it is loaded: `parplan models` needs model specs only (issue 36 start-up)
    from costmodels.framework import FrameworkCaps
    from costmodels.hardware_spec import ClusterSpec, GPUProfile
    from costmodels.stack import Stack
    from costmodels.train_spec import TrainSpec


class UnknownPresetError(KeyError):
    """A preset name that does not exist; the message lists close names."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


def _names(kind: str) -> list[str]:
    folder = resources.files(__package__) / kind
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


# libyaml's safe loader when PyYAML has it: the same constructor and resolver as yaml.safe_load, ~10x
# faster to scan (the 23 model presets of `parplan models` took 40 ms of its start-up in pure Python)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=None)
def _read(kind: str, name: str) -> dict:
    names = _names(kind)
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownPresetError(f"unknown {kind[:-1]} preset {name!r}{hint} (known: {', '.join(names)})")
    text = (resources.files(__package__) / kind / f"{name}.yaml").read_text()
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


def forget_loaded() -> None:
    """Drop the profiles read so far, so the next load reads the files again (calibration scripts
    that rewrite a profile and then predict with it)."""
    _read.cache_clear()


def list_gpus() -> list[str]:
    """Names of the GPU profiles."""
    return _names("gpus")


def list_clusters() -> list[str]:
    """Names of the cluster presets."""
    return _names("clusters")


def list_models() -> list[str]:
    """Names of the model presets."""
    return _names("models")


def list_stacks() -> list[str]:
    """Names of the software-stack profiles."""
    return _names("stacks")


def list_frameworks() -> list[str]:
    """Names of the framework capability tables."""
    return _names("frameworks")


def load_framework(name: str) -> FrameworkCaps:
    """The capability table of framework `name` (costmodels.framework)."""
    from costmodels.framework import FrameworkCaps

    return FrameworkCaps.model_validate(_read("frameworks", name))


def load_stack(name: str) -> Stack:
    """The stack profile `name`."""
    from costmodels.stack import Stack

    return Stack.model_validate(_read("stacks", name))


def resolve_train(train: TrainSpec, stack: Optional[str] = None) -> TrainSpec:
    """`train` with its stack resolved to a profile: `stack` if given, else train.stack, else the default."""
    from costmodels.stack import DEFAULT_STACK, Stack

    chosen = stack if stack is not None else train.stack
    if isinstance(chosen, Stack):
        return train if chosen is train.stack else train.model_copy(update={"stack": chosen})
    return train.model_copy(update={"stack": load_stack(chosen or DEFAULT_STACK)})


def load_gpu(name: str) -> GPUProfile:
    """The GPU profile `name`."""
    from costmodels.hardware_spec import GPUProfile

    return GPUProfile.model_validate(_read("gpus", name))


def model_sources(name: str) -> list[str]:
    """The sources listed for model preset `name`."""
    return list(_read("models", name).get("sources", []))


def load_model(name: str) -> ModelSpec:
    """The model preset `name`."""
    data = {k: v for k, v in _read("models", name).items() if k != "sources"}
    return ModelSpec.model_validate(data)


def resolve_cluster(cluster: ClusterSpec, num_nodes: Optional[int] = None) -> ClusterSpec:
    """Replace a GPU name by its profile and apply a node-count override."""
    update: dict = {}
    if isinstance(cluster.gpu, str):
        update["gpu"] = load_gpu(cluster.gpu)
    if num_nodes is not None:
        update["num_nodes"] = num_nodes
    return cluster.model_copy(update=update) if update else cluster


def load_cluster(name: str, num_nodes: Optional[int] = None) -> ClusterSpec:
    """The cluster preset `name`, GPU resolved, optionally with another node count."""
    from costmodels.hardware_spec import ClusterSpec

    return resolve_cluster(ClusterSpec.model_validate(_read("clusters", name)), num_nodes)
