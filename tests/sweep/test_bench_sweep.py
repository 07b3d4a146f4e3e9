"""The bench sweep on a local Ray (2 CPUs, its own for the module) with tiny models: rows once, resume, placement."""

import json
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("pyarrow")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spectr_gbv.cli.main import main  # noqa: E402
from spectr_gbv.realpair.config import PRESETS  # noqa: E402
from spectr_gbv.realpair.runner import run_benchmark  # noqa: E402
from spectr_gbv.realpair.sweep_task import (  # noqa: E402
    BENCH_COLUMNS,
    BENCH_KEY,
    BenchSweep,
    Placement,
    bench_schema,
    read_bench_rows,
    resolve,
    run_bench_sweep,
    run_point,
    task_placement,
)
from spectr_gbv.sweep.store import read_provenance, read_table  # noqa: E402
from tests.sweep.bench_models import MODELS, PROMPTS, tiny_models, tiny_prompts  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# ar, sd (1, 2, 1.0), mdbv (2, 2, 1.0) on humaneval and gsm (the quick preset's datasets), 2 prompts of 8 tokens
QUICK = replace(PRESETS["quick"], methods=("sd", "mdbv"), num_prompts=2, max_new_tokens=8)
CONFIG = replace(QUICK, peer=False, predict=False, lossless=False).with_axes((2,), (2,), (1.0,))  # as the CLI's
SWEEP = BenchSweep(CONFIG, MODELS, PROMPTS)
CLI = ["sweep", "bench", "--methods", "sd,mdbv", "--prompts", "2", "--max-new-tokens", "8", "--L", "2", "--T", "1.0"]
CLI += ["--models", MODELS, "--prompt-loader", PROMPTS, "--quiet", "--json"]
COUNTS = ("prompts", "tokens_generated", "tokens_emitted", "row_iterations", "target_calls", "draft_calls")


@pytest.fixture(scope="module")
def bench_ray():
    if ray.is_initialized():  # another module's Ray: this module needs the repository on the workers' path
        ray.shutdown()
    runtime_env = {"env_vars": {"PYTHONPATH": str(ROOT)}}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR", runtime_env=runtime_env)
    yield
    ray.shutdown()


def stored(folder):
    rows = read_table(folder, schema=bench_schema(), key=BENCH_KEY).to_pylist()
    counts = Counter(tuple(r[c] for c in BENCH_KEY) for r in rows)
    assert set(counts.values()) == {1}, "a key stored twice"
    return {tuple(r[c] for c in BENCH_KEY): r for r in rows}


def parts(folder):
    return sorted(p.name for p in Path(folder).glob("part-*.parquet"))


@pytest.fixture(scope="module")
def fresh(bench_ray, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    requested = []
    original = ray.remote

    def recording_remote(*args, **options):
        requested.append(options)
        return original(*args, **options)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ray, "remote", recording_remote)
        result = run_bench_sweep(SWEEP, out, show_progress=False)
    return result, stored(out), requested


def test_placement_one_gpu_per_task_when_the_cluster_has_gpus():
    assert task_placement({"CPU": 16.0, "GPU": 2.0}) == Placement({"num_gpus": 1}, "cuda")
    assert task_placement({"CPU": 2.0}) == Placement({"num_cpus": 1}, "cpu")
    assert task_placement({"CPU": 4.0, "GPU": 0.0}) == Placement({"num_cpus": 1}, "cpu")


def test_every_configuration_row_once_on_cpu(fresh):
    result, rows, requested = fresh
    assert requested == [{"max_retries": 3, "num_cpus": 1}]  # the local Ray has no GPU
    assert (result.tasks_total, result.tasks_done, result.tasks_skipped, result.tasks_failed) == (3, 3, 0, 0)
    assert result.rows_written == 6
    points = [("ar", 1, 0, 1.0), ("sd", 1, 2, 1.0), ("mdbv", 2, 2, 1.0)]
    assert set(rows) == {(ds, *p, 0, 2, 8, MODELS) for ds in ("humaneval", "gsm") for p in points}
    for r in rows.values():
        assert set(r) == set(BENCH_COLUMNS)
        assert (r["device"], r["target_name"], r["draft_name"], r["sweeps"]) == ("cpu", "tiny", "tiny-draft", "K;L;T")
        assert r["tokens_generated"] == 16 and sum(r["accepted_hist"]) == r["row_iterations"]
        assert len(r["accepted_hist"]) == r["L"] + 1
        assert r["block_efficiency"] == r["tokens_emitted"] / r["row_iterations"]


