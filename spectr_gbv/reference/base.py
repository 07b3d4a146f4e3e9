"""The verifier interface, its input checks, and the run loop shared by every verifier.

Inputs of one iteration (THEORY.md sections 1-2), for K drafts of L tokens over V = {0..n-1}:

* ``drafts`` : int array [K, L], ``drafts[k, t] = X^(k)_{t+1}``;
* ``draft_probs`` : [K, L, n], ``draft_probs[k, t] = q(. | X^(k)_{1:t})`` for t = 0..L-1;
* ``target_probs`` : [K, L+1, n], ``target_probs[k, t] = p(. | X^(k)_{1:t})`` for t = 0..L
  (row L is the bonus position).

Probability arrays are numpy ``object`` arrays of Fractions (exact) or float64. The output of
a verifier is the emitted token tuple ``X^(k)_{1:tau} + (Z,)`` of length ``tau + 1``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational
from typing import Any, ClassVar

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import FLOAT_ROW_ATOL, Scalar
from spectr_gbv.reference.choosers import (
    Chooser,
    Diagnostics,
    Emission,
    SamplingChooser,
    check_weights,
    enumerate_law,
)

DraftTuple = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class VerifyInput:
    """Validated inputs of one verification (see the module docstring for the layout).

    Attributes
    ----------
    drafts : ndarray, shape [K, L], int64
    draft_probs : ndarray, shape [K, L, n], object (Fractions) or float64
    target_probs : ndarray, shape [K, L+1, n], same dtype as ``draft_probs``
    exact : bool
        True when the probabilities are Fractions.
    """

    drafts: np.ndarray
    draft_probs: np.ndarray
    target_probs: np.ndarray
    exact: bool

    @property
    def K(self) -> int:  # noqa: N802 - the papers' name
        """Number of drafts."""
        return int(self.drafts.shape[0])

    @property
    def L(self) -> int:  # noqa: N802
        """Draft length."""
        return int(self.drafts.shape[1])

    @property
    def n(self) -> int:
        """Vocabulary size."""
        return int(self.draft_probs.shape[2])

    @property
    def one(self) -> Scalar:
        """1 in the input's number kind."""
        return Fraction(1) if self.exact else 1.0

    def draft(self, k: int) -> tuple[int, ...]:
        """Tokens of draft ``k`` as a tuple."""
        return tuple(int(v) for v in self.drafts[k])


def _prob_array(arr: Any, name: str) -> tuple[np.ndarray, bool]:
    """Convert to an object array of Fractions (exact) or float64; report which."""
    a = np.asarray(arr)
    if a.dtype == object:
        flat = a.reshape(-1)
        for i, v in enumerate(flat):
            if isinstance(v, bool) or not isinstance(v, Rational):
                idx = np.unravel_index(i, a.shape)
                raise ValueError(
                    f"{name}: an object array must hold Fractions (or ints); entry "
                    f"{tuple(int(j) for j in idx)} is {v!r}"
                )
        out = np.empty(a.shape, dtype=object)
        out.reshape(-1)[:] = [Fraction(v) for v in flat]
        return out, True
    if a.dtype.kind == "f":
        return a.astype(np.float64), False
    if a.dtype.kind in "iu":
        out = np.empty(a.shape, dtype=object)
        out.reshape(-1)[:] = [Fraction(int(v)) for v in a.reshape(-1)]
        return out, True
    raise ValueError(f"{name}: expected Fractions (object array) or float64, got dtype {a.dtype}")


def _check_rows(arr: np.ndarray, name: str, exact: bool) -> None:
    """Every row (last axis) finite, non-negative and summing to 1."""
    if not exact and not np.all(np.isfinite(arr)):
        idx = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name}: entry {tuple(int(i) for i in idx)} is not finite")
    neg = np.argwhere(arr < 0)
    if len(neg):
        idx = tuple(int(i) for i in neg[0])
        raise ValueError(f"{name}: entry {idx} is negative ({arr[idx]!r})")
    if not exact:
        # Rows whose (pairwise, error below 1e-11 for non-negative rows summing near 1) numpy sum is
        # well inside the tolerance pass under math.fsum too; only the others are summed exactly.
        near = np.abs(arr.sum(axis=-1) - 1.0) > FLOAT_ROW_ATOL / 2
        for idx in map(tuple, np.argwhere(near)):
            total = math.fsum(arr[idx].tolist())
            if not abs(total - 1.0) <= FLOAT_ROW_ATOL:
                raise ValueError(
                    f"{name}[{', '.join(map(str, idx))}] sums to {total!r}, not 1 within {FLOAT_ROW_ATOL:g}"
                )
        return
    for idx in np.ndindex(*arr.shape[:-1]):
        total = sum(arr[idx].tolist(), Fraction(0))
        if total != 1:
            raise ValueError(f"{name}[{', '.join(map(str, idx))}] sums to {total}, not exactly 1")


