"""Turn what the user typed (preset names, spec files, plan files, layout strings) into specs.

Every failure raises UserError with the field, the value and the rule; files are read with
yaml.safe_load only, size-capped, and YAML anchors/aliases are refused (no alias bombs).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

from pydantic import BaseModel, ValidationError

import hardware_profiles as hp
from costmodels.hardware_spec import ClusterSpec
from costmodels.outputs import Estimate
from planner.files import gpu_profile
from planner.files.hf_config import hf_hint, model_from_hf_config
from planner.files.hf_notes import hf_name, hf_warnings, located
from planner.files.plan_age import older_cluster_notes, older_model_notes
from planner.files.planfile import VERSION
from planner.files.said import note
from costmodels.layout import Layout
from costmodels.model_spec import ModelSpec
from costmodels.train_spec import TrainSpec
from planner.errors import UserError, closest, describe_validation_error
from planner.files.safe_read import (MAX_FILE_BYTES, SPEC_SUFFIXES, key_text, parse_mapping,  # noqa: F401
                                     read_text)  # (MAX_FILE_BYTES and SPEC_SUFFIXES re-exported)

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
    warnings: list = field(default_factory=list)  # lines naming what the config sets that parplan does not price
    model_notes: list = field(default_factory=list)  # the model reader's warnings, on stderr already (model_noted)


def validate(cls: type[T], data: Any, where: str, from_file: bool = True) -> T:
    """cls.model_validate(data) with errors rewritten as a UserError naming `where`. A mapping read from
    a file with no known field at all is no spec (e.g. /etc/shadow): said so, nothing of it echoed."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    if from_file and data and not set(map(str, data)) & set(cls.model_fields):
        raise UserError(f"{where}: does not look like a parplan spec file (no known field of {cls.__name__})")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise UserError(describe_validation_error(err, where)) from None


def read_mapping(path: Path) -> dict:
    """A JSON or YAML file holding one mapping, read through planner.files.safe_read: a regular file of at
    most 4 MiB (checked while reading), safe loading, no YAML aliases, no duplicate keys, nesting,
    integers and floats bounded."""
    path = Path(path)
    return parse_mapping(read_text(path), path)


def _preset(loader: Callable[[str], T], name: str) -> T:
    try:
        return loader(name)
    except hp.UnknownPresetError as err:
        raise UserError(str(err)) from None




def _is_preset_name(arg: str, presets: list[str]) -> bool:
    """A preset, or a name that is neither an existing path nor a spec-file name (a preset typo)."""
    path = Path(arg)
    return arg in presets or not (path.exists() or path.suffix.lower() in SPEC_SUFFIXES)


def model_from_data(data: Any, where: str = "model") -> ModelSpec:
    """A preset name, an inline ModelSpec mapping or a Hugging Face config mapping."""
    return model_noted(data, where)[0]


_HELD = contextvars.ContextVar("hf_notes_held", default=False)


@contextlib.contextmanager
def notes_held() -> Iterator[None]:
    """Within the block, model_noted returns the Hugging Face notes without printing them: for a reader that
    learns the training length only after it loaded the model (`check` of a launch file), which prints the notes
    itself once it knows it (model_notes with that length)."""
    token = _HELD.set(True)
    try:
        yield
    finally:
        _HELD.reset(token)


def model_noted(data: Any, where: str = "model", seq_len: Optional[int] = None) -> tuple[ModelSpec, list[str]]:
    """model_from_data's spec and the warning lines of a Hugging Face config (hf_notes.hf_warnings, each
    `WHERE: LINE`), printed on stderr as read; none for a preset or a parplan spec. `seq_len`: the training
    length the command was given (--seq-len, a plan's train.seq_length), which the notes on length speak of."""
    if isinstance(data, str):
        return _preset(hp.load_model, data), []
    hint = hf_hint(data, where)
    if hint:  # an empty or model_type-less config.json: name the Hugging Face keys, not parplan's
        raise UserError(hint)
    if isinstance(data, dict) and "model_type" in data:  # named as hf_notes.hf_name
        spec, notes = _hf_model(data, where, seq_len)
        if not _HELD.get():
            say_notes(notes)
        return spec, notes
    return validate(ModelSpec, data, where), []


