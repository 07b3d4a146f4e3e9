"""The sweep store: parts written atomically, no key stored twice, readers deduplicate, resume keys (no Ray)."""

import json
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from spectr_gbv.sweep.schema import COLUMNS, KEY, arrow_schema  # noqa: E402
from spectr_gbv.sweep.store import SweepStore, read_table  # noqa: E402


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
    # two writers that did not see each other: both store K=1
    first, second = SweepStore(tmp_path), SweepStore(tmp_path)
    assert first.existing_keys() == second.existing_keys() == set()
    first.write([row(K=1, value="1/3")])
    older = tmp_path / parts(tmp_path)[0]
    os.utime(older, ns=(1, 1))
    second.write([row(K=1, value="2/3"), row(K=2)])
    assert len(parts(tmp_path)) == 2
    table = read_table(tmp_path)
    keys = list(zip(*(table[c].to_pylist() for c in KEY), strict=True))
    assert sorted(keys) == [("random:2,2,0,0", "sd", 1), ("random:2,2,0,0", "sd", 2)]
    assert dict(zip(table["K"].to_pylist(), table["expected_accepted"].to_pylist(), strict=True))[1] == "1/3"


def test_parts_are_whole_or_absent(tmp_path, monkeypatch):
    store = SweepStore(tmp_path)
    store.write([row(K=1)])

    def broken(table, where, **kw):
        with open(where, "wb") as fh:
            fh.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        store.write([row(K=2)])
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "sweep.json") == parts(tmp_path)  # no temp left
    assert len(parts(tmp_path)) == 1
    assert SweepStore(tmp_path).existing_keys() == {("random:2,2,0,0", "sd", 1)}
    assert store.write([row(K=2)]) == 1  # the failed key was not marked as stored


def test_rows_must_match_the_schema(tmp_path):
    bad = row()
    del bad["error"]
    with pytest.raises(ValueError, match=r"row: keys differ from schema.COLUMNS \(missing \['error'\], unknown \[\]\)"):
        SweepStore(tmp_path).write([bad])


def test_record_grid_and_empty_reads(tmp_path):
    store = SweepStore(tmp_path / "s")
    assert read_table(tmp_path / "s").num_rows == 0
    store.record_grid({"methods": ["sd"]})
    store.record_grid({"methods": ["sd"]})
    store.record_grid({"methods": ["bv"]})
    data = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert data["grids"] == [{"methods": ["sd"]}, {"methods": ["bv"]}]
    assert data["columns"] == list(COLUMNS) and data["key"] == list(KEY) and data["package_version"] == "0.1.0"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        SweepStore(tmp_path / "file")
    with pytest.raises(ValueError, match="sweep: no such directory"):
        read_table(tmp_path / "none")
