"""The sweep's Parquet dataset: a folder of Parquet files only, written atomically and deduplicated by key.

Layout of a sweep folder (``--out``), every file in it a Parquet file, so that pandas, pyarrow,
polars and DuckDB read the folder itself as the dataset::

    OUT/
      part-<uuid>.parquet        # one per finished task (schema: spectr_gbv.sweep.schema.arrow_schema)
      _sweep.parquet             # provenance: zero rows, the same schema; key-value metadata
                                 # "spectr_gbv.sweep" = JSON {layout, package_version, columns, key, grids}

What the readers do with the bare folder (checked by ``tests/sweep/test_readers.py``):
pyarrow (``pyarrow.parquet.read_table``, ``pyarrow.dataset.dataset``) and pandas skip names that
start with ``_`` or ``.``, so they never open ``_sweep.parquet``; polars (``read_parquet`` /
``scan_parquet`` of a folder) and DuckDB (``read_parquet('OUT')``, ``'OUT/*.parquet'``) skip
nothing, and read it as a file of zero rows with the table's schema, so every reader gets the
same rows. Any other file in the folder (a JSON file, a summary, an editor's backup) makes
polars fail and, unless its name starts with ``_`` or ``.``, pyarrow and pandas too:
:func:`non_parquet_entries` lists them.

Each file is written under a temporary name and renamed into the folder
(:func:`spectr_gbv.sweep.publish.publish`), so a reader or a resumed run sees whole files only,
whatever happened to the writer; a write that fails raises
:class:`~spectr_gbv.sweep.publish.SweepWriteError`, one line naming the folder. One writer at a
time: :class:`SweepStore` takes the folder's lock (:data:`LOCK_NAME`, hidden, so every reader
skips it) without waiting, and writes only rows whose :data:`~spectr_gbv.sweep.schema.KEY` is not
stored yet, reading the stored keys again under the lock. :func:`read_table` drops any duplicate
key (first part by modification time wins) of a folder that two writers of an earlier version,
which had no lock, shared. Each part also records the key, the package version and the SHA-256
of its rows in its own key-value metadata; every part read is checked
(:mod:`spectr_gbv.sweep.parts`: a damaged, foreign or corrupt part raises
:class:`~spectr_gbv.sweep.parts.PartError` naming it). Needs pyarrow and filelock (the ``sweep``
extra).

Another table (an application's, described by a :class:`~spectr_gbv.sweep.schema.TableKind`) goes
through the same writer with the optional ``schema`` and ``key`` arguments of :class:`SweepStore` and
:func:`read_table`; the default is the exact sweep's table. A folder keeps one key: a store
whose key differs from the one recorded in its provenance refuses to write there.

Folders written by earlier versions (layout 1) kept the provenance in ``sweep.json`` beside the
parts, which broke every reader of the folder but :func:`read_table`. :func:`read_table` and
:func:`read_provenance` still read them; the next :meth:`SweepStore.record_grid` (the next
``spectr-gbv sweep`` into the folder) moves ``sweep.json``'s grids into ``_sweep.parquet`` and
deletes ``sweep.json``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from spectr_gbv.sweep.parts import (
    HASH_FIELD,
    METADATA_KEY,
    PART_GLOB,
    PartsReport,
    check_parts,
    content_hash,
    part_files,
    read_part,
    read_table,
)
from spectr_gbv.sweep.publish import SweepWriteError, publish, write_error
from spectr_gbv.sweep.schema import COLUMNS, KEY, TableKind, arrow_schema

#: Name of the provenance file in the folder (a zero-row Parquet file; pyarrow and pandas skip ``_`` names).
PROVENANCE = "_sweep.parquet"
#: The folder layout this version writes (1: ``sweep.json`` beside the parts; 2: :data:`PROVENANCE`).
LAYOUT = 2
#: Name of the provenance file of layout 1 (read and converted, never written).
SWEEP_JSON = "sweep.json"
#: Name of the writers' lock file in the folder (hidden: pyarrow, pandas, polars and DuckDB skip it).
LOCK_NAME = ".sweep.lock"

_Key = tuple[Any, ...]


class FolderLockedError(ValueError):
    """Another writer (a second ``spectr-gbv sweep``) holds the folder's lock; the message names both."""


def _row_key(row: dict[str, Any], key: tuple[str, ...] = KEY) -> _Key:
    return tuple(row[c] for c in key)


def _load_provenance(path: Path, load: Callable[[], Any]) -> dict[str, Any]:
    """``load()``, checked to be a provenance record (a dict with a list of grids); ValueError otherwise."""
    try:
        data = load()
        if not isinstance(data, dict) or not isinstance(data["grids"], list):
            raise TypeError("grids")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"out: {str(path)!r} is not a sweep provenance file") from exc
    return data


