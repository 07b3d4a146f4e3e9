"""The package's layout: top-level packages import one way, and no file imports another's private names.

Layers, lowest first (a module may import its own layer or a lower one):
core -> theory -> reference -> simulate -> gpu -> validate -> testing (the library), then its
applications: ledger -> sweep -> realpair -> examples -> cli. The check reads the source with
:mod:`ast`, imports inside functions included, so it needs neither torch nor transformers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spectr_gbv"

#: Top-level package -> rank; a file may import a package of its own rank or a lower one.
LAYERS: dict[str, int] = {
    "core": 0,
    "data": 0,
    "theory": 1,
    "reference": 2,
    "simulate": 3,
    "gpu": 4,
    "validate": 5,
    "testing": 6,
    "ledger": 7,
    "sweep": 8,
    "realpair": 9,
    "examples": 10,
    "cli": 11,
}


def _files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _module_of(path: Path) -> list[str]:
    """The dotted parts of ``path``'s module (``spectr_gbv/a/b.py`` -> ``["spectr_gbv", "a", "b"]``)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved against ``path``)."""
    if node.level == 0:
        return node.module or ""
    base = _module_of(path)
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, imported name or "") for every import of a ``spectr_gbv`` module in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, "") for a in node.names if a.name.startswith("spectr_gbv")]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, node)
            if module.split(".")[0] == "spectr_gbv":
                found += [(node.lineno, module, a.name) for a in node.names]
    return found


def private_imports(path: Path) -> list[str]:
    """Every private name (or private module) ``path`` takes from another file of the package."""
    bad = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_aliases = set()
    for line, module, name in _imports(path):
        parts = module.split(".") + ([name] if name else [])
        if any(_private(p) for p in parts):
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} {name}".rstrip())
        target = PACKAGE.parent / Path(*module.split("."), name) if name else None
        if target is not None and (target.is_dir() or target.with_suffix(".py").exists()):
            module_aliases.add(name)
        if not name:
            module_aliases.add(module.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.asname and a.name in module_aliases:
                    module_aliases.add(a.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
        ):
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value.id}.{node.attr}")
    return bad


def upward_imports(path: Path) -> list[str]:
    """Every import in ``path`` of a top-level package above its own layer."""
    own = _module_of(path)
    if len(own) < 2 or own[1] not in LAYERS:
        return []
    rank = LAYERS[own[1]]
    bad = []
    for line, module, name in _imports(path):
        parts = module.split(".")
        target = parts[1] if len(parts) > 1 else name
        if target in LAYERS and LAYERS[target] > rank:
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: imports spectr_gbv.{target}")
    return bad


def test_every_top_level_package_has_a_layer():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), sorted(packages - set(LAYERS))


def test_layers_import_one_way():
    bad = [line for path in _files() for line in upward_imports(path)]
    assert bad == []


def test_no_private_name_crosses_files():
    bad = [line for path in _files() for line in private_imports(path)]
    assert bad == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from spectr_gbv.core.numbers import _short\n", 1),
        ("from spectr_gbv.theory import _lp_build\n", 1),
        ("from spectr_gbv.theory import lp\nx = lp._helper\n", 1),
        ("from . import _private_module\n", 1),
        ("from spectr_gbv.core.numbers import short_number\n", 0),
        ("import spectr_gbv.theory._lp_build\n", 1),
    ],
)
def test_the_private_check_can_fail(tmp_path, source, expected, monkeypatch):
    path = PACKAGE / "core" / "_probe_for_layers_test.py"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: source)
    assert len(private_imports(path)) == expected


def test_the_layer_check_can_fail(monkeypatch):
    path = PACKAGE / "gpu" / "decoding" / "probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: "from spectr_gbv.realpair import runner\n")
    assert upward_imports(path) == ["spectr_gbv/gpu/decoding/probe.py:1: imports spectr_gbv.realpair"]
