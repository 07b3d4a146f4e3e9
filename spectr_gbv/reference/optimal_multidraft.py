r"""The optimal single-step multi-draft verifier, exact and polynomial, lifted to the draft trie.

One step (L = 1), c i.i.d. drafts from q, target p, set S of the distinct drafted tokens. A
selection rule picks one token y of S; speculative sampling then accepts it with probability
:math:`\min\{1, p(y)/d(y)\}`, where d is the law of the selected token averaged over the
drafts, and otherwise emits :math:`Z \sim \mathrm{normalize}(\max\{p - d, 0\})` (lossless for
any selection rule; Khisti et al. 2024's canonical decomposition). The laws d that a selection
rule can induce are the bases of the polymatroid of the coverage function

.. math::
    f(X) = P(S \cap X \neq \emptyset) = g(q(X)), \qquad g(x) = 1 - (1 - x)^c,

whose vertices are the priority orders :math:`\sigma` ("select the first token of S in
:math:`\sigma`"): :math:`v_\sigma(y) = (1 - q(H))^c - (1 - q(H) - q(y))^c` with H the tokens
before y. The acceptance :math:`\sum_y \min\{p(y), d(y)\}` is at most
:math:`\min_{A}[p(A) + 1 - q(A)^c] = OPT` (THEORY.md section 5), and this module builds a base
d that attains it, then writes d as a convex combination of at most :math:`|T|` priority orders, all in
exact rational arithmetic:

1. acceptance vector :math:`a^*`: the greedy vertex of the box-truncated polymatroid
   :math:`f'(X) = \min_{Y \subseteq X}[g(q(Y)) + p(X \setminus Y)]`, so :math:`a^* \le p`,
   :math:`a^* \in P(f)`, :math:`a^*(T) = OPT`;
2. d: raise :math:`a^*` coordinate by coordinate to a base of f (``d >= a*``, so
   :math:`\sum \min\{p, d\} = OPT`);
3. peel: with :math:`\sigma` = tokens by d/q descending (consistent with every tight set of d),
   take the largest :math:`\lambda` keeping :math:`(d - \lambda v_\sigma)/(1 - \lambda)` in the
   base polytope (Dinkelbach iterations), record :math:`(\lambda, \sigma)` and repeat on the
   remainder, which has one more tight set.

Every minimisation over sets is of a concave function of q(X) plus a modular one, so its
minimiser is a threshold set of a ratio (the concave conjugate argument) and the n + 1
prefixes of one sorted order are checked. T is the support of q (tokens with q = 0 are never
drafted). Cost per node: O(n^2 log n) for steps 1-2 and O(n^2 D log n) for step 3 (at most
n - 1 peels, D Dinkelbach iterations each, D <= n and in practice 2-3), Fraction operations
on numbers whose size grows with c and n; polynomial in V and c.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference import coverage
from spectr_gbv.reference.base import Verifier, VerifyInput, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.coverage import selection_probabilities
from spectr_gbv.reference.structure import walk_draft_tree

Decomposition = coverage.Decomposition
#: ``priority`` values of :func:`node_rule`: the order in which steps 1-2 visit the tokens.
PRIORITIES = coverage.PRIORITIES


def order_vertex(q: Sequence[Fraction], order: Sequence[int], c: int) -> list[Fraction]:
    r"""Law of the first token of S in ``order``: :math:`(1 - q(H))^c - (1 - q(H) - q(y))^c`.

    Parameters
    ----------
    q : sequence of Fraction, length n
        Draft law at the node.
    order : sequence of int
        A priority order of the support T of q (tokens outside it get 0).
    c : int
        Number of i.i.d. drafts, >= 1.

    Returns
    -------
    list of Fraction, length n
        The vertex :math:`v_\sigma` of the coverage polymatroid (sums to 1 over T;
        :func:`spectr_gbv.reference.coverage.order_vertex` for c drafts for sure).
    """
    return coverage.order_vertex(q, order, coverage.point_mass(c))


def decompose(d: Sequence[Fraction], q: Sequence[Fraction], c: int) -> Decomposition:
    r"""Write a base d of the coverage polymatroid of c drafts as a mixture of priority orders (step 3).

    Parameters
    ----------
    d : sequence of Fraction, length n
        A base: the law of the selected token, summing to 1 on the support T of q, with
        :math:`d(X) \le 1 - (1 - q(X))^c` for every X.
    q : sequence of Fraction, length n
    c : int
        Number of i.i.d. drafts, >= 1.

    Returns
    -------
    tuple of (Fraction, tuple of int)
        ``(weight, order)`` pairs, weights positive and summing to 1, at most :math:`|T|` of them, with
        :math:`\sum_i w_i v_{\sigma_i} = d` exactly (:func:`spectr_gbv.reference.coverage.decompose_base`).

    Raises
    ------
    AssertionError
        ``d`` not a base (a caller bug; the verifier only passes bases it built).
    """
    return coverage.decompose_base(d, q, coverage.point_mass(c))


def node_rule(
    p: tuple[Fraction, ...], q: tuple[Fraction, ...], c: int, priority: str = "id"
) -> tuple[tuple[Fraction, ...], Decomposition]:
    r"""The optimal rule at one node: selection law d and its priority-order mixture.

    Parameters
    ----------
    p, q : tuple of Fraction, length n
        Target and draft laws at the node (each summing to 1).
    c : int
        Number of i.i.d. drafts through the node, >= 1.
    priority : str
        The order in which the greedy steps visit the tokens, which picks one of the optimal
        bases: ``"id"`` (token id; the ``optimal_multidraft`` verifier) or ``"ratio"`` (p/q
        descending, ties by id: the optimal base that gives high-ratio tokens the most
        selection mass first). Every choice attains the same node optimum.

    Returns
    -------
    d : tuple of Fraction, length n
        Law of the selected token; :math:`\sum_y \min\{p(y), d(y)\}` equals the L = 1 optimum
        :math:`\min_A [p(A) + 1 - q(A)^c]` (:func:`spectr_gbv.theory.bounds.l1_optimum`).
    orders : tuple of (Fraction, tuple of int)
        :func:`decompose` of d.

    Raises
    ------
    ValueError
        ``priority`` not in :data:`PRIORITIES`.

    Notes
    -----
    :func:`spectr_gbv.reference.coverage.mixture_rule` with target p and c drafts for sure.
    """
    return coverage.mixture_rule(p, q, coverage.point_mass(c), priority)


def _exact_row(row: np.ndarray) -> tuple[Fraction, ...]:
    """A row as exact Fractions, renormalised exactly (float64 rows sum to 1 only within rounding)."""
    vals = [Fraction(v) for v in row.tolist()]
    total = sum(vals, Fraction(0))
    return tuple(v / total for v in vals)


class OptimalMultiDraftVerifier(Verifier):
    r"""Optimal single-step multi-draft verification, node by node on the draft trie.

    At a node u of the draft tree with the c drafts through it and their next tokens
    (i.i.d. q(.|u) given u), with p = p(.|u), q = q(.|u): build the selection law d and its
    priority-order mixture (:func:`node_rule`, the module docstring); select a token y of the
    drafted set with probability :func:`selection_probabilities`; accept it with probability
    :math:`\min\{1, p(y)/d(y)\}` and move to child y, where all drafts carrying y continue;
    otherwise emit :math:`Z \sim \mathrm{normalize}(\max\{p - d, 0\})`. After L accepted tokens
    emit the bonus :math:`Z \sim p(.|x^L)`.

    Lossless: given the node, the selected token has law d (averaged over the c i.i.d.
    drafts), and speculative sampling of a d-distributed token against p is lossless. At each
    node the acceptance probability is the optimum over all lossless rules for c i.i.d.
    drafts, so at L = 1, E[tau] = OPT(K) exactly; at L >= 2 it is a greedy, node-by-node rule
    (the field's lift of a single-step verifier to a tree), not the block optimum OPT(K). The
    rule reads only the set of drafted tokens, so the law is symmetric in the draft order.
    Float64 inputs are converted to Fractions (exactly, then renormalised) for the rule and
    the results returned as floats. K = 1 is speculative sampling at each node (d = q).

    Complexity per node: polynomial, O(n^3 log n) Fraction operations in the worst case
    (module docstring), cached per (p, q, c); per iteration at most K L nodes.

    References
    ----------
    The optimum's value: THEORY.md section 5 (min-cut); Hu et al. 2025, "Towards optimal
    multi-draft speculative decoding", arXiv 2502.18779 (the subset formula). Selection then
    speculative sampling: Khisti et al. 2024, arXiv 2410.18234 (canonical decomposition).
    Construction (truncated polymatroid greedy, raise to a base, priority-order peeling):
    this project; Fujishige, "Submodular functions and optimization", 2005 (polymatroid base
    polytopes, greedy vertices).
    """

    name = "optimal_multidraft"
    lossless, structure, citation = class_facts(name)
    symmetric = True

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """Optimal selection then speculative sampling at one node of the draft tree.

        Parameters
        ----------
        p, q : ndarray, shape (n,)
            Target and draft laws at the node (Fractions or float64).
        tokens : list of int
            Next tokens of the drafts through the node, in draft order.
        prefix : tuple of int
            The node (keys a float residual fallback in ``chooser.diagnostics``).
        exact : bool
        chooser : Chooser

        Returns
        -------
        index : int or None
            Position in ``tokens`` of the first draft carrying the accepted token, or None.
        residual : ndarray, shape (n,), or None
            ``max(p - d, 0)`` when the selected token is rejected.
        """
        pe, qe = (tuple(p.tolist()), tuple(q.tolist())) if exact else (_exact_row(p), _exact_row(q))
        d, orders = node_rule(pe, qe, len(tokens))
        select = selection_probabilities(orders, tokens)
        cands = sorted(select)
        conv = (lambda x: x) if exact else float
        y = cands[chooser.categorical([conv(select[t]) for t in cands])]
        if chooser.bernoulli(conv(min(Fraction(1), pe[y] / d[y]))):
            return tokens.index(y), None
        weights = np.array([conv(max(pe[t] - d[t], Fraction(0))) for t in range(len(pe))], dtype=p.dtype)
        return None, residual_or_fallback(weights, p, exact, chooser.diagnostics, ("optimal_residual", prefix))

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Walk down the draft tree, one optimal selection + speculative sampling per node."""
        return walk_draft_tree(batch, self.node_step, chooser)


__all__ = [
    "PRIORITIES",
    "OptimalMultiDraftVerifier",
    "decompose",
    "node_rule",
    "order_vertex",
    "selection_probabilities",
]
