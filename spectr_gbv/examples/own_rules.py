r"""Verification rules as a researcher writes them, to run wherever a method name is accepted.

Each rule is named by ``module:attribute`` (``spectr_gbv.examples.own_rules:TreeRRS``) in
``spectr-gbv simulate --methods``, ``spectr-gbv sweep --methods``, ``spectr-gbv validate
--reference``, ``spectr-gbv bench --methods`` and ``SpeculativeDecoder(method=...)``; see
docs/verifiers.md, "Bring your own rule".

* :class:`TreeRRS`: recursive rejection sampling on the draft tree, written from the paper
  against the :class:`~spectr_gbv.reference.Verifier` interface. It declares
  ``structure = "draft_tree"``, so the exact simulator averages it node by node instead of
  enumerating draft tuples. Lossless.
* :class:`DistinctTokenRRS`: the same walk, but each *distinct* drafted token is tried once
  (a natural "optimisation": repeats are skipped). It claims to be lossless; the exact
  simulator shows it is not (its validity defect is positive for K >= 2), because the trials
  are no longer i.i.d. draws of q.
* :func:`first_draft_sd`: token-level speculative sampling of draft 0 as a plain function
  with the generic interface; its exact law is enumerated over its ``rng`` draws. It declares
  ``first_draft_sd.lossless = True`` (its claim) and ``first_draft_sd.drafts = "one"`` (it reads
  draft 0 only, so grids run it at K = 1 only).

References
----------
Miao et al. 2024, "SpecInfer", arXiv 2305.09781 (multi-step speculative sampling);
Leviathan et al. 2023, arXiv 2211.17192, Algorithm 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.reference import Verifier
from spectr_gbv.reference.base import VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.structure import walk_draft_tree


class TreeRRS(Verifier):
    r"""Recursive rejection sampling at every node of the draft tree (lossless).

    At a node with target and draft laws p, q and the drafted next tokens :math:`x_1..x_m` (in
    draft order, repeats kept), start from :math:`R = p`; trial i accepts :math:`x_i` with
    probability :math:`\min\{1, R(x_i)/q(x_i)\}`, else :math:`R \leftarrow
    \mathrm{normalize}(\max\{R - q, 0\})`. All rejected: emit :math:`Z \sim R`.

    References
    ----------
    Miao et al. 2024 (SpecInfer, arXiv 2305.09781), multi-step speculative sampling.
    """

    name = "tree_rrs"
    lossless = True
    symmetric = False
    structure = "draft_tree"
    citation = "Miao et al. 2024 (SpecInfer, arXiv 2305.09781), written as a user's rule"

    def tokens_to_try(self, tokens: list[int]) -> list[int]:
        """Indices into ``tokens`` of the trials, in order (here: every drafted token)."""
        return list(range(len(tokens)))

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """Trials at one node: ``(index of the accepted token, None)`` or ``(None, residual weights)``.

        Parameters
        ----------
        p, q : ndarray, shape (n,)
            Target and draft laws at the node (Fractions or float64).
        tokens : list of int
            The next tokens of the drafts through the node, in draft order.
        prefix : tuple of int
            The node (unused).
        exact : bool
        chooser : Chooser
            Takes every random decision (``bernoulli``).
        """
        r = p
        for i in self.tokens_to_try(tokens):
            x = tokens[i]
            if chooser.bernoulli(min(1, r[x] / q[x])):
                return i, None
            rest = np.maximum(r - q, 0)
            if not np.any(rest > 0):  # R = q (up to rounding): nothing left to correct
                return None, r
            r = rest / rest.sum()
        return None, r

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Walk down the draft tree with :meth:`node_step`."""
        return walk_draft_tree(batch, self.node_step, chooser)


class DistinctTokenRRS(TreeRRS):
    """:class:`TreeRRS` trying each distinct drafted token once: claims lossless, is not."""

    name = "distinct_token_rrs"
    lossless = True  # the author's claim; the exact simulator refutes it
    symmetric = False
    structure = "draft_tree"
    citation = "TreeRRS with repeated tokens skipped, written as a user's rule"

    def tokens_to_try(self, tokens: list[int]) -> list[int]:
        """The first index of each distinct token."""
        seen: dict[int, int] = {}
        for i, x in enumerate(tokens):
            seen.setdefault(x, i)
        return list(seen.values())


def first_draft_sd(
    drafts: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, rng: np.random.Generator
) -> list[int]:
    """Token-level speculative sampling of draft 0 (Leviathan et al. 2023, Algorithm 1).

    Parameters
    ----------
    drafts : ndarray, shape [K, L], int
    draft_probs : ndarray, shape [K, L, V]
    target_probs : ndarray, shape [K, L+1, V]
    rng : numpy.random.Generator
        One ``random()`` per trial, one ``choice`` for the final token.

    Returns
    -------
    list of int
        The accepted prefix of draft 0 and one token (``tau + 1`` ids).
    """
    x = drafts[0]
    out: list[int] = []
    for t in range(len(x)):
        p, q = target_probs[0, t], draft_probs[0, t]
        if rng.random() < min(1, p[x[t]] / q[x[t]]):
            out.append(int(x[t]))
            continue
        rest = np.maximum(p - q, 0)
        weights = rest if np.any(rest > 0) else p
        return out + [int(rng.choice(len(p), p=weights / weights.sum()))]
    bonus = target_probs[0, len(x)]
    return out + [int(rng.choice(len(bonus), p=bonus / bonus.sum()))]


first_draft_sd.lossless = True  # type: ignore[attr-defined]
first_draft_sd.drafts = "one"  # type: ignore[attr-defined]  # reads draft 0 only: grids run it at K = 1
