"""Reading verifier outputs: one emitted sequence (generic, hf) or a padded batch (chain).

Malformed outputs are not errors here: they are returned with a diagnosis (``bad_output``,
``nan_or_out_of_vocab``) that the structural checks report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Emitted:
    """Emitted tokens of a batch of verifier calls, left-aligned.

    Attributes
    ----------
    tokens : ndarray, shape [B, L+1], int64
        Row b: the emitted tokens, then -1 (entries of a malformed row are -1).
    lengths : ndarray, shape [B], int64
        Number of emitted tokens (0 for a malformed row).
    problems : dict of int to (str, str)
        Row -> (diagnosis, message) for outputs that could not be read as tokens (NaN, not
        integers, wrong shape, inconsistent -1 padding, more than L+1 tokens).
    """

    tokens: np.ndarray
    lengths: np.ndarray
    problems: dict[int, tuple[str, str]] = field(default_factory=dict)


def to_numpy(out: Any) -> Any:
    """A torch tensor as a numpy array (other objects unchanged, garbage left for the reader)."""
    if type(out).__module__.startswith("torch"):
        try:
            return out.detach().cpu().numpy()
        except Exception:  # noqa: BLE001 - a garbage object is reported as bad output
            return out
    return out


def read_sequence(out: Any) -> tuple[tuple[int, ...] | None, tuple[str, str] | None]:
    """Read one generic verifier output as a tuple of ints.

    Returns
    -------
    (tokens, None) or (None, (diagnosis, message))
        ``nan_or_out_of_vocab`` for NaN/inf entries, ``bad_output`` for anything that is not
        a 1-D sequence of integers.
    """
    if type(out) in (list, tuple) and all(type(x) is int for x in out):
        return tuple(out), None
    out = to_numpy(out)
    if not isinstance(out, list | tuple | np.ndarray):
        return None, ("bad_output", f"returned a {type(out).__name__}, expected a sequence of token ids")
    try:
        arr = np.asarray(out)
    except Exception as exc:  # noqa: BLE001 - ragged or odd objects
        return None, ("bad_output", f"output is not an array of ints ({type(exc).__name__})")
    if arr.ndim != 1:
        return None, ("bad_output", f"output has shape {arr.shape}, expected a 1-D sequence")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            return None, ("nan_or_out_of_vocab", f"output contains NaN or inf: {arr.tolist()}")
        if not np.all(arr == np.round(arr)):
            return None, ("bad_output", f"output contains non-integer values: {arr.tolist()}")
        return tuple(int(x) for x in arr), None
    if arr.dtype.kind in "iu":
        return tuple(int(x) for x in arr), None
    if arr.dtype == object:
        vals = []
        for x in arr:
            if isinstance(x, float) and not np.isfinite(x):
                return None, ("nan_or_out_of_vocab", f"output contains NaN or inf: {arr.tolist()}")
            if isinstance(x, bool) or not isinstance(x, int | np.integer):
                return None, ("bad_output", f"output entry {x!r} is not an int")
            vals.append(int(x))
        return tuple(vals), None
    return None, ("bad_output", f"output has dtype {arr.dtype}, expected integer token ids")


def read_padded(out: Any, B: int, L: int) -> Emitted:
    """Read a chain verifier's output [B, L+1] (-1 after the emitted tokens) into :class:`Emitted`."""
    tokens = np.full((B, L + 1), -1, dtype=np.int64)
    lengths = np.zeros(B, dtype=np.int64)
    res = Emitted(tokens, lengths)
    out = to_numpy(out)
    try:
        arr = np.asarray(out)
    except Exception:  # noqa: BLE001
        arr = np.asarray(None, dtype=object)
    if arr.shape != (B, L + 1) or arr.dtype.kind not in "iuf":
        msg = f"output has shape {arr.shape} and dtype {arr.dtype}, expected int64 [{B}, {L + 1}]"
        res.problems = {b: ("bad_output", msg) for b in range(B)}
        return res
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr).all(axis=1)
        for b in np.flatnonzero(bad):
            res.problems[int(b)] = ("nan_or_out_of_vocab", f"output row contains NaN or inf: {arr[b].tolist()}")
        frac = np.isfinite(arr) & (arr != np.round(arr))
        for b in np.flatnonzero(frac.any(axis=1) & ~bad):
            res.problems[int(b)] = ("bad_output", f"output row contains non-integer values: {arr[b].tolist()}")
        arr = np.where(np.isfinite(arr), arr, -2).astype(np.int64)
    arr = arr.astype(np.int64)
    pad = arr == -1
    first = np.where(pad.any(axis=1), pad.argmax(axis=1), L + 1)
    after = np.arange(L + 1)[None, :] >= first[:, None]
    inconsistent = (after & ~pad).any(axis=1)
    for b in np.flatnonzero(inconsistent):
        if int(b) not in res.problems:
            res.problems[int(b)] = (
                "bad_output",
                f"output row {arr[b].tolist()}: a token after the first -1 (padding must be -1 to the end)",
            )
    for b in np.flatnonzero(first == 0):
        if int(b) not in res.problems:
            res.problems[int(b)] = ("bad_output", f"output row {arr[b].tolist()} emits no token")
    ok = np.ones(B, dtype=bool)
    ok[list(res.problems)] = False
    tokens[ok] = np.where(after[ok], -1, arr[ok])
    lengths[ok] = first[ok]
    return res


__all__ = ["Emitted", "read_padded", "read_sequence", "to_numpy"]
