"""The sweep on a local Ray (2 CPUs, one instance for the module): exact rows once each, resume, a killed worker."""

import json
import shutil
import struct
from collections import Counter

import pytest

ray = pytest.importorskip("ray")
pq = pytest.importorskip("pyarrow.parquet")

from spectr_gbv.cli.main import main  # noqa: E402
from spectr_gbv.core.instance import random_instance  # noqa: E402
from spectr_gbv.core.numbers import json_value  # noqa: E402
from spectr_gbv.simulate.methods import simulate_method  # noqa: E402
from spectr_gbv.sweep.grid import grid_from_args  # noqa: E402
from spectr_gbv.sweep.runner import KILL_ONCE_ENV, run_sweep  # noqa: E402
from spectr_gbv.sweep.schema import KEY  # noqa: E402
from spectr_gbv.sweep.store import non_parquet_entries, read_provenance, read_table  # noqa: E402
from spectr_gbv.theory.bounds import cic_bound  # noqa: E402
from spectr_gbv.theory.lp import optimal_lossless  # noqa: E402

GRID = grid_from_args(
    random=["2,2,0-5", "3,2,0-3"], methods="sd,mdbv,optimal_multidraft", ks="1,2", measures="tau,bounds,opt"
)
ROWS = 10 * (1 + 2 + 2)  # sd reads one draft: K = 1 only (MethodSpec.grid_shape)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


def rows_by_key(folder):
    rows = read_table(folder).to_pylist()
    counts = Counter(tuple(r[c] for c in KEY) for r in rows)
    assert set(counts.values()) == {1}, "a key stored twice"
    return {tuple(r[c] for c in KEY): {c: v for c, v in r.items() if c != "seconds"} for r in rows}


@pytest.fixture(scope="module")
def fresh(local_ray, tmp_path_factory):
    out = tmp_path_factory.mktemp("fresh")
    result = run_sweep(GRID, out, show_progress=False)
    return result, rows_by_key(out)


def test_every_row_once_and_exact(fresh):
    result, rows = fresh
    assert (result.tasks_total, result.tasks_skipped, result.tasks_done, result.tasks_failed) == (10, 0, 10, 0)
    assert result.rows_written == ROWS and len(rows) == ROWS
    assert set(rows) == set().union(*(t.keys() for t in GRID.tasks()))
    for (instance_id, method, k), r in rows.items():
        n, L, seed, _ = (int(x) for x in instance_id.removeprefix("random:").split(","))
        inst = random_instance(n, L, seed)
        direct = simulate_method(inst, method, k)
        assert r["expected_accepted"] == json_value(direct.expected_accepted)
        assert r["validity_defect"] == json_value(direct.validity_defect)
        assert r["lossless"] is direct.lossless and r["error"] is None
        assert r["cic_bound"] == json_value(cic_bound(*inst, k, L))
        assert r["opt"] == pytest.approx(optimal_lossless(*inst, k, L).value, abs=1e-9)
        assert r["ot"] is None  # not requested


def test_interrupted_sweep_resumes(fresh, tmp_path):
    def stop_after_two(so_far):
        if so_far.tasks_done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(GRID, tmp_path, show_progress=False, on_task_done=stop_after_two)
    assert len(rows_by_key(tmp_path)) == 2 * 5  # the two tasks written stay
    again = run_sweep(GRID, tmp_path, show_progress=False)
    assert (again.tasks_skipped, again.tasks_done, again.tasks_failed, again.rows_written) == (2, 8, 0, 40)
    assert rows_by_key(tmp_path) == fresh[1]
    done = run_sweep(GRID, tmp_path, show_progress=False)  # complete: nothing to run, Ray not even asked
    assert (done.tasks_skipped, done.tasks_done, done.rows_written) == (10, 0, 0)


