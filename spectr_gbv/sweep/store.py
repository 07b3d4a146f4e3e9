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

Each file is written under a temporary name outside the folder (in its parent, when that is
writable and on the same file system; else a hidden ``.tmp`` name inside it), then renamed
into it (``os.replace``), so a reader or a resumed run sees whole files only, whatever happened to
the writer. :class:`SweepStore` writes only rows whose :data:`~spectr_gbv.sweep.schema.KEY` is not
stored yet; :func:`read_table` drops any duplicate key (first part by modification time wins)
should two writers ever have shared a folder. Each part also records the key and the package
version in its own key-value metadata. Needs pyarrow (the ``sweep`` extra).

Another table (e.g. the bench sweep's, :mod:`spectr_gbv.sweep.bench`) goes through the same
writer with the optional ``schema`` and ``key`` arguments of :class:`SweepStore` and
:func:`read_table`; the default is the exact sweep's table. A folder keeps one key: a store
whose key differs from the one recorded in its provenance refuses to write there.

Folders written by earlier versions (layout 1) kept the provenance in ``sweep.json`` beside the
parts, which broke every reader of the folder but :func:`read_table`. :func:`read_table` and
:func:`read_provenance` still read them; the next :meth:`SweepStore.record_grid` (the next
``spectr-gbv sweep`` into the folder) moves ``sweep.json``'s grids into ``_sweep.parquet`` and
deletes ``sweep.json``.
"""

from __future__ import annotations

import errno
import json
import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from spectr_gbv.sweep.schema import COLUMNS, KEY, arrow_schema

#: Name of the provenance file in the folder (a zero-row Parquet file; pyarrow and pandas skip ``_`` names).
PROVENANCE = "_sweep.parquet"
#: Key of the provenance JSON in the Parquet key-value metadata (of :data:`PROVENANCE` and of each part).
METADATA_KEY = "spectr_gbv.sweep"
#: The folder layout this version writes (1: ``sweep.json`` beside the parts; 2: :data:`PROVENANCE`).
LAYOUT = 2
#: Name of the provenance file of layout 1 (read and converted, never written).
SWEEP_JSON = "sweep.json"
#: Glob of the part files.
PART_GLOB = "part-*.parquet"

_Key = tuple[Any, ...]
#: errno values of a staging folder that cannot take the temporary file: fall back to the folder itself.
_STAGING_ERRORS = frozenset({errno.EXDEV, errno.EACCES, errno.EPERM, errno.EROFS})


def _parts(directory: Path) -> list[Path]:
    """Part files in write order (modification time, then name)."""
    files = list(directory.glob(PART_GLOB))
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _row_key(row: dict[str, Any], key: tuple[str, ...] = KEY) -> _Key:
    return tuple(row[c] for c in key)


def _staging(directory: Path) -> list[Path]:
    """Where a temporary file may be written before its rename into ``directory``, best first.

    The parent folder when it is writable and on the same file system (readers of ``directory``
    then never see a temporary file), then ``directory`` itself (a hidden ``.tmp`` name).
    """
    here = directory.resolve()
    parent = here.parent
    try:
        same_fs = parent != here and parent.stat().st_dev == here.stat().st_dev
    except OSError:
        same_fs = False
    if same_fs and os.access(parent, os.W_OK | os.X_OK):
        return [parent, here]
    return [here]


def _publish(directory: Path, name: str, write: Callable[[Path], None]) -> Path:
    """``write(tmp)`` a file under a temporary name (see :func:`_staging`), fsync it, rename it to ``directory/name``.

    A failure leaves no temporary file behind and nothing at ``directory/name`` (an existing file
    there is kept whole).
    """
    token = uuid.uuid4().hex
    stages = _staging(directory)
    for i, stage in enumerate(stages):
        prefix = "." if stage == stages[-1] else f".{stages[-1].name}."  # beside the folder: name it after it
        tmp = stage / f"{prefix}{name}.{token}.tmp"
        try:
            write(tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, directory / name)
            return directory / name
        except OSError as exc:
            if exc.errno in _STAGING_ERRORS and i + 1 < len(stages):
                continue
            raise
        finally:
            tmp.unlink(missing_ok=True)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


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


def non_parquet_entries(directory: str | Path) -> list[str]:
    """Names in a sweep folder that are not Parquet files: the entries that break its readers.

    pyarrow, pandas, polars and DuckDB read a sweep folder as one dataset only when it holds
    Parquet files alone (see the module docstring): a layout-1 ``sweep.json``, summaries written
    into the folder by earlier versions of ``sweep summarize``, or any other file or subfolder is
    reported here. :func:`read_table` reads the parts only and is not affected.

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
    return sorted(p.name for p in where.iterdir() if not (p.suffix == ".parquet" and p.is_file()))


class SweepStore:
    """Writer of one sweep folder: append-only parts, never two rows with the same key.

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
        self.directory.mkdir(parents=True, exist_ok=True)
        self._keys: set[_Key] | None = None

    def _schema(self) -> Any:
        return arrow_schema() if self.schema is None else self.schema

    def existing_keys(self) -> set[_Key]:
        """Keys already stored, tuples of the :attr:`key` columns (default ``(instance_id, method, K)``).

        Read once, then kept up to date.

        Returns
        -------
        set of tuple
            A copy; the store's own set is updated by :meth:`write`.
        """
        if self._keys is None:
            import pyarrow.parquet as pq

            keys: set[_Key] = set()
            for part in _parts(self.directory):
                columns = pq.read_table(part, columns=list(self.key)).to_pydict()
                keys.update(zip(*(columns[c] for c in self.key), strict=True))
            self._keys = keys
        return set(self._keys)

    def write(self, rows: Iterable[dict[str, Any]]) -> int:
        """Store the rows whose key is new, as one new part file.

        The part's key-value metadata :data:`METADATA_KEY` records ``{"layout", "key",
        "package_version"}``.

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
        """
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
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), METADATA_KEY: json.dumps(record)})
        _publish(self.directory, f"part-{uuid.uuid4().hex}.parquet", lambda tmp: pq.write_table(table, tmp))
        self._keys.update(new_keys)
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
        """
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
        _publish(self.directory, PROVENANCE, lambda tmp: pq.write_table(empty, tmp))
        legacy.unlink(missing_ok=True)


