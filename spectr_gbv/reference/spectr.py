"""SpecTr: K-SEQ optimal-transport verification applied node by node on the draft tree."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference.base import Verifier, VerifyInput, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.kernels import kseq_residual, kseq_rho
from spectr_gbv.reference.structure import walk_draft_tree


class SpecTrVerifier(Verifier):
    r"""SpecTr K-SEQ on the draft tree.

    Start at the root with all K drafts. At a node u of depth t with the k = K_u drafts
    through it (in index order), p = p(.|u), q = q(.|u):
    :math:`\beta(\rho) = \sum_v \min\{p(v)/\rho, q(v)\}`, rho = the smallest
    :math:`\rho\in[1, k]` with :math:`1 - (1-\beta)^k \le \rho\beta`
    (:func:`~spectr_gbv.reference.kernels.kseq_rho`); try the drafts in order, accepting
    draft j's token :math:`x_j` when :math:`u_j \rho q(x_j) \le p(x_j)`, i.e. with probability
    :math:`\min\{1, p(x_j)/(\rho q(x_j))\}` (fresh uniform each). On acceptance move to child
    :math:`x_j`, where *all* drafts carrying that token (also those tried and rejected before)
    continue; if none is accepted emit
    :math:`Z \sim \mathrm{normalize}(\max\{p - \min\{p/\rho, q\}(1-(1-\beta)^k)/\beta, 0\})`.
    After L accepted tokens emit the bonus :math:`Z \sim p(.|x^L)`.

    Lossless: given the node, the next tokens of the drafts through it are i.i.d. q(.|u)
    (acceptance decisions above only read tokens at their own depth), and K-SEQ maps k i.i.d.
    q-samples to a p-sample. The law depends on the order of the drafts (the first accepted
    draft wins), so ``symmetric = False``. Exact inputs use a rational rho within 2^-40 above
    the algebraic root (see :func:`~spectr_gbv.reference.kernels.kseq_rho`).

    References
    ----------
    Sun et al. 2023, "SpecTr: fast speculative decoding via optimal transport",
    arXiv 2310.15141, the K-SEQ draft-selection algorithm and its draft-tree extension, as
    THEORY.md section 6 reads them.
    """

    name = "spectr"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """K-SEQ at one node of the draft tree, with ``k = len(tokens)`` drafts through it.

        Parameters
        ----------
        p, q : ndarray, shape (n,)
            Target and draft laws at the node.
        tokens : list of int
            Next tokens of the drafts through the node, in draft order.
        prefix : tuple of int
            The node (keys a residual fallback in ``chooser.diagnostics``).
        exact : bool
        chooser : Chooser

        Returns
        -------
        index : int or None
            Position in ``tokens`` of the first accepted draft, or None when all are rejected.
        residual : ndarray, shape (n,), or None
            K-SEQ's residual weights (None when a draft is accepted).
        """
        one = Fraction(1) if exact else 1.0
        k = len(tokens)
        rho = kseq_rho(p, q, k, exact)
        accept = [min(one, p[x] / (rho * q[x])) for x in tokens]
        first = chooser.first_success(accept)
        if first is not None:
            return first, None
        weights = residual_or_fallback(
            kseq_residual(p, q, k, rho, exact), p, exact, chooser.diagnostics, ("kseq_residual", prefix)
        )
        return None, weights

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Walk down the draft tree, one K-SEQ per node."""
        return walk_draft_tree(batch, self.node_step, chooser)
