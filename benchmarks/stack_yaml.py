"""Read and write the stack profiles (hardware_profiles/stacks/*.yaml) in their sectioned layout.

A profile is its identity (name, family, framework, description) and the sections of
costmodels.stack.Stack: mechanisms, fitted, memory, provenance. Every script that writes a profile
(calibrate.py, calibrate_memory.py, memory_accuracy.py, uncertainty_table.py) reads and writes it
here, so a file of the old flat layout is rewritten sectioned and the order of keys is always the
model's. The leading comment lines are kept.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from costmodels.stack import SECTIONS, Stack, nest_flat_keys

STACKS = Path(__file__).resolve().parents[1] / "hardware_profiles" / "stacks"


def _in_model_order(data: dict, fields) -> dict:
    known = [k for k in fields if k in data]
    return {**{k: data[k] for k in known}, **{k: v for k, v in data.items() if k not in known}}


def sectioned(data: dict) -> dict:
    """`data` with flat keys moved into their sections, top-level and section keys in the models' order."""
    data = _in_model_order(nest_flat_keys(data), Stack.model_fields)
    for section, model in SECTIONS.items():
        if isinstance(data.get(section), dict):
            data[section] = _in_model_order(data[section], model.model_fields)
    return data


def read_profile(path: Path) -> tuple[str, dict]:
    """(the leading comment lines, the profile as a sectioned mapping)."""
    text = path.read_text()
    head = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    return head, sectioned(yaml.safe_load(text))


def write_profile(path: Path, head: str, data: dict) -> None:
    """Write `data` (sectioned first) under the comment lines `head`."""
    path.write_text(head + "\n" + yaml.safe_dump(sectioned(data), sort_keys=False, width=110))
