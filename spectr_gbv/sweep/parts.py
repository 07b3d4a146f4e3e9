"""The sweep's part files read back and checked: schema, content hash, damaged files.

Every ``part-*.parquet`` file of a sweep folder (:mod:`spectr_gbv.sweep.store`) records, in its
Parquet key-value metadata :data:`METADATA_KEY`, the SHA-256 of its rows (:func:`content_hash`).
Parquet stores numbers in plain bytes, so one flipped byte in a data page reads back as another
number in every reader (pandas, pyarrow, polars, DuckDB); the hash is what catches it.
:func:`read_part` reads one part and refuses it, with a :class:`PartError` naming the file, when

* it is not a readable Parquet file (a damaged page header or footer, a truncated file);
* its columns or their types differ from the sweep's schema (a foreign ``part-*.parquet``,
  which pyarrow would otherwise read as a row of nulls);
* its rows do not hash to the recorded :data:`HASH_FIELD` (a flipped byte in a page).

Parts written before the hash existed carry none and are read unchecked. :func:`read_table`
(resume, ``sweep summarize``, an application's own readers) reads every part through
:func:`read_part`; :func:`check_parts` (``spectr-gbv sweep verify DIR``) reports every bad part
of a folder instead of stopping at the first. pandas, polars and DuckDB read the folder without
this check: run ``spectr-gbv sweep verify DIR`` (or :func:`check_parts`) to learn whether
they would read a damaged part. Needs pyarrow (the ``sweep`` extra).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectr_gbv.sweep.schema import KEY, arrow_schema

#: Key of the sweep's JSON record in the Parquet key-value metadata (of each part and of the provenance).
METADATA_KEY = "spectr_gbv.sweep"
#: Field of a part's record holding the SHA-256 (hex) of its rows (:func:`content_hash`).
HASH_FIELD = "sha256"
#: Glob of the part files.
PART_GLOB = "part-*.parquet"
#: What a user does about a bad part (the end of every :class:`PartError` message).
FIX_HINT = "move it out of the folder; a rerun of the sweep recomputes its rows"


class PartError(ValueError):
    """A part file that cannot be read as a part of this sweep; the message is one line naming the file.

    Parameters
    ----------
    path : Path
        The part file.
    problem : str
        What is wrong with it (one line, without the file name).

    Attributes
    ----------
    path : Path
    problem : str
    """

    def __init__(self, path: Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"part {str(path)!r}: {problem}; {FIX_HINT}")


def part_files(directory: str | Path) -> list[Path]:
    """The ``part-*.parquet`` files of a folder in write order (modification time, then name).

    Parameters
    ----------
    directory : str or Path
        A sweep folder.

    Returns
    -------
    list of Path
        Empty when the folder holds no part.
    """
    files = list(Path(directory).glob(PART_GLOB))
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def content_hash(table: Any) -> str:
    """SHA-256 (hex) of a table's column names and values, exactly as they read back.

    The payload is the compact JSON of ``[names, [column values, ...]]`` (Python values of each
    column in table order; floats as their shortest round-trip repr, so a changed bit of a
    float64 changes the hash; null as ``null``). The schema's key-value metadata is not hashed.

    Parameters
    ----------
    table : pyarrow.Table
        The rows of one part.

    Returns
    -------
    str
        64 hex digits.

    References
    ----------
    SHA-256: NIST FIPS 180-4, Secure Hash Standard (``hashlib.sha256``).

    Examples
    --------
    >>> import pyarrow as pa
    >>> content_hash(pa.table({"a": [1.0]})) == content_hash(pa.table({"a": [1.0]}))
    True
    >>> content_hash(pa.table({"a": [1.0]})) == content_hash(pa.table({"a": [1.0000000000000002]}))
    False
    """
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    payload = json.dumps([list(table.schema.names), columns], separators=(",", ":"), allow_nan=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _schema_problem(found: Any, schema: Any) -> str | None:
    """How ``found``'s columns differ from ``schema``'s (names and types; order ignored), or None."""
    want = {f.name: f.type for f in schema}
    have = {f.name: f.type for f in found}
    missing = sorted(set(want) - set(have))
    unknown = sorted(set(have) - set(want))
    retyped = sorted(f"{n}: {have[n]} (not {want[n]})" for n in set(want) & set(have) if have[n] != want[n])
    if not (missing or unknown or retyped):
        return None
    details = [f"{what} {names}" for what, names in (("missing", missing), ("unknown", unknown)) if names]
    details += [f"other types [{', '.join(retyped)}]"] if retyped else []
    return f"not a part of this sweep: its schema differs ({'; '.join(details)})"


def _read_checked(path: Path, schema: Any) -> tuple[Any, bool]:
    """:func:`read_part`'s table, and whether the part recorded a hash."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise PartError(path, f"damaged Parquet file, unreadable ({_one_line(exc)})") from exc
    problem = _schema_problem(table.schema, schema)
    if problem is not None:
        raise PartError(path, problem)
    raw = (table.schema.metadata or {}).get(METADATA_KEY.encode())
    try:
        record = json.loads(raw) if raw is not None else {}
        expected = record.get(HASH_FIELD) if isinstance(record, dict) else None
    except ValueError as exc:
        raise PartError(path, f"corrupt: its {METADATA_KEY!r} metadata is not JSON") from exc
    if expected is not None and content_hash(table.replace_schema_metadata(None)) != expected:
        raise PartError(path, f"corrupt: its rows do not match their recorded {HASH_FIELD} (a changed byte)")
    return table.select(schema.names).cast(schema), expected is not None


