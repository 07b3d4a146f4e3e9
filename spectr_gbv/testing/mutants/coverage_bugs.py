r"""Planted multi-draft bugs that hide where a small battery does not look: many drafts, ratio ties.

Each mutant is lossless on part of the input space and lossy outside it, so a harness that
only samples small instances passes it:

============================  =====================================================  ===================
mutant                        lossless exactly when                                  diagnosis
============================  =====================================================  ===================
``rrs_two_residual_slots``    K <= 2 (at most two sibling rejections at a node)      ``wrong_residual``
``rrs_lagged_target``         K <= 3 (at most three sibling trials at a node)        ``not_lossless``
``multipath_tie_mismatch``    no drafted children tie in ``min(1, p/q)``, or K = 1   ``not_lossless``
============================  =====================================================  ===================

Interface: the generic one of :mod:`spectr_gbv.testing.mutants`. Each runs a
:class:`~spectr_gbv.reference.Verifier` subclass (tree RRS, multi-path greedy BV) written
against the reference layer's chooser, so ``outcome_law`` is the exact law of its sampler. The
single-draft coverage mutants (large vocabularies, id 0, all-zero residuals) are in
:mod:`spectr_gbv.testing.mutants.draw_bugs`.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.base import VerifyInput, normalize
from spectr_gbv.reference.choosers import Chooser
from spectr_gbv.reference.gbv_multipath import (
    MultiPathGreedyVerifier,
    PreparedRows,
    select_path,
    skewed_rows,
    token_ranks,
)
from spectr_gbv.reference.kernels import block_weights
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier
from spectr_gbv.testing.mutants.inputs import law_of, sample_validated, tag_verifier

#: Residual updates kept by ``rrs_two_residual_slots`` (lossy from K = RESIDUAL_SLOTS + 1).
RESIDUAL_SLOTS = 2
#: Target write-backs kept by ``rrs_lagged_target`` (lossy from K = LAGGED_WRITE_BACKS + 2).
LAGGED_WRITE_BACKS = 2


# ============================================================================ RRS node variants
def capped_rrs_node(
    p: np.ndarray, q: np.ndarray, tokens: list[int], exact: bool, updates: int, lag_target: bool
) -> tuple[list[Any], np.ndarray]:
    r"""Recursive rejection sampling at a node with a bounded number of residual updates.

    As :func:`spectr_gbv.reference.rrs.rrs_node` (trial i accepts with
    :math:`\min\{1, R(x_i)/q(x_i)\}`, :math:`R \leftarrow \mathrm{normalize}(\max\{R - q, 0\})`
    after a rejection), except that R is updated at the first ``updates`` rejections only.

    * ``lag_target=False`` (a residual buffer of ``updates`` slots): later trials test against
      the last stored residual and, after more than ``updates`` rejections, the correction is
      drawn from it, :math:`R_{updates}` instead of :math:`R_{k}`. Trials are right up to
      trial ``updates + 1``; only the correction after ``updates + 1`` or more rejections is
      wrong, so the bug needs K >= ``updates + 1``.
    * ``lag_target=True`` (the target row written back ``updates`` times): later trials test
      against the stale target, but the correction is always computed afresh from the target
      the last trial used, :math:`\mathrm{normalize}(\max\{R_{stale} - q, 0\})`. Trial
      ``updates + 2`` is the first wrong one, so the bug needs K >= ``updates + 2``.

    Parameters
    ----------
    p, q : ndarray, shape (n,)
        Target and draft laws at the node.
    tokens : list of int
        The children tried, in draft order.
    exact : bool
    updates : int
        Residual updates kept (>= 0).
    lag_target : bool
        Which of the two bugs.

    Returns
    -------
    accept : list of scalars, length m <= len(tokens)
        Acceptance probability of each trial (trials after a sure acceptance are dropped).
    final : ndarray, shape (n,)
        The law the correction is drawn from when all m trials reject.
    """
    one: Any = Fraction(1) if exact else 1.0
    target = p
    accept: list[Any] = []
    final = p
    for i, x in enumerate(tokens):
        a = min(one, target[x] / q[x])
        nxt = np.maximum(target - q, 0)
        if not np.any(nxt > 0):  # R = q: this trial accepts surely
            accept.append(one)
            break
        accept.append(a)
        fresh = normalize(nxt, exact)
        if i < updates:
            target = fresh
            final = fresh
        else:
            final = fresh if lag_target else target
    return accept, final


class _CappedRRS(RecursiveRejectionVerifier):
    """RRS on the draft tree with :func:`capped_rrs_node` at every node."""

    lossless = False

    def __init__(self, name: str, updates: int, lag_target: bool) -> None:
        super().__init__()
        self.name = name  # type: ignore[misc]
        self.updates, self.lag_target = updates, lag_target

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """The reference RRS walk's node, with the capped node rule."""
        accept, final = capped_rrs_node(p, q, tokens, exact, self.updates, self.lag_target)
        first = chooser.first_success(accept)
        return (first, None) if first is not None else (None, final)


# ============================================================================ multipath tie mismatch
def skewed_rows_reversed_ties(batch: VerifyInput, k: int) -> list[np.ndarray]:
    r""":func:`~spectr_gbv.reference.gbv_multipath.skewed_rows` with ties among equal ratios reversed.

    The same formula, :math:`q_{skew}(v|u) = ((A+y+z)^K - (A+y)^K) / ((A+x)^K - A^K)`, with
    the node ranks ordering tied tokens by *descending* id, while
    :func:`~spectr_gbv.reference.gbv_multipath.select_path` orders them ascending. The rows
    are then the law of a different selection rule than the one applied: a draft law that is
    not the law of the selected path. Identical to the reference when no two tokens with
    q > 0 tie at a node on the path (or K = 1, where :math:`q_{skew} = q`).

    Returns
    -------
    list of L arrays, shape (n,)
    """
    return skewed_rows(batch, k, ranks=functools.partial(token_ranks, reverse_ties=True))


