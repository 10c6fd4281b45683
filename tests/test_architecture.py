"""The house: imports run one way (planner/__init__.py), costmodels stays pure, and the README links
only inside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# lower levels never import higher ones; the same level may import itself
LEVELS = [("costmodels", 0), ("hardware_profiles", 1), ("planner.errors", 2), ("planner.safetext", 2),
          ("planner.files", 3), ("planner.search", 4), ("planner.exporters", 5), ("planner.report", 6),
          ("planner", 7)]
PURE_FORBIDDEN = ("typer", "rich", "ortools", "planner", "hardware_profiles", "yaml")


def framework_level(module: str) -> int:
    """planner.frameworks.<name>.export* writes files (the exporters' level); every other module of a
    framework's folder reads them (the files' level)."""
    parts = module.split(".")
    return level("planner.exporters") if len(parts) > 3 and parts[3].startswith("export") else level("planner.files")


def level(module: str) -> int:
    """The level of a dotted module name (the longest matching prefix)."""
    if module == "planner.frameworks" or module.startswith("planner.frameworks."):
        return framework_level(module)
    for prefix, lvl in LEVELS:
        if module == prefix or module.startswith(prefix + "."):
            return lvl
    raise KeyError(module)


def modules() -> list[tuple[str, Path]]:
    out = []
    for pkg in ("costmodels", "hardware_profiles", "planner"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out.append((name, path))
    return out


def imported(path: Path, package: str) -> set[str]:
    """Every module `path` imports (inside functions too), absolute names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else package.rsplit(".", node.level - 1)[0] + "." + node.module
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return found


def own(name: str) -> bool:
    return name.split(".")[0] in ("costmodels", "hardware_profiles", "planner")


@pytest.mark.parametrize("name, path", modules(), ids=[m[0] for m in modules()])
def test_imports_run_one_way(name, path):
    mine = level(name)
    up = []
    for target in imported(path, name):
        if not own(target):
            continue
        try:
            if level(target) > mine:
                up.append(target)
        except KeyError:
            continue
    # `from planner.files import loading` names planner.files.loading: judge the module, not the package
    up = [t for t in up if not any(t.startswith(u + ".") for u in up)]
    assert not up, f"{name} (level {mine}) imports {sorted(up)} from above it"


@pytest.mark.parametrize("name, path", [m for m in modules() if m[0].startswith("costmodels")],
                         ids=[m[0] for m in modules() if m[0].startswith("costmodels")])
def test_costmodels_is_pure(name, path):
    bad = [t for t in imported(path, name) if t.split(".")[0] in PURE_FORBIDDEN]
    assert not bad, f"{name} imports {sorted(bad)}"


def test_every_package_says_what_it_holds_and_may_import():
    folders = [p.relative_to(ROOT / "planner") for p in (ROOT / "planner" / "frameworks").iterdir() if p.is_dir()
               and (p / "__init__.py").exists()]
    packages = ("files", "search", "exporters", "report", "frameworks", *folders)
    for init in [ROOT / "planner" / p / "__init__.py" for p in packages]:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc, init


def test_readme_links_stay_inside_the_repository():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'(?:src|href)="([^"]+)"', text)
    assert links
    for link in links:
        assert not re.match(r"[a-z]+://", link), link
        target = (ROOT / link.split("#")[0]).resolve()
        assert ROOT in target.parents or target == ROOT, link
        assert target.exists(), link


def test_a_frameworks_readers_never_import_its_exporters():
    assert level("planner.frameworks.megatron.flags") == level("planner.files")
    assert level("planner.frameworks.megatron.export_slurm") == level("planner.exporters")
    assert level("planner.frameworks.deepspeed") == level("planner.files")


ALIASES = sorted(p for p in (ROOT / "planner").rglob("*.py") if "sys.modules[__name__]" in p.read_text())


@pytest.mark.parametrize("old", ALIASES, ids=lambda p: str(p.relative_to(ROOT)))
def test_old_paths_stay_thin_aliases_of_the_moved_modules(old):
    """A path kept for one release is a docstring and one alias, never code of its own (one place to fix)."""
    import importlib
    tree = ast.parse(old.read_text())
    assert len(tree.body) <= 4 and "kept for one release" in (ast.get_docstring(tree) or "")
    name = ".".join(old.relative_to(ROOT).with_suffix("").parts)
    moved = importlib.import_module(name)
    assert moved.__name__.startswith("planner.frameworks."), name