def read_part(path: str | Path, schema: Any = None) -> Any:
    """One part file, checked: readable Parquet, the sweep's schema, rows matching their hash.

    Parameters
    ----------
    path : str or Path
        A ``part-*.parquet`` file.
    schema : pyarrow.Schema, optional
        The sweep's schema (default :func:`~spectr_gbv.sweep.schema.arrow_schema`).

    Returns
    -------
    pyarrow.Table
        The part's rows with exactly ``schema`` (columns in its order, no key-value metadata).

    Raises
    ------
    PartError
        The file is not readable Parquet (damaged or truncated), its columns differ from
        ``schema`` (names or types), its sweep record is not JSON, or its rows do not hash to the
        recorded :data:`HASH_FIELD`. One line: ``part 'PATH': PROBLEM; move it out of the folder...``.
    """
    return _read_checked(Path(path), arrow_schema() if schema is None else schema)[0]


@dataclass(frozen=True)
class PartsReport:
    """What :func:`check_parts` found in a sweep folder.

    Attributes
    ----------
    parts : int
        Part files read.
    rows : int
        Rows of the good parts (duplicate keys included).
    unhashed : int
        Good parts without a recorded hash (written by an earlier version; read unchecked).
    duplicates : int
        Rows of the good parts whose key an earlier part already stored (readers that do not
        deduplicate, such as pandas, see them twice).
    bad : tuple of PartError
        One per bad part, in write order.
    """

    parts: int
    rows: int
    unhashed: int
    duplicates: int
    bad: tuple[PartError, ...]


def check_parts(directory: str | Path, *, schema: Any = None, key: tuple[str, ...] | None = None) -> PartsReport:
    """Read every part of a sweep folder through :func:`read_part`, collecting the bad ones.

    Parameters
    ----------
    directory : str or Path
        A sweep folder.
    schema : pyarrow.Schema, optional
        The sweep's schema (default :func:`~spectr_gbv.sweep.schema.arrow_schema`).
    key : tuple of str, optional
        The columns that identify a row (default :data:`~spectr_gbv.sweep.schema.KEY`).

    Returns
    -------
    PartsReport
        ``bad`` is empty when every part is whole.

    Raises
    ------
    ValueError
        ``directory`` is not a folder.
    """
    where = Path(directory)
    if not where.is_dir():
        raise ValueError(f"sweep: no such directory {str(directory)!r}")
    schema = arrow_schema() if schema is None else schema
    names = list(KEY if key is None else key)
    files = part_files(where)
    bad: list[PartError] = []
    rows = unhashed = duplicates = 0
    seen: set[tuple[Any, ...]] = set()
    for part in files:
        try:
            table, hashed = _read_checked(part, schema)
        except PartError as exc:
            bad.append(exc)
            continue
        unhashed += not hashed
        rows += table.num_rows
        columns = table.select(names).to_pydict()
        for row_key in zip(*(columns[c] for c in names), strict=True):
            duplicates += row_key in seen
            seen.add(row_key)
    return PartsReport(len(files), rows, unhashed, duplicates, tuple(bad))


def read_table(directory: str | Path, *, schema: Any = None, key: tuple[str, ...] | None = None) -> Any:
    """Every stored row of a sweep folder as one ``pyarrow.Table``, one row per key, each part checked.

    Reads the ``part-*.parquet`` files only (through :func:`read_part`), so it also reads a folder
    of an earlier layout, or one that holds other files.

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
        Schema ``schema`` (without the parts' key-value metadata); a key stored twice keeps its
        first row (parts in modification-time order). Empty (zero rows) for a folder without parts.

    Raises
    ------
    ValueError
        ``directory`` is not a folder.
    PartError
        A part that is damaged, foreign (another schema) or corrupt (its rows do not match
        their hash): the first one found, named in the message.
    """
    import pyarrow as pa

    where = Path(directory)
    if not where.is_dir():
        raise ValueError(f"sweep: no such directory {str(directory)!r}")
    schema = arrow_schema() if schema is None else schema
    names = tuple(KEY if key is None else key)
    tables = [read_part(part, schema) for part in part_files(where)]
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables(tables)
    columns = table.select(list(names)).to_pydict()
    seen: set[tuple[Any, ...]] = set()
    keep = []
    for i, row_key in enumerate(zip(*(columns[c] for c in names), strict=True)):
        if row_key not in seen:
            seen.add(row_key)
            keep.append(i)
    return table if len(keep) == table.num_rows else table.take(pa.array(keep, type=pa.int64()))


__all__ = [
    "FIX_HINT",
    "HASH_FIELD",
    "METADATA_KEY",
    "PART_GLOB",
    "PartError",
    "PartsReport",
    "check_parts",
    "content_hash",
    "part_files",
    "read_part",
    "read_table",
]