def _rows_equal(a: np.ndarray, b: np.ndarray, exact: bool) -> bool:
    if exact:
        return bool(np.all(a == b))
    return bool(np.max(np.abs(a - b)) <= FLOAT_ROW_ATOL)


def validate_inputs(drafts: Any, draft_probs: Any, target_probs: Any) -> VerifyInput:
    """Check the three arrays of one verification and return them as a :class:`VerifyInput`.

    Parameters
    ----------
    drafts : array-like, shape [K, L], integer
        Drafted token ids.
    draft_probs : array-like, shape [K, L, n], Fractions (object) or float64
        ``q(. | X^(k)_{1:t})`` for t = 0..L-1.
    target_probs : array-like, shape [K, L+1, n], Fractions (object) or float64
        ``p(. | X^(k)_{1:t})`` for t = 0..L.

    Returns
    -------
    VerifyInput
        Exact when both probability arrays are exact; if one is float64 both become float64
        (as :class:`spectr_gbv.core.Instance` does).

    Raises
    ------
    ValueError
        Naming the argument: non-integer ``drafts``; wrong shapes (``K >= 1``, ``L >= 1``,
        ``n >= 1``, ``[K, L]``, ``[K, L, n]``, ``[K, L+1, n]``); a token outside ``0..n-1``;
        an entry that is not a number, not finite or negative; a row not summing to 1
        (exactly for Fractions, within :data:`~spectr_gbv.core.numbers.FLOAT_ROW_ATOL` for
        floats); a drafted token of draft probability 0; or two drafts with a common prefix
        whose rows at that prefix differ (the rows are functions of the prefix).
    """
    d = np.asarray(drafts)
    if d.dtype == object and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in d.reshape(-1)):
        d = d.astype(np.int64)
    if d.dtype.kind not in "iu":
        raise ValueError(f"drafts: expected integer token ids, got dtype {d.dtype}")
    if d.ndim != 2 or d.shape[0] < 1 or d.shape[1] < 1:
        raise ValueError(f"drafts: expected shape [K, L] with K >= 1 and L >= 1, got {d.shape}")
    d = d.astype(np.int64)
    K, L = d.shape
    q, q_exact = _prob_array(draft_probs, "draft_probs")
    p, p_exact = _prob_array(target_probs, "target_probs")
    if q.ndim != 3 or q.shape[:2] != (K, L) or q.shape[2] < 1:
        raise ValueError(f"draft_probs: expected shape [K, L, n] = [{K}, {L}, n], got {q.shape}")
    n = q.shape[2]
    if p.shape != (K, L + 1, n):
        raise ValueError(f"target_probs: expected shape [K, L+1, n] = [{K}, {L + 1}, {n}], got {p.shape}")
    bad = np.argwhere((d < 0) | (d >= n))
    if len(bad):
        k, t = (int(i) for i in bad[0])
        raise ValueError(f"drafts[{k}, {t}] = {int(d[k, t])} is outside the vocabulary 0..{n - 1}")
    exact = q_exact and p_exact
    if not exact:
        q, p = q.astype(np.float64), p.astype(np.float64)
    _check_rows(q, "draft_probs", exact)
    _check_rows(p, "target_probs", exact)
    drafted = q[np.arange(K)[:, None], np.arange(L)[None, :], d]
    zero = np.argwhere(drafted <= 0)
    if len(zero):
        k, t = (int(i) for i in zero[0])
        raise ValueError(
            f"draft_probs[{k}, {t}, {int(d[k, t])}] = 0 but drafts[{k}, {t}] = {int(d[k, t])}: "
            "a draft cannot contain a token of draft probability 0"
        )
    for k2 in range(1, K):
        for k1 in range(k2):
            t = 0
            while True:
                if not _rows_equal(p[k1, t], p[k2, t], exact):
                    raise ValueError(
                        f"target_probs[{k1}, {t}] != target_probs[{k2}, {t}] although drafts "
                        f"{k1} and {k2} share the prefix {tuple(int(v) for v in d[k1, :t])}"
                    )
                if t == L:
                    break
                if not _rows_equal(q[k1, t], q[k2, t], exact):
                    raise ValueError(
                        f"draft_probs[{k1}, {t}] != draft_probs[{k2}, {t}] although drafts "
                        f"{k1} and {k2} share the prefix {tuple(int(v) for v in d[k1, :t])}"
                    )
                if d[k1, t] != d[k2, t]:
                    break
                t += 1
    for arr in (q, p):
        arr.flags.writeable = False
    return VerifyInput(d, q, p, exact)


