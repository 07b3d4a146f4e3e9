"""A sweep folder is one Parquet dataset for every reader: pandas, pyarrow, polars, DuckDB; reruns included.

One real sweep on a local Ray (2 CPUs, its own for the module) into a folder, then an
interrupted run of a larger grid into the same folder and its rerun: the folder holds Parquet
files only, and each reader, pointed at the folder itself (and at ``DIR/*.parquet``), gets
every stored row once with the values the package's own reader gives. polars and DuckDB
readers of a bare folder are tested where the installed version reads folders at all (probed
on a folder of one plain Parquet file).
"""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ds = pytest.importorskip("pyarrow.dataset")

from spectr_gbv.cli.main import main  # noqa: E402
from spectr_gbv.core.instance import random_instance  # noqa: E402
from spectr_gbv.core.numbers import json_value  # noqa: E402
from spectr_gbv.simulate.methods import simulate_method  # noqa: E402
from spectr_gbv.sweep.grid import grid_from_args  # noqa: E402
from spectr_gbv.sweep.runner import run_sweep  # noqa: E402
from spectr_gbv.sweep.schema import COLUMNS, KEY  # noqa: E402
from spectr_gbv.sweep.store import (  # noqa: E402
    LOCK_NAME,
    METADATA_KEY,
    PROVENANCE,
    SWEEP_JSON,
    SweepStore,
    non_parquet_entries,
    read_provenance,
    read_table,
)

FIRST = grid_from_args(random=["2,2,0-3"], methods="sd,mdbv", ks="1,2", measures="tau")
# overlaps FIRST (seeds 0-3 at K = 1, 2) and adds seeds 4-5, K = 3 and a method
SECOND = grid_from_args(random=["2,2,0-5"], methods="sd,mdbv,bv", ks="1-3", measures="tau,bounds")
KEYS = set().union(*(t.keys() for t in FIRST.tasks()), *(t.keys() for t in SECOND.tasks()))
ROWS = len(KEYS)  # sd and bv read one draft: K = 1 only (MethodSpec.grid_shape)
VALUES = ("expected_accepted", "expected_accepted_float", "validity_defect", "lossless")


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def folder(local_ray, tmp_path_factory):
    """A folder written by a sweep, an interrupted larger sweep, and two reruns (each skipping stored rows)."""
    out = tmp_path_factory.mktemp("readers") / "field"
    first = run_sweep(FIRST, out, show_progress=False)
    assert (first.tasks_done, first.rows_written) == (4, 12)  # sd at K = 1, mdbv at K = 1, 2

    def stop_after_two(so_far):
        if so_far.tasks_done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(SECOND, out, show_progress=False, on_task_done=stop_after_two)
    again = run_sweep(SECOND, out, show_progress=False)
    assert again.tasks_failed == 0 and again.tasks_skipped == 2 and again.tasks_done == 4
    done = run_sweep(SECOND, out, show_progress=False)  # all stored: nothing written, provenance unchanged
    assert (done.tasks_skipped, done.rows_written) == (6, 0)
    return out


@pytest.fixture(scope="module")
def expected(folder):
    """Key -> the VALUES columns, as the package's reader gives them (checked against direct simulation below)."""
    rows = read_table(folder).to_pylist()
    assert len(rows) == ROWS
    return {tuple(r[c] for c in KEY): tuple(r[c] for c in VALUES) for r in rows}


def _check(records):
    """The rows a reader returned (dicts of the KEY and VALUES columns) are exactly the stored ones, once each."""
    counts = Counter(tuple(r[c] for c in KEY) for r in records)
    assert len(records) == ROWS
    assert set(counts.values()) == {1}, [k for k, n in counts.items() if n > 1]
    return {tuple(r[c] for c in KEY): tuple(r[c] for c in VALUES) for r in records}


def test_the_folder_holds_parquet_files_only(folder):
    names = sorted(p.name for p in folder.iterdir() if p.name != LOCK_NAME)  # the hidden lock: every reader skips it
    assert names and all(n.endswith(".parquet") for n in names), names
    assert PROVENANCE in names and sum(n.startswith("part-") for n in names) == 4 + 2 + 4  # one part per task run
    assert non_parquet_entries(folder) == []
    assert not [p.name for p in folder.parent.iterdir() if p.name.endswith(".tmp")]  # no temporary file left beside


