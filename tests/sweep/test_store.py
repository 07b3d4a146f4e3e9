"""The sweep store: atomic parts, no key stored twice, readers deduplicate, resume keys, provenance (no Ray)."""

import errno
import json
import os
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from spectr_gbv.sweep import publish as publish_module  # noqa: E402
from spectr_gbv.sweep.schema import COLUMNS, KEY, arrow_schema  # noqa: E402
from spectr_gbv.sweep.store import (  # noqa: E402
    LAYOUT,
    LOCK_NAME,
    METADATA_KEY,
    PROVENANCE,
    SWEEP_JSON,
    FolderLockedError,
    SweepStore,
    non_parquet_entries,
    read_provenance,
    read_table,
)


def row(instance_id="random:2,2,0,0", method="sd", K=1, value="1/2"):
    out = dict.fromkeys(COLUMNS)
    out.update(instance_id=instance_id, family="random", method=method, K=K, expected_accepted=value, n=2, L=2)
    out["expected_accepted_float"] = float(eval(value))
    return out


def parts(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("part-"))


def test_write_skips_stored_keys_and_repeats(tmp_path):
    store = SweepStore(tmp_path / "out")
    assert store.existing_keys() == set()
    assert store.write([row(K=1), row(K=2), row(K=1, value="9/10")]) == 2  # the repeated key keeps the first
    assert store.write([row(K=2, value="3/4"), row(K=3)]) == 1
    assert store.write([row(K=3)]) == 0  # nothing new: no file
    assert len(parts(tmp_path / "out")) == 2
    assert store.existing_keys() == {("random:2,2,0,0", "sd", k) for k in (1, 2, 3)}
    table = read_table(tmp_path / "out")
    assert table.schema == arrow_schema()
    got = sorted(zip(table["K"].to_pylist(), table["expected_accepted"].to_pylist(), strict=True))
    assert got == [(1, "1/2"), (2, "1/2"), (3, "1/2")]


def test_resume_reads_the_keys_back(tmp_path):
    SweepStore(tmp_path).write([row(method=m, K=k) for m in ("sd", "mdbv") for k in (1, 2)])
    again = SweepStore(tmp_path)  # a new process: keys read from the parts' KEY columns
    assert again.existing_keys() == {("random:2,2,0,0", m, k) for m in ("sd", "mdbv") for k in (1, 2)}
    assert again.write([row(method="sd", K=1), row(method="bv", K=1)]) == 1
    assert read_table(tmp_path).num_rows == 5


def test_reader_deduplicates_by_key_first_part_wins(tmp_path):
    # a folder two writers of an earlier version (no lock) shared: both stored K=1
    SweepStore(tmp_path).write([row(K=1, value="1/3")])
    older = tmp_path / parts(tmp_path)[0]
    os.utime(older, ns=(1, 1))
    plain = pa.Table.from_pylist([row(K=1, value="2/3"), row(K=2)], schema=arrow_schema())
    pq.write_table(plain, tmp_path / "part-b.parquet")
    assert len(parts(tmp_path)) == 2
    table = read_table(tmp_path)
    keys = list(zip(*(table[c].to_pylist() for c in KEY), strict=True))
    assert sorted(keys) == [("random:2,2,0,0", "sd", 1), ("random:2,2,0,0", "sd", 2)]
    assert dict(zip(table["K"].to_pylist(), table["expected_accepted"].to_pylist(), strict=True))[1] == "1/3"


