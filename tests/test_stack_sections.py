"""A Stack is mechanisms (read from sources), fitted numbers (each within a sourced range) and
provenance; the shipped profiles have the same sections and round-trip through the writers' helper
(benchmarks/stack_yaml.py). Code and files of the flat layout still load, for one release."""

from __future__ import annotations

import math
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

import hardware_profiles as hp
from benchmarks.stack_yaml import STACKS, read_profile, sectioned, write_profile
from costmodels.stack import SECTION_OF, Stack
from costmodels.stack_fitted import RANGE_SOURCES, Fitted
from costmodels.stack_mechanisms import Mechanisms
from costmodels.stack_provenance import Provenance

PROFILES = sorted(STACKS.glob("*.yaml"))


def _bound(info, name: str):
    return next((getattr(m, name) for m in info.metadata if hasattr(m, name)), None)


def _leaf_fields(model: type[BaseModel], prefix: str = ""):
    """(dotted name, FieldInfo) of every non-model field, nested models walked."""
    for name, info in model.model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            yield from _leaf_fields(sub, f"{prefix}{name}.")
        else:
            yield prefix + name, info


def _is_float(annotation) -> bool:
    return annotation is float or float in typing.get_args(annotation)


def test_every_fitted_number_has_a_finite_range_and_its_source():
    leaves = dict(_leaf_fields(Fitted))
    assert leaves and set(RANGE_SOURCES) == set(Fitted.model_fields)
    for name, info in leaves.items():
        lo, hi = _bound(info, "ge"), _bound(info, "le")
        assert lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi) and lo < hi, name


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_profiles_fitted_values_sit_in_their_range(path: Path):
    fitted = yaml.safe_load(path.read_text())["fitted"]
    ranges = dict(_leaf_fields(Fitted))
    flat = {f"fp8.{k}": v for k, v in fitted.get("fp8", {}).items()} | {k: v for k, v in fitted.items() if k != "fp8"}
    assert flat
    for name, value in flat.items():
        info = ranges[name]
        if value is not None:
            assert _bound(info, "ge") <= value <= _bound(info, "le"), (path.stem, name, value)


def test_mechanisms_hold_no_fitted_efficiency():
    """Floats in mechanisms are sizes with a unit in their name (buckets, bytes), read from sources;
    every dimensionless scale, slowdown and overhead lives in fitted."""
    floats = [n for n, info in Mechanisms.model_fields.items() if _is_float(info.annotation)]
    assert floats and all(n.endswith(("_mparams", "_bytes_per_element")) for n in floats), floats
    assert not set(Mechanisms.model_fields) & set(Fitted.model_fields)
    assert not [n for n in Mechanisms.model_fields if n.endswith(("_scale", "_slowdown", "_overhead_s", "_error"))]


def test_sections_do_not_share_a_field_name_with_each_other_or_the_stack():
    names = [*Mechanisms.model_fields, *Fitted.model_fields, *Provenance.model_fields]
    assert len(names) == len(set(names)) == len(SECTION_OF)
    assert not set(names) & set(Stack.model_fields)


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_each_profile_is_sectioned_and_round_trips(path: Path, tmp_path: Path):
    raw = yaml.safe_load(path.read_text())
    assert not set(raw) & set(SECTION_OF), f"{path.name}: flat keys"
    assert sectioned(raw) == raw and list(raw) == [k for k in Stack.model_fields if k in raw]
    stack = hp.load_stack(path.stem)
    assert Stack.model_validate(stack.model_dump(mode="json")) == stack
    copy = tmp_path / path.name
    write_profile(copy, *read_profile(path))
    assert copy.read_text() == path.read_text()


def test_flat_layout_still_loads_and_forwards():
    """Transitional: flat keys (old files, old plan files, other engineers' code) reach their section."""
    nested = hp.load_stack("torchtitan")
    flat = {k: v for k, v in nested.model_dump(mode="json").items() if k not in ("mechanisms", "fitted", "provenance")}
    for section in ("mechanisms", "fitted", "provenance"):
        flat.update(nested.model_dump(mode="json")[section])
    assert Stack.model_validate(flat) == nested
    assert nested.gemm_scale == nested.fitted.gemm_scale and nested.zero3_prefetch == nested.mechanisms.zero3_prefetch
    assert nested.fp8.rowwise == nested.fitted.fp8.rowwise and nested.held_out == nested.provenance.held_out
    moved = nested.model_copy(update={"gemm_scale": 0.5, "zero3_prefetch": 2, "fit_rows": ["x"], "name": "y"})
    assert (moved.fitted.gemm_scale, moved.mechanisms.zero3_prefetch, moved.provenance.fit_rows, moved.name) == \
        (0.5, 2, ["x"], "y")
    assert moved.fitted.attn_scale == nested.fitted.attn_scale and nested.fitted.gemm_scale != 0.5
    with pytest.raises(AttributeError):
        _ = nested.no_such_field


def test_flat_stack_file_loads_through_the_cli_reader(tmp_path: Path):
    from planner.trainopts import load_stack_file

    stack = hp.load_stack("nemo")
    data = {**stack.model_dump(mode="json"), "gemm_scale": 0.9}
    path = tmp_path / "flatish.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_stack_file(path) == stack.model_copy(update={"gemm_scale": 0.9})


def test_calibrate_writes_fitted_and_provenance_sections(tmp_path: Path, monkeypatch):
    """benchmarks/calibrate.py write_stack: the fitted numbers under `fitted:`, rows, error, script and
    date under `provenance:`, mechanisms and memory untouched, and the file still loads."""
    import sys
    from types import SimpleNamespace

    pytest.importorskip("scipy")
    sys.path.insert(0, str(STACKS.parents[1] / "benchmarks"))
    import calibrate

    (tmp_path / "stacks").mkdir()
    src = STACKS / "deepspeed.yaml"
    (tmp_path / "stacks" / src.name).write_text(src.read_text())
    monkeypatch.setattr(calibrate, "ROOT", tmp_path)
    stack = hp.load_stack("deepspeed").model_copy(update={"gemm_scale": 0.8123456789})
    calibrate.write_stack("deepspeed", SimpleNamespace(stacks={"deepspeed": stack}), "a note", ["R-1"], 0.123456)
    written = yaml.safe_load((tmp_path / "stacks" / src.name).read_text())
    before = yaml.safe_load(src.read_text())
    assert written["fitted"]["gemm_scale"] == 0.812346 and not set(written) & set(SECTION_OF)
    prov = written["provenance"]
    assert (prov["fitted_by"], prov["fitted_on"], prov["fit_rows"], prov["fit_error"]) == \
        ("benchmarks/calibrate.py", "a note", ["R-1"], 0.1235)
    assert len(prov["fitted_date"]) == 10 and prov["held_out"] == before["provenance"]["held_out"]
    assert (written["mechanisms"], written["memory"]) == (before["mechanisms"], before["memory"])
    Stack.model_validate(written)


@pytest.mark.parametrize("section", [3, [1], "x"])
def test_a_section_that_is_no_mapping_is_named_not_a_traceback(tmp_path: Path, section):
    from planner.errors import UserError
    from planner.trainopts import load_stack_file

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "framework": "megatron", "fitted": section, "gemm_scale": 0.5}))
    with pytest.raises(UserError, match="fitted"):
        load_stack_file(path)