def read_table(directory: str | Path, *, schema: Any = None, key: tuple[str, ...] | None = None) -> Any:
    """Every stored row of a sweep folder as one ``pyarrow.Table``, one row per key.

    Reads the ``part-*.parquet`` files only, so it also reads a folder of an earlier layout, or
    one that holds other files.

    Parameters
    ----------
    directory : str or Path
        A sweep folder.
    schema : pyarrow.Schema, optional
        The table's schema (default :func:`~spectr_gbv.sweep.schema.arrow_schema`).
    key : tuple of str, optional
        The columns that identify a row (default :data:`~spectr_gbv.sweep.schema.KEY`).

    Returns
    -------
    pyarrow.Table
        Schema ``schema`` (default :func:`~spectr_gbv.sweep.schema.arrow_schema`, without the
        parts' key-value metadata); a key stored twice keeps its first row (parts in
        modification-time order). Empty (zero rows) for a folder without parts.

    Raises
    ------
    ValueError
        ``directory`` is not a folder.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    where = Path(directory)
    if not where.is_dir():
        raise ValueError(f"sweep: no such directory {str(directory)!r}")
    schema = arrow_schema() if schema is None else schema
    names = tuple(KEY if key is None else key)
    tables = [pq.read_table(part, schema=schema) for part in _parts(where)]
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables(tables)
    columns = table.select(list(names)).to_pydict()
    seen: set[_Key] = set()
    keep = []
    for i, row_key in enumerate(zip(*(columns[c] for c in names), strict=True)):
        if row_key not in seen:
            seen.add(row_key)
            keep.append(i)
    return table if len(keep) == table.num_rows else table.take(pa.array(keep, type=pa.int64()))


__all__ = [
    "LAYOUT",
    "METADATA_KEY",
    "PART_GLOB",
    "PROVENANCE",
    "SWEEP_JSON",
    "SweepStore",
    "non_parquet_entries",
    "read_provenance",
    "read_table",
]
