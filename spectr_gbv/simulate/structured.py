r"""Exact averaging over i.i.d. drafts without enumerating draft tuples (the structured paths).

:func:`~spectr_gbv.simulate.exact.simulate_exact` averages a verifier's kernel over the
:math:`m^K` ordered draft tuples (m drafts of positive probability). For a verifier whose class
declares a reading shape of :mod:`spectr_gbv.reference.structure`, this module computes the
same average, exactly and to the last rational digit, by running the verifier's own step code
over far fewer inputs:

* ``selected_draft`` (``ar``, ``sd``, ``bv``, ``gbv_multipath``): one kernel per draft x, on K
  copies of x, weighted by the probability that x is the selected draft
  (:math:`a(o) = \sum_x P(\text{sel} = x)\,P(O = o \mid x, \dots, x)`); m kernels;
* ``draft_scan`` (``mdbv``): the scan state (accepted prefix, law of the next token) after k
  drafts is a Markov chain; the chain is propagated draft by draft, the step law of each
  (state, draft) pair enumerated by replaying ``scan_step``; drafts that do not start with the
  prefix keep the state with their total q-mass. Cost: K times (states x drafts through them);
* ``draft_tree`` (``rrs``, ``spectr``): the law below a node u reached by c drafts depends only
  on (u, c) (their next tokens are c i.i.d. draws from q(.|u)); it is computed once per (u, c)
  by replaying ``node_step`` on every ordered token sequence of length c, and memoised. Cost:
  at most (nodes of depth < L) x sum over c <= K of s^c, s the support of q(.|u).

These paths run on exact instances only (Fractions), where the lossless verifiers' kernels
record no clamp and no residual fallback; a path that records one, or a ``selected_draft``
class whose selection probabilities do not sum to exactly 1, is reported by raising
:class:`StructureError` (the simulator then uses the tuple enumeration, never a wrong law).

References
----------
THEORY.md sections 1-2 (the averaged law a(o) over i.i.d. drafts) and 6 (the verifiers).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.core.progress import ProgressBar
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Diagnostics, Emission, emission_outputs, replay_outcomes
from spectr_gbv.reference.structure import STRUCTURES

Law = dict[tuple[int, ...], Scalar]

#: :func:`structured_kernels` reports at most this (2^62): larger estimates are not computed exactly.
ESTIMATE_CAP = 2**62


class StructureError(RuntimeError):
    """A structured path found that the verifier does not behave as its declared shape."""


class StructureTooLargeError(ValueError):
    """The structured path would evaluate more kernels than allowed (raised before or during the run)."""


@dataclass(frozen=True)
class StructuredLaw:
    """The averaged output law from a structured path.

    Attributes
    ----------
    law : dict of tuple of int to Fraction
        :math:`a(o)` over outputs of positive probability.
    structure : str
        The shape used (one of :data:`~spectr_gbv.reference.structure.STRUCTURES`).
    num_kernels : int
        Kernel (or step) evaluations performed.
    """

    law: Law
    structure: str
    num_kernels: int


def declared_structure(verifier: Verifier) -> str | None:
    """The shape declared in the verifier's own class body, or None (inherited ones do not count)."""
    shape = type(verifier).__dict__.get("structure")
    return shape if shape in STRUCTURES else None


def structured_kernels(verifier: Verifier, instance: Instance, num_drafts: int) -> int | None:
    """Estimated kernel evaluations of the structured path, or None when it does not apply.

    ``selected_draft``: m (drafts of positive probability), exactly. ``draft_tree``: an upper
    bound, the sum over the nodes u of depth < L with q(u) > 0 and over c = 1..K of s_u^c
    (s_u = support of q(.|u)). ``draft_scan``: K m, the cost with one state per draft; the
    true cost depends on the number of chain states, so the run checks its limit again before
    each draft (:class:`StructureTooLargeError`). Capped at :data:`ESTIMATE_CAP`.
    """
    shape = declared_structure(verifier)
    if shape is None or not instance.exact:
        return None
    q, L, K = instance.draft, instance.L, num_drafts
    m = int(np.count_nonzero(q.joint(L)))
    if shape == "selected_draft":
        return m
    if shape == "draft_scan":
        return K * m
    total = 0
    for t in range(L):
        level = q.level(t).reshape(-1, instance.n)
        mass = q.joint(t).reshape(-1) if t else np.ones(1, dtype=object)
        for row, w in zip(level, mass, strict=True):
            if w > 0:
                s = int(np.count_nonzero(row))
                if K * math.log2(max(s, 2)) > 62:  # more than ~4.6e18 kernels: no need for the exact count
                    return ESTIMATE_CAP
                total += K if s == 1 else (s ** (K + 1) - s) // (s - 1)
    return min(total, ESTIMATE_CAP)