def test_provenance_records_every_grid_in_parquet_metadata(folder):
    data = read_provenance(folder)
    assert data["layout"] == 2 and data["package_version"] == "0.1.0"
    assert data["key"] == list(KEY) and data["columns"] == list(COLUMNS)
    assert data["grids"] == [FIRST.to_dict(), SECOND.to_dict()]  # the interrupted run and its reruns: once
    provenance = pq.read_table(folder / PROVENANCE)  # a plain Parquet file: zero rows, the table's schema
    assert provenance.num_rows == 0 and provenance.schema.names == list(COLUMNS)
    assert json.loads(provenance.schema.metadata[METADATA_KEY.encode()]) == data
    part = next(folder.glob("part-*.parquet"))
    record = json.loads(pq.read_schema(part).metadata[METADATA_KEY.encode()])
    assert {k: v for k, v in record.items() if k != "sha256"} == {
        "layout": 2,
        "key": list(KEY),
        "package_version": "0.1.0",
    }
    assert re.fullmatch("[0-9a-f]{64}", record["sha256"])


def test_the_package_reader_has_the_exact_values(expected):
    assert set(expected) == KEYS
    for instance_id, method, k in [("random:2,2,5,0", "bv", 1), ("random:2,2,0,0", "mdbv", 2)]:
        direct = simulate_method(random_instance(2, 2, int(instance_id.split(",")[2])), method, k)
        got = expected[(instance_id, method, k)]
        assert got[0] == json_value(direct.expected_accepted) and got[2] == json_value(direct.validity_defect)
        assert got[1] == float(direct.expected_accepted) and got[3] is True


def test_pandas_reads_the_folder(folder, expected):
    pd = pytest.importorskip("pandas")
    df = pd.read_parquet(folder)
    assert list(df.columns) == list(COLUMNS)
    df = df.astype(object).where(df.notna(), None)
    assert _check(df.to_dict("records")) == expected
    assert pd.read_parquet(str(folder), columns=["K"])["K"].sum() == sum(k for _, _, k in KEYS)


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda d: pq.read_table(d), id="pyarrow.parquet.read_table"),
        pytest.param(lambda d: pq.ParquetDataset(d).read(), id="pyarrow.parquet.ParquetDataset"),
        pytest.param(lambda d: ds.dataset(d, format="parquet").to_table(), id="pyarrow.dataset"),
    ],
)
def test_pyarrow_reads_the_folder(folder, expected, read):
    table = read(str(folder))
    assert table.schema.names == list(COLUMNS)
    assert _check(table.to_pylist()) == expected


def _reads_folders(read, tmp_path):
    """Whether ``read(folder)`` reads a folder of one plain Parquet file (older versions want a glob)."""
    probe = tmp_path / "probe"
    probe.mkdir()
    pq.write_table(pa.table({"x": [1, 2]}), probe / "a.parquet")
    try:
        return read(str(probe)) == 2
    except Exception:  # noqa: BLE001 - any refusal means: this version has no folder form
        return False


@pytest.mark.parametrize("form", ["read_parquet(glob)", "read_parquet(dir)", "scan_parquet(dir)"])
def test_polars_reads_the_folder(folder, expected, form, tmp_path):
    pl = pytest.importorskip("polars")
    if form.endswith("(dir)") and not _reads_folders(lambda d: pl.read_parquet(d).height, tmp_path):
        pytest.skip(f"polars {pl.__version__} does not read a folder")
    where = str(folder / "*.parquet") if form.endswith("(glob)") else str(folder)
    frame = pl.scan_parquet(where).collect() if form.startswith("scan") else pl.read_parquet(where)
    assert frame.columns == list(COLUMNS)
    assert _check(frame.to_dicts()) == expected


