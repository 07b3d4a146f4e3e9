"""Hypothesis strategies for speculative-decoding verifiers: instances, cases, inputs, configs.

Small composable functions in the hypothesis style. Every strategy builds on
:func:`spectr_gbv.core.random_instance` / :class:`spectr_gbv.core.TabularAR`, so a drawn
instance is valid by construction (rows non-negative, summing to 1) and reproducible from
the seed hypothesis drew (shrinking moves toward small n, L, K and seed 0).

Size arguments (``n``, ``L``, ``K``) take an int (fixed), a ``(lo, hi)`` tuple (inclusive
range) or a hypothesis strategy. ``sparsity`` (probability that a table entry is zeroed,
which makes supports of p and q partly disjoint) and ``temperature`` take a number, a
``(lo, hi)`` range or a strategy as well.

Examples
--------
>>> from hypothesis import given, settings
>>> @settings(max_examples=3, deadline=None)
... @given(instances(n=3, L=2))
... def check(instance):
...     assert instance.n == 3 and instance.L == 2
>>> check()
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st

from spectr_gbv.core.instance import Instance, random_instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.reference.base import iteration_inputs

__all__ = ["Config", "cases", "configs", "instances", "num_drafts", "verify_inputs"]

#: Largest table size n**L drawn by default (keeps exact simulation and LPs fast).
MAX_CELLS = 64
#: Largest K drawn by default.
MAX_K = 4


class Config(NamedTuple):
    """Sizes of one verification problem: vocabulary n, draft length L, number of drafts K."""

    n: int
    L: int
    K: int


def _ints(value: Any, name: str, lowest: int) -> st.SearchStrategy[int]:
    """An int, an inclusive ``(lo, hi)`` range or a strategy, as a strategy of ints >= ``lowest``."""
    if isinstance(value, st.SearchStrategy):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected an int, a (lo, hi) tuple or a strategy, got {value!r}")
    if isinstance(value, int | np.integer):
        if value < lowest:
            raise ValueError(f"{name}: must be >= {lowest}, got {value}")
        return st.just(int(value))
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        lo, hi = value
        if not lowest <= lo <= hi:
            raise ValueError(f"{name}: range {value} must satisfy {lowest} <= lo <= hi")
        return st.integers(lo, hi)
    raise ValueError(f"{name}: expected an int, a (lo, hi) tuple or a strategy, got {value!r}")


def _sizes(n: Any, L: Any, max_cells: Any) -> tuple[st.SearchStrategy[int], Any]:
    """Check ``n``, ``L`` and ``max_cells`` when a strategy is built; return n's strategy and L's sampler.

    Where ``n`` and ``L`` are ints or ranges, the smallest pair must fit (``n_lo**L_lo <=
    max_cells``), n is drawn only up to the largest vocabulary that fits with ``L_lo``, and L
    only up to the largest length that fits the drawn n, so no draw is ever rejected (a
    rejecting filter made hypothesis give up with ``Unsatisfiable``). A size given as a
    strategy is filtered instead.

    Raises
    ------
    ValueError
        ``max_cells`` not an int >= 1, a bad ``n`` or ``L`` (named first in the message), or a
        smallest requested size above ``max_cells``: ``max_cells=64 is below the smallest table
        requested, n=8, L=5: n**L = 32768 cells; raise max_cells to at least 32768 or lower n / L``.
    """
    if isinstance(max_cells, bool) or not isinstance(max_cells, int | np.integer) or max_cells < 1:
        raise ValueError(f"max_cells: expected an int >= 1 (largest table size n**L), got {max_cells!r}")
    max_cells = int(max_cells)
    n_strategy, L_strategy = _ints(n, "n", 1), _ints(L, "L", 1)
    n_lo, n_hi = _bounds(n)
    L_lo, L_hi = _bounds(L)
    if n_lo is not None and L_lo is not None and n_lo**L_lo > max_cells:
        cells = n_lo**L_lo
        raise ValueError(
            f"max_cells={max_cells} is below the smallest table requested, n={n_lo}, L={L_lo}: n**L = {cells} "
            f"cells; raise max_cells to at least {cells} or lower n / L"
        )
    if n_lo is not None and n_hi is not None and L_lo is not None:
        n_fit = n_lo
        while n_fit < n_hi and (n_fit + 1) ** L_lo <= max_cells:
            n_fit += 1
        n_strategy = st.integers(n_lo, n_fit)

    def L_for(n_value: int) -> st.SearchStrategy[int]:
        if L_lo is None or L_hi is None:
            return L_strategy.filter(lambda v: n_value**v <= max_cells)
        top = L_lo
        while top < L_hi and n_value ** (top + 1) <= max_cells:
            top += 1
        if n_value**L_lo > max_cells:  # n came from a strategy: nothing fits this n
            return L_strategy.filter(lambda v: n_value**v <= max_cells)
        return st.integers(L_lo, top)

    return n_strategy, L_for


def _bounds(value: Any) -> tuple[int | None, int | None]:
    """``(lo, hi)`` of an int or a range already checked by :func:`_ints`; ``(None, None)`` for a strategy."""
    if isinstance(value, tuple):
        return int(value[0]), int(value[1])
    if isinstance(value, int | np.integer):
        return int(value), int(value)
    return None, None


def _floats(value: Any, name: str, lo_bound: float, hi_bound: float, *, open_low: bool = False) -> st.SearchStrategy:
    """A number, a ``(lo, hi)`` range or a strategy, as a strategy of floats in the given bounds."""
    if isinstance(value, st.SearchStrategy):
        return value

    def ok(v: float) -> bool:
        return math.isfinite(v) and (v > lo_bound if open_low else v >= lo_bound) and v <= hi_bound

    if isinstance(value, int | float) and not isinstance(value, bool):
        if not ok(float(value)):
            raise ValueError(f"{name}: {value!r} is outside the allowed range [{lo_bound}, {hi_bound}]")
        return st.just(value)
    if isinstance(value, tuple) and len(value) == 2:
        lo, hi = (float(v) for v in value)
        if not (ok(lo) and ok(hi) and lo <= hi):
            raise ValueError(f"{name}: range {value!r} must lie in [{lo_bound}, {hi_bound}] with lo <= hi")
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    raise ValueError(f"{name}: expected a number, a (lo, hi) tuple or a strategy, got {value!r}")


def _at_temperature(model: TabularAR, temperature: Any, exact: bool) -> TabularAR:
    r"""Every row :math:`r \mapsto r^{1/T} / \sum r^{1/T}` (softmax of the same logits at T)."""
    if temperature == 1:
        return model
    inv = 1 / Fraction(temperature).limit_denominator(10**6) if exact else 1.0 / float(temperature)
    if exact:
        if Fraction(inv).denominator != 1:
            raise ValueError(f"temperature: exact instances need 1/T to be an integer, got T = {temperature!r}")
        power = int(inv)
        levels = []
        for t in range(model.depth + 1):
            lv = model.level(t) ** power
            out = np.empty(lv.shape, dtype=object)
            for idx in np.ndindex(*lv.shape[:-1]):
                out[idx] = lv[idx] / sum(lv[idx].tolist(), Fraction(0))
            levels.append(out)
        return TabularAR.from_levels(levels, name=model.name)
    levels = []
    for t in range(model.depth + 1):
        lv = np.asarray(model.level(t), dtype=np.float64)
        # log space: low temperatures must not underflow every entry of a row
        with np.errstate(divide="ignore"):
            logits = np.log(lv) * inv
        logits -= logits.max(axis=-1, keepdims=True)
        w = np.exp(logits)
        levels.append(w / w.sum(axis=-1, keepdims=True))
    return TabularAR.from_levels(levels, name=model.name)


def instances(
    n: Any = (2, 3),
    L: Any = (1, 3),
    sparsity: Any = (0.0, 0.4),
    temperature: Any = 1,
    exact: bool = True,
    max_cells: int = MAX_CELLS,
) -> st.SearchStrategy[Instance]:
    r"""A random :class:`~spectr_gbv.core.Instance` (target p, draft q, draft length L).

    Rows of p and q are Dirichlet(1) draws (rational with small denominators when
    ``exact``), each entry zeroed with probability ``sparsity`` (at least one entry per row
    stays positive), then both models are put at ``temperature``.

    Parameters
    ----------
    n : int, (lo, hi) or strategy
        Vocabulary size, >= 1. Default 2..3.
    L : int, (lo, hi) or strategy
        Draft length, >= 1. Default 1..3; pairs with ``n**L > max_cells`` are never drawn.
    sparsity : float, (lo, hi) or strategy
        Probability in [0, 1) that a table entry is zeroed. Default 0..0.4.
    temperature : float, (lo, hi) or strategy
        T > 0: every row r becomes :math:`r^{1/T}/\sum r^{1/T}`. Default 1 (unchanged).
        Exact instances need an integer 1/T (1, 1/2, 1/3, ...); other values need
        ``exact=False``.
    exact : bool
        Fractions (True) or float64 rows.
    max_cells : int
        Largest table size n**L; the smallest requested n**L must fit.

    Returns
    -------
    SearchStrategy of Instance
        Named like :func:`~spectr_gbv.core.random_instance` (the seed rebuilds it).

    Raises
    ------
    ValueError
        On a bad argument, named first in the message: when the strategy is built for sizes and
        ranges (``max_cells`` below the smallest requested ``n**L`` included), when it is drawn
        from for an exact temperature whose 1/T is not an integer.
    """
    n_strategy, L_for = _sizes(n, L, max_cells)
    sparsity_strategy = _floats(sparsity, "sparsity", 0.0, 0.95)
    temperature_strategy = _floats(temperature, "temperature", 0.0, 1e6, open_low=True)
    return _instances(n_strategy, L_for, sparsity_strategy, temperature_strategy, exact)


@st.composite
def _instances(
    draw: st.DrawFn,
    n_strategy: st.SearchStrategy[int],
    L_for: Any,
    sparsity_strategy: st.SearchStrategy,
    temperature_strategy: st.SearchStrategy,
    exact: bool,
) -> Instance:
    """The draws of :func:`instances`, on arguments it has checked."""
    n_ = draw(n_strategy)
    L_ = draw(L_for(n_))
    zero_prob = draw(sparsity_strategy)
    temp = draw(temperature_strategy)
    seed = draw(st.integers(0, 2**32 - 1))
    inst = random_instance(n_, L_, seed, exact=exact, zero_prob=zero_prob)
    if temp == 1:
        return inst
    target = _at_temperature(inst.target, temp, exact)
    draft = _at_temperature(inst.draft, temp, exact)
    return Instance(target, draft, L_, f"{inst.name} at temperature {temp:g}")


def num_drafts(K: Any = (1, MAX_K)) -> st.SearchStrategy[int]:
    """Number of drafts K (int, ``(lo, hi)`` or strategy; default 1..4).

    Returns
    -------
    SearchStrategy of int

    Raises
    ------
    ValueError
        ``K`` < 1 or malformed.
    """
    return _ints(K, "K", 1)


def configs(
    n: Any = (2, 4), L: Any = (1, 3), K: Any = (1, MAX_K), max_cells: int = MAX_CELLS
) -> st.SearchStrategy[Config]:
    """Problem sizes ``Config(n, L, K)`` with ``n**L <= max_cells``.

    Parameters
    ----------
    n, L, K : int, (lo, hi) or strategy
        Ranges as in :func:`instances` (defaults 2..4, 1..3, 1..4).
    max_cells : int
        Largest n**L; the smallest requested n**L must fit.

    Returns
    -------
    SearchStrategy of Config

    Raises
    ------
    ValueError
        On a bad argument, named first in the message, when the strategy is built (as
        :func:`instances`).
    """
    n_strategy, L_for = _sizes(n, L, max_cells)
    return _configs(n_strategy, L_for, _ints(K, "K", 1))


@st.composite
def _configs(draw: st.DrawFn, n_strategy: st.SearchStrategy[int], L_for: Any, K_strategy: st.SearchStrategy) -> Config:
    """The draws of :func:`configs`, on arguments it has checked."""
    n_ = draw(n_strategy)
    return Config(n_, draw(L_for(n_)), draw(K_strategy))


def cases(K: Any = (1, MAX_K), **instance_kwargs: Any) -> st.SearchStrategy[tuple[Instance, int]]:
    """``(instance, K)`` pairs, the items of ``validate(..., instances=[...])``.

    Parameters
    ----------
    K : int, (lo, hi) or strategy
        Number of drafts.
    **instance_kwargs
        Passed to :func:`instances` (``n``, ``L``, ``sparsity``, ``temperature``, ``exact``).

    Returns
    -------
    SearchStrategy of (Instance, int)

    Raises
    ------
    ValueError
        On a bad argument, when the strategy is built (as :func:`instances`).
    """
    return st.tuples(instances(**instance_kwargs), num_drafts(K))


def verify_inputs(
    K: Any = (1, MAX_K), **instance_kwargs: Any
) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One verification's inputs with the drafts sampled from q, as a serving system produces them.

    Draws an instance (``instance_kwargs`` as :func:`instances`) and K, then K i.i.d. drafts
    ``x_t ~ q(. | x_{<t})`` with a numpy generator seeded by hypothesis, and reads the rows off
    the tables (:func:`~spectr_gbv.reference.iteration_inputs`).

    Parameters
    ----------
    K : int, (lo, hi) or strategy
        Number of drafts.
    **instance_kwargs
        Passed to :func:`instances`.

    Returns
    -------
    SearchStrategy of (drafts, draft_probs, target_probs)
        ``drafts`` int64 [K, L]; ``draft_probs`` [K, L, n] and ``target_probs`` [K, L+1, n],
        object arrays of Fractions for exact instances, float64 otherwise. Every drafted token
        has positive draft probability; rows of drafts sharing a prefix agree.

    Raises
    ------
    ValueError
        On a bad argument, when the strategy is built (as :func:`instances`).
    """
    return _verify_inputs(instances(**instance_kwargs), num_drafts(K))


@st.composite
def _verify_inputs(
    draw: st.DrawFn, instance_strategy: st.SearchStrategy[Instance], K_strategy: st.SearchStrategy[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The draws of :func:`verify_inputs`, on arguments it has checked."""
    inst = draw(instance_strategy)
    k = draw(K_strategy)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    drafts = np.empty((k, inst.L), dtype=np.int64)
    for j in range(k):
        for t in range(inst.L):
            row = np.asarray(inst.draft.cond(drafts[j, :t]), dtype=np.float64)
            drafts[j, t] = rng.choice(inst.n, p=row / row.sum())
    return iteration_inputs(inst, drafts)