def test_a_second_writer_is_refused_and_no_key_is_stored_twice(tmp_path):
    first, second = SweepStore(tmp_path), SweepStore(tmp_path)
    assert first.existing_keys() == second.existing_keys() == set()  # both read the folder before writing
    with first.locked():  # a running sweep holds the lock
        assert first.write([row(K=1, value="1/3")]) == 1
        with pytest.raises(FolderLockedError) as info:
            second.record_grid({"methods": ["sd"]})
        assert str(info.value) == (
            f"out: another sweep is writing into {str(tmp_path)!r} (it holds the lock "
            f"{str(tmp_path / LOCK_NAME)!r}); wait for it to end, or write into another folder"
        )
        with pytest.raises(FolderLockedError):
            second.write([row(K=1, value="2/3")])
    # the lock released: the second writer reads the keys again before writing (its view was stale)
    assert second.write([row(K=1, value="2/3"), row(K=2)]) == 1
    assert len(parts(tmp_path)) == 2
    assert sorted(pq.read_table(tmp_path).to_pydict()["K"]) == [1, 2]  # a plain reader: each key once
    assert read_table(tmp_path).to_pydict()["expected_accepted"] == ["1/3", "1/2"]


def test_parts_are_whole_or_absent(tmp_path, monkeypatch):
    out = tmp_path / "out"
    store = SweepStore(out)
    store.write([row(K=1)])

    def broken(table, where, **kw):
        with open(where, "wb") as fh:
            fh.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        store.write([row(K=2)])
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME, *parts(out)]  # no temp left in the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nor beside it, where it was written
    assert len(parts(out)) == 1
    assert SweepStore(out).existing_keys() == {("random:2,2,0,0", "sd", 1)}
    assert store.write([row(K=2)]) == 1  # the failed key was not marked as stored


def test_rows_must_match_the_schema(tmp_path):
    bad = row()
    del bad["error"]
    with pytest.raises(ValueError, match=r"row: keys differ from schema.COLUMNS \(missing \['error'\], unknown \[\]\)"):
        SweepStore(tmp_path).write([bad])


def test_record_grid_and_empty_reads(tmp_path):
    store = SweepStore(tmp_path / "s")
    assert read_table(tmp_path / "s").num_rows == 0
    assert read_provenance(tmp_path / "s") is None
    store.record_grid({"methods": ["sd"]})
    store.record_grid({"methods": ["sd"]})
    store.record_grid({"methods": ["bv"]})
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [LOCK_NAME, PROVENANCE]  # no sweep.json
    inode = (tmp_path / "s" / PROVENANCE).stat().st_ino
    store.record_grid({"methods": ["sd"]})
    assert (tmp_path / "s" / PROVENANCE).stat().st_ino == inode  # recorded already: not rewritten
    data = read_provenance(tmp_path / "s")
    assert data["grids"] == [{"methods": ["sd"]}, {"methods": ["bv"]}]
    assert data["columns"] == list(COLUMNS) and data["key"] == list(KEY) and data["package_version"] == "0.1.0"
    assert data["layout"] == LAYOUT == 2
    meta = pq.read_schema(tmp_path / "s" / PROVENANCE).metadata
    assert json.loads(meta[METADATA_KEY.encode()]) == data
    assert read_table(tmp_path / "s").num_rows == 0  # the provenance file holds no rows
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        SweepStore(tmp_path / "file")
    with pytest.raises(ValueError, match="sweep: no such directory"):
        read_table(tmp_path / "none")
    with pytest.raises(ValueError, match="sweep: no such directory"):
        read_provenance(tmp_path / "none")


def test_a_folder_keeps_one_key(tmp_path):
    SweepStore(tmp_path).record_grid({"methods": ["sd"]})
    other = SweepStore(tmp_path, key=("instance_id", "method"))
    with pytest.raises(ValueError, match=r"_sweep.parquet' holds a sweep keyed by \['instance_id', 'method', 'K'\]"):
        other.record_grid({"methods": ["bv"]})
    assert read_provenance(tmp_path)["grids"] == [{"methods": ["sd"]}]  # nothing written
    (tmp_path / PROVENANCE).write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="is not a sweep provenance file"):
        SweepStore(tmp_path).record_grid({"methods": ["sd"]})
    pq.write_table(arrow_schema().empty_table(), tmp_path / PROVENANCE)  # Parquet, without the metadata
    with pytest.raises(ValueError, match="is not a sweep provenance file"):
        read_provenance(tmp_path)


