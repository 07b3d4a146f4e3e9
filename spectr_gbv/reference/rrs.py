"""SpecInfer's recursive rejection sampling (RRS) on the draft tree."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference.base import Verifier, VerifyInput, normalize
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.structure import walk_draft_tree


def rrs_node(p: np.ndarray, q: np.ndarray, tokens: list[int], exact: bool) -> tuple[list[Any], list[np.ndarray]]:
    r"""Acceptance probabilities and residual laws of recursive rejection sampling at a node.

    Trial i accepts ``tokens[i]`` with probability :math:`\min\{1, R_i(x)/q(x)\}`, where
    :math:`R_0 = p` and :math:`R_{i+1} = \mathrm{normalize}(\max\{R_i - q, 0\})` after a
    rejection. When some :math:`R_i = q` (trial i accepts surely; in float64, when the
    residual rounds to zero and :math:`R_i(x) \ge q(x)`) the later trials are unreachable and
    dropped; a float64 residual that rounds to zero while :math:`R_i(x) < q(x)` keeps
    :math:`R_{i+1} = R_i` (never accept surely a token of residual mass 0).

    Returns
    -------
    accept : list of scalars, length m <= len(tokens)
    residuals : list of m + 1 arrays, shape (n,)
        ``residuals[i]`` is :math:`R_i`; ``residuals[-1]`` is the law after all m rejections.
    """
    one: Any = Fraction(1) if exact else 1.0
    residuals = [p]
    accept: list[Any] = []
    for x in tokens:
        r = residuals[-1]
        a = min(one, r[x] / q[x])
        nxt = np.maximum(r - q, 0)
        if not np.any(nxt > 0):
            if exact or a == one:
                # R = q: this trial accepts surely (in float64, up to rounding)
                accept.append(one)
                residuals.append(r)  # never used: the rejection branch has probability 0
                break
            # float64, R <= q up to rounding but R(x) < q(x) (R(x) = 0 < q(x), say): the rejection
            # is reachable and its residual rounded to zero; the later trials keep R
            accept.append(a)
            residuals.append(r)
            continue
        accept.append(a)
        residuals.append(normalize(nxt, exact))
    return accept, residuals


class RecursiveRejectionVerifier(Verifier):
    r"""SpecInfer multi-step speculative sampling (recursive rejection sampling) on the tree.

    At a node u with the drafts through it (index order) and their next tokens
    :math:`x_1, .., x_k` (repeats allowed), set :math:`R = p(.|u)` and for i = 1..k accept
    :math:`x_i` with probability :math:`\min\{1, R(x_i)/q(x_i|u)\}`, else
    :math:`R \leftarrow \mathrm{normalize}(\max\{R - q(.|u), 0\})`. On acceptance move to
    the child, where all drafts carrying that token continue; if all are rejected emit
    :math:`Z \sim R`; after L accepted tokens emit the bonus :math:`Z \sim p(.|x^L)`.
    Lossless (each trial is speculative sampling towards the current residual); equals MDBV
    at L = 1. Order-dependent, so ``symmetric = False``.

    References
    ----------
    Miao et al. 2024, "SpecInfer: accelerating large language model serving with tree-based
    speculative inference and verification", arXiv 2305.09781, multi-step speculative
    sampling (stochastic token-tree verification), as THEORY.md section 6 reads it.
    """

    name = "rrs"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """Recursive rejection sampling at one node of the draft tree.

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
        accept, residuals = rrs_node(p, q, tokens, exact)
        first = chooser.first_success(accept)
        return (first, None) if first is not None else (None, residuals[-1])

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Walk down the draft tree, recursive rejection sampling at each node."""
        return walk_draft_tree(batch, self.node_step, chooser)