def test_rows_equal_the_in_process_benchmark(fresh):
    models = tiny_models()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the Ray workers (OMP_NUM_THREADS=1)
    try:
        bench = run_benchmark(CONFIG, models, tiny_prompts(CONFIG, models), device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)
    assert len(bench.rows) == 6
    for b in bench.rows:
        r = fresh[1][(b.dataset, b.method, b.num_drafts, b.draft_length, b.temperature, 0, 2, 8, MODELS)]
        assert [r[c] for c in COUNTS] == [getattr(b, c) for c in COUNTS]
        assert r["accepted_hist"] == b.accepted_hist


def test_read_bench_rows_adds_speedups(fresh):
    rows = read_bench_rows(fresh[0].out)
    assert len(rows) == 6
    ar = {(r.dataset, r.temperature): r.tokens_per_second for r in rows if r.method == "ar"}
    for r in rows:
        assert r.speedup == (1.0 if r.method == "ar" else r.tokens_per_second / ar[(r.dataset, r.temperature)])
        assert r.ar_tokens_per_second == ar[(r.dataset, r.temperature)]


def test_cli_rerun_writes_nothing_and_a_wider_grid_runs_only_the_new_point(fresh, capsys):
    out = fresh[0].out
    before = parts(out)
    assert main([*CLI, "--K", "2", "--out", out]) == 0  # the Ray of the module is reused
    data = json.loads(capsys.readouterr().out)
    assert {k: data[k] for k in ("tasks_total", "tasks_done", "tasks_skipped", "rows_written")} == {
        "tasks_total": 3,
        "tasks_done": 0,
        "tasks_skipped": 3,
        "rows_written": 0,
    }
    assert parts(out) == before
    assert main([*CLI, "--K", "1,2", "--out", out]) == 0  # adds mdbv at K = 1
    data = json.loads(capsys.readouterr().out)
    assert (data["tasks_total"], data["tasks_done"], data["tasks_skipped"], data["rows_written"]) == (4, 1, 3, 2)
    rows = stored(out)
    assert len(rows) == 8 and {k for k in rows if k[1:3] == ("mdbv", 1)} == {
        (ds, "mdbv", 1, 2, 1.0, 0, 2, 8, MODELS) for ds in ("humaneval", "gsm")
    }
    assert [g["kind"] for g in read_provenance(out)["grids"]] == ["bench", "bench"]


def test_bad_specs_are_usage_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="module:function"):
        resolve("tests.sweep.bench_models")
    with pytest.raises(ValueError, match="AttributeError"):
        resolve("tests.sweep.bench_models:missing")
    assert main(["sweep", "bench", "--models", "no_such_module_xyz:f", "--out", str(tmp_path)]) == 2
    assert "--models" in capsys.readouterr().err
    assert main(["sweep", "bench", "--methods", "nope", "--out", str(tmp_path)]) == 2
    assert not list(tmp_path.iterdir())


def test_a_prompt_loader_with_too_few_prompts_fails():
    sweep = BenchSweep(replace(CONFIG, num_prompts=4), MODELS, PROMPTS)  # the loader has 3 texts
    with pytest.raises(ValueError, match="'humaneval' has 3 prompts, expected 4"):
        run_point(sweep, sweep.points()[0])


def test_an_exact_sweep_folder_is_refused(tmp_path):
    (tmp_path / "sweep.json").write_text(
        json.dumps({"columns": [], "key": ["instance_id", "method", "K"], "grids": []})
    )
    with pytest.raises(ValueError, match="keyed by"):
        run_bench_sweep(SWEEP, tmp_path, show_progress=False)


def test_importing_the_module_imports_no_torch():
    code = "import sys, spectr_gbv.sweep, spectr_gbv.realpair.sweep_task; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
