"""Shared pieces of the planted bugs: input conversion, reference-layer calls, uniform sources, inverse-CDF draws.

The helpers every module of :mod:`spectr_gbv.testing.mutants` builds its verifiers from: they
convert the harness's arrays, call a :mod:`spectr_gbv.reference` verifier, hand out uniforms
and tag a function with the attributes the harness reads (:func:`tag_verifier`). Arrays may
be numpy arrays, nested sequences or torch tensors (converted on the CPU without importing
torch); float16/bfloat16/float32 rows are renormalised in float64 when their sum is within
1e-2 / 1e-2 / 1e-4 of 1.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.base import VerifyInput, validate_inputs

# An exact outcome law: emitted token tuple -> probability (Fraction or float).
Law = dict[tuple[int, ...], Any]
#: A generic-interface verifier: ``verify(draft_tokens, draft_probs, target_probs, rng) -> list[int]``.
GenericVerifier = Callable[..., list[int]]
#: A chain-interface verifier: ``verify(draft_ids, draft_probs, target_probs, uniforms) -> int64[B, L+1]``.
ChainVerifier = Callable[..., np.ndarray]

#: Row-sum tolerance under which low-precision rows are renormalised, by itemsize.
_LOW_PRECISION_TOL = {2: 1e-2, 4: 1e-4}


# ============================================================================ input handling
def _to_numpy(x: Any) -> np.ndarray:
    """A numpy array from a numpy array, a nested sequence or a torch tensor (moved to CPU)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
            arr = t.numpy().astype(np.float64)
            return _renormalise(arr, 1e-2)
        x = t.numpy()
    return np.asarray(x)


def _renormalise(a: np.ndarray, tol: float) -> np.ndarray:
    """Divide each row (last axis) by its sum when that sum is finite and within ``tol`` of 1."""
    if a.ndim == 0:
        return a
    s = a.sum(axis=-1, keepdims=True)
    ok = np.isfinite(s) & (np.abs(s - 1.0) <= tol)
    return np.where(ok, a / np.where(ok, s, 1.0), a)


def _law_array(x: Any, name: str) -> np.ndarray:
    """Probabilities as Fractions (object), ints, or float64 (low precision renormalised)."""
    a = _to_numpy(x)
    if a.dtype == object or a.dtype.kind in "iu":
        return a
    if a.dtype.kind != "f":
        raise ValueError(f"{name}: expected probabilities (float or Fraction), got dtype {a.dtype}")
    tol = _LOW_PRECISION_TOL.get(a.dtype.itemsize)
    a = a.astype(np.float64)
    return a if tol is None else _renormalise(a, tol)


def _ids(x: Any, name: str, ndim: int) -> np.ndarray:
    """Integer token ids of ``ndim`` dimensions as int64."""
    d = _to_numpy(x)
    if d.dtype == object and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in d.reshape(-1)):
        d = d.astype(np.int64)
    if d.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integer token ids, got dtype {d.dtype}")
    if d.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {d.shape}")
    return d.astype(np.int64)


def check_rng(rng: Any) -> np.random.Generator:
    """``rng`` itself when it is a :class:`numpy.random.Generator`.

    Raises
    ------
    ValueError
        If ``rng`` is anything else (a seed, a legacy ``RandomState``, None).
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def generic_arrays(draft_tokens: Any, draft_probs: Any, target_probs: Any) -> tuple[np.ndarray, ...]:
    """Converted generic-interface arrays ``(d, q, p)`` with their shapes checked.

    Returns
    -------
    d : int64 array, shape (K, L)
    q : array, shape (K, L, V)
        Fractions (object), ints, or float64 (low-precision rows renormalised).
    p : array, shape (K, L+1, V)
        As ``q``.

    Raises
    ------
    ValueError
        If the ids are not integers of two dimensions, the laws not probabilities, K or L is 0,
        or the shapes disagree.
    """
    d = _ids(draft_tokens, "draft_tokens", 2)
    q = _law_array(draft_probs, "draft_probs")
    p = _law_array(target_probs, "target_probs")
    K, L = d.shape
    if K < 1 or L < 1:
        raise ValueError(f"draft_tokens: expected shape [K, L] with K, L >= 1, got {d.shape}")
    if q.ndim != 3 or q.shape[:2] != (K, L) or q.shape[2] < 1:
        raise ValueError(f"draft_probs: expected shape [K, L, V] = [{K}, {L}, V], got {q.shape}")
    if p.shape != (K, L + 1, q.shape[2]):
        raise ValueError(f"target_probs: expected shape [K, L+1, V] = [{K}, {L + 1}, {q.shape[2]}], got {p.shape}")
    return d, q, p


def _truncate(d: np.ndarray, q: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut every draft before the first placeholder (negative id) of any draft."""
    neg = d < 0
    if not neg.any():
        return d, q, p
    first = np.where(neg.any(axis=1), neg.argmax(axis=1), d.shape[1])
    cut = int(first.min())
    return d[:, :cut], q[:, :cut], p[:, : cut + 1]