def _add(law: Law, emission: Emission, weight: Scalar) -> None:
    for out, prob in emission_outputs(emission, True):
        law[out] = law.get(out, Fraction(0)) + weight * prob


def _check_diag(diag: Diagnostics, verifier: Verifier) -> None:
    if any(diag.summary()[k] for k in ("clamped", "residual_fallbacks")):
        raise StructureError(f"{verifier.name}: a kernel clamped a weight or used a residual fallback")


def _selected_draft(verifier: Any, table: Any, K: int, bar: ProgressBar) -> tuple[Law, int]:
    law: Law = {}
    total = Fraction(0)
    for i in range(len(table.tokens)):
        rows = [i] * K
        batch = VerifyInput(table.tokens[rows], table.draft_rows[rows], table.target_rows[rows], True)
        weight = verifier.selected_draft_probability(batch)
        total += weight
        if weight:
            for out, prob in verifier.outcome_law_checked(batch).items():
                law[out] = law.get(out, Fraction(0)) + weight * prob
            if any(verifier.last_diagnostics.get(k, 0) for k in ("clamped", "residual_fallbacks")):
                raise StructureError(f"{verifier.name}: a kernel clamped a weight or used a residual fallback")
        bar.update()
    if total != 1:
        raise StructureError(f"{verifier.name}: selected-draft probabilities sum to {total}, not 1")
    return law, len(table.tokens)


def _draft_scan(verifier: Any, table: Any, K: int, L: int, limit: int, bar: ProgressBar) -> tuple[Law, int]:
    through: dict[tuple[int, ...], list[int]] = {}
    for i, x in enumerate(table.tokens.tolist()):
        for t in range(L):
            through.setdefault(tuple(x[:t]), []).append(i)
    mass = {u: sum((table.probs[i] for i in idx), Fraction(0)) for u, idx in through.items()}
    singles = [
        VerifyInput(table.tokens[[i]], table.draft_rows[[i]], table.target_rows[[i]], True)
        for i in range(len(table.tokens))
    ]
    diag = Diagnostics()
    root = table.target_rows[0, 0]
    states: dict[Any, list[Any]] = {((), tuple(root.tolist())): [(), root, Fraction(1)]}
    kernels = 0

    def add(new: dict[Any, list[Any]], prefix: tuple[int, ...], law_row: np.ndarray, w: Scalar) -> None:
        key = (prefix, tuple(law_row.tolist()))
        entry = new.get(key)
        if entry is None:
            new[key] = [prefix, law_row, w]
        else:
            entry[2] = entry[2] + w

    for _ in range(K):
        work = sum(len(through[p]) for p, _, _ in states.values() if len(p) < L)
        if kernels + work > limit:
            raise StructureTooLargeError(f"{kernels + work} scan steps exceed the limit {limit}")
        new: dict[Any, list[Any]] = {}
        for prefix, row, w in states.values():
            if len(prefix) == L:
                add(new, prefix, row, w)
                continue
            rest = 1 - mass[prefix]
            if rest:
                add(new, prefix, row, w * rest)
            for i in through[prefix]:
                step = functools.partial(verifier.scan_step, singles[i], 0, prefix, row)
                for (prefix2, row2), prob in replay_outcomes(step, True, diag):
                    add(new, prefix2, row2, w * table.probs[i] * prob)
                kernels += 1
                bar.update()
        states = new
    _check_diag(diag, verifier)
    law: Law = {}
    for prefix, row, w in states.values():
        _add(law, Emission(prefix, row), w)
    return law, kernels


