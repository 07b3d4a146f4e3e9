"""``spectr-gbv bench`` command line: options, output files, exit codes (tiny models injected, nothing downloaded)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.cli.main import main  # noqa: E402
from spectr_gbv.realpair import extras as bench_extras  # noqa: E402
from spectr_gbv.realpair import runner as benchmark  # noqa: E402
from tests.gpu.tiny_models import perturbed_copy, tiny_llama  # noqa: E402
from tests.realpair.test_benchmark import Recorder, toy_encode  # noqa: E402

SMALL = ["--datasets", "cpython", "--prompts", "1", "--max-new-tokens", "6", "--K", "1,2", "--L", "2", "--T", "1.0"]
SMALL += ["--methods", "sd,mdbv", "--quiet", "--threads", "1", "--device", "cpu"]


@pytest.fixture
def tiny(monkeypatch):
    """Replace the real model loader by a tiny random pair; return the recorded loader arguments."""
    seen = []

    def fake_load_models(draft="distilled", device=None, cache_dir=None, progress=True):
        seen.append((draft, device, cache_dir))
        target = tiny_llama(16, 0, num_layers=2, max_position_embeddings=1024)  # stdlib prompts: ~230 tokens
        return benchmark.BenchModels(target, perturbed_copy(target, 1, 0.3), toy_encode, None, "tiny", "tiny-draft")

    monkeypatch.setattr(benchmark, "load_models", fake_load_models)
    return seen


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_json_run_writes_every_file(tiny, capsys, tmp_path):
    out_dir = tmp_path / "res"
    argv = ["bench", *SMALL, "--no-peer", "--no-predict", "--no-lossless", "--out", str(out_dir), "--json"]
    code, out, err = run_cli(capsys, *argv, "--draft", "truncated:1")
    assert code == 0, err
    data = json.loads(out)
    assert tiny == [("truncated:1", "cpu", None)]
    assert data["machine"]["command"] == "spectr-gbv " + " ".join(argv + ["--draft", "truncated:1"])
    assert data["config"]["centre"] == [1, 2, 1.0] and data["config"]["datasets"] == ["cpython"]
    keys = [(r["method"], r["num_drafts"], r["draft_length"]) for r in data["rows"]]
    assert keys == [("ar", 1, 0), ("sd", 1, 2), ("mdbv", 1, 2), ("mdbv", 2, 2)]
    assert data["rows"][0]["block_efficiency"] == 1.0 and data["rows"][0]["speedup"] == 1.0
    assert data["prompts"]["cpython"][0]["id"].startswith("cpython3")
    for name in ("runs.csv", "results.json", "summary.md", "be_vs_K_cpython.png", "hist_cpython.png"):
        assert (out_dir / name).stat().st_size > 0
    assert data["peer"] == data["lossless"] == data["predictions"] == [] and data["errors"] == []
    assert "estimate: about" in err


def test_bench_text_run_with_extras_and_a_rejected_law_test(tiny, capsys, tmp_path, monkeypatch):
    rec = Recorder(passed=False)
    monkeypatch.setattr(bench_extras, "_peer_fn", lambda: rec.peer)
    monkeypatch.setattr(bench_extras, "_predict_fn", lambda: rec.predict)
    monkeypatch.setattr(bench_extras, "_lossless_fn", lambda: rec.lossless)
    code, out, err = run_cli(capsys, "bench", *SMALL, "--out", str(tmp_path), "--seed", "3")
    assert code == 1  # a law test rejected
    assert "law test REJECTED: sd on the 'code' prompt" in err
    assert "## cpython" in out and "Peer: transformers assisted generation" in out and "wrote " in out
    assert len(rec.calls["peer"]) == 1 and rec.calls["peer"][0]["seed"] == 3
    assert rec.calls["predict"][0]["num_drafts"] == [1, 2]
    assert [c["method"] for c in rec.calls["lossless"]] == ["sd", "mdbv"]  # quick: the code prompt only
    assert rec.calls["lossless"][0]["runs"] == benchmark.PRESETS["quick"].lossless_runs
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["predicted_vs_measured"]) == 3 and not data["lossless"][0]["passed"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--preset", "huge"], "--preset expects one of quick, full"),
        (["--methods", "sd,foo"], "--methods: unknown or empty foo"),
        (["--methods", ","], "--methods: unknown or empty"),
        (["--datasets", "mgsm"], "--datasets: unknown or empty mgsm"),
        (["--prompts", "0"], "--prompts expects an int >= 1"),
        (["--prompts", "x"], "--prompts expects an int >= 1"),
        (["--max-new-tokens", "-3"], "--max-new-tokens expects an int >= 1"),
        (["--K", "0"], "--K values must lie in 1..16"),
        (["--L", "a"], "--L expects comma-separated ints"),
        (["--T", "-0.5"], "--T expects comma-separated temperatures"),
        (["--seed", "x"], "--seed expects an int"),
        (["--threads", "0"], "--threads expects an int >= 1"),
        (["--draft", "truncated:x"], "--draft expects 'distilled' or 'truncated:N'"),
        (["--draft", "big"], "--draft expects 'distilled' or 'truncated:N'"),
        (["--device", "tpu"], "--device expects auto, cpu or cuda"),
    ],
)
def test_bad_options_exit_2_with_one_line(capsys, monkeypatch, argv, message):
    def never(*args, **kwargs):
        raise AssertionError("models must not be loaded for a bad option")

    monkeypatch.setattr(benchmark, "load_models", never)
    code, out, err = run_cli(capsys, "bench", *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and err.startswith("spectr-gbv bench: error: ")


def test_missing_distilled_draft_is_a_usage_error(capsys, monkeypatch):
    def no_draft(*args, **kwargs):
        raise ImportError("No module named 'spectr_gbv.realpair.models.draft'")

    monkeypatch.setattr(benchmark, "load_models", no_draft)
    code, out, err = run_cli(capsys, "bench", "--device", "cpu", "--quiet")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--draft distilled: the draft model is not available" in err and "truncated:4" in err
