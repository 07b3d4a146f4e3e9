r"""How a verifier reads its K drafts: the shapes the exact simulator averages without tuples.

The exact simulator averages a verifier's law over K i.i.d. drafts. Enumerating every draft
tuple costs :math:`m^K` kernels (m drafts of positive probability). A verifier class may
instead declare, in its *own* class body, one of three reading shapes in its
``structure`` attribute (:class:`~spectr_gbv.reference.Verifier`); its ``run`` is then written with the
generic loop below for that shape, so the simulator's dynamic programme
(:mod:`spectr_gbv.simulate.structured`) executes the same per-step code as ``run``. A
subclass that does not re-declare ``structure`` (a mutant overriding one step, a variant) is
simulated tuple by tuple, never through a shape it may have broken.

``"selected_draft"``
    The law given the drafts depends on one draft x the verifier selects, and equals its law
    on K copies of x. The class provides ``selected_draft_probability(batch)``: for ``batch``
    = K copies of x, the probability that the selected draft of K i.i.d. drafts is x (``sd``
    and ``bv`` read the first draft: q(x); ``ar`` reads none; ``gbv_multipath`` selects the
    lexicographic maximum, whose law is the skewed q). These probabilities must sum to 1
    over x; the simulator checks it exactly.
``"draft_scan"``
    The drafts are read one at a time in index order (:func:`scan_drafts`) by
    ``scan_step(batch, k, prefix, law, chooser) -> (prefix, law)``, which reads only draft k
    and the state: the accepted prefix P and the law R of the next token. A draft that does
    not start with P is skipped; the scan ends when P has L tokens; then Z ~ R (``mdbv``). The state
    after k drafts is a Markov chain in k.
``"draft_tree"``
    The verifier walks down the draft tree (:func:`walk_draft_tree`). At a node u of depth t
    with the drafts through u in index order, ``node_step(p, q, tokens, prefix, exact,
    chooser) -> (index, residual)`` reads only p(.|u), q(.|u) and the drafts' tokens at depth
    t, and returns the index of the accepted token (``residual`` None) or None and the
    residual weights of Z. All drafts carrying the accepted token continue to the child
    (``rrs``, ``spectr``). Given that c drafts reach a node, their next tokens are c i.i.d.
    draws from q(.|u), so the law below a node depends only on (u, c).

References
----------
THEORY.md sections 1-2 (i.i.d. drafts) and 6 (the verifiers).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission

#: The reading shapes a verifier may declare (see the module docstring).
STRUCTURES: tuple[str, ...] = ("selected_draft", "draft_scan", "draft_tree")

ScanStep = Callable[[VerifyInput, int, tuple[int, ...], np.ndarray, Chooser], tuple[tuple[int, ...], np.ndarray]]
NodeStep = Callable[
    [np.ndarray, np.ndarray, list[int], tuple[int, ...], bool, Chooser], tuple[int | None, np.ndarray | None]
]


def scan_drafts(batch: VerifyInput, step: ScanStep, chooser: Chooser) -> Emission:
    """Read the drafts in index order with ``step``; the ``"draft_scan"`` shape.

    Parameters
    ----------
    batch : VerifyInput
    step : callable
        ``step(batch, k, prefix, law, chooser) -> (prefix, law)``: the new accepted prefix
        (extending ``prefix``) and the law of the token after it, from draft ``k``, which
        starts with ``prefix`` (``len(prefix) < L``).
    chooser : Chooser

    Returns
    -------
    Emission
        The final prefix and law (the law starts as ``target_probs[0, 0]``).
    """
    prefix: tuple[int, ...] = ()
    law = batch.target_probs[0, 0]
    for k in range(batch.K):
        if len(prefix) == batch.L:
            break
        if batch.draft(k)[: len(prefix)] != prefix:
            continue
        prefix, law = step(batch, k, prefix, law, chooser)
    return Emission(prefix, law)


def walk_draft_tree(batch: VerifyInput, node_step: NodeStep, chooser: Chooser) -> Emission:
    """Walk down the draft tree with ``node_step`` at each node; the ``"draft_tree"`` shape.

    Parameters
    ----------
    batch : VerifyInput
    node_step : callable
        ``node_step(p, q, tokens, prefix, exact, chooser) -> (index, residual)`` at a node:
        ``p``, ``q`` of shape (n,), ``tokens`` the next tokens of the drafts through the node
        in index order; ``index`` of the accepted token, or None with the residual weights.
    chooser : Chooser

    Returns
    -------
    Emission
        The accepted prefix and the residual at the stop, or the bonus row
        ``p(. | x^L)`` after L accepted tokens.
    """
    active = list(range(batch.K))
    prefix: tuple[int, ...] = ()
    for t in range(batch.L):
        k0 = active[0]
        tokens = [int(batch.drafts[j, t]) for j in active]
        first, residual = node_step(
            batch.target_probs[k0, t], batch.draft_probs[k0, t], tokens, prefix, batch.exact, chooser
        )
        if first is None:
            if residual is None:
                raise ValueError(f"node_step at prefix {prefix}: neither an accepted index nor a residual")
            return Emission(prefix, residual)
        token = tokens[first]
        prefix = prefix + (token,)
        active = [j for j in active if batch.drafts[j, t] == token]
    return Emission(prefix, batch.target_probs[active[0], batch.L])


def draft_probability(batch: VerifyInput, k: int) -> Scalar:
    """``q(x)`` of draft ``k``: the product of its drafted tokens' conditionals (exact for Fractions)."""
    prob = batch.one
    for t in range(batch.L):
        prob = prob * batch.draft_probs[k, t, int(batch.drafts[k, t])]
    return prob


__all__ = ["STRUCTURES", "draft_probability", "scan_drafts", "walk_draft_tree"]
