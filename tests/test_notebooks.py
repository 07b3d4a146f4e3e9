"""The notebooks in notebooks/ run top to bottom (nbclient, kernel python3) and are committed without outputs.

``bound_computation.ipynb`` ends on the real model pair, so it runs with the real-model tests
(SPECTR_GBV_REAL_MODEL=1, as in CI, or the model already cached).
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ALL = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def _real_model():
    pytest.importorskip("torch")
    from tests.realpair.real_model import real_model_enabled

    if not real_model_enabled():
        pytest.skip("real model not cached; set SPECTR_GBV_REAL_MODEL=1")


def test_the_two_notebooks_are_there():
    assert ALL == ["bound_computation.ipynb", "validate_a_verifier.ipynb"]


@pytest.mark.parametrize("name", ALL)
def test_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.get("outputs") and c.get("execution_count") is None for c in code)


def _run(name: str):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    resources = {"metadata": {"path": str(NOTEBOOKS)}}
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources=resources).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    return "\n".join(o.get("text", "") for o in outputs if o.get("name") == "stdout"), images


def test_bound_computation_runs_and_prints_the_exact_values():
    _real_model()
    out, images = _run("bound_computation.ipynb")
    assert images == 1  # the plot of the bounds against K is shown
    assert "K=1: B = 13/8 (1.6250), B_BV = 113/72 (1.5694)" in out
    assert "K=2: B = 401/216" in out and "OPT = 1.9722" in out
    assert "limit of B as K -> infinity: 2 (L = 2)" in out
    assert "K=7: B = " in out


def test_validate_a_verifier_runs_fails_the_bug_and_passes_the_fix():
    out, _ = _run("validate_a_verifier.ipynb")
    assert "buggy_sd (interface generic" in out and ": FAILED" in out
    assert "accepts_placeholder" in out
    assert "smallest failing case: " in out and "wrong_residual" in out
    assert "degenerate_residual raises crashes on an all-zero residual" in out  # the fixed law, still a crash
    assert "robust_sd (interface generic" in out and "): PASSED" in out and "checks: 50 passed, 0 failed" in out
