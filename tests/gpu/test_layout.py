"""The layout of ``spectr_gbv.gpu`` (issue 15): one-way imports between its subpackages, and the
removed flat import paths of before the split (gone; the public ``spectr_gbv.gpu`` names still import).

The import check reads the source with :mod:`ast` (imports inside functions included), so it needs
neither torch nor transformers.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parents[2] / "spectr_gbv" / "gpu"
#: Subpackage -> layer; a module may import its own layer or a lower one.
LAYERS = {"kernels": 0, "decoding": 1, "models": 2, "bench": 3}
#: Removed flat module -> its new modules (CHANGELOG.md, "gpu/ layout (issue 15)").
MOVED = {
    "decoder": ["decoding.decoder"],
    "cache": ["decoding.cache"],
    "sampling": ["decoding.sampling"],
    "draft_sources": ["decoding.draft_sources"],
    "stats": ["decoding.stats"],
    "draft_model": ["models.draft"],
    "fetch": ["models.fetch"],
    "prompts": ["models.prompts"],
    "benchmark": ["bench.runner"],
    "bench_config": ["bench.config"],
    "bench_extras": ["bench.extras"],
    "bench_results": ["bench.results"],
    "bench_output": ["bench.output", "bench.report"],
    "peer": ["bench.peer"],
    "predict": ["bench.predict"],
    "real_lossless": ["bench.real_lossless"],
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


def test_subpackages_import_one_way_and_never_a_removed_path():
    bad = []
    for layer, rank in LAYERS.items():
        for path in sorted((GPU / layer).glob("*.py")):
            for name in gpu_imports(path):
                head = name.split(".")[0]
                if head in MOVED or head not in LAYERS or LAYERS[head] > rank:
                    bad.append(f"{path.relative_to(GPU)} imports spectr_gbv.gpu.{name}")
    assert bad == []


def test_bench_extras_do_not_import_the_runner():
    assert [n for n in gpu_imports(GPU / "bench" / "extras.py") if n.startswith("bench.runner")] == []


def test_nothing_is_flat():
    assert sorted(p.name for p in GPU.glob("*.py")) == ["__init__.py"]


def test_removed_flat_paths_are_gone_and_the_public_names_still_import():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    for old in [*MOVED, "_deprecated"]:
        with pytest.raises(ModuleNotFoundError, match=f"spectr_gbv.gpu.{old}"):
            importlib.import_module(f"spectr_gbv.gpu.{old}")
    for news in MOVED.values():
        for new in news:
            importlib.import_module(f"spectr_gbv.gpu.{new}")
    gpu = importlib.import_module("spectr_gbv.gpu")
    for name in gpu.__all__:
        module = importlib.import_module(f"spectr_gbv.gpu.{gpu._EXPORTS[name]}")
        assert getattr(gpu, name) is getattr(module, name), name
    from spectr_gbv.gpu import DecoderConfig, SpeculativeDecoder, load_draft, load_target, verify  # noqa: F401
