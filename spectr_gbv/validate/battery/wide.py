"""A small instance seen through a wide vocabulary: :class:`VocabEmbedding`.

The battery's laws are enumerated on small vocabularies (2-5 tokens), but verifiers break on
token ids a small vocabulary never shows: ids stored as ``uint8`` wrap at 256, ``int16`` at
32,768. A :class:`VocabEmbedding` maps token ``i`` of a small instance to id ``ids[i]`` of a
vocabulary of ``size`` tokens: the verifier sees drafts in those ids and probability rows of
width ``size`` (zero outside the ids), and its outputs are mapped back to the small instance,
where the law tests keep their few bins. An output id outside ``ids`` has target probability 0
there, so the structural checks (``zero_probability_token``) see it before the law tests.

The wide rows are :class:`CompactRows`: plain float64 arrays that pickle as their few nonzero
columns, so handing a batch to a worker process costs what the small instance costs, and the
worker rebuilds an ordinary :class:`numpy.ndarray` of width V for the verifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, SupportsIndex

import numpy as np

#: Floats (float64) of one batch of wide probability rows: batches are cut to stay under it (32 MiB).
MAX_BATCH_FLOATS = 2**22


def _rebuild(ids: tuple[int, ...], size: int, small: np.ndarray) -> np.ndarray:
    """Rows ``[..., len(ids)]`` scattered into zeros ``[..., size]`` (a plain float64 array)."""
    out = np.zeros((*small.shape[:-1], size), dtype=np.float64)
    out[..., list(ids)] = small
    return out


class CompactRows(np.ndarray):
    """Float64 rows of width V, zero outside a few columns, that pickle as those columns only.

    Built by :meth:`VocabEmbedding.widen_rows`; unpickling gives a plain :class:`numpy.ndarray`
    (the verifier in a worker process never sees this class). Views and slices pickle as plain
    arrays (their data in full).
    """

    _compact: tuple[tuple[int, ...], int, np.ndarray] | None

    def __array_finalize__(self, obj: Any) -> None:
        self._compact = None

    def __reduce__(self) -> tuple[Any, ...]:
        if self._compact is not None:
            return (_rebuild, self._compact)
        return np.asarray(self).view(np.ndarray).__reduce__()

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        if self._compact is not None:
            return (_rebuild, self._compact)
        return np.asarray(self).view(np.ndarray).__reduce_ex__(protocol)


@dataclass(frozen=True)
class VocabEmbedding:
    """Token ``i`` of a small instance is id ``ids[i]`` of a vocabulary of ``size`` tokens.

    Attributes
    ----------
    ids : tuple of int
        Distinct ids in ``0..size-1``, one per token of the small instance, increasing.
    size : int
        Vocabulary size V the verifier sees.

    Raises
    ------
    ValueError
        Ids not increasing, or outside ``0..size-1``.
    """

    ids: tuple[int, ...]
    size: int

    def __post_init__(self) -> None:
        ids = self.ids
        if not ids or any(b <= a for a, b in zip(ids, ids[1:], strict=False)) or ids[0] < 0 or ids[-1] >= self.size:
            raise ValueError(f"ids: expected increasing ids in 0..{self.size - 1}, got {list(ids)}")

    def widen_ids(self, tokens: np.ndarray) -> np.ndarray:
        """Small-instance tokens -> vocabulary ids (int64, same shape; negative entries kept)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        table = np.asarray(self.ids, dtype=np.int64)
        return np.where(tokens >= 0, table[np.clip(tokens, 0, len(table) - 1)], tokens)

    def widen_rows(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``[..., n_small]`` -> ``[..., size]``, zero outside ``ids``.

        Float rows give float64 :class:`CompactRows` (cheap to pickle); object rows (Fractions)
        an object array with integer zeros.
        """
        rows = np.asarray(rows)
        if rows.dtype == object:
            out = np.zeros((*rows.shape[:-1], self.size), dtype=object)
            out[..., list(self.ids)] = rows
            return out
        small = np.array(rows, dtype=np.float64)
        wide = _rebuild(self.ids, self.size, small).view(CompactRows)
        wide._compact = (self.ids, self.size, small)
        return wide

    def narrow_ids(self, ids: np.ndarray) -> np.ndarray:
        """Vocabulary ids -> small-instance tokens (int64, same shape); ids outside ``ids`` give -1."""
        ids = np.asarray(ids, dtype=np.int64)
        table = np.asarray(self.ids, dtype=np.int64)
        pos = np.clip(np.searchsorted(table, ids), 0, len(table) - 1)
        return np.where(table[pos] == ids, pos, -1)

    def batch_cap(self, K: int, L: int) -> int:
        """Iterations per verifier batch so that its rows hold at most :data:`MAX_BATCH_FLOATS` floats."""
        return max(1, MAX_BATCH_FLOATS // (K * (2 * L + 1) * self.size))


__all__ = ["MAX_BATCH_FLOATS", "CompactRows", "VocabEmbedding"]