def _read_layout2(path: Path) -> dict[str, Any]:
    """The provenance JSON of a :data:`PROVENANCE` file; ValueError when it is not one."""
    import pyarrow.parquet as pq

    return _load_provenance(path, lambda: json.loads((pq.read_schema(path).metadata or {})[METADATA_KEY.encode()]))


def _read_layout1(path: Path) -> dict[str, Any]:
    """The provenance of a layout-1 ``sweep.json``; ValueError when it is not one."""
    return {**_load_provenance(path, lambda: json.loads(path.read_text())), "layout": 1}


def read_provenance(directory: str | Path) -> dict[str, Any] | None:
    """The provenance of a sweep folder: package version, columns, key and every grid run into it.

    Parameters
    ----------
    directory : str or Path
        A sweep folder (layout 2, :data:`PROVENANCE`; or layout 1, ``sweep.json``).

    Returns
    -------
    dict or None
        ``{"layout": 2, "package_version": str, "columns": [str], "key": [str], "grids": [dict]}``
        (``"layout": 1`` for a folder of an earlier version; when both files are there, the
        layout-2 record with the layout-1 grids it lacks appended); None when the folder has
        neither file (e.g. a folder of parts written by hand).

    Raises
    ------
    ValueError
        ``directory`` is not a folder, or a provenance file there is not a sweep's.
    ImportError
        pyarrow is not installed.

    Examples
    --------
    >>> read_provenance("runs/field")["grids"]  # doctest: +SKIP
    [{'methods': ['mdbv', 'gbv_multipath'], 'K': [2, 3, 4], ...}]
    """
    where = Path(directory)
    if not where.is_dir():
        raise ValueError(f"sweep: no such directory {str(directory)!r}")
    new = _read_layout2(where / PROVENANCE) if (where / PROVENANCE).exists() else None
    old = _read_layout1(where / SWEEP_JSON) if (where / SWEEP_JSON).exists() else None
    if new is None or old is None:
        return new or old
    return {**new, "grids": new["grids"] + [g for g in old["grids"] if g not in new["grids"]]}


def verify_folder(directory: str | Path, kinds: Sequence[TableKind] = ()) -> PartsReport:
    """Every part of a sweep folder checked against the schema and key its provenance names (``sweep verify``).

    :func:`~spectr_gbv.sweep.parts.check_parts` does the check.

    A folder whose recorded key is that of one of ``kinds`` is checked against that kind's schema
    and key; any other folder (or one without provenance) against the exact sweep's
    :func:`~spectr_gbv.sweep.schema.arrow_schema`.

    Parameters
    ----------
    directory : str or Path
        A sweep folder.
    kinds : sequence of TableKind
        The other tables the caller knows (``spectr-gbv sweep verify`` passes the real-model bench
        sweep's); default none.

    Returns
    -------
    PartsReport

    Raises
    ------
    ValueError
        ``directory`` is not a folder, or its provenance file is not a sweep's.
    """
    record = read_provenance(directory)
    if record is not None:
        for kind in kinds:
            if record.get("key") == list(kind.key):
                return check_parts(directory, schema=kind.schema(), key=kind.key)
    return check_parts(directory)


def non_parquet_entries(directory: str | Path) -> list[str]:
    """Names in a sweep folder that are not Parquet files: the entries that break its readers.

    pyarrow, pandas, polars and DuckDB read a sweep folder as one dataset only when it holds
    Parquet files alone (see the module docstring): a layout-1 ``sweep.json``, summaries written
    into the folder by earlier versions of ``sweep summarize``, or any other file or subfolder is
    reported here (not the writers' lock :data:`LOCK_NAME`, which every reader skips).
    :func:`read_table` reads the parts only and is not affected.

    Parameters
    ----------
    directory : str or Path
        A sweep folder.

    Returns
    -------
    list of str
        Sorted names (empty for a clean folder, or when ``directory`` does not exist).
    """
    where = Path(directory)
    if not where.is_dir():
        return []
    return sorted(
        p.name for p in where.iterdir() if not (p.suffix == ".parquet" and p.is_file()) and p.name != LOCK_NAME
    )


