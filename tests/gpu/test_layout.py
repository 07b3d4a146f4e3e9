"""The layout of ``spectr_gbv.gpu``: one-way imports between its subpackages, nothing of the real-pair
application (:mod:`spectr_gbv.realpair`) imported or named by string, and the removed import paths of
earlier layouts (gone; the public ``spectr_gbv.gpu`` names still import).

The import checks read the source with :mod:`ast` (imports inside functions included), so they need
neither torch nor transformers.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "spectr_gbv"
GPU = PACKAGE / "gpu"
REALPAIR = PACKAGE / "realpair"
#: Subpackage -> layer; a module may import its own layer or a lower one.
LAYERS = {"kernels": 0, "decoding": 1, "models": 2}
#: Removed module below ``spectr_gbv.gpu`` -> its new modules (CHANGELOG.md, the gpu/ layout entries).
MOVED = {
    "decoder": ["spectr_gbv.gpu.decoding.decoder"],
    "cache": ["spectr_gbv.gpu.decoding.cache"],
    "sampling": ["spectr_gbv.gpu.decoding.sampling"],
    "draft_sources": ["spectr_gbv.gpu.decoding.draft_sources"],
    "stats": ["spectr_gbv.gpu.decoding.stats"],
    "draft_model": ["spectr_gbv.realpair.models.draft"],
    "fetch": ["spectr_gbv.realpair.models.fetch"],
    "prompts": ["spectr_gbv.realpair.models.prompts"],
    "benchmark": ["spectr_gbv.realpair.runner"],
    "bench_config": ["spectr_gbv.realpair.config"],
    "bench_extras": ["spectr_gbv.realpair.extras"],
    "bench_results": ["spectr_gbv.realpair.results"],
    "bench_output": ["spectr_gbv.realpair.output", "spectr_gbv.realpair.report"],
    "peer": ["spectr_gbv.realpair.peer"],
    "predict": ["spectr_gbv.realpair.predict"],
    "real_lossless": ["spectr_gbv.realpair.real_lossless"],
    "bench": ["spectr_gbv.realpair"],
    "models.draft": ["spectr_gbv.realpair.models.draft"],
    "models.fetch": ["spectr_gbv.realpair.models.fetch"],
    "models.prompts": ["spectr_gbv.realpair.models.prompts"],
    "models.target": ["spectr_gbv.realpair.models.target"],
}


def gpu_imports(path: Path) -> list[str]:
    """Dotted names below ``spectr_gbv.gpu`` that ``path`` imports (``from spectr_gbv.gpu import x`` gives ``x``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found += [n.removeprefix("spectr_gbv.gpu.") for n in names if n.startswith("spectr_gbv.gpu.")]
        if isinstance(node, ast.ImportFrom) and node.module == "spectr_gbv.gpu":
            found += [a.name for a in node.names]
    return found


def realpair_imports(path: Path) -> list[str]:
    """Modules below ``spectr_gbv.realpair`` that ``path`` imports (``from spectr_gbv.realpair import x``: ``x``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("spectr_gbv.realpair")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spectr_gbv.realpair"):
            found.append(node.module)
            if node.module == "spectr_gbv.realpair":
                found += [f"spectr_gbv.realpair.{a.name}" for a in node.names]
    return [n.removeprefix("spectr_gbv.realpair").lstrip(".") for n in found]


def realpair_strings(path: Path) -> list[str]:
    """``spectr_gbv.realpair`` named in ``path``'s code: imports, and string constants other than docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    found = [f"import {n or 'spectr_gbv.realpair'}" for n in realpair_imports(path)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if "realpair" in node.value:
                found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_subpackages_import_one_way_and_never_a_removed_path():
    bad = []
    for layer, rank in LAYERS.items():
        for path in sorted((GPU / layer).glob("*.py")):
            for name in gpu_imports(path):
                head = name.split(".")[0]
                if name in MOVED or head in MOVED or head not in LAYERS or LAYERS[head] > rank:
                    bad.append(f"{path.relative_to(GPU)} imports spectr_gbv.gpu.{name}")
    assert bad == []


def test_gpu_never_imports_or_names_the_real_pair_application():
    bad = [f"{path.relative_to(GPU)}: {hit}" for path in sorted(GPU.rglob("*.py")) for hit in realpair_strings(path)]
    assert bad == []


def test_the_real_pair_configuration_flows_one_way():
    # config -> results -> extras -> runner -> (output, report render the runner's result dict)
    never = {
        "config": {"results", "extras", "runner", "output", "report"},
        "results": {"extras", "runner", "output", "report"},
        "extras": {"runner", "output", "report"},
        "report": {"runner", "extras", "results"},
        "output": {"runner", "extras", "results"},
    }
    bad = [
        f"{module}.py imports realpair.{name}"
        for module, forbidden in never.items()
        for name in realpair_imports(REALPAIR / f"{module}.py")
        if name.split(".")[0] in forbidden
    ]
    assert bad == []


def test_nothing_is_flat():
    assert sorted(p.name for p in GPU.glob("*.py")) == ["__init__.py"]


def test_removed_paths_are_gone_and_the_public_names_still_import():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    for old in [*MOVED, "_deprecated"]:
        with pytest.raises(ModuleNotFoundError, match=f"spectr_gbv.gpu.{old}"):
            importlib.import_module(f"spectr_gbv.gpu.{old}")
    for news in MOVED.values():
        for new in news:
            importlib.import_module(new)
    gpu = importlib.import_module("spectr_gbv.gpu")
    for name in gpu.__all__:
        module = importlib.import_module(f"spectr_gbv.gpu.{gpu._EXPORTS[name]}")
        assert getattr(gpu, name) is getattr(module, name), name
    from spectr_gbv.gpu import DecoderConfig, SpeculativeDecoder, verify  # noqa: F401
    from spectr_gbv.realpair.models import load_draft, load_target  # noqa: F401