def test_a_layout_1_folder_is_converted_on_the_next_record(tmp_path):
    SweepStore(tmp_path).write([row(K=1), row(K=2)])
    layout1 = {"columns": list(COLUMNS), "key": list(KEY), "grids": [{"methods": ["sd"]}], "package_version": "0"}
    (tmp_path / SWEEP_JSON).write_text(json.dumps(layout1))
    assert read_provenance(tmp_path) == {**layout1, "layout": 1}
    assert non_parquet_entries(tmp_path) == [SWEEP_JSON]
    assert read_table(tmp_path).num_rows == 2  # the package reads the old layout
    with pytest.raises(ValueError, match=r"sweep.json' holds a sweep keyed by"):
        SweepStore(tmp_path, key=("instance_id", "K")).record_grid({"methods": ["sd"]})
    assert (tmp_path / SWEEP_JSON).exists() and not (tmp_path / PROVENANCE).exists()  # refused: untouched
    SweepStore(tmp_path).record_grid({"methods": ["bv"]})
    assert not (tmp_path / SWEEP_JSON).exists() and non_parquet_entries(tmp_path) == []
    data = read_provenance(tmp_path)
    assert data["layout"] == 2 and data["grids"] == [{"methods": ["sd"]}, {"methods": ["bv"]}]
    assert data["package_version"] == "0.1.0"
    assert pq.read_table(tmp_path).num_rows == 2  # pyarrow reads the folder now
    # both files (a conversion cut short): the layout-2 record, plus the old grids it lacks
    (tmp_path / SWEEP_JSON).write_text(json.dumps({**layout1, "grids": [{"methods": ["sd"]}, {"methods": ["ar"]}]}))
    assert read_provenance(tmp_path)["grids"] == [{"methods": ["sd"]}, {"methods": ["bv"]}, {"methods": ["ar"]}]
    (tmp_path / SWEEP_JSON).write_text("[]")
    with pytest.raises(ValueError, match="is not a sweep provenance file"):
        read_provenance(tmp_path)


def test_non_parquet_entries(tmp_path):
    assert non_parquet_entries(tmp_path / "none") == []
    SweepStore(tmp_path).write([row()])
    (tmp_path / "summary.md").write_text("#")
    (tmp_path / "sub.parquet").mkdir()
    (tmp_path / ".hidden").write_text("")
    assert non_parquet_entries(tmp_path) == [".hidden", "sub.parquet", "summary.md"]


def test_temporary_files_fall_back_to_the_folder(tmp_path, monkeypatch):
    """A parent that cannot take the temporary file (not writable, another file system): a hidden name inside."""
    where = []
    original = pq.write_table

    def spying(table, path, **kw):
        where.append(Path(path))
        original(table, path, **kw)

    monkeypatch.setattr(pq, "write_table", spying)
    out = tmp_path / "out"
    store = SweepStore(out)
    monkeypatch.setattr(publish_module.os, "access", lambda *a, **k: False)  # a read-only parent
    assert store.write([row(K=1)]) == 1
    assert where[-1].parent == out.resolve() and where[-1].name.startswith(".part-") and where[-1].suffix == ".tmp"
    monkeypatch.undo()
    monkeypatch.setattr(pq, "write_table", spying)
    replace = publish_module.os.replace
    calls = []

    def cross_device(src, dst):
        calls.append(Path(src).parent)
        if len(calls) == 1:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        replace(src, dst)

    monkeypatch.setattr(publish_module.os, "replace", cross_device)
    assert store.write([row(K=2)]) == 1
    assert calls == [tmp_path.resolve(), out.resolve()]  # the parent first, then the folder itself
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME, *parts(out)]
    assert read_table(out)["K"].to_pylist() == [1, 2]
