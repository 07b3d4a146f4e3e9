"""SpecInfer's recursive rejection sampling with the drafts through each node tried in random order."""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.rrs import rrs_node
from spectr_gbv.reference.structure import walk_draft_tree


def random_order(tokens: list[int], chooser: Chooser) -> list[int]:
    """Positions of ``tokens`` in a uniformly random order, drawn through ``chooser``.

    The order is drawn one position at a time with ``chooser.categorical``, each remaining
    *token value* with weight its remaining multiplicity (the first remaining position holding
    it is taken). This is the law of the token sequence under a uniform permutation of the c
    positions, with one branch per distinct sequence instead of c! (equal tokens are
    interchangeable for the verifier).

    Parameters
    ----------
    tokens : list of int
        The next tokens of the drafts through a node (repeats allowed).
    chooser : Chooser

    Returns
    -------
    list of int
        A permutation of ``range(len(tokens))``.
    """
    remaining = list(range(len(tokens)))
    order: list[int] = []
    while remaining:
        values = sorted({tokens[i] for i in remaining})
        if len(values) == 1:
            order.extend(remaining)
            break
        counts = [sum(1 for i in remaining if tokens[i] == v) for v in values]
        v = values[chooser.categorical(counts)]
        pos = next(i for i in remaining if tokens[i] == v)
        order.append(pos)
        remaining.remove(pos)
    return order


class RandomOrderRecursiveRejectionVerifier(Verifier):
    r"""SpecInfer recursive rejection sampling, the drafts through each node tried in random order.

    At a node u with the c drafts through it and their next tokens :math:`x_1..x_c` (repeats
    allowed), draw a uniformly random order of the c drafts (of the drafts with their repeats,
    not of the distinct child tokens), then run :func:`~spectr_gbv.reference.rrs.rrs_node` in
    that order: :math:`R = p(.|u)`; accept the next token x with probability
    :math:`\min\{1, R(x)/q(x|u)\}`, else :math:`R \leftarrow \mathrm{normalize}(\max\{R -
    q(.|u), 0\})`. On acceptance all drafts carrying the token continue; if all are rejected
    emit :math:`Z \sim R`; after L accepted tokens emit the bonus :math:`Z \sim p(.|x^L)`.

    SpecInfer's verification picks the next child of the token tree uniformly at random among
    those not yet tried. Here the permuted objects are the c drafts, repeats included: with
    i.i.d. drafts a repeated token must be tried again (it is then surely rejected, but its
    rejection still moves R), and trying each distinct child once is not lossless for
    i.i.d. drafts. A uniform order of i.i.d. draws is again i.i.d., so this is lossless, and its
    law averaged over the drafts equals that of ``rrs`` (draft order) at every L: the law below
    a node depends only on (u, c). Given the drafts, the law depends only on the multiset of
    their tokens at each node, so ``symmetric = True``.

    Complexity per node: the number of distinct orders of the c tokens (at most c!) times
    O(c n) for the residuals, in enumeration; O(c^2 + c n) per sample.

    References
    ----------
    Miao et al. 2024, "SpecInfer: accelerating large language model serving with tree-based
    speculative inference and verification", arXiv 2305.09781, multi-step speculative sampling
    (stochastic token-tree verification, a uniformly random untried child at each step);
    THEORY.md section 6.
    """

    name = "rrs_random"
    lossless, structure, citation = class_facts(name)
    symmetric = True

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """Recursive rejection sampling at one node, in a uniformly random order of its drafts.

        Parameters
        ----------
        p, q : ndarray, shape (n,)
            Target and draft laws at the node.
        tokens : list of int
            Next tokens of the drafts through the node, in draft order.
        prefix : tuple of int
            The node (unused: the rule is the same at every node).
        exact : bool
        chooser : Chooser

        Returns
        -------
        index : int or None
            Position in ``tokens`` of the accepted trial, or None when all are rejected.
        residual : ndarray, shape (n,), or None
            The law after all rejections (None when a token is accepted).
        """
        order = random_order(tokens, chooser)
        accept, residuals = rrs_node(p, q, [tokens[i] for i in order], exact)
        first = chooser.first_success(accept)
        return (order[first], None) if first is not None else (None, residuals[-1])

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Walk down the draft tree, recursive rejection sampling in random order at each node."""
        return walk_draft_tree(batch, self.node_step, chooser)


__all__ = ["RandomOrderRecursiveRejectionVerifier", "random_order"]