def say_notes(lines: list[str]) -> None:
    """The model reader's warning lines on stderr, as the launch-file readers print theirs (planner.files.native.note)."""
    for line in lines:
        print(f"parplan: warning: {line}", file=sys.stderr)


def _hf_model(data: dict, where: str, seq_len: Optional[int] = None) -> tuple[ModelSpec, list[str]]:
    """A Hugging Face config's spec and its warnings (`WHERE: LINE`); a bad file is a UserError located at `where`."""
    try:
        spec = model_from_hf_config(data, name=hf_name(data, where))
        notes = hf_warnings(data, spec, seq_len)
    except ValueError as err:
        raise UserError(located(where, err)) from None
    return spec, [f"{where}: {line}" for line in notes]


def load_model(arg: str) -> ModelSpec:
    """MODEL argument: a preset name, a spec file (YAML/JSON) or a Hugging Face config.json."""
    return load_model_noted(arg)[0]


def load_model_noted(arg: str, seq_len: Optional[int] = None) -> tuple[ModelSpec, list[str]]:
    """load_model's spec and a Hugging Face config's warning lines (model_noted, with the given `seq_len`),
    printed on stderr as read."""
    if _is_preset_name(arg, hp.list_models()):
        try:
            return hp.load_model(arg), []
        except hp.UnknownPresetError as err:  # a Hub id or a path that is not there: say what MODEL may be
            raise UserError(f"{err}; MODEL may also be a ModelSpec file (YAML/JSON, `parplan schema ModelSpec`) or "
                            "a Hugging Face config.json (parplan reads files only: download the config first)") from None
    path = Path(arg)
    return model_noted(read_mapping(path), where=str(path), seq_len=seq_len)


def model_notes(arg: Optional[str], seq_len: Optional[int] = None) -> list[str]:
    """The warning lines load_model_noted gives for `arg` with `seq_len` (none for None or a preset), read again
    and NOT printed: for a command that loaded the model with its notes held (notes_held) until it knew the
    training length, and prints or returns them itself (check of a launch file)."""
    if not isinstance(arg, str) or _is_preset_name(arg, hp.list_models()):
        return []
    path = Path(arg)
    data = read_mapping(path)
    if isinstance(data, dict) and "model_type" in data and not hf_hint(data, str(path)):
        return _hf_model(data, str(path), seq_len)[1]
    return []


def cluster_from_data(data: Any, nodes: Optional[int] = None, gpus: Optional[int] = None,
                      where: str = "cluster") -> ClusterSpec:
    """A preset name, `{preset: NAME, num_nodes: N, gpu: OTHER, ...}` (a preset's chassis with fields
    overridden, another GPU profile included) or an inline ClusterSpec; the GPU resolved to its profile,
    the whole validated once (memory_reserve_gib below the HBM), resized by --nodes or --gpus."""
    if isinstance(data, str):
        return resize_cluster(_preset(hp.load_cluster, data), nodes, gpus)
    if isinstance(data, dict) and "preset" in data:
        data = _over_preset(data, where)
    said = ""
    if isinstance(data, dict) and "gpu" in data:  # a preset, a spec file, or inline (efficiency filled if left out)
        gpu, said = gpu_profile.resolve(data["gpu"], where, read_mapping)
        data = {**data, "gpu": gpu}
    spec = validate(ClusterSpec, data, where)
    for line in [said] + gpu_profile.link_warnings(spec):  # after the validation: a bad file is one line
        gpu_profile.warn(where, line)
    return resize_cluster(spec, nodes, gpus)


def _over_preset(data: dict, where: str) -> dict:
    """`{preset: NAME, **overrides}` as the preset's fields with the overrides over them."""
    name = data["preset"]
    if not isinstance(name, str):
        raise UserError(f"{where}.preset: a cluster preset name is expected (got {type(name).__name__})")
    base = _preset(hp.load_cluster, name).model_dump()
    return {**base, **{k: v for k, v in data.items() if k != "preset"}}


