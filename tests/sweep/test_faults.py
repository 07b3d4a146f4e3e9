"""Sweep faults without Ray: corrupt, damaged and foreign parts, a second writer, broken instance files,
an unknown baseline, rows with errors, read-only folders, a full disk, an unreachable Ray head, Ctrl-C.

Each test names the class of docs/bad_input.md ("Sweep faults") it guards. The runner's loop
(:func:`~spectr_gbv.sweep.runner.drive`) runs here on a stand-in for Ray that hands back the
rows of :func:`~spectr_gbv.sweep.tasks.run_task`, so no Ray starts.
"""

import errno
import json
import socket
import struct
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from spectr_gbv.cli.main import main  # noqa: E402
from spectr_gbv.core.instance import default_instance  # noqa: E402
from spectr_gbv.sweep import runner  # noqa: E402
from spectr_gbv.sweep.grid import grid_from_args  # noqa: E402
from spectr_gbv.sweep.parts import PartError, check_parts, read_table  # noqa: E402
from spectr_gbv.sweep.publish import SweepWriteError  # noqa: E402
from spectr_gbv.sweep.runner import SweepInterrupted, SweepResult, drive  # noqa: E402
from spectr_gbv.sweep.schema import COLUMNS, arrow_schema  # noqa: E402
from spectr_gbv.sweep.store import LOCK_NAME, SweepStore  # noqa: E402
from spectr_gbv.sweep.tasks import run_task  # noqa: E402

# sd reads one draft: K = 1 only, so 3 rows a task
GRID = grid_from_args(random=["2,2,0-2"], methods="sd,mdbv", ks="1,2", measures="tau")
ARGV = ["sweep", "--random", "2,2,0-2", "--methods", "sd,mdbv", "--K", "1,2", "--measures", "tau", "--quiet"]


def row(instance_id="random:2,2,0,0", method="sd", K=1, value=0.123456789, error=None):
    out = dict.fromkeys(COLUMNS)
    out.update(instance_id=instance_id, family="random", method=method, K=K, n=2, L=2, error=error)
    out.update(expected_accepted=repr(value), expected_accepted_float=value)
    return out


def only_part(folder):
    (part,) = sorted(folder.glob("part-*.parquet"))
    return part


def error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    return err[0]


class FakeRay:
    """What :func:`drive` asks of Ray: submit (the item is its own ref), wait, get, cancel."""

    def __init__(self, interrupt_at=None):
        self.interrupt_at, self.waits, self.cancelled = interrupt_at, 0, []

    def wait(self, refs, num_returns=1):
        self.waits += 1
        if self.waits == self.interrupt_at:
            raise KeyboardInterrupt  # Ctrl-C while the driver collects a task
        return refs[:1], refs[1:]

    def get(self, ref):
        return run_task(ref)

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)


def run_drive(store, fake, tasks):
    result = SweepResult(len(tasks), 0, 0, 0, 0, 0.0, str(store.directory))
    with store.locked():
        return drive(fake, tasks, lambda t: t, lambda t: t.instance_id, store, result, label="sweep", window=2,
                     show_progress=False)  # fmt: skip