@pytest.mark.parametrize("form", ["glob", "dir"])
def test_duckdb_reads_the_folder(folder, expected, form, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()

    def count(where):
        return con.execute(f"SELECT count(*) FROM read_parquet('{where}')").fetchall()[0][0]

    if form == "dir" and not _reads_folders(count, tmp_path):
        pytest.skip(f"duckdb {duckdb.__version__} does not read a folder")
    where = f"{folder}/*.parquet" if form == "glob" else str(folder)
    cursor = con.execute(f"SELECT {', '.join(KEY + VALUES)} FROM read_parquet('{where}')")
    records = [dict(zip(KEY + VALUES, row, strict=True)) for row in cursor.fetchall()]
    assert _check(records) == expected
    distinct = f"SELECT count(*) FROM (SELECT DISTINCT instance_id, method, K FROM read_parquet('{where}'))"
    assert con.execute(distinct).fetchall()[0][0] == ROWS


def test_summaries_go_beside_the_dataset(folder, capsys):
    assert main(["sweep", "summarize", str(folder), "--baseline", "sd", "--no-plots"]) == 0
    captured = capsys.readouterr()
    beside = folder.with_name(folder.name + "-summary")
    assert sorted(p.name for p in beside.iterdir()) == ["summary.json", "summary.md"]
    assert f"summary files written to {beside}" in captured.err
    assert json.loads((beside / "summary.json").read_text())["rows"] == ROWS
    assert non_parquet_entries(folder) == []  # nothing written into the dataset
    assert main(["sweep", "summarize", str(folder), "--out", str(folder / "s"), "--no-plots"]) == 2
    assert "is inside the dataset folder" in capsys.readouterr().err
    assert not (folder / "s").exists()


def test_a_folder_of_the_old_layout_is_read_then_converted_by_a_rerun(folder, expected, tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    for part in folder.glob("part-*.parquet"):
        (old / part.name).write_bytes(part.read_bytes())
    layout1 = {"columns": list(COLUMNS), "key": list(KEY), "grids": [FIRST.to_dict()], "package_version": "0.0.9"}
    (old / SWEEP_JSON).write_text(json.dumps(layout1))
    with pytest.raises(pa.ArrowInvalid, match="sweep.json"):
        pq.read_table(old)  # the reported failure, on a layout-1 folder
    assert {tuple(r[c] for c in KEY) for r in read_table(old).to_pylist()} == KEYS  # the package still reads it
    assert read_provenance(old) == {**layout1, "layout": 1}
    assert main(["sweep", "summarize", str(old), "--baseline", "sd", "--no-plots", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["rows"] == ROWS
    assert "holds entries that are not Parquet files (sweep.json)" in captured.err

    result = run_sweep(SECOND, old, show_progress=False)  # every row stored: Ray is not asked
    assert (result.tasks_skipped, result.rows_written) == (6, 0)
    assert sorted(p.name for p in old.iterdir() if not p.name.startswith("part-")) == [LOCK_NAME, PROVENANCE]
    assert read_provenance(old)["grids"] == [FIRST.to_dict(), SECOND.to_dict()]
    assert _check(pq.read_table(old).to_pylist()) == expected


def test_bench_tables_are_read_alike(tmp_path):
    """The bench sweep's schema (a list column, another key) through the same store: polars and DuckDB agree."""
    from spectr_gbv.realpair.sweep_task import BENCH_COLUMNS, BENCH_KEY, bench_schema

    types = {"string": "x", "int64": 1, "float64": 0.5, "list<int64>": [1, 2]}
    rows = []
    for k in (1, 2, 3):
        row = {name: types[kind] for name, kind in BENCH_COLUMNS.items()}
        row.update(dataset="humaneval", method="mdbv", K=k)
        rows.append(row)
    store = SweepStore(tmp_path / "bench", schema=bench_schema(), key=BENCH_KEY)
    store.record_grid({"kind": "bench"})
    assert store.write(rows[:2]) == 2 and store.write(rows) == 1
    with pytest.raises(ValueError, match="keyed by"):
        SweepStore(tmp_path / "bench").record_grid({"kind": "exact"})
    expected = sorted((r["K"], r["tokens_generated"]) for r in rows)
    assert sorted((r["K"], r["tokens_generated"]) for r in pq.read_table(tmp_path / "bench").to_pylist()) == expected
    pl = pytest.importorskip("polars")
    got = pl.read_parquet(str(tmp_path / "bench" / "*.parquet")).sort("K")
    assert list(zip(got["K"], got["tokens_generated"], strict=True)) == expected
    duckdb = pytest.importorskip("duckdb")
    sql = f"SELECT K, tokens_generated FROM read_parquet('{tmp_path / 'bench'}/*.parquet') ORDER BY K"
    assert duckdb.connect().execute(sql).fetchall() == expected


def test_readers_see_no_temporary_file_while_a_part_is_written(tmp_path, monkeypatch):
    """The part is written beside the folder, then renamed into it: mid-write, the folder holds Parquet only."""
    store = SweepStore(tmp_path / "out")
    store.record_grid({"methods": ["sd"]})
    seen = []
    original = pq.write_table

    def spying(table, where, **kw):
        original(table, where, **kw)
        seen.append((Path(where).parent, sorted(p.name for p in (tmp_path / "out").iterdir() if p.name != LOCK_NAME)))

    monkeypatch.setattr(pq, "write_table", spying)
    row = dict.fromkeys(COLUMNS)
    row.update(instance_id="random:2,2,0,0", method="sd", K=1)
    assert store.write([row]) == 1
    ((where, names),) = seen
    assert where == tmp_path.resolve() and names == [PROVENANCE]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
