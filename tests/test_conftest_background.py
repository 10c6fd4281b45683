"""tests/conftest.py sends the files with a BACKGROUND to the first xdist worker, which alone starts their slow parts:
a file with a BACKGROUND missing from conftest.BACKGROUND_FILES would have it run on demand wherever it lands, and a
file listed without one would be pinned for nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import conftest

TESTS = Path(__file__).resolve().parent


def _has_background(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == "BACKGROUND" for node in tree.body)


def test_background_files_are_exactly_the_modules_with_a_background():
    found = sorted(f"tests/{p.name}" for p in TESTS.glob("test_*.py") if _has_background(p))
    assert found == sorted(conftest.BACKGROUND_FILES)
    assert not set(conftest.BACKGROUND_FILES) & set(conftest.SHARED_SEARCHES)