# 1. a flipped byte in a part
def test_a_flipped_byte_is_named_by_summarize_resume_and_verify(tmp_path, capsys):
    store = SweepStore(tmp_path / "out")
    assert store.write([row(K=1), row(K=2)]) == 2
    part = only_part(tmp_path / "out")
    data = bytearray(part.read_bytes())
    at = data.find(struct.pack("<d", 0.123456789))
    assert at > 0
    data[at] ^= 1  # the lowest mantissa bit: pyarrow, pandas, polars and DuckDB read 0.12345678900000002
    part.write_bytes(bytes(data))
    assert pq.read_table(part)["expected_accepted_float"].to_pylist()[0] != 0.123456789
    expected = f"part {str(part)!r}: corrupt: its rows do not match their recorded sha256 (a changed byte)"
    with pytest.raises(PartError) as info:
        read_table(tmp_path / "out")
    assert str(info.value).startswith(expected + "; move it out of the folder")
    with pytest.raises(PartError, match="corrupt"):
        SweepStore(tmp_path / "out").existing_keys()  # a resumed sweep refuses to skip its keys
    assert main(["sweep", "summarize", str(tmp_path / "out"), "--no-plots", "--quiet"]) == 2
    assert error_line(capsys).startswith(f"spectr-gbv sweep: error: {expected}")
    assert main(["sweep", "verify", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"BAD {expected}")
    assert out[1] == f"{tmp_path / 'out'}: 1 parts, 0 rows in the good ones; 1 bad parts."
    part.rename(tmp_path / part.name)  # the fix the message names
    assert main(["sweep", "verify", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["parts"], report["rows"], report["bad"]) == (0, 0, [])


# 7. a damaged page header
def test_a_damaged_page_header_is_named(tmp_path, capsys):
    SweepStore(tmp_path).write([row()])
    part = only_part(tmp_path)
    data = bytearray(part.read_bytes())
    data[4:24] = b"\xff" * 20  # the first page header follows the magic bytes "PAR1"
    part.write_bytes(bytes(data))
    with pytest.raises(PartError, match=r"damaged Parquet file, unreadable \("):
        read_table(tmp_path)
    assert main(["sweep", "summarize", str(tmp_path), "--out", str(tmp_path.parent / "s"), "--no-plots"]) == 2
    assert error_line(capsys).startswith(f"spectr-gbv sweep: error: part {str(part)!r}: damaged Parquet file")


# 4. a foreign part-*.parquet
def test_a_foreign_part_is_refused_by_name(tmp_path, capsys):
    SweepStore(tmp_path).write([row()])
    foreign = tmp_path / "part-zzz.parquet"
    pq.write_table(pa.table({"instance_id": ["x"], "score": [1.5]}), foreign)
    with pytest.raises(PartError) as info:
        read_table(tmp_path)
    assert str(info.value).startswith(f"part {str(foreign)!r}: not a part of this sweep: its schema differs (missing [")
    assert "unknown ['score']" in str(info.value)
    retyped = tmp_path / "part-yyy.parquet"
    foreign.unlink()
    schema = pa.schema([f if f.name != "K" else pa.field("K", pa.string()) for f in arrow_schema()])
    pq.write_table(pa.Table.from_pylist([{**row(), "K": "1"}], schema=schema), retyped)
    with pytest.raises(PartError, match=r"other types \[K: string \(not int64\)\]"):
        read_table(tmp_path)
    assert main(["sweep", "summarize", str(tmp_path), "--out", str(tmp_path.parent / "s"), "--no-plots"]) == 2
    assert error_line(capsys).startswith(f"spectr-gbv sweep: error: part {str(retyped)!r}: not a part of this sweep")
    assert len(check_parts(tmp_path).bad) == 1


# 5. an unknown baseline
def test_an_unknown_baseline_is_refused(tmp_path, capsys):
    SweepStore(tmp_path / "d").write([row(method="sd"), row(method="mdbv")])
    argv = ["sweep", "summarize", str(tmp_path / "d"), "--no-plots"]
    assert main([*argv, "--baseline", "nope"]) == 2
    line = error_line(capsys)
    assert line == (
        f"spectr-gbv sweep: error: baseline: 'nope' is not a method of the dataset {str(tmp_path / 'd')!r}; "
        "methods present: sd, mdbv"
    )
    assert not (tmp_path / "d-summary").exists()  # nothing written
    SweepStore(tmp_path / "e").write([row(method="sd"), row(method="bv")])  # no mdbv: the default is sd
    assert main(["sweep", "summarize", str(tmp_path / "e"), "--no-plots", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["baseline"] == "sd"


# 2. two writers into one folder
def test_a_second_sweep_into_a_locked_folder_is_refused(tmp_path, capsys):
    held = SweepStore(tmp_path / "out")
    with held.locked():
        assert main([*ARGV, "--out", str(tmp_path / "out")]) == 2
    assert error_line(capsys) == (
        f"spectr-gbv sweep: error: out: another sweep is writing into {str(tmp_path / 'out')!r} (it holds the "
        f"lock {str(tmp_path / 'out' / LOCK_NAME)!r}); wait for it to end, or write into another folder"
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [LOCK_NAME]  # nothing written


# 3. broken instance files
def test_broken_instance_files_are_named_before_anything_runs(tmp_path, capsys):
    folder = tmp_path / "insts"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(default_instance().to_dict()))
    (folder / "bad.json").write_text("{not json")
    rows = default_instance().to_dict()
    rows["target"]["0"] = ["3/4", "3/4"]  # a row summing to 3/2
    (folder / "rows.json").write_text(json.dumps(rows))
    argv = ["sweep", "--instances", str(folder), "--methods", "sd", "--K", "1", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    line = error_line(capsys)
    assert line.startswith(f"spectr-gbv sweep: error: dir: 2 of 3 instance files in {str(folder)!r} fail to load: ")
    assert "bad.json (instance: bad.json is not valid JSON" in line and "; rows.json (" in line
    assert not (tmp_path / "out").exists()  # refused before the folder was made


# 6. failed tasks and rows with errors in the exit status
def test_rows_with_errors_make_the_exit_status_1(tmp_path, capsys, monkeypatch):
    store = SweepStore(tmp_path)
    keys = sorted(set().union(*(t.keys() for t in GRID.tasks())))
    store.write([row(i, m, k, error="simulate: ValueError: boom" if i.endswith(",1,0") else None) for i, m, k in keys])
    monkeypatch.setattr(runner, "start_ray", lambda *a: pytest.fail("every row is stored: Ray must not start"))
    assert runner.run_sweep(GRID, tmp_path, show_progress=False).rows_with_errors == 3
    assert main([*ARGV, "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Sweep of 3 instances: 0 tasks done, 3 skipped (already stored), 0 failed; 0 rows written")
    assert out.endswith(f" to {tmp_path}; 3 rows of the grid carry an error (see the 'error' column).\n")


def test_failed_tasks_are_counted_in_the_line_and_exit_status(tmp_path, capsys):
    from spectr_gbv.cli.sweep import _finish

    class Args:
        quiet, json = True, False

    failed = SweepResult(3, 0, 2, 1, 8, 1.0, str(tmp_path), ("random:2,2,1,0: RayTaskError: boom",))
    assert _finish(Args, failed, "Sweep of 3 instances: 2 tasks done") == 1
    assert capsys.readouterr().out == (
        f"Sweep of 3 instances: 2 tasks done, 0 skipped (already stored), 1 failed; 8 rows written in 1.0 s to "
        f"{tmp_path} (rerun the same command to retry the failed tasks).\n"
    )


# 8. a read-only or immutable folder
def test_a_read_only_folder_gives_one_line_not_the_cleanup_error(tmp_path, monkeypatch, capsys):
    store = SweepStore(tmp_path / "out")

    def refuse(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(pq, "write_table", lambda table, where, **kw: refuse(where))
    monkeypatch.setattr(Path, "unlink", refuse)  # the temporary file's cleanup fails the same way
    with pytest.raises(SweepWriteError) as info:
        store.write([row()])
    assert str(info.value).startswith("out: cannot write part-")
    assert str(info.value).endswith(
        f" into {str(tmp_path / 'out')!r}: Read-only file system (EROFS); the parts stored before are whole"
    )
    assert info.value.errno == errno.EROFS and store.existing_keys() == set()
    assert main([*ARGV, "--out", str(tmp_path / "out")]) == 2
    line = error_line(capsys)
    assert line.startswith("spectr-gbv sweep: error: out: cannot write _sweep.parquet into ")
    assert "Read-only file system (EROFS)" in line


def test_a_folder_that_refuses_the_lock_file_gives_one_line(tmp_path, monkeypatch, capsys):
    import filelock

    def refuse(self, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(self.lock_file))

    monkeypatch.setattr(filelock.FileLock, "acquire", refuse)
    assert main([*ARGV, "--out", str(tmp_path / "out")]) == 2
    assert error_line(capsys) == (
        f"spectr-gbv sweep: error: out: cannot write the lock '{LOCK_NAME}' into {str(tmp_path / 'out')!r}: "
        "Permission denied (EACCES); the parts stored before are whole"
    )


# 9. disk full mid-sweep
def test_disk_full_mid_sweep_keeps_the_folder_consistent_and_resumable(tmp_path, monkeypatch):
    store, tasks = SweepStore(tmp_path / "out"), GRID.tasks()
    original, calls = pq.write_table, []

    def filling(table, where, **kw):
        calls.append(where)
        if len(calls) == 2:
            Path(where).write_bytes(b"PAR1 half")
            raise OSError(errno.ENOSPC, "No space left on device")
        original(table, where, **kw)

    monkeypatch.setattr(pq, "write_table", filling)
    with pytest.raises(SweepWriteError) as info:
        run_drive(store, FakeRay(), tasks)
    name = Path(calls[1]).name.split(".")[2]  # the temporary ".out.part-<uuid>.parquet.<token>.tmp"
    assert str(info.value) == (
        f"out: cannot write {name}.parquet into {str(tmp_path / 'out')!r}: No space left on device (ENOSPC); "
        "the parts stored before are whole (3 rows stored by this run); make room or fix the folder, then rerun "
        "the same command to resume"
    )
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and p.suffix == ".tmp") == []
    assert SweepStore(tmp_path / "out").existing_keys() == tasks[0].keys()  # the first task, whole
    resumed = run_drive(SweepStore(tmp_path / "out"), FakeRay(), tasks[1:])
    assert (resumed.tasks_done, resumed.rows_written) == (2, 6)
    assert read_table(tmp_path / "out").num_rows == 9


# 10. an unreachable Ray head
def test_an_unreachable_address_is_refused_at_once(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    assert main([*ARGV, "--out", str(tmp_path / "out"), "--address", f"127.0.0.1:{port}"]) == 2
    assert error_line(capsys) == (
        f"spectr-gbv sweep: error: --address '127.0.0.1:{port}': no Ray head answers at 127.0.0.1:{port} "
        f"(Connection refused); start one there (ray start --head --port {port}) or leave --address out for a "
        "local Ray"
    )
    assert not (tmp_path / "out").exists()
    assert main([*ARGV, "--out", str(tmp_path / "out"), "--address", "10.0.0.1"]) == 2
    assert "expected HOST:PORT" in error_line(capsys)


# 11. Ctrl-C
def test_ctrl_c_stops_between_writes_and_the_rerun_resumes(tmp_path, capsys, monkeypatch):
    store, tasks, fake = SweepStore(tmp_path / "out"), GRID.tasks(), FakeRay(interrupt_at=2)
    with pytest.raises(SweepInterrupted) as info:
        run_drive(store, fake, tasks)
    assert (info.value.result.tasks_done, info.value.result.rows_written) == (1, 3)
    assert str(info.value) == "interrupted; 3 rows stored, rerun the same command to resume"
    assert fake.cancelled == tasks[1:]  # the tasks in flight are cancelled
    assert SweepStore(tmp_path / "out").existing_keys() == tasks[0].keys()
    monkeypatch.setattr(runner, "run_sweep", lambda *a, **k: (_ for _ in ()).throw(info.value))
    assert main([*ARGV, "--out", str(tmp_path / "out")]) == 130
    assert error_line(capsys) == "spectr-gbv sweep: interrupted; 3 rows stored, rerun the same command to resume"