def _multinomial(tokens: list[int]) -> int:
    """Number of orderings of the multiset ``tokens``."""
    out = math.factorial(len(tokens))
    for v in set(tokens):
        out //= math.factorial(tokens.count(v))
    return out


def _draft_tree(verifier: Any, instance: Instance, K: int, bar: ProgressBar) -> tuple[Law, int]:
    L, target, draft = instance.L, instance.target, instance.draft
    diag = Diagnostics()
    memo: dict[tuple[tuple[int, ...], int], Law] = {}
    kernels = 0
    symmetric = bool(verifier.symmetric)

    def below(prefix: tuple[int, ...], c: int) -> Law:
        nonlocal kernels
        key = (prefix, c)
        if key in memo:
            return memo[key]
        p, q = target.cond(prefix), draft.cond(prefix)
        support = [v for v in range(instance.n) if q[v] > 0]
        out: Law = {}
        # a symmetric verifier's law depends on the multiset of next tokens only: one kernel per
        # multiset, weighted by its multinomial probability
        if symmetric:
            seqs: Iterable[tuple[int, ...]] = itertools.combinations_with_replacement(support, c)
        else:
            seqs = itertools.product(support, repeat=c)
        for seq in seqs:
            tokens = list(seq)
            w = math.prod((q[v] for v in seq), start=Fraction(1))
            if symmetric:
                w *= _multinomial(tokens)
            step = functools.partial(verifier.node_step, p, q, tokens, prefix, True)
            for (first, residual), prob in replay_outcomes(step, True, diag):
                if first is None:
                    _add(out, Emission(prefix, residual), w * prob)
                    continue
                child = prefix + (tokens[first],)
                if len(child) == L:
                    _add(out, Emission(child, target.cond(child)), w * prob)
                else:
                    for o, v in below(child, tokens.count(tokens[first])).items():
                        out[o] = out.get(o, Fraction(0)) + w * prob * v
            kernels += 1
            bar.update()
        memo[key] = out
        return out

    law = below((), K)
    _check_diag(diag, verifier)
    return law, kernels


def structured_law(
    verifier: Verifier, instance: Instance, table: Any, num_drafts: int, limit: int, bar: ProgressBar
) -> StructuredLaw:
    """The output law averaged over K i.i.d. drafts through the verifier's declared shape.

    Parameters
    ----------
    verifier : Verifier
        Its class declares a shape (:func:`declared_structure` is not None).
    instance : Instance
        Exact (Fractions).
    table : DraftTable
        :class:`~spectr_gbv.simulate.exact.DraftTable` of the instance.
    num_drafts : int
        K >= 1.
    limit : int
        Largest number of kernel evaluations allowed.
    bar : ProgressBar
        Advanced once per kernel evaluation.

    Returns
    -------
    StructuredLaw

    Raises
    ------
    StructureError
        The verifier does not behave as its declared shape (see the module docstring).
    StructureTooLargeError
        The ``draft_scan`` chain would need more than ``limit`` steps.
    ValueError
        No declared shape, or a float instance.
    """
    shape = declared_structure(verifier)
    if shape is None or not instance.exact:
        raise ValueError("structured_law: needs a verifier class that declares a structure and an exact instance")
    K = int(num_drafts)
    if shape == "selected_draft":
        law, kernels = _selected_draft(verifier, table, K, bar)
    elif shape == "draft_scan":
        law, kernels = _draft_scan(verifier, table, K, instance.L, limit, bar)
    else:
        law, kernels = _draft_tree(verifier, instance, K, bar)
    return StructuredLaw(law, shape, kernels)


__all__ = [
    "ESTIMATE_CAP",
    "StructureError",
    "StructureTooLargeError",
    "StructuredLaw",
    "declared_structure",
    "structured_kernels",
    "structured_law",
]