class SweepStore:
    """Writer of one sweep folder: append-only parts, never two rows with the same key, one writer at a time.

    Writers take the folder's lock (:data:`LOCK_NAME`, a ``filelock.FileLock``; :meth:`locked`)
    without waiting: a second writer is refused at once with :class:`FolderLockedError`. The
    runner holds it for a whole sweep; :meth:`write` and :meth:`record_grid` take it for their own
    call when not held, and then read the stored keys again, so no key is ever stored twice.

    Parameters
    ----------
    directory : str or Path
        The sweep folder (created with its parents when missing).
    schema : pyarrow.Schema, optional
        The table's schema (default :func:`~spectr_gbv.sweep.schema.arrow_schema`, the exact sweep's).
    key : tuple of str, optional
        The columns that identify a row (default :data:`~spectr_gbv.sweep.schema.KEY`); all in ``schema``.

    Raises
    ------
    ValueError
        ``directory`` exists and is not a folder, or a ``key`` column is not in ``schema``.
    SweepWriteError
        ``directory`` is missing and cannot be created.
    """

    def __init__(self, directory: str | Path, *, schema: Any = None, key: tuple[str, ...] | None = None) -> None:
        self.directory = Path(directory)
        self.schema = schema
        self.columns: tuple[str, ...] = tuple(COLUMNS) if schema is None else tuple(schema.names)
        self.key: tuple[str, ...] = tuple(KEY if key is None else key)
        if not self.key or not set(self.key) <= set(self.columns):
            raise ValueError(f"key: columns {list(self.key)} are not all in the schema")
        if self.directory.exists() and not self.directory.is_dir():
            raise ValueError(f"out: {str(directory)!r} exists and is not a directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(self.directory.parent, f"the folder {self.directory.name!r}", exc) from exc
        self._keys: set[_Key] | None = None
        self._error_keys: set[_Key] = set()
        self._parts_read: set[str] = set()
        self._lock: Any = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[SweepStore]:
        """Hold the folder's writer lock (:data:`LOCK_NAME`) for the ``with`` block; re-entrant.

        The outermost entry reads the stored keys again (:meth:`existing_keys`) under the lock.

        Yields
        ------
        SweepStore
            This store.

        Raises
        ------
        FolderLockedError
            Another writer (another process, or another store of this process) holds the lock:
            one line naming the folder and the lock file. Nothing waits.
        SweepWriteError
            The lock file cannot be created (a read-only or immutable folder).

        References
        ----------
        ``filelock.FileLock`` (py-filelock): an ``flock`` lock on Unix, released by the kernel when
        the holding process dies, so a killed sweep leaves no stale lock (where the file system
        has no ``flock``, filelock falls back to a marker file).
        """
        import filelock

        path = self.directory / LOCK_NAME
        if self._lock is None:
            self._lock = filelock.FileLock(path, timeout=0, thread_local=False)
        outer = not self._lock.is_locked
        try:
            self._lock.acquire(timeout=0)
        except filelock.Timeout as exc:
            raise FolderLockedError(
                f"out: another sweep is writing into {str(self.directory)!r} (it holds the lock {str(path)!r}); "
                "wait for it to end, or write into another folder"
            ) from exc
        except OSError as exc:
            raise write_error(self.directory, f"the lock {LOCK_NAME!r}", exc) from exc
        try:
            if outer and self._keys is not None:
                self._read_keys()  # what another writer stored since: read under the lock
            yield self
        finally:
            self._lock.release()

    def _schema(self) -> Any:
        return arrow_schema() if self.schema is None else self.schema

    def existing_keys(self) -> set[_Key]:
        """Keys already stored, tuples of the :attr:`key` columns (default ``(instance_id, method, K)``).

        Read once (every part checked by :func:`~spectr_gbv.sweep.parts.read_part`), then kept up
        to date; the parts written by others are read when :meth:`locked` is entered.

        Returns
        -------
        set of tuple
            A copy; the store's own set is updated by :meth:`write`.

        Raises
        ------
        PartError
            A damaged, foreign or corrupt part (named): a resumed sweep refuses to skip its keys.
        """
        if self._keys is None:
            self._read_keys()
        assert self._keys is not None
        return set(self._keys)

    def _read_keys(self) -> None:
        """Read the keys of the parts not read yet (all of them again when a part read before is gone)."""
        files = part_files(self.directory)
        names = {p.name for p in files}
        if self._keys is None or not self._parts_read <= names:
            self._keys, self._error_keys, self._parts_read = set(), set(), set()
        schema = self._schema()
        for part in files:
            if part.name in self._parts_read:
                continue
            columns = read_part(part, schema).to_pydict()
            part_keys = list(zip(*(columns[c] for c in self.key), strict=True))
            self._keys.update(part_keys)
            if "error" in columns:
                self._error_keys.update(k for k, e in zip(part_keys, columns["error"], strict=True) if e is not None)
            self._parts_read.add(part.name)

    def error_keys(self) -> set[_Key]:
        """Keys stored with a non-null ``error`` column (empty for a table without one).

        Returns
        -------
        set of tuple
            A subset of :meth:`existing_keys` (read with it).
        """
        self.existing_keys()
        return set(self._error_keys)

    def write(self, rows: Iterable[dict[str, Any]]) -> int:
        """Store the rows whose key is new, as one new part file, under the folder's lock.

        The part's key-value metadata :data:`METADATA_KEY` records ``{"layout", "key",
        "package_version", "sha256"}``, the last the :func:`~spectr_gbv.sweep.parts.content_hash`
        of its rows, checked whenever the part is read.

        Parameters
        ----------
        rows : iterable of dict
            Rows with exactly the store's columns (default :data:`~spectr_gbv.sweep.schema.COLUMNS`).
            A key repeated within ``rows`` is kept once (the first).

        Returns
        -------
        int
            Rows written (0: no file was created).

        Raises
        ------
        ValueError
            A row whose keys are not exactly the schema's columns.
        FolderLockedError
            Another writer holds the folder's lock.
        SweepWriteError
            The part cannot be written (read-only folder, disk full): nothing is stored, the keys
            stay unstored.
        """
        with self.locked():
            return self._write(rows)

    def _write(self, rows: Iterable[dict[str, Any]]) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        import spectr_gbv

        stored = self._keys if self._keys is not None else self.existing_keys()
        assert self._keys is not None
        fresh: list[dict[str, Any]] = []
        new_keys: set[_Key] = set()
        for row in rows:
            if set(row) != set(self.columns):
                missing = sorted(set(self.columns) - set(row))
                extra = sorted(set(row) - set(self.columns))
                raise ValueError(f"row: keys differ from schema.COLUMNS (missing {missing}, unknown {extra})")
            key = _row_key(row, self.key)
            if key in stored or key in new_keys:
                continue
            new_keys.add(key)
            fresh.append(row)
        if not fresh:
            return 0
        table = pa.Table.from_pylist(fresh, schema=self._schema())
        record = {"layout": LAYOUT, "key": list(self.key), "package_version": spectr_gbv.__version__}
        record[HASH_FIELD] = content_hash(table)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), METADATA_KEY: json.dumps(record)})
        name = f"part-{uuid.uuid4().hex}.parquet"
        publish(self.directory, name, lambda tmp: pq.write_table(table, tmp))
        self._parts_read.add(name)
        self._keys.update(new_keys)
        if "error" in self.columns:
            self._error_keys.update(_row_key(r, self.key) for r in fresh if r["error"] is not None)
        return len(fresh)

    def record_grid(self, grid: dict[str, Any]) -> None:
        """Add ``grid`` (:meth:`~spectr_gbv.sweep.grid.SweepGrid.to_dict`) to the folder's provenance unless there.

        The provenance is :data:`PROVENANCE`, rewritten whole (atomically) with the package
        version of this call, unless it already records ``grid`` with this version. A layout-1
        ``sweep.json`` is converted: its grids go into :data:`PROVENANCE`, then it is deleted.

        Parameters
        ----------
        grid : dict
            JSON-ready description of the grid.

        Raises
        ------
        ValueError
            A provenance file there that is not a sweep's, or that records another key (nothing is written).
        FolderLockedError
            Another writer holds the folder's lock.
        SweepWriteError
            The provenance cannot be written (read-only folder, disk full).
        """
        with self.locked():
            self._record_grid(grid)

    def _record_grid(self, grid: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        import spectr_gbv

        data = read_provenance(self.directory)
        if data is not None and data.get("key", list(self.key)) != list(self.key):
            found = self.directory / (PROVENANCE if data["layout"] != 1 else SWEEP_JSON)
            raise ValueError(f"out: {str(found)!r} holds a sweep keyed by {data['key']}, not {list(self.key)}")
        if data is None:
            data = {"columns": list(self.columns), "key": list(self.key), "grids": []}
        grids = list(data["grids"])
        legacy = self.directory / SWEEP_JSON
        current = data.get("layout") == LAYOUT and data.get("package_version") == spectr_gbv.__version__
        if current and grid in grids and not legacy.exists():
            return  # already recorded by this version: nothing to rewrite
        if grid not in grids:
            grids.append(grid)
        record = {
            "layout": LAYOUT,
            "package_version": spectr_gbv.__version__,
            "columns": list(data.get("columns", self.columns)),
            "key": list(self.key),
            "grids": grids,
        }
        empty = self._schema().empty_table()
        empty = empty.replace_schema_metadata({**(empty.schema.metadata or {}), METADATA_KEY: json.dumps(record)})
        publish(self.directory, PROVENANCE, lambda tmp: pq.write_table(empty, tmp))
        legacy.unlink(missing_ok=True)


__all__ = [
    "LAYOUT",
    "LOCK_NAME",
    "METADATA_KEY",
    "PART_GLOB",
    "PROVENANCE",
    "SWEEP_JSON",
    "FolderLockedError",
    "SweepStore",
    "SweepWriteError",
    "non_parquet_entries",
    "read_provenance",
    "verify_folder",
    "read_table",
]
