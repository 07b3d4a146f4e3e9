"""Randomness behind one interface: a sampling chooser and an exact enumerating chooser.

Every verifier of this layer is written once, as a function of a *chooser* that takes all of
its random decisions (THEORY.md section 2: a verifier is a Markov kernel from the drafts to
outputs). Two choosers implement the same methods:

* :class:`SamplingChooser` draws each decision from a :class:`numpy.random.Generator`, with a
  fresh uniform per Bernoulli trial and per categorical draw (never reused);
* the enumerating chooser behind :func:`enumerate_law` explores every execution path by
  depth-first replay of choice sequences, multiplies the branch probabilities along a path,
  skips zero-probability branches, and so returns the exact output law (Fractions in,
  Fractions out; floats in, floats out).

Because ``sample`` and ``outcome_law`` run the same code, they cannot disagree.

Decision methods (``probs``/``weights`` are Fractions or floats):

``bernoulli(prob) -> bool``
    True with probability ``prob``.
``categorical(weights) -> int``
    Index ``i`` with probability ``weights[i] / sum(weights)``.
``first_success(probs) -> int | None``
    Index of the first success among independent Bernoulli(``probs[i]``) trials tried in
    order (``None`` if all fail); the sampler stops drawing at the first success.
``last_success(probs) -> int``
    ``max{i : trial i succeeded}`` over independent trials numbered ``1..m`` (``0`` if none):
    the ``tau = max{i : eta_i <= h_i}`` of block verification (THEORY.md section 3).

Each chooser also carries a :class:`Diagnostics` record (clamped weights, fallbacks).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from spectr_gbv.core.numbers import Scalar

#: Float probabilities within this distance outside [0, 1] are snapped into it (rounding).
FLOAT_PROB_SLACK = 1e-12


@dataclass
class Diagnostics:
    """What a verifier run noticed: weights clamped into [0, 1] and residual fallbacks.

    Keys identify a deterministic quantity of the run (e.g. ``("h", j, i)`` for the weight of
    draft ``j``'s sub-block of length ``i``); a key counts once however many execution paths
    evaluate it, so sampling and enumeration report comparable numbers.

    Attributes
    ----------
    evaluated : set
        Keys of every clamped-weight evaluation.
    out_of_range : dict
        Key -> raw value, for the evaluations that left [0, 1] (or had a zero denominator,
        raw value ``inf``/``-inf``).
    fallbacks : set
        Keys where a residual was identically zero and a documented fallback law was used.
    """

    evaluated: set[Hashable] = field(default_factory=set)
    out_of_range: dict[Hashable, Scalar] = field(default_factory=dict)
    fallbacks: set[Hashable] = field(default_factory=set)

    def clamp_unit(self, key: Hashable, value: Scalar | float, exact: bool) -> Scalar:
        """Record ``value`` under ``key`` and return it clamped into [0, 1].

        ``value`` may be ``inf``/``-inf`` (a zero denominator); the result is a Fraction
        when ``exact``, else a float.
        """
        self.evaluated.add(key)
        one: Scalar = Fraction(1) if exact else 1.0
        if value < 0 or value > 1:
            self.out_of_range[key] = value
            return one * 0 if value < 0 else one
        return value

    def note_fallback(self, key: Hashable) -> None:
        """Record that a zero residual at ``key`` was replaced by its fallback law."""
        self.fallbacks.add(key)

    def summary(self) -> dict[str, int]:
        """Counts: ``clamp_evaluations``, ``clamped`` (left [0, 1]), ``residual_fallbacks``."""
        return {
            "clamp_evaluations": len(self.evaluated),
            "clamped": len(self.out_of_range),
            "residual_fallbacks": len(self.fallbacks),
        }


class Chooser(Protocol):
    """The decisions a verifier may take (see the module docstring)."""

    exact: bool
    diagnostics: Diagnostics

    def bernoulli(self, prob: Scalar) -> bool: ...  # noqa: D102

    def categorical(self, weights: Sequence[Scalar] | np.ndarray) -> int: ...  # noqa: D102

    def first_success(self, probs: Sequence[Scalar]) -> int | None: ...  # noqa: D102

    def last_success(self, probs: Sequence[Scalar]) -> int: ...  # noqa: D102


def check_probability(prob: Scalar, exact: bool, what: str = "bernoulli") -> Scalar:
    """Validate a probability: in [0, 1] (floats within :data:`FLOAT_PROB_SLACK`, snapped).

    Raises
    ------
    ValueError
        NaN, or outside [0, 1]; the message names ``what``.
    """
    if not exact:
        prob = float(prob)
        if math.isnan(prob) or prob < -FLOAT_PROB_SLACK or prob > 1 + FLOAT_PROB_SLACK:
            raise ValueError(f"{what}: probability {prob} is not in [0, 1]")
        return min(max(prob, 0.0), 1.0)
    if not 0 <= prob <= 1:
        raise ValueError(f"{what}: probability {prob} is not in [0, 1]")
    return prob


def check_weights(weights: Sequence[Scalar] | np.ndarray, exact: bool) -> list[Scalar]:
    """Validate categorical weights (finite, non-negative, positive sum) and return them.

    Raises
    ------
    ValueError
        Empty, NaN/inf, negative entry, or all zero.
    """
    if _is_float_row(weights, exact):
        _check_float_weights(weights)  # the same checks and messages, vectorised (wide vocabularies)
        return weights.tolist()
    out = list(weights)
    if not out:
        raise ValueError("categorical: weights are empty")
    for i, w in enumerate(out):
        if not exact and not math.isfinite(float(w)):
            raise ValueError(f"categorical: weight {i} is {w!r}, not finite")
        if w < 0:
            raise ValueError(f"categorical: weight {i} is negative ({w!r})")
    if not any(w > 0 for w in out):
        raise ValueError(f"categorical: all {len(out)} weights are zero (no law to sample)")
    return out


def _is_float_row(weights: object, exact: bool) -> bool:
    """True for float64 1-D weights of a float run: the case :func:`check_weights` and
    :meth:`SamplingChooser.categorical` vectorise."""
    return not exact and isinstance(weights, np.ndarray) and weights.ndim == 1 and weights.dtype == np.float64


def _check_float_weights(weights: np.ndarray) -> None:
    """:func:`check_weights` on a 1-D float64 array, vectorised: the first offending entry is named."""
    if weights.size == 0:
        raise ValueError("categorical: weights are empty")
    bad = np.flatnonzero(~np.isfinite(weights))
    if bad.size:
        raise ValueError(f"categorical: weight {int(bad[0])} is {weights[bad[0]]!r}, not finite")
    neg = np.flatnonzero(weights < 0)
    if neg.size:
        raise ValueError(f"categorical: weight {int(neg[0])} is negative ({weights[neg[0]]!r})")
    if not np.any(weights > 0):
        raise ValueError(f"categorical: all {weights.size} weights are zero (no law to sample)")


def _float_categorical(weights: np.ndarray, u: float) -> int:
    """The index :meth:`SamplingChooser.categorical` draws for float64 ``weights`` and uniform ``u``.

    Bit-identical to the sequential loop: ``numpy.cumsum`` accumulates in order (as ``acc += w``
    does; zero weights leave the sum unchanged), the total is ``math.fsum``'s correctly rounded
    sum, and the first index whose running sum exceeds ``u * total`` is drawn (the last positive
    weight when float rounding leaves ``u * total`` at or above every running sum).
    """
    total = math.fsum(weights.tolist())
    acc = np.cumsum(weights)
    i = int(np.searchsorted(acc, u * total, side="right"))
    return i if i < weights.size else int(np.flatnonzero(weights > 0)[-1])


def _total(values: Sequence[Scalar], exact: bool) -> Scalar:
    return sum(values, Fraction(0)) if exact else math.fsum(float(v) for v in values)


class SamplingChooser:
    """Draws every decision from ``rng``; one fresh uniform per trial or categorical draw.

    Parameters
    ----------
    rng : numpy.random.Generator
    exact : bool
        Whether the probabilities are Fractions (comparisons are then exact:
        ``u < prob`` with ``u`` a float and ``prob`` a Fraction).
    diagnostics : Diagnostics, optional
    """

    def __init__(self, rng: np.random.Generator, exact: bool, diagnostics: Diagnostics | None = None) -> None:
        self.rng = rng
        self.exact = exact
        self.diagnostics = diagnostics if diagnostics is not None else Diagnostics()

    def bernoulli(self, prob: Scalar) -> bool:
        """True with probability ``prob`` (``u < prob`` for a fresh uniform ``u``)."""
        prob = check_probability(prob, self.exact)
        return bool(self.rng.random() < prob)

    def categorical(self, weights: Sequence[Scalar] | np.ndarray) -> int:
        """Index drawn with probability proportional to ``weights`` (zero weights never)."""
        ws = check_weights(weights, self.exact)
        u = self.rng.random()
        # float64 rows (wide vocabularies) vectorised; an enumerating rng's symbolic uniform takes the loop
        if isinstance(u, float) and _is_float_row(weights, self.exact):
            return _float_categorical(weights, u)
        total = _total(ws, self.exact)
        # exact: u * total < acc  <=>  u < acc / total (total > 0), which needs no product with u
        threshold = u if self.exact else u * total
        acc: Scalar = Fraction(0) if self.exact else 0.0
        last_positive = 0
        for i, w in enumerate(ws):
            if w <= 0:
                continue
            last_positive = i
            acc += w
            if threshold < (acc / total if self.exact else acc):
                return i
        return last_positive  # float rounding: u * total >= the summed weights

    def first_success(self, probs: Sequence[Scalar]) -> int | None:
        """First success among independent trials tried in order, or None."""
        for i, prob in enumerate(probs):
            if self.bernoulli(prob):
                return i
        return None

    def last_success(self, probs: Sequence[Scalar]) -> int:
        """``max{i : eta_i < probs[i-1]}`` with one uniform per trial (``0`` if none)."""
        checked = [check_probability(p, self.exact, "last_success") for p in probs]
        etas = self.rng.random(len(checked))
        tau = 0
        for i, (eta, prob) in enumerate(zip(etas, checked, strict=True), start=1):
            if eta < prob:
                tau = i
        return tau


class _ReplayChooser:
    """One depth-first replay: follows ``script`` then takes the first branch, queueing others."""

    def __init__(self, script: list[int], exact: bool, diagnostics: Diagnostics) -> None:
        self.script = script
        self.exact = exact
        self.diagnostics = diagnostics
        self.taken: list[int] = []
        self.prob: Scalar = Fraction(1) if exact else 1.0
        self.pending: list[list[int]] = []

    def _branch(self, options: list[tuple[object, Scalar]]) -> object:
        live = [(value, p) for value, p in options if p > 0]
        if not live:
            raise ValueError("enumeration: a decision has no branch of positive probability")
        depth = len(self.taken)
        if depth < len(self.script):
            idx = self.script[depth]
            if idx >= len(live):  # pragma: no cover - the algorithm is not deterministic
                raise RuntimeError("enumeration: replay diverged (non-deterministic verifier?)")
        else:
            idx = 0
            self.pending.extend(self.taken + [alt] for alt in range(1, len(live)))
        self.taken.append(idx)
        value, p = live[idx]
        self.prob = self.prob * p
        return value

    def bernoulli(self, prob: Scalar) -> bool:
        prob = check_probability(prob, self.exact)
        one = Fraction(1) if self.exact else 1.0
        return bool(self._branch([(True, prob), (False, one - prob)]))

    def categorical(self, weights: Sequence[Scalar] | np.ndarray) -> int:
        ws = check_weights(weights, self.exact)
        total = _total(ws, self.exact)
        return int(self._branch([(i, w / total) for i, w in enumerate(ws)]))  # type: ignore[arg-type]

    def first_success(self, probs: Sequence[Scalar]) -> int | None:
        checked = [check_probability(p, self.exact, "first_success") for p in probs]
        one = Fraction(1) if self.exact else 1.0
        options: list[tuple[object, Scalar]] = []
        fail = one
        for i, prob in enumerate(checked):
            options.append((i, fail * prob))
            fail = fail * (one - prob)
        options.append((None, fail))
        return self._branch(options)  # type: ignore[return-value]

    def last_success(self, probs: Sequence[Scalar]) -> int:
        checked = [check_probability(p, self.exact, "last_success") for p in probs]
        one = Fraction(1) if self.exact else 1.0
        options: list[tuple[object, Scalar]] = []
        none_after = one  # P(no success among trials i+1..m)
        for i in range(len(checked), 0, -1):
            options.append((i, checked[i - 1] * none_after))
            none_after = none_after * (one - checked[i - 1])
        options.append((0, none_after))
        return int(self._branch(options))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Emission:
    """End of a verifier run: the accepted prefix and the law of the token it samples itself.

    Attributes
    ----------
    prefix : tuple of int
        Accepted draft tokens, length ``tau`` in ``0..L``.
    weights : ndarray, shape (n,), object (Fractions) or float64
        Unnormalised law of the final token Z (finite, non-negative, positive sum).
    """

    prefix: tuple[int, ...]
    weights: np.ndarray


def emission_outputs(emission: Emission, exact: bool) -> list[tuple[tuple[int, ...], Scalar]]:
    """The outputs ``emission.prefix + (z,)`` of an emission with their probabilities.

    Parameters
    ----------
    emission : Emission
    exact : bool

    Returns
    -------
    list of (tuple of int, Fraction or float)
        One pair per token ``z`` of positive weight, probability ``weights[z] / sum(weights)``.

    Raises
    ------
    ValueError
        The emission's weights are invalid (see :func:`check_weights`).
    """
    ws = check_weights(emission.weights, exact)
    total = _total(ws, exact)
    return [(emission.prefix + (z,), w / total) for z, w in enumerate(ws) if w > 0]


def replay_outcomes(
    run: Callable[[Chooser], Any], exact: bool, diagnostics: Diagnostics | None = None
) -> list[tuple[Any, Scalar]]:
    """Every result of ``run`` with its probability, by depth-first replay of the choices.

    Parameters
    ----------
    run : callable
        ``run(chooser) -> result``; must be deterministic given the chooser's answers.
    exact : bool
        Fractions (exact probabilities) or floats.
    diagnostics : Diagnostics, optional
        Shared by every replay (keys count once).

    Returns
    -------
    list of (result, Fraction or float)
        One pair per execution path of positive probability (equal results are not merged:
        they need not be hashable); the probabilities sum to 1 (exactly for Fractions).

    Raises
    ------
    ValueError
        A decision with invalid probabilities.
    """
    diag = diagnostics if diagnostics is not None else Diagnostics()
    outcomes: list[tuple[Any, Scalar]] = []
    stack: list[list[int]] = [[]]
    while stack:
        chooser = _ReplayChooser(stack.pop(), exact, diag)
        result = run(chooser)
        outcomes.append((result, chooser.prob))
        stack.extend(reversed(chooser.pending))
    return outcomes


def enumerate_law(
    run: Callable[[Chooser], Emission], exact: bool, diagnostics: Diagnostics | None = None
) -> dict[tuple[int, ...], Scalar]:
    """Exact output law of ``run`` by depth-first replay of all choice sequences.

    Parameters
    ----------
    run : callable
        ``run(chooser) -> Emission``; must be deterministic given the chooser's answers.
    exact : bool
        Fractions (exact law) or floats.
    diagnostics : Diagnostics, optional
        Shared by every replay (keys count once).

    Returns
    -------
    dict
        ``output tuple -> probability`` over outputs of positive probability; the output is
        ``emission.prefix + (z,)``. Sums to 1 (exactly for Fractions).

    Raises
    ------
    ValueError
        A decision with invalid probabilities, or an emission with invalid weights.
    """
    law: dict[tuple[int, ...], Scalar] = {}
    for emission, prob in replay_outcomes(run, exact, diagnostics):
        for out, w in emission_outputs(emission, exact):
            law[out] = law.get(out, 0) + prob * w
    return law
