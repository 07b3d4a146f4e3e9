r"""``near_opt_bv`` with second chances: the score race's losers continue the accepted prefix.

A finished experiment, kept outside the package (docs/near_opt_bv.md, "Second chances and the
real pair", has its results): with the registered rule the losers provably never accept a token,
and with a proportional share ``mix`` they do, at a cost on the battery larger than their gain.
Tests: ``tests/experiments/test_second_chance.py``.

:class:`~spectr_gbv.reference.near_opt_bv.NearOptBlockVerifier` (score selection) commits to
the draft with the largest score and block-verifies it; when that draft stops early, the other
drafts are never read. MDBV instead tries the drafts in turn, each continuing the accepted
prefix against the last residual. This verifier does both (docs/near_opt_bv.md,
"Second chances"):

1. the race of :func:`~spectr_gbv.reference.near_opt_bv.score_tree`: draft k* with the largest
   score S* wins, and block verification of it with draft law r (the race's law of the
   selected block) stops at an accepted prefix P with the law R of the next token;
2. the losers, in index order, continue P as MDBV's scan does: a loser that starts with P
   runs block verification of its remaining tokens against the target whose first conditional
   is R and later ones p, with the loser's own law as the draft law; P and R move on.

**The losers' law.** Given the winner's index and block (score law :math:`g`), the other K - 1
drafts are exchangeable and all score below the winner's score S*; the verifier never draws S*,
it integrates it out. Loser j, read after the losers of lower index (score laws :math:`G_i`,
blocks known) and before ``m`` others, has the block law

.. math::
    \pi_j(y) \propto q(y) \int g(s) \prod_i F_i(s)\, F_y(s)\, s^m\, ds

(F the CDFs; a loser not yet read scores below s with probability s, the scores being uniform),
and its next-token rows are the ratios of such integrals with :math:`F_{uv}` and :math:`F_u`
(:func:`loser_rows`). On each elementary segment of the breakpoints the integrand is a
polynomial, so every row is exact in rationals
(:func:`race_integral`), and each row reads only the rows of the
drafted prefixes (every :math:`F_{uv}` is the CDF of
:func:`~spectr_gbv.reference.near_opt_bv.child_law`).

**Lossless.** Block verification of the winner is lossless with draft law r, so (P, R) is
distributed as BV's output; the coins of that run are independent of the losers. At each step of
the scan, loser j's block, given everything read so far (the winner's and earlier losers' blocks,
all coins), has the law :math:`\pi_j` above, so block verification of its tokens after P with
draft rows :math:`\pi_j` and first target row R continues "P, then a token of law R" losslessly
(Sun et al. 2024, Algorithm 2; MDBV's scan, THEORY.md section 6). **Never below** ``near_opt_bv``
with the same rule: the winner's run is the same, and a continuation only lengthens P. Hence
K = 1 is BV (no losers) and L = 1 is OPT(K) (the share ``mix`` applies above the last level only;
nothing lossless exceeds OPT(K)).

**No gain on the optimal face** (``mix = 0``, the registered rule). At a node u let T be the
children that the lexicographic base leaves below the target :math:`w_u p(.|u)`. Both the
lexicographic and the hedged base are tight on T (:math:`d(T) = g_H(q(T))`) and have
:math:`d \le w_u p` on T, and every child with :math:`d < w_u p` is in T. Tightness makes every
priority order of the split rank T first, so T's children hold the top of u's score law. If the
winner stops at P = u (:math:`\tau = |P| < L`), its next token z is not in T: otherwise its BV
weight after z is :math:`\min\{1, w_u p(z|u)/d(z)\} = 1`, and with weight 1 block verification
accepts past u surely (:math:`h_j = 1` at the first later position with :math:`r_j > 0`, else
:math:`h_L = w_L = 1`). A loser through u scores below the winner, so its next token is not in T
either, while the residual :math:`R \propto (w_u p(.|u) - d)^+` lives on T: the loser's first
token has R = 0, it accepts nothing and passes R on unchanged. So with ``mix = 0`` the law given
the drafts is ``near_opt_bv``'s (tested on draft tuples of three instances). A share ``mix > 0``
gives every child a share of every score (the rule's law becomes :math:`(1 - \lambda) d + \lambda q`
above the last level), the losers then reach the residual, and ``mix = 1`` is MDBV in a random order
above the last level.

Complexity: that of :func:`~spectr_gbv.reference.near_opt_bv.score_tree`, plus, per loser
read, one child law and one integral per child at each of its prefixes beyond P: O(K L n) laws and
integrals of O(K) factors over the segments of their breakpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from bench.experiments.near_opt_variants import MixedOrdersSplit, check_mix
from spectr_gbv.reference.base import VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.kernels import block_verify
from spectr_gbv.reference.near_opt_bv import (
    NearOptBlockVerifier,
    NodeSplit,
    ScoreNode,
    child_law,
    exact_row,
    score_tree,
)
from spectr_gbv.reference.score_laws import UNIFORM, ScoreLaw, win_probabilities


def race_integral(density: ScoreLaw, cdfs: Sequence[ScoreLaw], power: int) -> Fraction:
    r""":math:`\int g(s) \prod_i F_i(s)\, s^m\, ds` exactly, for a density g and CDFs :math:`F_i` of score laws.

    With ``cdfs`` the other drafts' laws and ``power`` 0 it is the win probability of the draft
    whose law is g (:func:`~spectr_gbv.reference.score_laws.win_probabilities`); each draft
    marginalised over q contributes a factor s instead (its score is uniform, and the uniform
    law's CDF is s). So the integral is the win probability of g against the laws ``cdfs`` and
    ``power`` uniform laws, which :func:`~spectr_gbv.reference.score_laws.win_probabilities`
    integrates exactly (on each elementary segment of the union of the breakpoints g is
    constant and every :math:`F_i` linear, so the integrand is a polynomial). Cost: one call of
    it on ``len(cdfs) + power + 1`` laws, which also integrates the other laws' win
    probabilities (unused here).

    Parameters
    ----------
    density : ScoreLaw
        g: a law (or measure) whose density is integrated against.
    cdfs : sequence of ScoreLaw
        The laws whose CDFs multiply the integrand.
    power : int
        m >= 0.

    Returns
    -------
    Fraction

    References
    ----------
    docs/near_opt_bv.md, "Second chances and the real pair".
    """
    return win_probabilities([density, *cdfs, *[UNIFORM] * power])[0]


def loser_rows(
    batch: VerifyInput,
    nodes: dict[tuple[int, ...], ScoreNode],
    winner: ScoreLaw,
    earlier: list[ScoreLaw],
    later: int,
    j: int,
    start: int,
) -> list[tuple[Fraction, ...]]:
    r"""Loser j's next-token rows along its draft for t = start..L-1, given what the scan has read.

    Given the winner's block (score law g), the blocks of the ``earlier`` losers (score laws
    :math:`G_i`) and ``later`` losers not yet read, loser j's block y has the law
    :math:`\propto q(y) \int g(s) \prod_i F_i(s)\, F_y(s)\, s^{\text{later}} ds` (all losers score
    below the winner; a loser not yet read scores below s with probability s). Its rows are

    .. math::
        \pi(v \mid u) = q(v \mid u)\, \frac{\int g \prod_i F_i\, F_{uv}\, s^{\text{later}}}
        {\int g \prod_i F_i\, F_u\, s^{\text{later}}},

    with :math:`F_u` the CDF of the score law of a draft through u (``nodes[u].law``) and
    :math:`F_{uv}` that of :func:`~spectr_gbv.reference.near_opt_bv.child_law`.

    Raises
    ------
    ValueError
        A zero denominator (loser j cannot have that prefix given what was read).
    """
    x = batch.draft(j)
    rows = []
    for t in range(start, batch.L):
        node = nodes[x[:t]]
        below = race_integral(winner, [*earlier, node.law], later)
        if below <= 0:
            raise ValueError(f"loser_rows: draft {j} cannot reach depth {t} below the winner's score")
        q = exact_row(batch.draft_probs[j, t], batch.exact)
        rows.append(
            tuple(
                qv * race_integral(winner, [*earlier, child_law(node, q, v)], later) / below if qv > 0 else Fraction(0)
                for v, qv in enumerate(q)
            )
        )
    return rows


class SecondChanceNearOptVerifier(NearOptBlockVerifier):
    """``near_opt_bv`` whose race losers continue the accepted prefix, MDBV-style (module docstring).

    Not registered (method names are a public contract); a research variant of
    ``near_opt_bv`` with ``selection="score"`` and its other options.

    References
    ----------
    docs/near_opt_bv.md ("Second chances"); Sun et al. 2024,
    arXiv 2403.10444, Algorithm 2; MDBV (THEORY.md section 6) for the scan.
    """

    name = "near_opt_bv:second_chance"
    symmetric = False
    structure = None  # the law reads every draft: the exact simulator enumerates draft tuples

    def __init__(
        self,
        priority: str | None = None,
        weighting: str = "bv",
        split: str | NodeSplit = "orders",
        mix: Fraction = Fraction(0),
    ) -> None:
        super().__init__(priority, weighting, "score", split)
        check_mix(Fraction(mix), split)
        self.mix = Fraction(mix)
        #: The split of the race: ``split``, or with ``mix > 0`` the orders split with that share.
        self.race_split: str | NodeSplit = MixedOrdersSplit(self.mix) if self.mix else split

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """The race, BV of the winner, then the losers in index order, each on its conditional law."""
        conv = (lambda v: v) if batch.exact else float
        dtype = object if batch.exact else np.float64
        nodes, leaves = score_tree(batch, self.priority, self.weighting, self.race_split)
        k = chooser.categorical([conv(w) for w in win_probabilities(leaves)]) if batch.K > 1 else 0
        x = batch.draft(k)
        rows = [np.array([conv(v) for v in nodes[x[:t]].d], dtype=dtype) for t in range(batch.L)]
        tau, law = block_verify(
            chooser, x, batch.target_probs[k, : batch.L], rows, batch.target_probs[k, batch.L], batch.exact
        )
        prefix = x[:tau]
        losers = [j for j in range(batch.K) if j != k]
        for i, j in enumerate(losers):
            if len(prefix) == batch.L:
                break
            y = batch.draft(j)
            if y[: len(prefix)] != prefix:
                continue
            start = len(prefix)
            earlier = [leaves[e] for e in losers[:i]]
            exact_rows = loser_rows(batch, nodes, leaves[k], earlier, len(losers) - i - 1, j, start)
            d_rows = [np.array([conv(v) for v in row], dtype=dtype) for row in exact_rows]
            target_rows = [law] + [batch.target_probs[j, t] for t in range(start + 1, batch.L)]
            step, law = block_verify(
                chooser, y[start:], target_rows, d_rows, batch.target_probs[j, batch.L], batch.exact
            )
            prefix = y[: start + step]
        return Emission(prefix, law)


__all__ = ["SecondChanceNearOptVerifier", "loser_rows", "race_integral"]
