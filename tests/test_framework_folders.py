"""A framework lives in one folder (issue 36 part 9): planner/frameworks/<name>/ names the capability
table it runs under --framework, the stacks that price it and the formats it writes, and those names
agree with the sourced data in hardware_profiles/ and with the exporters' list of formats."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import hardware_profiles as hp
from planner import exporters
from planner.exporters.pricing import RUNS

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = sorted(p.name for p in (ROOT / "planner" / "frameworks").iterdir() if (p / "__init__.py").exists())


def folder(name: str):
    return importlib.import_module(f"planner.frameworks.{name}")


def test_every_capability_table_has_its_folder():
    assert FOLDERS == sorted(hp.list_frameworks())


@pytest.mark.parametrize("name", FOLDERS)
def test_a_folder_names_its_capabilities_stacks_and_formats(name):
    fw = folder(name)
    caps = hp.load_framework(fw.CAPABILITIES)
    assert fw.NAME == name == caps.name
    assert fw.STACKS[0] == caps.stack, "the first stack is the framework's default"
    assert caps.export_format in fw.FORMATS


@pytest.mark.parametrize("name", FOLDERS)
def test_a_folders_stacks_are_every_stack_profile_of_its_framework(name):
    profiles = {s for s in hp.list_stacks() if hp.load_stack(s).framework == name}
    assert set(folder(name).STACKS) == profiles


def test_every_export_format_belongs_to_one_folder():
    owners = [f for name in FOLDERS for f in folder(name).FORMATS]
    assert sorted(owners) == sorted(exporters.FORMATS)
    for name in FOLDERS:  # a format priced by a framework's stack is that framework's
        for fmt in folder(name).FORMATS:
            assert RUNS[fmt][0] in (name, None), fmt


@pytest.mark.parametrize("name", FOLDERS)
def test_a_folders_exporters_render_what_the_exporters_package_dispatches(name):
    modules = sorted(p.stem for p in (ROOT / "planner" / "frameworks" / name).glob("export*.py"))
    renderers = {importlib.import_module(f"planner.frameworks.{name}.{m}").render for m in modules}
    assert renderers == {exporters.RENDERERS[f].render for f in folder(name).FORMATS}


def test_the_old_read_configs_path_names_the_moved_readers():
    """planner.files.read_configs is kept for one release: its names are the moved functions themselves."""
    from planner.files import read_configs
    from planner.frameworks.deepspeed import config_json
    from planner.frameworks.torchtitan import config_values
    assert read_configs.ds_batch is config_json.ds_batch and read_configs.ds_unpriced is config_json.ds_unpriced
    assert read_configs.stage_options is config_values.stage_options
    assert read_configs.titan_split is config_values.titan_split


def test_a_framework_exporter_imported_first_does_not_meet_a_half_initialized_package():
    """Importing planner.frameworks.megatron.export before planner.exporters ran the package while the
    exporter was half-initialized (AttributeError: no attribute 'render'; tests/test_mla.py failed alone)."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = ("import planner.frameworks.megatron.export as m, planner.exporters as e; "
            "assert e.RENDERERS['megatron'].render is m.render")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True).returncode == 0