def test_a_killed_worker_loses_and_duplicates_nothing(fresh, tmp_path, monkeypatch):
    marker = tmp_path / "killed"
    monkeypatch.setenv(KILL_ONCE_ENV, str(marker))
    result = run_sweep(GRID, tmp_path / "out", show_progress=False)
    assert marker.exists()  # a worker process died mid-task
    pid, instance_id = marker.read_text().split()
    assert int(pid) > 0 and instance_id.startswith("random:")
    assert (result.tasks_done, result.tasks_failed, result.rows_written) == (10, 0, ROWS)
    assert rows_by_key(tmp_path / "out") == fresh[1]


def test_cli_runs_on_the_shared_ray(local_ray, tmp_path, capsys):
    argv = ["sweep", "--random", "2,2,0-1", "--methods", "sd,bv", "--K", "1-2", "--out", str(tmp_path), "--quiet"]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {k: data[k] for k in ("tasks_total", "tasks_done", "tasks_skipped", "rows_written")} == {
        "tasks_total": 2,
        "tasks_done": 2,
        "tasks_skipped": 0,
        "rows_written": 4,  # sd and bv at K = 1 only
    }
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("Sweep of 2 instances: 0 tasks done, 2 skipped (already stored), 0 failed; 0 rows written")
    assert read_provenance(tmp_path)["grids"][0]["methods"] == ["sd", "bv"]
    assert non_parquet_entries(tmp_path) == []  # the folder is a Parquet dataset: parts and _sweep.parquet


def test_a_task_failing_after_its_retries_is_counted_and_rerun(fresh, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KILL_ONCE_ENV, str(tmp_path / "killed"))
    result = run_sweep(GRID, tmp_path / "out", show_progress=False, max_retries=0)
    (_, instance_id) = (tmp_path / "killed").read_text().split()
    assert (result.tasks_done, result.tasks_failed, result.rows_written) == (9, 1, ROWS - 5)
    assert len(result.failures) == 1 and result.failures[0].startswith(f"{instance_id}: ")
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("spectr-gbv")]
    assert line.startswith(f"spectr-gbv sweep: task failed: {instance_id}: ")
    again = run_sweep(GRID, tmp_path / "out", show_progress=False)  # the marker exists: no more kills
    assert (again.tasks_skipped, again.tasks_done, again.tasks_failed) == (9, 1, 0)
    assert rows_by_key(tmp_path / "out") == fresh[1]


def test_cli_summarize_reads_the_dataset(fresh, tmp_path, capsys):
    assert main(["sweep", "summarize", fresh[0].out, "--out", str(tmp_path), "--no-plots", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["rows"], data["instances"], data["K"]) == (ROWS, 10, [1, 2])
    assert json.loads((tmp_path / "summary.json").read_text()) == data
    assert main(["sweep", "summarize", fresh[0].out, "--out", str(tmp_path), "--no-plots"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["sweep", "summarize", str(tmp_path / "none"), "--no-plots"]) == 2
    assert capsys.readouterr().err.startswith("spectr-gbv sweep: error: ")


def test_cli_resume_refuses_a_corrupt_part_then_recomputes_it(fresh, tmp_path, capsys):
    """End to end on Ray: a changed byte is named on resume (exit 2); moved out, its rows are computed again."""
    shutil.copytree(fresh[0].out, tmp_path / "o")
    argv = ["sweep", "--random", "2,2,0-5", "--random", "3,2,0-3", "--methods", "sd,mdbv,optimal_multidraft"]
    argv += ["--K", "1,2", "--measures", "tau,bounds,opt", "--out", str(tmp_path / "o"), "--quiet"]
    part = sorted((tmp_path / "o").glob("part-*.parquet"))[0]
    value = pq.read_table(part)["expected_accepted_float"].to_pylist()[0]
    data = bytearray(part.read_bytes())
    data[data.find(struct.pack("<d", value))] ^= 1
    part.write_bytes(bytes(data))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"spectr-gbv sweep: error: part {str(part)!r}: corrupt: ") and "\n" not in err
    part.rename(tmp_path / part.name)
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["tasks_skipped"], data["tasks_done"], data["rows_written"], data["rows_with_errors"]) == (9, 1, 5, 0)
    assert rows_by_key(tmp_path / "o") == fresh[1]
