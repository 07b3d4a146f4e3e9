"""The sweep's Parquet dataset: a folder of part files, written atomically and deduplicated by key.

Layout of a sweep folder::

    OUT/
      sweep.json                 # provenance: package version, columns, key, every grid run into it
      part-<uuid>.parquet        # one per finished task (schema: spectr_gbv.sweep.schema.arrow_schema)

Each part is written under a hidden temporary name, then renamed (``os.replace``), so a reader
or a resumed run sees whole parts only, whatever happened to the writer. :class:`SweepStore`
writes only rows whose :data:`~spectr_gbv.sweep.schema.KEY` is not stored yet; readers go
through :func:`read_table`, which drops any duplicate key (first part by modification time
wins) should two writers ever have shared a folder. Needs pyarrow (the ``sweep`` extra).

Another table (e.g. the bench sweep's, :mod:`spectr_gbv.sweep.bench`) goes through the same
writer with the optional ``schema`` and ``key`` arguments of :class:`SweepStore` and
:func:`read_table`; the default is the exact sweep's table. A folder keeps one key: a store
whose key differs from the one recorded in ``sweep.json`` refuses to write there.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spectr_gbv.sweep.schema import COLUMNS, KEY, arrow_schema

#: Name of the provenance file beside the parts.
SWEEP_JSON = "sweep.json"
#: Glob of the part files (temporary files start with a dot and never match).
PART_GLOB = "part-*.parquet"

_Key = tuple[Any, ...]


def _parts(directory: Path) -> list[Path]:
    """Part files in write order (modification time, then name)."""
    files = list(directory.glob(PART_GLOB))
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _row_key(row: dict[str, Any], key: tuple[str, ...] = KEY) -> _Key:
    return tuple(row[c] for c in key)


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
        table = pa.Table.from_pylist(fresh, schema=arrow_schema() if self.schema is None else self.schema)
        name = f"part-{uuid.uuid4().hex}.parquet"
        tmp = self.directory / f".{name}.tmp"
        try:
            pq.write_table(table, tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, self.directory / name)
        finally:
            tmp.unlink(missing_ok=True)
        self._keys.update(new_keys)
        return len(fresh)

    def record_grid(self, grid: dict[str, Any]) -> None:
        """Add ``grid`` (:meth:`~spectr_gbv.sweep.grid.SweepGrid.to_dict`) to ``sweep.json`` unless already there.

        Raises
        ------
        ValueError
            An existing ``sweep.json`` that is not a sweep's provenance file, or that records another key.
        """
        import spectr_gbv

        path = self.directory / SWEEP_JSON
        if path.exists():
            try:
                data = json.loads(path.read_text())
                grids = data["grids"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"out: {str(path)!r} is not a sweep provenance file") from exc
            if data.get("key", list(self.key)) != list(self.key):
                raise ValueError(f"out: {str(path)!r} holds a sweep keyed by {data['key']}, not {list(self.key)}")
        else:
            data = {"columns": list(self.columns), "key": list(self.key), "grids": []}
            grids = data["grids"]
        data["package_version"] = spectr_gbv.__version__
        if grid not in grids:
            grids.append(grid)
        tmp = self.directory / f".{SWEEP_JSON}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)


def read_table(directory: str | Path, *, schema: Any = None, key: tuple[str, ...] | None = None) -> Any:
    """Every stored row of a sweep folder as one ``pyarrow.Table``, one row per key.

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
        Schema ``schema`` (default :func:`~spectr_gbv.sweep.schema.arrow_schema`); a key stored twice keeps its
        first row (parts in modification-time order). Empty (zero rows) for a folder without parts.

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


__all__ = ["PART_GLOB", "SWEEP_JSON", "SweepStore", "read_table"]
