"""Multi-path greedy block verification (Thomas & Pal): BV on the lexicographically best draft."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.kernels import BlockWeights, block_verify, block_weights, power_increment


def token_ranks(p: np.ndarray, q: np.ndarray, exact: bool, reverse_ties: bool = False) -> list[int]:
    r"""Tokens at a node sorted by :math:`\min\{1, p(v)/q(v)\}` ascending, ties by token id.

    Tokens with ``q(v) = 0`` get ratio 1 (they carry no draft mass, so their place does not
    change any skewed law). ``reverse_ties`` orders tied tokens by descending id instead (the
    planted tie-breaking bug of :mod:`spectr_gbv.testing.mutants.coverage_bugs`).
    """
    one: Scalar = Fraction(1) if exact else 1.0
    sign = -1 if reverse_ties else 1

    def ratio(v: int) -> Scalar:
        return min(one, p[v] / q[v]) if q[v] > 0 else one

    return sorted(range(len(p)), key=lambda v: (ratio(v), sign * v))


def select_path(batch: VerifyInput) -> int:
    """Index of a draft equal to the lexicographic maximum of the drafts under the node ranks.

    Walks from the root to the highest-ranked drafted child at every node; returns the lowest
    draft index on the selected path (all drafts on it are identical).
    """
    active = list(range(batch.K))
    for t in range(batch.L):
        k0 = active[0]
        order = token_ranks(batch.target_probs[k0, t], batch.draft_probs[k0, t], batch.exact)
        rank = {v: i for i, v in enumerate(order)}
        best = max((int(batch.drafts[j, t]) for j in active), key=rank.__getitem__)
        active = [j for j in active if batch.drafts[j, t] == best]
    return active[0]


def skewed_rows(batch: VerifyInput, k: int, ranks: Callable[..., list[int]] = token_ranks) -> list[np.ndarray]:
    r"""Conditionals of the lexicographic maximum of K i.i.d. drafts along draft ``k``.

    At node u (depth t) with x = q(u), A = q-mass of the length-t prefixes ranked below u
    (A = 0 at the root), for each token v: z = x q(v|u), y = x * (q-mass of the tokens ranked
    below v at u), and

    .. math::
        q_{skew}(v|u) = \frac{(A+y+z)^K - (A+y)^K}{(A+x)^K - A^K}

    The denominator is the telescoping sum of the numerators over v, which is how it is
    evaluated (rows sum to 1). In float64 every difference of powers is computed by
    :func:`~spectr_gbv.reference.kernels.power_increment` after dividing A, y, z by A + x (no
    cancellation, no under/overflow); with Fractions it is exact.

    Parameters
    ----------
    batch : VerifyInput
    k : int
        The draft the rows follow.
    ranks : callable
        ``ranks(p_row, q_row, exact) -> token order`` at a node (default :func:`token_ranks`,
        the order :func:`select_path` uses).

    Returns
    -------
    list of L arrays, shape (n,)
        ``rows[t] = q_skew(. | x^t)`` along draft ``k``, t = 0..L-1.
    """
    exact, K = batch.exact, batch.K
    one: Scalar = Fraction(1) if exact else 1.0
    a_mass: Scalar = one * 0  # A
    x_mass: Scalar = one  # x = q(u)
    rows = []
    for t in range(batch.L):
        q = batch.draft_probs[k, t]
        order = ranks(batch.target_probs[k, t], q, exact)
        scale = a_mass + x_mass if not exact else one
        below = one * 0  # y / x
        nums = [one * 0] * batch.n
        below_of = {}
        for v in order:
            below_of[v] = below
            lo = (a_mass + x_mass * below) / scale
            z = x_mass * q[v] / scale
            nums[v] = power_increment(lo, z, K, exact)
            below = below + q[v]
        total = sum(nums, one * 0) if exact else math.fsum(nums)
        rows.append(np.asarray([v / total for v in nums], dtype=object if exact else np.float64))
        x_tok = int(batch.drafts[k, t])
        a_mass = a_mass + x_mass * below_of[x_tok]
        x_mass = x_mass * q[x_tok]
    return rows


@dataclass(frozen=True)
class PreparedRows:
    r"""What :meth:`MultiPathGreedyVerifier.prepare` computes once per input and ``run`` reuses.

    Subclasses that change how the path or its draft law is chosen (a different tie rule) return
    one from their own ``prepare``; ``run`` then verifies ``rows`` along draft ``k``.

    Attributes
    ----------
    k : int
        Index of the selected draft (:func:`select_path`), ``0 <= k < K``.
    rows : list of L arrays, shape (V,)
        The skewed conditionals :math:`q_{skew}(\cdot | x^{t-1})` along draft ``k``
        (:func:`skewed_rows`): Fractions (object dtype) for exact inputs, else float64.
    weights : BlockWeights
        Block-verification weights of draft ``k`` against ``p`` with draft law ``rows``
        (:class:`~spectr_gbv.reference.kernels.BlockWeights`, Sun et al. 2024, Algorithm 2).
    """

    k: int
    rows: list[np.ndarray]
    weights: BlockWeights


class MultiPathGreedyVerifier(Verifier):
    r"""Multi-path greedy block verification of Thomas & Pal (as THEORY.md section 6 reads it).

    At each node u of the draft tree rank tokens by :math:`\min\{1, p(v|u)/q(v|u)\}`
    ascending (ties by token id); select the lexicographic maximum of the K drafts under these
    ranks (walk from the root to the highest-ranked drafted child). Its law is autoregressive
    with conditionals :math:`q_{skew}` (:func:`skewed_rows`); run block verification
    (Sun et al. 2024, Algorithm 2) on the selected path with q replaced by
    :math:`q_{skew}`. Lossless (BV is lossless for any draft law, and the selected path has law
    :math:`q_{skew}`); K = 1 is BV. The law depends only on the multiset of drafts.

    References
    ----------
    Thomas & Pal 2026, arXiv 2602.16961 (multi-path greedy block verification: path selection
    and skewed draft law, as THEORY.md section 6 reads it); Sun et al. 2024,
    arXiv 2403.10444, Algorithm 2; THEORY.md section 6.
    """

    name = "gbv_multipath"
    lossless, structure, citation = class_facts(name)
    symmetric = True

    def prepare(self, batch: VerifyInput) -> PreparedRows:
        """Select the path, compute its skewed conditionals and BV weights."""
        k = select_path(batch)
        rows = skewed_rows(batch, k)
        weights = block_weights(batch.draft(k), batch.target_probs[k, : batch.L], rows, batch.exact)
        return PreparedRows(k, rows, weights)

    def selected_draft_probability(self, batch: VerifyInput) -> Scalar:
        r"""P(lexicographic maximum of K i.i.d. drafts = x), for ``batch`` = K copies of x.

        The product of the skewed conditionals :math:`q_{skew}(x_t | x^{t-1})` along x
        (:func:`skewed_rows`); the ``selected_draft`` shape of
        :mod:`spectr_gbv.reference.structure`.
        """
        rows = skewed_rows(batch, 0)
        prob = batch.one
        for t, row in enumerate(rows):
            prob = prob * row[int(batch.drafts[0, t])]
        return prob

    def run(self, batch: VerifyInput, prep: PreparedRows, chooser: Chooser) -> Emission:
        """Block verification of the selected path against p with draft law q_skew."""
        x = batch.draft(prep.k)
        tau, law = block_verify(
            chooser,
            x,
            batch.target_probs[prep.k, : batch.L],
            prep.rows,
            batch.target_probs[prep.k, batch.L],
            batch.exact,
            weights=prep.weights,
        )
        return Emission(x[:tau], law)