def iteration_inputs(instance: Instance, drafts: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three input arrays of one iteration, read off an instance's tables.

    Parameters
    ----------
    instance : Instance
        Target p (depth >= L) and draft q (depth >= L - 1).
    drafts : array-like, shape [K, L], int
        Token ids; L must equal ``instance.L``.

    Returns
    -------
    drafts : ndarray, shape [K, L], int64
    draft_probs : ndarray, shape [K, L, n], object (Fractions) or float64
        ``q(. | X^(k)_{1:t})``, t = 0..L-1.
    target_probs : ndarray, shape [K, L+1, n], same dtype
        ``p(. | X^(k)_{1:t})``, t = 0..L.

    Raises
    ------
    ValueError
        ``drafts`` not of shape [K, L] with L = ``instance.L``, or a token outside the
        vocabulary.
    """
    d = np.asarray(drafts)
    if d.dtype.kind not in "iu" or d.ndim != 2 or d.shape[0] < 1 or d.shape[1] != instance.L:
        raise ValueError(f"drafts: expected an integer array of shape [K, L={instance.L}], got {d.dtype} {d.shape}")
    d = d.astype(np.int64)
    K, L = d.shape
    dtype = object if instance.exact else np.float64
    q = np.empty((K, L, instance.n), dtype=dtype)
    p = np.empty((K, L + 1, instance.n), dtype=dtype)
    for k in range(K):
        for t in range(L + 1):
            p[k, t] = instance.target.cond(d[k, :t])
            if t < L:
                q[k, t] = instance.draft.cond(d[k, :t])
    return d, q, p


def normalize(weights: np.ndarray, exact: bool) -> np.ndarray:
    """``weights / sum(weights)`` (exact for Fractions).

    Raises
    ------
    ValueError
        If the weights are invalid or all zero.
    """
    ws = check_weights(weights, exact)
    total = sum(ws, Fraction(0)) if exact else math.fsum(float(w) for w in ws)
    return np.asarray(weights) / total


def residual_or_fallback(
    weights: np.ndarray,
    fallback: np.ndarray,
    exact: bool,
    diagnostics: Diagnostics,
    key: Hashable,
) -> np.ndarray:
    """A residual law's weights, or ``fallback`` for a float residual that rounded to zero.

    In exact arithmetic a lossless verifier never reaches an all-zero residual with positive
    probability, so an exact all-zero residual is returned as is (sampling it then raises).
    In float64 such a residual can sit on a branch of probability ~1e-16 (e.g. ``p = q`` up
    to rounding); there ``fallback`` (the target row at that position) is used and the event
    is recorded in ``diagnostics`` under ``key``.
    """
    if not exact and not np.any(weights > 0):
        diagnostics.note_fallback(key)
        return fallback
    return weights


class Verifier(ABC):
    """A verifier of one speculative-decoding iteration: an exact kernel plus a sampler.

    Subclasses set the class attributes and implement :meth:`run` once, as a function of a
    chooser (:mod:`spectr_gbv.reference.choosers`); :meth:`outcome_law` (exact enumeration)
    and :meth:`sample` (one draw) both call it, so they agree by construction.

    Attributes
    ----------
    name : str
        Stable method name (registry key, CLI name).
    lossless : bool
        True when the output law, averaged over i.i.d. drafts, passes THEORY.md section 2's
        validity criterion on every instance.
    symmetric : bool
        True when the outcome law for a draft tuple does not depend on the order of the
        drafts (the exact simulator then enumerates draft multisets).
    citation : str
        Paper and algorithm the implementation follows.
    kernel_tolerance : float or None
        None when the kernel is exact on exact inputs (every verifier but the LP oracle);
        otherwise the largest validity defect that the kernel's own float64 numerics can leave
        on an exact instance (``lp_oracle``: its kernel comes from a float64 LP), which the
        exact simulator then states and judges ``lossless`` against.
    structure : str or None
        The reading shape of :mod:`spectr_gbv.reference.structure` (``"selected_draft"``,
        ``"draft_scan"``, ``"draft_tree"``) that lets the exact simulator average the law
        over i.i.d. drafts without enumerating draft tuples; None (default) for none. Only a
        class that declares it in its own body is simulated through it.
    last_diagnostics : dict of str to int
        :meth:`Diagnostics.summary` of the last :meth:`outcome_law` or :meth:`sample` call
        (``clamp_evaluations``, ``clamped``, ``residual_fallbacks``).
    last_out_of_range : dict
        Key -> raw value of each clamped weight that left [0, 1] in that call.
    """

    name: ClassVar[str]
    lossless: ClassVar[bool]
    symmetric: ClassVar[bool]
    citation: ClassVar[str]
    kernel_tolerance: ClassVar[float | None] = None
    structure: ClassVar[str | None] = None

    def __init__(self) -> None:
        self.last_diagnostics: dict[str, int] = {}
        self.last_out_of_range: dict[Hashable, Scalar | float] = {}

    def _record(self, diag: Diagnostics) -> None:
        self.last_diagnostics = diag.summary()
        self.last_out_of_range = dict(diag.out_of_range)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, lossless={self.lossless})"

    # ------------------------------------------------------------------ to implement
    def prepare(self, batch: VerifyInput) -> Any:
        """Deterministic precomputation shared by every execution path (default: None)."""
        return None

    @abstractmethod
    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """One execution of the algorithm; every random decision goes through ``chooser``."""

    def law_key(self, drafts: DraftTuple) -> Hashable:
        """Key such that draft tuples with equal keys have equal outcome laws.

        Default: the sorted tuple when ``symmetric``, else the tuple itself. Verifiers
        that read only part of the drafts override it (the exact simulator groups by it).
        """
        return tuple(sorted(drafts)) if self.symmetric else drafts

    # ------------------------------------------------------------------ public API
    def outcome_law(self, drafts: Any, draft_probs: Any, target_probs: Any) -> dict[tuple[int, ...], Scalar]:
        """Exact law of the emitted tokens given the drafts.

        Parameters
        ----------
        drafts : array-like, shape [K, L], int
        draft_probs : array-like, shape [K, L, n], Fractions (object) or float64
        target_probs : array-like, shape [K, L+1, n], Fractions (object) or float64

        Returns
        -------
        dict of tuple of int to Fraction or float
            ``P(O = o)`` for every output ``o`` (accepted prefix plus one token) of positive
            probability; Fractions when the inputs are exact, floats otherwise. Sums to 1.

        Raises
        ------
        ValueError
            Invalid inputs (see :func:`validate_inputs`).
        """
        return self.outcome_law_checked(validate_inputs(drafts, draft_probs, target_probs))

    def outcome_law_checked(self, batch: VerifyInput) -> dict[tuple[int, ...], Scalar]:
        """:meth:`outcome_law` on inputs already validated (used by the exact simulator)."""
        prep = self.prepare(batch)
        diag = Diagnostics()
        law = enumerate_law(lambda ch: self.run(batch, prep, ch), batch.exact, diag)
        self._record(diag)
        return law

    def sample(self, drafts: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> tuple[int, ...]:
        """Run the verifier once with randomness from ``rng``.

        Parameters
        ----------
        drafts, draft_probs, target_probs
            As :meth:`outcome_law`.
        rng : numpy.random.Generator
            Source of the uniforms (one fresh draw per decision).

        Returns
        -------
        tuple of int
            The emitted tokens, length ``tau + 1``.

        Raises
        ------
        ValueError
            Invalid inputs, or ``rng`` not a :class:`numpy.random.Generator`.
        """
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng: expected a numpy.random.Generator, got {type(rng).__name__}")
        return self.sample_checked(validate_inputs(drafts, draft_probs, target_probs), rng)

    def sample_checked(self, batch: VerifyInput, rng: np.random.Generator) -> tuple[int, ...]:
        """:meth:`sample` on inputs already validated."""
        diag = Diagnostics()
        chooser = SamplingChooser(rng, batch.exact, diag)
        emission = self.run(batch, self.prepare(batch), chooser)
        z = chooser.categorical(emission.weights)
        self._record(diag)
        return emission.prefix + (z,)
