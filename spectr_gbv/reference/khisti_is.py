r"""Khisti et al.'s importance-sampling multi-draft verifier, node by node on the draft tree.

Canonical decomposition (Khisti et al. 2025): a token-level multi-draft selection rule is, w.l.o.g.,
an importance-sampling (IS) step that selects ONE of the drafted tokens, followed by
single-draft speculative sampling of the selected token Y against p, with Y's induced law

.. math::
    r(y) = \sum_{x_{1:c}} \prod_{j} q(x_j)\, P(Y = y \mid x_{1:c})

(over the c i.i.d. drafts) as the draft law: accept Y with probability
:math:`\min\{1, p(Y)/r(Y)\}`, else emit :math:`Z \sim \mathrm{normalize}(\max\{p - r, 0\})`.
Any selection rule makes this lossless; the rule decides the acceptance
:math:`\sum_y \min\{p(y), r(y)\}`.

The selection rule here is the paper's practical s-truncated LP scheme for two drafts, applied
as a sequential tournament for c > 2 drafts (see :class:`ImportanceSamplingVerifier`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import Verifier, VerifyInput, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.structure import walk_draft_tree

#: LP-truncation threshold s of the pairwise selection LP (the paper's default, its Table 2).
DEFAULT_LP_TRUNCATION = 5
#: Largest denominator of an LP weight snapped to a fraction (exact inputs); any snapped weight
#: in [0, 1] keeps the verifier lossless, since r is then computed exactly from it.
WEIGHT_MAX_DENOMINATOR = 10**6
#: Plans (per node law pair and draft count) kept by one verifier instance before it clears them.
PLAN_CACHE_SIZE = 4096


@dataclass(frozen=True)
class PairRule:
    r"""Selection rule of one tournament round: current winner a (law pi) vs challenger b (law q).

    Attributes
    ----------
    rank : dict of int to int
        Rank of each token: 0, 1, .. by :math:`p(v) - \pi(v) q(v)` descending, ties by token id.
    keep : dict of (int, int) to scalar
        For a != b both in the truncated set :math:`\Omega_1` (rank < s): probability that the
        winner a is kept against the challenger b. Any other pair keeps the lower-ranked token.
    """

    rank: dict[int, int]
    keep: dict[tuple[int, int], Scalar]

    def keep_prob(self, a: int, b: int, one: Scalar) -> Scalar:
        """P(keep the winner ``a`` | challenger ``b``), ``a != b``."""
        prob = self.keep.get((a, b))
        if prob is not None:
            return prob
        return one if self.rank[a] < self.rank[b] else one * 0


@dataclass(frozen=True)
class TournamentPlan:
    """The c - 1 round rules at a node and the exact induced law of the selected token.

    Attributes
    ----------
    rounds : list of PairRule, length c - 1
    laws : list of ndarray, length c
        ``laws[j]`` = law of the winner among the first j + 1 drafts (``laws[0] = q``);
        ``laws[-1]`` is the induced law r.
    """

    rounds: list[PairRule]
    laws: list[np.ndarray]


def _ranks(p: np.ndarray, pi: np.ndarray, q: np.ndarray) -> list[int]:
    """Tokens sorted by ``p - pi * q`` descending, ties by token id."""
    return sorted(range(len(p)), key=lambda v: (-(p[v] - pi[v] * q[v]), v))


def _truncated_lp(p: np.ndarray, pi: np.ndarray, q: np.ndarray, top: list[int], exact: bool) -> dict:
    r"""Keep probabilities on :math:`\Omega_1` = ``top`` maximising :math:`\sum_{\Omega_1}\min\{p, r\}`.

    Variables: :math:`\sigma_{ab}\in[0,1]` (keep winner a vs challenger b, a != b in
    :math:`\Omega_1`) and :math:`z_i \le p_i`, :math:`z_i \le r_i(\sigma)`; maximise
    :math:`\sum_i z_i`. Solved in float64 by HiGHS; returns {} when it fails (then the rank
    rule is used on :math:`\Omega_1` too). Exact inputs get each weight snapped to a fraction
    in [0, 1] (denominator <= :data:`WEIGHT_MAX_DENOMINATOR`), float inputs the same snapped
    value as a float (so both kinds run the same rule); ``top`` is passed in token order so
    that the LP does not depend on how ties in the ranking were broken.
    """
    s = len(top)
    pairs = [(a, b) for a in top for b in top if a != b]
    if not pairs:
        return {}
    col = {ab: k for k, ab in enumerate(pairs)}
    nvar = len(pairs) + s
    pf = [float(p[v]) for v in range(len(p))]
    pif = [float(pi[v]) for v in range(len(p))]
    qf = [float(q[v]) for v in range(len(p))]
    top_set = set(top)
    q_out = sum(qf[v] for v in range(len(p)) if v not in top_set)
    pi_out = sum(pif[v] for v in range(len(p)) if v not in top_set)
    a_ub = np.zeros((2 * s, nvar))
    b_ub = np.zeros(2 * s)
    for i, v in enumerate(top):
        # z_i <= p_i
        a_ub[i, len(pairs) + i] = 1.0
        b_ub[i] = pf[v]
        # z_i - sum_b pi_v q_b sigma_vb + sum_a pi_a q_v sigma_av <= pi_v q_v + sum_a pi_a q_v + rest
        row = s + i
        a_ub[row, len(pairs) + i] = 1.0
        const = pif[v] * qf[v] + pif[v] * q_out + pi_out * qf[v]
        for u in top:
            if u == v:
                continue
            a_ub[row, col[(v, u)]] -= pif[v] * qf[u]
            a_ub[row, col[(u, v)]] += pif[u] * qf[v]
            const += pif[u] * qf[v]
        b_ub[row] = const
    c = np.r_[np.zeros(len(pairs)), -np.ones(s)]
    from scipy.optimize import linprog  # lazily: importing the registry must not cost scipy.optimize

    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=[(0.0, 1.0)] * nvar, method="highs")
    if not res.success or not np.all(np.isfinite(res.x)):
        return {}
    keep: dict = {}
    for ab, k in col.items():
        x = min(1.0, max(0.0, float(res.x[k])))
        snapped = Fraction(x).limit_denominator(WEIGHT_MAX_DENOMINATOR)
        keep[ab] = snapped if exact else float(snapped)
    return keep


def _winner_law(rule: PairRule, pi: np.ndarray, q: np.ndarray, exact: bool) -> np.ndarray:
    r"""Law of the round's winner: :math:`\pi'(i) = \pi_i q_i + \sum_{b\ne i}[\pi_i q_b\,
    \mathrm{keep}(i,b) + \pi_b q_i (1 - \mathrm{keep}(b,i))]`, exact for Fractions.

    O(n log n + s^2): pairs with a token outside :math:`\Omega_1` follow the rank rule, so their
    terms are tail sums along the ranking.
    """
    one: Any = Fraction(1) if exact else 1.0
    zero = one * 0
    n = len(q)
    order = sorted(range(n), key=lambda v: rule.rank[v])
    out = np.empty(n, dtype=object if exact else np.float64)
    # tail masses over tokens of strictly larger rank
    q_tail, pi_tail = zero, zero
    tails: dict[int, tuple[Scalar, Scalar]] = {}
    for v in reversed(order):
        tails[v] = (q_tail, pi_tail)
        q_tail, pi_tail = q_tail + q[v], pi_tail + pi[v]
    top = [v for v in order if any((v, u) in rule.keep for u in range(n))]
    top_set = set(top)
    q_out = sum((q[v] for v in range(n) if v not in top_set), zero)
    pi_out = sum((pi[v] for v in range(n) if v not in top_set), zero)
    for v in range(n):
        if v in top_set:
            val = pi[v] * q[v] + pi[v] * q_out + pi_out * q[v]
            for u in top:
                if u != v:
                    val += pi[v] * q[u] * rule.keep[(v, u)] + pi[u] * q[v] * (one - rule.keep[(u, v)])
        else:
            qt, pt = tails[v]
            val = pi[v] * q[v] + pi[v] * qt + pt * q[v]
        out[v] = val
    return out


def tournament_plan(
    p: np.ndarray, q: np.ndarray, c: int, exact: bool, s: int = DEFAULT_LP_TRUNCATION
) -> TournamentPlan:
    r"""The selection rules of a c-draft node and the exact induced law r of the selected token.

    Round j = 1..c-1 pits the current winner (law :math:`\pi_j`, :math:`\pi_1 = q`) against draft
    j + 1 (law q, independent): tokens are ranked by :math:`p - \pi_j q` descending; the top s
    (:math:`\Omega_1`) get keep probabilities from the truncated LP (``_truncated_lp``),
    every other pair keeps the lower-ranked token; :math:`\pi_{j+1}` follows exactly.

    Parameters
    ----------
    p, q : ndarray, shape (n,), Fractions (object) or float64
        Target and draft laws at the node.
    c : int
        Number of drafts through the node, >= 1.
    exact : bool
    s : int
        LP-truncation threshold, >= 1.

    Returns
    -------
    TournamentPlan
        ``laws[-1]`` is r; for c = 1 it is q (plain speculative sampling).

    Notes
    -----
    Cost: c - 1 LPs with s(s - 1) + s variables and 2s rows, plus O(c (n log n + s^2)) exact
    arithmetic for the laws; polynomial in n for any c (no sum over draft multisets).
    """
    laws = [q]
    rounds: list[PairRule] = []
    for _ in range(c - 1):
        pi = laws[-1]
        order = _ranks(p, pi, q)
        rank = {v: k for k, v in enumerate(order)}
        keep = _truncated_lp(p, pi, q, sorted(order[: min(s, len(order))]), exact)
        rule = PairRule(rank, keep)
        rounds.append(rule)
        laws.append(_winner_law(rule, pi, q, exact))
    return TournamentPlan(rounds, laws)


class ImportanceSamplingVerifier(Verifier):
    r"""Khisti et al.'s importance-sampling (IS) selection + speculative sampling, on the draft tree.

    At a node u with the c drafts through it (index order), p = p(.|u), q = q(.|u) and their
    next tokens :math:`x_1..x_c` (repeats allowed):

    1. Selection (a tournament of the paper's two-draft truncated-LP rule): winner
       :math:`W = x_1`; for j = 2..c, if :math:`x_j \ne W`, keep W with probability
       :math:`\mathrm{keep}_j(W, x_j)`, else :math:`W = x_j`. In round j tokens are ranked
       by :math:`p(v) - \pi_{j-1}(v) q(v)` descending (ties by id), :math:`\pi_{j-1}` the exact
       law of the winner so far (:math:`\pi_1 = q`); for W, :math:`x_j` both among the top
       s = 5 (:math:`\Omega_1`) keep is the solution of the LP
       :math:`\max \sum_{i\in\Omega_1}\min\{p_i, \pi_j(i)\}` over keep in [0, 1]; any other
       pair keeps the lower-ranked token.
    2. Speculative sampling of Y = W against p with draft law :math:`r = \pi_c` (computed
       exactly): accept with probability :math:`\min\{1, p(Y)/r(Y)\}`; on acceptance all drafts
       carrying Y continue to the child; else emit :math:`Z \sim \mathrm{normalize}(\max\{p - r,
       0\})`. After L accepted tokens emit the bonus :math:`Z \sim p(.|x^L)`.

    Lossless for any keep weights (step 2 maps a sample of r to a sample of p, and the next
    tokens of the drafts through a node are i.i.d. q(.|u) given the node). c = 1 is token-level
    SD; at L = 1, K = 2 with n <= s the LP is the full two-draft optimum, so the acceptance is
    OPT(2) (Khisti et al.'s Theorem 1) up to the snapping of the weights. Order-dependent (the
    tournament is sequential), so ``symmetric = False``.

    Parameters
    ----------
    lp_truncation : int
        The paper's s (default :data:`DEFAULT_LP_TRUNCATION` = 5, its best setting in Table 2).
        The paper's other truncation, of the vocabulary to its top tokens, is not applied.

    Notes
    -----
    Complexity per node with c drafts: c - 1 HiGHS LPs of s(s - 1) + s variables and
    O(c (n log n + s^2)) exact operations for r (memoised per (p, q, c) on the instance), then
    O(c) for the selection itself. Exact inputs: the float64 LP weights are snapped to
    fractions (denominator <= :data:`WEIGHT_MAX_DENOMINATOR`) and r is exact given them, so the
    validity defect is exactly 0; the snapping only moves the acceptance off the LP optimum
    by ~1e-6 at most.

    References
    ----------
    Khisti, Ebrahimi, Dbouk, Behboodi, Memisevic, Louizos 2025, "Multi-Draft Speculative
    Sampling: Canonical Decomposition and Theoretical Limits", ICLR 2025, arXiv 2410.18234:
    Theorem 1 (canonical decomposition: IS selection then single-draft speculative sampling)
    and the truncated-LP selection scheme of its faster IS section and appendix (LP-truncation
    threshold s, Table 2), extended to K > 2 drafts by successive pairwise selection; the tree
    extension is that of SpecTr/RRS in THEORY.md section 6.
    """

    name = "khisti_is"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    lp_truncation: ClassVar[int] = DEFAULT_LP_TRUNCATION

    def __init__(self, lp_truncation: int = DEFAULT_LP_TRUNCATION) -> None:
        super().__init__()
        if not isinstance(lp_truncation, int) or isinstance(lp_truncation, bool) or lp_truncation < 1:
            raise ValueError(f"lp_truncation must be an int >= 1, got {lp_truncation!r}")
        self.lp_truncation = lp_truncation
        self._plans: dict[tuple[Any, ...], TournamentPlan] = {}

    def plan(self, p: np.ndarray, q: np.ndarray, c: int, exact: bool) -> TournamentPlan:
        """:func:`tournament_plan` at this instance's s, memoised on (p, q, c, exact)."""
        key = (exact, c, tuple(p.tolist()), tuple(q.tolist()))
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= PLAN_CACHE_SIZE:
                self._plans.clear()
            plan = tournament_plan(p, q, c, exact, self.lp_truncation)
            self._plans[key] = plan
        return plan

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """IS selection among the drafts' next tokens, then speculative sampling against p.

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
            Position in ``tokens`` of the selected and accepted token, or None on rejection.
        residual : ndarray, shape (n,), or None
            :math:`\\max\\{p - r, 0\\}` (None when the token is accepted).
        """
        one: Any = Fraction(1) if exact else 1.0
        plan = self.plan(p, q, len(tokens), exact)
        win = 0
        for j in range(1, len(tokens)):
            a, b = tokens[win], tokens[j]
            if a != b and not chooser.bernoulli(plan.rounds[j - 1].keep_prob(a, b, one)):
                win = j
        r = plan.laws[-1]
        y = tokens[win]
        if chooser.bernoulli(min(one, p[y] / r[y])):
            return win, None
        weights = residual_or_fallback(np.maximum(p - r, 0), p, exact, chooser.diagnostics, ("is_residual", prefix))
        return None, weights

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Walk down the draft tree, one IS selection and speculative-sampling step per node."""
        return walk_draft_tree(batch, self.node_step, chooser)


__all__ = [
    "DEFAULT_LP_TRUNCATION",
    "PLAN_CACHE_SIZE",
    "WEIGHT_MAX_DENOMINATOR",
    "ImportanceSamplingVerifier",
    "PairRule",
    "TournamentPlan",
    "tournament_plan",
]
