"""``spectr-gbv bench --methods`` with a slow verifier on a large vocabulary prints the decoder's warning once.

The real model loader is replaced by a tiny pair with V = 8,192 and the run stops before the
first decoder is built, so no slow kernel runs.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.cli.main import main  # noqa: E402
from spectr_gbv.gpu.decoding.guards import slow_method_note  # noqa: E402
from spectr_gbv.realpair import runner as benchmark  # noqa: E402
from spectr_gbv.realpair.config import GridPoint  # noqa: E402
from tests.gpu.tiny_models import tiny_llama  # noqa: E402
from tests.realpair.test_benchmark import toy_encode  # noqa: E402

ARGV = ["bench", "--datasets", "cpython", "--prompts", "1", "--max-new-tokens", "4", "--K", "2,3", "--L", "2,4"]
ARGV += ["--T", "1.0", "--quiet", "--threads", "1", "--device", "cpu", "--no-peer", "--no-predict", "--no-lossless"]


class Stop(Exception):
    """Raised where the benchmark would start measuring."""


@pytest.fixture
def wide(monkeypatch):
    """A V = 8,192 pair instead of the real one; the run stops at the step-cost measurement."""

    def fake_load_models(draft="distilled", device=None, cache_dir=None, progress=True):
        target = tiny_llama(8192, 0, hidden_size=8, max_position_embeddings=1024)
        return benchmark.BenchModels(target, target, toy_encode, None, "wide", "wide")

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(benchmark, "load_models", fake_load_models)
    monkeypatch.setattr(benchmark, "measure_step_costs", stop)


def test_bench_prints_the_slow_verifier_warning_before_running(wide, capsys, tmp_path):
    with pytest.raises(Stop):
        main([*ARGV, "--methods", "mdbv,near_opt_bv,optimal_multidraft", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert lines == [
        f"warning: {slow_method_note('optimal_multidraft', 8192, 3, 4)}",
        f"warning: {slow_method_note('near_opt_bv', 8192, 3, 4)}",
    ]
    assert "K = 3, L = 4, B = 1 expect about 5.6 s per verification call" in lines[0]  # the grid's largest K L


def test_bench_without_slow_verifiers_prints_no_warning(wide, capsys, tmp_path):
    with pytest.raises(Stop):
        main([*ARGV, "--methods", "mdbv,spectr", "--out", str(tmp_path)])
    assert "warning:" not in capsys.readouterr().err


def test_slow_method_notes_take_each_methods_largest_grid_point():
    grid = [GridPoint("near_opt_bv", 2, 8, 0.7, ()), GridPoint("near_opt_bv", 7, 4, 0.7, ())]
    grid += [GridPoint("ar", 1, 0, 0.7, ()), GridPoint("mdbv", 7, 16, 0.7, ())]
    assert benchmark.slow_method_notes(grid, 49152) == [slow_method_note("near_opt_bv", 49152, 7, 4)]
    assert benchmark.slow_method_notes(grid, 4096) == []
