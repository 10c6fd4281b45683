"""Turn what the user typed (preset names, spec files, plan files, layout strings) into specs.

Every failure raises UserError with the field, the value and the rule; files are read with
yaml.safe_load only, size-capped, and YAML anchors/aliases are refused (no alias bombs).
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

import hardware_profiles as hp
from costmodels.hardware_spec import ClusterSpec
from costmodels.hf_config import model_from_hf_config
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.errors import UserError, describe_validation_error

MAX_FILE_BYTES = 4 * 2**20
PLAN_KEYS = {"model", "cluster", "train", "layout"}
PLAN_EXTRA_KEYS = {"parplan_version", "estimate", "search", "alternatives", "reasons"}

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Problem:
    """A fully specified problem: the four specs of a plan file."""

    model: ModelSpec
    cluster: ClusterSpec
    train: TrainSpec
    layout: Optional[Layout] = None


def validate(cls: type[T], data: Any, where: str) -> T:
    """cls.model_validate(data) with errors rewritten as a UserError naming `where`."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise UserError(describe_validation_error(err, where)) from None


def read_mapping(path: Path) -> dict:
    """A JSON or YAML file holding one mapping: a regular file (a FIFO or device would block or never
    end), at most 4 MiB (checked while reading), safe loading, no YAML aliases, no duplicate keys."""
    raw = _read_capped(path)
    if not raw.strip():
        raise UserError(f"{path}: file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a UTF-8 text file (binary?)") from None
    data = _parse_text(text, path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _read_capped(path: Path) -> bytes:
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise UserError(f"{path}: not a regular file (a directory, FIFO or device); give a spec file")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise UserError(f"cannot read {str(path)!r}: {err.strerror or err}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UserError(f"{path}: file is over {MAX_FILE_BYTES} bytes; spec files are limited to {MAX_FILE_BYTES} bytes")
    return raw


def _unique_pairs(pairs: list) -> dict:
    """json object_pairs_hook: a mapping, refusing a key given twice (the last would silently win)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} is given twice")
        out[key] = value
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping key given twice."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _parse_text(text: str, path: Path) -> Any:
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        except json.JSONDecodeError as err:
            raise UserError(f"{path}: invalid JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
        except ValueError as err:
            raise UserError(f"{path}: {err}") from None
    try:
        events = list(yaml.parse(text, Loader=yaml.SafeLoader))
        if any(isinstance(e, yaml.AliasEvent) for e in events):
            raise UserError(f"{path}: YAML aliases (*name) are not accepted in spec files")
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}: invalid YAML{where}: {getattr(err, 'problem', None) or err}") from None


def _preset(loader: Callable[[str], T], name: str) -> T:
    try:
        return loader(name)
    except hp.UnknownPresetError as err:
        raise UserError(str(err)) from None


SPEC_SUFFIXES = (".json", ".yaml", ".yml")


def _is_preset_name(arg: str, presets: list[str]) -> bool:
    """A preset, or a name that is neither an existing path nor a spec-file name (a preset typo)."""
    path = Path(arg)
    return arg in presets or not (path.exists() or path.suffix.lower() in SPEC_SUFFIXES)


def model_from_data(data: Any, where: str = "model") -> ModelSpec:
    """A preset name, an inline ModelSpec mapping or a Hugging Face config mapping."""
    if isinstance(data, str):
        return _preset(hp.load_model, data)
    if isinstance(data, dict) and "model_type" in data:
        try:
            return model_from_hf_config(data)
        except ValueError as err:
            raise UserError(f"{where}: {err}") from None
    return validate(ModelSpec, data, where)


def load_model(arg: str) -> ModelSpec:
    """MODEL argument: a preset name, a spec file (YAML/JSON) or a Hugging Face config.json."""
    if _is_preset_name(arg, hp.list_models()):
        return _preset(hp.load_model, arg)
    path = Path(arg)
    return model_from_data(read_mapping(path), where=str(path))


def cluster_from_data(data: Any, nodes: Optional[int] = None, gpus: Optional[int] = None,
                      where: str = "cluster") -> ClusterSpec:
    """A preset name, `{preset: NAME, num_nodes: N, ...}` or an inline ClusterSpec, GPU resolved,
    resized by --nodes or --gpus."""
    if isinstance(data, str):
        cluster = _preset(hp.load_cluster, data)
    elif isinstance(data, dict) and isinstance(data.get("preset"), str):
        base = _preset(hp.load_cluster, data["preset"]).model_dump()
        overrides = {k: v for k, v in data.items() if k != "preset"}
        cluster = validate(ClusterSpec, {**base, **overrides}, where)
    else:
        cluster = validate(ClusterSpec, data, where)
        if isinstance(cluster.gpu, str):
            cluster = cluster.model_copy(update={"gpu": _preset(hp.load_gpu, cluster.gpu)})
    return resize_cluster(cluster, nodes, gpus)


def resize_cluster(cluster: ClusterSpec, nodes: Optional[int], gpus: Optional[int]) -> ClusterSpec:
    """Apply --nodes or --gpus (a whole number of nodes, or fewer GPUs on one node)."""
    if nodes is not None and gpus is not None:
        raise UserError(f"give --nodes or --gpus, not both (--nodes {nodes}, --gpus {gpus})")
    update: dict = {}
    if nodes is not None:
        update["num_nodes"] = nodes
    if gpus is not None:
        per = cluster.gpus_per_node
        if gpus < per:
            update.update(num_nodes=1, gpus_per_node=gpus)
        elif gpus % per:
            raise UserError(f"--gpus {gpus} is not a whole number of {per}-GPU nodes of cluster {cluster.name!r}")
        else:
            update["num_nodes"] = gpus // per
    if not update:
        return cluster
    data = cluster.model_dump()
    data.update(update)
    return validate(ClusterSpec, data, "cluster")


def load_cluster(arg: str, nodes: Optional[int] = None, gpus: Optional[int] = None) -> ClusterSpec:
    """CLUSTER option: a preset name or a spec file."""
    if _is_preset_name(arg, hp.list_clusters()):
        return cluster_from_data(arg, nodes, gpus)
    path = Path(arg)
    return cluster_from_data(read_mapping(path), nodes, gpus, where=str(path))


def parse_layout(text: str) -> Layout:
    """`"tp=8,pp=4,dp=2,mbs=1,zero=1,recompute=selective,sp=1,stage_layers=19:20:20:21"` -> Layout."""
    data: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise UserError(f"--layout: {part!r} is not key=value (e.g. tp=8,pp=4,mbs=1)")
        if key in data:
            raise UserError(f"--layout: {key} is given twice")
        data[key] = _layout_value(key, value)
    return validate(Layout, data, "layout")


def _layout_value(key: str, value: str) -> Any:
    if key in ("recompute", "schedule"):
        return value
    if key == "stage_layers":
        return [_int(key, v) for v in value.replace(" ", ":").split(":") if v]
    if key == "sp" and value.lower() in ("true", "false", "on", "off"):
        return value.lower() in ("true", "on")
    return _int(key, value)


def _int(key: str, value: str) -> int:
    """A layout integer in ASCII digits (int() would also read other scripts' digits, e.g. '٨' as 8)."""
    digits = value[1:] if value[:1] in "+-" else value
    if not (digits.isascii() and digits.isdigit()):
        raise UserError(f"--layout: {key}={value!r} is not a whole number (ASCII digits)")
    return int(value)


def resolve_train(train: TrainSpec, stack=None, where: str = "train") -> TrainSpec:
    """`train` with its stack resolved to a profile (hardware_profiles.resolve_train): `stack` (a
    name or a Stack) if given, else train.stack, else the default profile; never the built-in fallback."""
    try:
        return hp.resolve_train(train, stack)
    except hp.UnknownPresetError as err:
        raise UserError(f"{where}.stack: {err}") from None


def train_from_data(data: Any, where: str = "train") -> TrainSpec:
    """A TrainSpec mapping, validated, its stack (a name, an inline stack or null) resolved."""
    return resolve_train(validate(TrainSpec, data, where), where=where)


def problem_from_plan(data: dict, where: str) -> Problem:
    """A plan file's mapping: model, cluster, train, layout (each a preset name or inline spec)."""
    unknown = set(data) - PLAN_KEYS - PLAN_EXTRA_KEYS
    if unknown:
        raise UserError(f"{where}: unknown plan-file keys {sorted(map(str, unknown))}; expected {sorted(PLAN_KEYS)}")
    for key in ("model", "cluster", "train"):
        if key not in data:
            raise UserError(f"{where}: plan file lacks {key!r}")
    layout = data.get("layout")
    if isinstance(layout, str):
        layout = parse_layout(layout)
    elif layout is not None:
        layout = validate(Layout, layout, f"{where}: layout")
    return Problem(
        model=model_from_data(data["model"], f"{where}: model"),
        cluster=cluster_from_data(data["cluster"], where=f"{where}: cluster"),
        train=train_from_data(data["train"], f"{where}: train"),
        layout=layout,
    )


def load_plan(path: Path) -> Problem:
    """Read a plan file (JSON or YAML)."""
    return problem_from_plan(read_mapping(path), str(path))


def is_plan_file(arg: str) -> bool:
    """True when `arg` names an existing file whose top level has model/cluster/train."""
    path = Path(arg)
    if not path.is_file() or path.suffix.lower() not in (".json", ".yaml", ".yml"):
        return False
    try:
        return PLAN_KEYS - {"layout"} <= set(read_mapping(path))
    except UserError:
        return False