class _TieMismatchMultipath(MultiPathGreedyVerifier):
    """Multi-path greedy BV whose skewed draft law breaks ratio ties the other way."""

    name = "mutant_multipath_tie_mismatch"
    lossless = False

    def prepare(self, batch: VerifyInput) -> PreparedRows:
        """Path by ascending-id ties, skewed rows by descending-id ties."""
        k = select_path(batch)
        rows = skewed_rows_reversed_ties(batch, k)
        weights = block_weights(batch.draft(k), batch.target_probs[k, : batch.L], rows, batch.exact)
        return PreparedRows(k, rows, weights)


_TWO_SLOTS = _CappedRRS("mutant_rrs_two_residual_slots", RESIDUAL_SLOTS, lag_target=False)
_LAGGED = _CappedRRS("mutant_rrs_lagged_target", LAGGED_WRITE_BACKS, lag_target=True)
_TIES = _TieMismatchMultipath()


# ============================================================================ generic mutants
def rrs_two_residual_slots(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    r"""Tree RRS with a residual buffer of two slots: lossless for K <= 2, lossy from K = 3.

    SpecInfer's recursive rejection sampling (:class:`~spectr_gbv.reference.rrs.RecursiveRejectionVerifier`)
    keeps one residual per sibling rejection at a node, :math:`R_{i+1} =
    \mathrm{normalize}(\max\{R_i - q, 0\})`. This kernel stores :data:`RESIDUAL_SLOTS` = 2
    of them (sized for the K = 2 trees it was tested on): after the third and later
    rejections it does not update R, so the correction after k >= 3 rejections is drawn from
    :math:`R_2` instead of :math:`R_k` (:func:`capped_rrs_node`, ``lag_target=False``). The
    acceptance probabilities are right, so the accepted-length law is RRS's and only the
    emitted correction is wrong. With K <= 2 no node sees a third rejection: exactly
    lossless.

    Bug class: a fixed-size per-node buffer sized for the tree shapes it was tested on (a
    planted bug of this project, not a cited public report).

    Parameters
    ----------
    draft_tokens : array-like, int64 [K, L]
        K drafts; drafts with a common prefix share the tree node.
    draft_probs : array-like, float [K, L, V]
    target_probs : array-like, float [K, L+1, V]
    rng : numpy.random.Generator

    Returns
    -------
    list of int
        Accepted path plus one token.

    Raises
    ------
    ValueError
        Bad shapes or values (the reference input checks), or ``rng`` not a Generator.

    References
    ----------
    Miao et al. 2024 (SpecInfer, arXiv 2305.09781), multi-step speculative sampling.

    Attributes
    ----------
    bug = "wrong_residual"; outcome_law: exact law of this sampler.
    """
    return sample_validated(_TWO_SLOTS, draft_tokens, draft_probs, target_probs, rng)


def rrs_lagged_target(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    r"""Tree RRS whose acceptance target is written back twice only: lossless for K <= 3, lossy from K = 4.

    As :func:`rrs_two_residual_slots`, but the kernel keeps the acceptance target in a row
    that is written back for the first :data:`LAGGED_WRITE_BACKS` = 2 rejections only, while
    the correction is always computed afresh from the row the last trial used
    (:func:`capped_rrs_node`, ``lag_target=True``). Trials 1-3 and the correction after three
    rejections are right; trial 4 tests against :math:`R_2` instead of :math:`R_3`, so the
    acceptance rule itself is wrong from K = 4 on.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`rrs_two_residual_slots`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`rrs_two_residual_slots`.

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact law of this sampler.
    """
    return sample_validated(_LAGGED, draft_tokens, draft_probs, target_probs, rng)


def multipath_tie_mismatch(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    r"""Multi-path greedy BV whose path choice and skewed draft law break ratio ties differently.

    :class:`~spectr_gbv.reference.gbv_multipath.MultiPathGreedyVerifier` ranks the children of
    a node by :math:`\min\{1, p/q\}` and needs one ranking for two things: selecting the
    lexicographically best draft and computing that draft's law :math:`q_{skew}`, the draft
    law block verification runs against. Here the selection breaks ties by ascending token id
    and :math:`q_{skew}` by descending id (:func:`skewed_rows_reversed_ties`): two copies of
    the ranking code that disagree only on ties. Lossless exactly when no two children with
    q > 0 tie; ties are common in practice, since every child with p >= q has ratio 1
    (and p = q rows tie everywhere). K = 1 is BV, always lossless.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`rrs_two_residual_slots`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`rrs_two_residual_slots`.

    References
    ----------
    Thomas & Pal 2026, arXiv 2602.16961 (multi-path greedy block verification).

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact law of this sampler.
    """
    return sample_validated(_TIES, draft_tokens, draft_probs, target_probs, rng)


tag_verifier(rrs_two_residual_slots, "wrong_residual", "generic", "rrs", law_of(_TWO_SLOTS))
tag_verifier(rrs_lagged_target, "not_lossless", "generic", "rrs", law_of(_LAGGED))
tag_verifier(multipath_tie_mismatch, "not_lossless", "generic", "gbv_multipath", law_of(_TIES))

__all__ = [
    "LAGGED_WRITE_BACKS",
    "RESIDUAL_SLOTS",
    "capped_rrs_node",
    "multipath_tie_mismatch",
    "rrs_lagged_target",
    "rrs_two_residual_slots",
    "skewed_rows_reversed_ties",
]