def _root_only(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs of one dummy draft whose ``ar`` verification draws from ``p[:, 0]`` (all drafts cut to 0)."""
    K, V = p.shape[0], p.shape[2]
    if p.dtype == object:
        q = np.empty((K, 1, V), dtype=object)
        q[...] = Fraction(1, V)
    else:
        q = np.full((K, 1, V), 1.0 / V)
    return np.zeros((K, 1), dtype=np.int64), q, np.concatenate([p[:, :1], p[:, :1]], axis=1)


def correct_inputs(
    draft_tokens: Any, draft_probs: Any, target_probs: Any
) -> tuple[str | None, tuple[np.ndarray, ...]]:
    """Generic-interface inputs cut before the first placeholder (negative id) of any draft.

    Returns
    -------
    override : str or None
        ``"ar"`` when nothing is left to verify (the inputs are then one dummy draft whose
        ``ar`` verification draws from the target row at position 0), else None.
    inputs : tuple of arrays
        ``(d, q, p)`` as :func:`generic_arrays` returns them, cut to the shortest draft.

    Raises
    ------
    ValueError
        As :func:`generic_arrays`.
    """
    d, q, p = _truncate(*generic_arrays(draft_tokens, draft_probs, target_probs))
    if d.shape[1] == 0:
        return "ar", _root_only(p)
    return None, (d, q, p)


def float_inputs(d: np.ndarray, q: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same inputs with ``q`` and ``p`` in float64 (for mutants whose arithmetic is irrational)."""
    return d, np.asarray(q, dtype=np.float64), np.asarray(p, dtype=np.float64)


# ============================================================================ uniform sources
class QueueRng:
    """Stand-in for ``numpy.random.Generator.random`` handing out supplied uniforms in order.

    The reference samplers take one uniform per decision from ``rng.random()`` (and ``rng.random(m)``
    for block verification's m trials), so feeding them a queue fixes every decision.
    """

    def __init__(self, row: np.ndarray) -> None:
        """Hand out the float64 uniforms of ``row`` (shape (n,)) in order."""
        self._row = row
        self._next = 0

    def random(self, size: int | None = None) -> float | np.ndarray:
        """The next uniform (``size`` None) or the next ``size`` uniforms as an array.

        Raises
        ------
        ValueError
            If the row has fewer uniforms left than asked for.
        """
        count = 1 if size is None else int(size)
        if self._next + count > len(self._row):
            raise ValueError(f"uniforms: a row of {len(self._row)} uniforms is too short for this verification")
        out = self._row[self._next : self._next + count]
        self._next += count
        return float(out[0]) if size is None else out.copy()


class Uniforms:
    """Coins and final draws of one SD row: fresh from ``rng`` or read from a supplied row.

    ``coin(t)`` is the acceptance coin of position t; ``final(t)`` the uniform of the token drawn
    after stopping at t (a rejection at t < L, or the bonus at t = L): ``row[t]`` and
    ``row[min(t + 1, L)]`` for a supplied row of L + 1 uniforms.
    """

    def __init__(self, rng: np.random.Generator | None = None, row: np.ndarray | None = None) -> None:
        """Draw from ``rng`` when ``row`` (float64, shape (L+1,)) is None, else read ``row``."""
        self.rng, self.row = rng, row

    def coin(self, t: int) -> float:
        """The acceptance coin of position ``t``."""
        return float(self.rng.random()) if self.row is None else float(self.row[t])

    def final(self, t: int) -> float:
        """The uniform of the token drawn after stopping at ``t`` (a rejection, or the bonus at L)."""
        if self.row is None:
            return float(self.rng.random())
        return float(self.row[min(t + 1, len(self.row) - 1)])


def inverse_cdf(weights: np.ndarray, u: float, default: int | None = None) -> int:
    """First index with ``u * sum(w) < cumsum(w)``; ``default`` (else the last positive weight) if none.

    ``weights`` is a non-negative row of shape (V,) (any real dtype, read as float64), ``u`` a
    uniform in [0, 1). With ``default`` given the row is taken as already normalised
    (``u < cumsum(w)``), as a kernel that skips the division would.
    """
    w = np.asarray(weights, dtype=np.float64)
    c = np.cumsum(w)
    hits = np.flatnonzero(u * c[-1] < c) if default is None else np.flatnonzero(u < c)
    if hits.size:
        return int(hits[0])
    if default is not None:
        return default
    positive = np.flatnonzero(w > 0)
    return int(positive[-1]) if positive.size else 0


def residual_token(p_row: np.ndarray, q_row: np.ndarray, u: float) -> int:
    """A correct draw from ``max(p - q, 0)`` normalised (``p`` itself if that is all zero).

    ``p_row`` and ``q_row`` have shape (V,) and are read as float64; ``u`` is the uniform of the
    draw (:func:`inverse_cdf`).
    """
    r = np.maximum(np.asarray(p_row, dtype=np.float64) - np.asarray(q_row, dtype=np.float64), 0.0)
    return inverse_cdf(r if r.sum() > 0 else np.asarray(p_row, dtype=np.float64), u)


def ratio(p_x: float, q_x: float) -> float:
    """``p/q`` in float64 with IEEE semantics (``p/0 = inf``, ``0/0 = nan``), no warnings."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(p_x) / np.float64(q_x))


def tag_verifier(
    fn: Callable[..., Any], bug: str, interface: str, reference: str, law: Callable[..., Law] | None = None
) -> None:
    """Attach the attributes the harness and the tests read: ``bug``, ``interface``, ``reference``.

    ``bug`` is the expected diagnosis tag (``"ok"`` for a correct verifier), ``interface``
    ``"generic"`` or ``"chain"``, ``reference`` the method name it claims to implement;
    ``law``, when given, becomes ``fn.outcome_law`` (the exact law of ``fn``'s sampler).
    """
    fn.bug = bug  # type: ignore[attr-defined]
    fn.interface = interface  # type: ignore[attr-defined]
    fn.reference = reference  # type: ignore[attr-defined]
    if law is not None:
        fn.outcome_law = law  # type: ignore[attr-defined]


# ============================================================================ reference-layer samplers
#: Validated float64 inputs kept for reuse (a harness calls a verifier many times on few inputs).
_CACHE_SIZE = 4096
_VALIDATED: dict[tuple[Any, ...], VerifyInput] = {}


def _validated(d: np.ndarray, q: np.ndarray, p: np.ndarray) -> VerifyInput:
    """:func:`~spectr_gbv.reference.validate_inputs`, memoised on the bytes of float64 inputs."""
    if q.dtype != np.float64 or p.dtype != np.float64:
        return validate_inputs(d, q, p)
    key = (d.shape, q.shape, d.tobytes(), q.tobytes(), p.tobytes())
    hit = _VALIDATED.get(key)
    if hit is None:
        if len(_VALIDATED) >= _CACHE_SIZE:
            _VALIDATED.clear()
        hit = _VALIDATED[key] = validate_inputs(d, q, p)
    return hit


def sample_validated(verifier: Any, draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    """One generic-interface call of a reference-layer verifier on memoised validated inputs.

    ``verifier`` is a :class:`~spectr_gbv.reference.base.Verifier`; returns the emitted tokens.

    Raises
    ------
    ValueError
        If ``rng`` is not a Generator or the arrays fail :func:`generic_arrays` or
        :func:`~spectr_gbv.reference.validate_inputs`.
    """
    rng = check_rng(rng)
    batch = _validated(*generic_arrays(draft_tokens, draft_probs, target_probs))
    return [int(v) for v in verifier.sample_checked(batch, rng)]


def sample_inputs(verifier: Any, inputs: tuple[np.ndarray, ...], rng: np.random.Generator) -> list[int]:
    """One call of a reference-layer verifier on already converted (and possibly transformed) inputs.

    ``inputs`` is ``(d, q, p)`` as :func:`generic_arrays` returns them; returns the emitted tokens.

    Raises
    ------
    ValueError
        If ``rng`` is not a Generator, or the verifier rejects the inputs.
    """
    return [int(v) for v in verifier.sample(*inputs, check_rng(rng))]


def law_of(verifier: Any) -> Callable[..., Law]:
    """The generic-interface ``outcome_law`` of a reference-layer verifier (its exact law)."""

    def law(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
        return verifier.outcome_law(*generic_arrays(drafts, draft_probs, target_probs))

    return law


# ============================================================================ chain interface
def chain_arrays(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> tuple[Any, ...]:
    """Converted chain-interface arrays ``(d, q, p, u)``, shapes checked.

    ``d`` int64 [B, L], ``q`` [B, L, V], ``p`` [B, L+1, V] (converted as in
    :func:`generic_arrays`), ``u`` float64 [B, L+1] in [0, 1) or None.

    Raises
    ------
    ValueError
        If an array has the wrong dtype or shape, or a uniform lies outside [0, 1).
    """
    d = _ids(draft_ids, "draft_ids", 2)
    B, L = d.shape
    if B < 1 or L < 1:
        raise ValueError(f"draft_ids: expected shape [B, L] with B, L >= 1, got {d.shape}")
    q = _law_array(draft_probs, "draft_probs")
    p = _law_array(target_probs, "target_probs")
    if q.ndim != 3 or q.shape[:2] != (B, L) or q.shape[2] < 1:
        raise ValueError(f"draft_probs: expected shape [B, L, V] = [{B}, {L}, V], got {q.shape}")
    if p.shape != (B, L + 1, q.shape[2]):
        raise ValueError(f"target_probs: expected shape [B, L+1, V] = [{B}, {L + 1}, {q.shape[2]}], got {p.shape}")
    if uniforms is None:
        return d, q, p, None
    u = _to_numpy(uniforms)
    if u.dtype.kind != "f" or u.shape != (B, L + 1):
        raise ValueError(f"uniforms: expected floats of shape [B, L+1] = [{B}, {L + 1}], got {u.dtype} {u.shape}")
    u = u.astype(np.float64)
    if not np.all((u >= 0) & (u < 1)):
        raise ValueError("uniforms: every entry must lie in [0, 1)")
    return d, q, p, u


def run_chain(
    row_fn: Callable[[np.ndarray, np.ndarray, np.ndarray, Uniforms], list[int]],
    draft_ids: Any,
    draft_probs: Any,
    target_probs: Any,
    uniforms: Any,
) -> np.ndarray:
    """Apply a one-row SD function to every batch row; pad with -1 to int64 [B, L+1].

    ``row_fn(d[b], q[b], p[b], uniforms)`` returns the tokens row ``b`` emits; its
    :class:`Uniforms` read ``uniforms[b]`` or, when ``uniforms`` is None, one fresh Generator.

    Raises
    ------
    ValueError
        As :func:`chain_arrays`.
    """
    d, q, p, u = chain_arrays(draft_ids, draft_probs, target_probs, uniforms)
    B, L = d.shape
    rng = np.random.default_rng() if u is None else None
    out = np.full((B, L + 1), -1, dtype=np.int64)
    for b in range(B):
        source = Uniforms(rng=rng) if u is None else Uniforms(row=u[b])
        emitted = row_fn(d[b], q[b], p[b], source)
        out[b, : len(emitted)] = emitted
    return out
