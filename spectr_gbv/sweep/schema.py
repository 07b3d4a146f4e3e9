"""The sweep's Parquet table: column names and types (a public contract; see docs/sweep.md).

One row per (instance, method, K): the exact one-iteration result of ``method`` with K i.i.d.
drafts on the instance, and beside it the method-independent measures of (instance, K) that
were requested (the CIC bounds, the LP optima). Exact values are kept as strings (``"a/b"``,
:func:`~spectr_gbv.core.numbers.json_value`) beside float64 columns; a measure that was not
requested, or that failed, is null. :data:`KEY` identifies a row: the writer never stores two
rows with the same key, and a rerun skips keys already present.

Another table (an application's, with its own columns and key) is described by a
:class:`TableKind`, which the application builds and hands to the readers and writers that take
one (:class:`~spectr_gbv.sweep.store.SweepStore`, :func:`~spectr_gbv.sweep.store.verify_folder`);
nothing in this package names an application's table.

pyarrow is imported only inside :func:`arrow_schema` (the ``sweep`` extra), so importing this
module costs nothing on a base install.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Column name -> pyarrow type name, in table order. The first 16 are the stable names (docs/sweep.md).
COLUMNS: dict[str, str] = {
    "instance_id": "string",  # e.g. "random:3,2,7,0.3" (n,L,seed,zero_prob), "file:NAME", "battery:NAME"
    "family": "string",  # "random", "dir" or "battery"
    "n": "int64",
    "L": "int64",
    "K": "int64",
    "method": "string",
    "expected_accepted": "string",  # exact "a/b" on exact instances, repr of the float otherwise
    "expected_accepted_float": "float64",
    "validity_defect": "string",
    "lossless": "bool",
    "opt": "float64",  # OPT(K), the LP optimum (float64, HiGHS); null unless measured
    "ot": "float64",  # OT(K), the coupling LP optimum; null unless measured
    "cic_bound": "string",  # B(K), exact; null unless measured
    "cic_bound_lossless": "string",  # B_BV(K), exact; null unless measured
    "seconds": "float64",  # wall seconds of this row's exact simulation
    "package_version": "string",
    # beyond the stable names: float copies of the exact strings, and the error of a failed row
    "validity_defect_float": "float64",
    "cic_bound_float": "float64",
    "cic_bound_lossless_float": "float64",
    "error": "string",  # null on success; the exception's one-line message otherwise
}

#: The columns that identify a row.
KEY: tuple[str, ...] = ("instance_id", "method", "K")

#: Measures a sweep can request (``--measures``): ``tau`` (E[tau], validity defect, lossless;
#: always on), ``bounds`` (B and B_BV), ``opt`` (OPT(K) LP), ``ot`` (OT(K) LP).
MEASURES: tuple[str, ...] = ("tau", "bounds", "opt", "ot")


def arrow_schema() -> Any:
    """The :data:`COLUMNS` as a ``pyarrow.Schema`` (every column nullable).

    Raises
    ------
    ImportError
        pyarrow is not installed (``pip install 'spectr_gbv[sweep]'``).
    """
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
    return pa.schema([pa.field(name, types[kind]) for name, kind in COLUMNS.items()])


@dataclass(frozen=True)
class TableKind:
    """A sweep table other than the exact sweep's: its name, key columns and schema.

    An application that stores its own rows through :class:`~spectr_gbv.sweep.store.SweepStore`
    describes its table with one of these and passes it to the readers that must recognise a
    folder of that table (:func:`~spectr_gbv.sweep.store.verify_folder`). A folder is of this
    kind when the key recorded in its provenance equals :attr:`key`.

    Attributes
    ----------
    name : str
        A short label (``"bench"``).
    key : tuple of str
        The columns that identify a row, in order.
    schema : callable
        ``() -> pyarrow.Schema``; may raise ImportError when pyarrow is missing.
    """

    name: str
    key: tuple[str, ...]
    schema: Callable[[], Any]


__all__ = ["COLUMNS", "KEY", "MEASURES", "TableKind", "arrow_schema"]