def resize_cluster(cluster: ClusterSpec, nodes: Optional[int], gpus: Optional[int],
                   gpus_from: str = "--gpus") -> ClusterSpec:
    """Apply --nodes or --gpus (a whole number of nodes, fewer GPUs on one node, or, where a node's NVLink domain
    spans hosts, the fewest domains of whole hosts: _partial_domains; on a full-mesh node those
    keep only the links among them, so a 2-GPU share of an 8-GPU MI300X node has one 64 GB/s link, not 448).
    `gpus_from` names where the GPU count came from, for the error (calibrate: a log's)."""
    if nodes is not None and gpus is not None:
        raise UserError(f"give --nodes or --gpus, not both (--nodes {nodes}, --gpus {gpus})")
    update: dict = {}
    if nodes is not None:
        update["num_nodes"] = nodes
    if gpus is not None:
        per = cluster.gpus_per_node
        if gpus < per:
            update.update(num_nodes=1, gpus_per_node=gpus)
            if cluster.scale_up_topology == "mesh" and per > 1:  # they keep the links among them: gpus-1 of per-1
                update["scale_up_gb_per_s"] = cluster.scale_up_gb_per_s * max(gpus - 1, 1) / (per - 1)
        elif gpus % per:
            each = _partial_domains(cluster, gpus)
            if each is None:
                raise UserError(f"{gpus_from} {gpus} is not a whole number of {per}-GPU nodes of cluster "
                                f"{cluster.name!r}")
            update.update(num_nodes=gpus // each, gpus_per_node=each)
        else:
            update["num_nodes"] = gpus // per
    if not update:
        return cluster
    data = cluster.model_dump()
    data.update(update)
    return validate(ClusterSpec, data, "cluster")


def _partial_domains(cluster: ClusterSpec, gpus: int) -> Optional[int]:
    """GPUs per NVLink domain when `gpus` fill the fewest domains evenly with whole hosts (256 GB200 on NVL72
    racks: 4 racks of 64, 16 of their 18 trays; jobs leave trays out), else None. Only where a domain spans
    several hosts (gpus_per_host): a plain node is not split."""
    host, per = cluster.gpus_per_host, cluster.gpus_per_node
    if host is None or host >= per:
        return None
    domains = -(-gpus // per)
    each = gpus // domains
    return each if each * domains == gpus and each % host == 0 else None


def load_cluster(arg: str, nodes: Optional[int] = None, gpus: Optional[int] = None) -> ClusterSpec:
    """CLUSTER option: a preset name or a spec file."""
    if _is_preset_name(arg, hp.list_clusters()):
        return cluster_from_data(arg, nodes, gpus)
    path = Path(arg)
    return cluster_from_data(read_mapping(path), nodes, gpus, where=str(path))


def parse_layout(text: str) -> Layout:
    """`"tp=8,pp=4,dp=2,mbs=1,zero=1,recompute=selective,sp=1,stage_layers=19:20:20:21"` -> Layout, the parts
    separated by commas or blanks (layout_parts); lists (stage_layers, chunk_layers,
    recompute_modules=layernorm:moe_act) are colon-separated."""
    data: dict[str, Any] = {}
    for part in layout_parts(text):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise UserError(f"--layout: {part!r} is not key=value (e.g. tp=8,pp=4,mbs=1)")
        if key in data:
            raise UserError(f"--layout: {key} is given twice")
        if key not in Layout.model_fields:
            raise UserError(f"--layout: unknown key {key!r}{_nearest_key(key)}; keys: {', '.join(Layout.model_fields)}")
        data[key] = _layout_value(key, value)
    if not data:  # ",,,," or "" would silently mean the default layout
        raise UserError(f"--layout {text!r} names no key=value (e.g. tp=8,pp=4,mbs=1)")
    return validate(Layout, data, "layout", from_file=False)


_LIST_KEYS = ("stage_layers", "chunk_layers", "recompute_modules")


def layout_parts(text: str) -> list[str]:
    """The key=value parts of a --layout text, separated by commas or blanks (the way plan and explain print
    a layout: "tp=8 pp=1 dp=1 zero=1 mbs=1"); blanks around '=' are allowed, and a blank-separated item after
    a list key joins that list ("stage_layers=19 20 20 21"). A part without '=' is kept as it is, for the error."""
    parts: list[str] = []
    for token in re.split(r"[,\s]+", re.sub(r"\s*=\s*", "=", text.strip())):
        if not token:
            continue
        if "=" not in token and parts and parts[-1].partition("=")[0] in _LIST_KEYS and parts[-1][-1] != "=":
            parts[-1] += ":" + token
        else:
            parts.append(token)
    return parts


def _nearest_key(key: str) -> str:
    """' (did you mean zero?)' for a near-typo of a Layout key, else ''."""
    field = closest(key.lower(), Layout.model_fields)
    return f" (did you mean {field}?)" if field else ""


def _layout_value(key: str, value: str) -> Any:
    if key in ("recompute", "schedule", "cp_comm", "recompute_method"):
        return value
    if key == "recompute_modules":
        return [v for v in value.replace(" ", ":").split(":") if v]
    if key in ("stage_layers", "chunk_layers"):
        try:
            return [_int(key, v) for v in value.replace(" ", ":").split(":") if v]
        except UserError as err:
            raise UserError(f"{err} (a list: whole numbers separated by ':', e.g. {key}=19:20:20:21)") from None
    if key == "sp" and value.lower() in ("true", "false", "on", "off"):
        return value.lower() in ("true", "on")
    return _int(key, value)


def _int(key: str, value: str) -> int:
    """A layout integer in ASCII digits (int() would also read other scripts' digits, e.g. '٨' as 8)."""
    digits = value[1:] if value[:1] in "+-" else value
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        shown = value if len(value) <= 24 else value[:21] + "..."
        raise UserError(f"--layout: {key}={shown!r} is not a whole number (at most 18 ASCII digits)")
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


def problem_from_plan(data: dict, where: str, seq_len: Optional[int] = None, model_replaced: bool = False) -> Problem:
    """A plan file's mapping: model, cluster, train, layout (each a preset name or inline spec). The Hugging Face
    notes of an inline config speak of `seq_len` (--seq-len) over the plan's own train.seq_length, and are
    neither printed nor kept when `model_replaced` (--model prices another model)."""
    _plan_keys(data, where)
    check_plan_extras(data, where)
    layout = data.get("layout")
    if isinstance(layout, str):
        layout = parse_layout(layout)
    elif layout is not None:
        layout = validate(Layout, layout, f"{where}: layout")
    train = data.get("train")
    own = train.get("seq_length") if isinstance(train, dict) else None
    seq_len = seq_len or (own if isinstance(own, int) and not isinstance(own, bool) else None)
    with notes_held() if model_replaced else contextlib.nullcontext():
        model, notes = model_noted(data["model"], f"{where}: model", seq_len)
    notes = [] if model_replaced else notes
    older_cluster_notes(data["cluster"], f"{where}: cluster")
    older_model_notes(data["model"], f"{where}: model")
    return Problem(
        model=model,
        cluster=cluster_from_data(data["cluster"], where=f"{where}: cluster"),
        train=train_from_data(data["train"], f"{where}: train"),
        layout=layout,
        model_notes=notes,
    )


# What `parplan check` reads (planner.files.native, planner.files.finetune_yaml), named in the errors below
CHECK_READS = ("parplan plan files (model, cluster, train, layout), Megatron-LM and Megatron-DeepSpeed scripts, "
               "Megatron-Bridge config YAML, Hugging Face Trainer launch scripts, DeepSpeed JSON, Accelerate config "
               "YAML, Axolotl and LLaMA-Factory YAML, torchtitan TOML and launch lines")


def _plan_keys(data: dict, where: str) -> None:
    """The plan file's keys: model, cluster and train present, nothing unknown (named, never echoed
    in bulk: a file that is no plan at all may hold anything). Another tool's config is named
    (planner.files.other_tools); any other mapping gets the list of what check reads."""
    from planner.files.other_tools import YAML_TOOLS, yaml_tool  # noqa: PLC0415 - other_tools imports this module

    tool = yaml_tool(data)
    if tool:
        raise UserError(f"{where}: a {YAML_TOOLS[tool].name} config (it has {YAML_TOOLS[tool].keys}), not a parplan "
                        f"plan file: give it to `parplan check {where} --model MODEL --cluster CLUSTER`, which reads "
                        "it or names the estimate command for its run")
    known = set(map(str, data)) & (PLAN_KEYS | PLAN_EXTRA_KEYS)
    if data and not known:
        raise UserError(f"{where}: does not look like a parplan plan file (no model, cluster or train), nor like any "
                        f"config parplan reads; check reads {CHECK_READS}")
    unknown = sorted(map(str, set(data) - PLAN_KEYS - PLAN_EXTRA_KEYS))
    if unknown:
        shown = [key_text(k) for k in unknown if not any(c.isspace() or c == ":" for c in k)][:3]
        more = f" (and {len(unknown) - len(shown)} more)" if len(unknown) > len(shown) else ""
        raise UserError(f"{where}: unknown plan-file keys {shown}{more}; expected "
                        f"{sorted(PLAN_KEYS | PLAN_EXTRA_KEYS)}. If this is another tool's config: check reads "
                        f"{CHECK_READS}")
    for key in ("model", "cluster", "train"):
        if key not in data:
            raise UserError(f"{where}: plan file lacks {key!r}")


def check_plan_extras(data: dict, where: str) -> None:
    """What `plan --save` writes beside the specs, checked for shape: reasons (strings), alternatives
    (estimates, as report draws them), estimate (its memory.peak_bytes and time.step_s, which export
    prints), parplan_version (a string), search (a mapping)."""
    reasons = data.get("reasons", [])
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise UserError(f"{where}: reasons must be a list of strings (got {_kind(reasons)})")
    alternatives = data.get("alternatives", [])
    if not isinstance(alternatives, list):
        raise UserError(f"{where}: alternatives must be a list of estimates (got {_kind(alternatives)})")
    for i, alt in enumerate(alternatives):
        validate(Estimate, alt, f"{where}: alternatives[{i}]")
    _saved_estimate(data.get("estimate"), where)
    if not isinstance(data.get("parplan_version", ""), str):
        raise UserError(f"{where}: parplan_version must be a string (got {_kind(data['parplan_version'])})")
    _newer_version_note(data.get("parplan_version"), where)
    if not isinstance(data.get("search") or {}, dict):
        raise UserError(f"{where}: search must be a mapping (got {_kind(data['search'])})")


def _version_tuple(text: str) -> Optional[tuple]:
    parts = text.strip().split(".")
    return tuple(int(p) for p in parts) if all(p.isascii() and p.isdigit() for p in parts) and parts else None


def _newer_version_note(version: Optional[str], where: str) -> None:
    """A note when the plan was saved by a newer parplan than this one: its cost model may have priced it otherwise
    (the saved estimate is not this version's), and a field it added would be refused as an unknown key."""
    saved, here = _version_tuple(version or ""), _version_tuple(VERSION)
    if saved is not None and here is not None and saved > here:
        note(where, f"parplan_version {version[:20]}: saved by a newer parplan than this {VERSION}; it is re-priced "
                    "with this version's cost model (its saved estimate may differ)")


def _saved_estimate(est: Any, where: str) -> None:
    if est is None:
        return
    if not isinstance(est, dict):
        raise UserError(f"{where}: estimate must be a mapping (an Estimate) or null (got {_kind(est)})")
    for part, key, kinds in (("memory", "peak_bytes", int), ("time", "step_s", (int, float))):
        section = est.get(part, {})
        if not isinstance(section, dict):
            raise UserError(f"{where}: estimate.{part} must be a mapping (got {_kind(section)})")
        value = section.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, kinds) or value < 0:
            raise UserError(f"{where}: estimate.{part}.{key} must be a number >= 0 (got {_kind(value)})")


def _kind(value: Any) -> str:
    """A value's type and, for scalars, a short repr; never a whole nested structure."""
    if isinstance(value, (dict, list)):
        return f"a {type(value).__name__} of {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def load_plan(path: Path, seq_len: Optional[int] = None, model_replaced: bool = False) -> Problem:
    """Read a plan file (JSON or YAML); `seq_len` and `model_replaced` as problem_from_plan's."""
    return problem_from_plan(read_mapping(path), str(path), seq_len, model_replaced)


def is_plan_file(arg: str) -> bool:
    """True when `arg` names an existing file whose top level has two or more of a plan's model/cluster/train/layout
    (one missing is the plan's own error, not a model file's)."""
    path = Path(arg)
    if not path.is_file() or path.suffix.lower() not in (".json", ".yaml", ".yml"):
        return False
    try:
        return len(PLAN_KEYS & set(read_mapping(path))) >= 2
    except UserError:
        return False
