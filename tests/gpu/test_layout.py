"""The layout of ``spectr_gbv.gpu`` (issue 15): one-way imports between its subpackages, and the
deprecated flat import paths (re-export their new home, warn, never imported by the package).

The import check reads the source with :mod:`ast` (imports inside functions included), so it needs
neither torch nor transformers; the shim checks run in a fresh interpreter.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parents[2] / "spectr_gbv" / "gpu"
#: Subpackage -> layer; a module may import its own layer or a lower one.
LAYERS = {"kernels": 0, "decoding": 1, "models": 2, "bench": 3}
#: Deprecated flat module -> its new modules (CHANGELOG.md, "gpu/ layout (issue 15)").
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


def test_subpackages_import_one_way_and_never_a_deprecated_path():
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


def test_every_moved_module_has_a_shim_and_nothing_else_is_flat():
    flat = {p.stem for p in GPU.glob("*.py")} - {"__init__", "_deprecated"}
    assert flat == set(MOVED)


SHIM_SCRIPT = """
import importlib, json, sys, warnings
moved = json.loads(sys.argv[1])
warnings.simplefilter("error", DeprecationWarning)
import spectr_gbv.cli.main, spectr_gbv.gpu
for news in moved.values():
    for new in news:
        importlib.import_module("spectr_gbv.gpu." + new)
from spectr_gbv.gpu import SpeculativeDecoder, load_draft, load_target, verify
loaded_shims = sorted(o for o in moved if "spectr_gbv.gpu." + o in sys.modules)
report = {"loaded_shims": loaded_shims, "shims": {}}
for old, news in moved.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace = {}
        exec(f"import spectr_gbv.gpu.{old} as shim", namespace)
        shim = namespace["shim"]
    targets = [importlib.import_module("spectr_gbv.gpu." + n) for n in news]
    same = all(getattr(shim, name) is getattr(t, name) for t in targets for name in getattr(t, "__all__", [])
               if not name.startswith("_"))
    public = {n for t in targets for n in vars(t) if not n.startswith("_")}
    report["shims"][old] = {
        "warnings": [(w.category.__name__, str(w.message).split(";")[0], w.filename)
                     for w in caught],
        "same_objects": same and all(getattr(shim, n) is getattr(t, n) for t in targets for n in shim.__all__
                                     if hasattr(t, n)),
        "exports_all_public": public <= set(dir(shim)) | {n for t in targets for n in vars(t)
                                                          if type(vars(t)[n]).__name__ == "module"},
    }
print(json.dumps(report))
"""


def test_deprecated_paths_warn_and_reexport_and_the_package_never_imports_them():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    done = subprocess.run(
        [sys.executable, "-c", SHIM_SCRIPT, json.dumps(MOVED)], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["loaded_shims"] == []
    for old, got in report["shims"].items():
        message = f"spectr_gbv.gpu.{old} is deprecated (moved in issue 15, removed in the next release)"
        # stacklevel=2: the warning points at the importing statement (exec'd code: "<string>")
        assert got == {
            "warnings": [["DeprecationWarning", message, "<string>"]],
            "same_objects": True,
            "exports_all_public": True,
        }, old
