r"""``near_opt_bv``'s research variants: the non-default score splits and the neutral base.

A finished experiment, kept outside the package (docs/near_opt_bv.md, "Candidates tried", has
the table of candidates C4a-C6a and their results; ``bench/near_opt_candidates.py`` evaluates
them). None of these is used by a registered method; each plugs into the package's reference
through its public seams:

* a score split is a :class:`~spectr_gbv.reference.near_opt_bv.NodeSplit`, passed as
  ``NearOptBlockVerifier(split=...)`` or ``score_tree(..., split=...)``: :data:`PROPORTIONAL`
  (candidate C4c, the optimal law with the largest proportional share, :func:`proportional_rule`),
  :data:`RULE` (C4b, :func:`~spectr_gbv.reference.coverage.mixture_rule`'s law with its largest
  proportional share, :func:`proportional_share`) and :class:`MixedOrdersSplit` (the orders
  split with a proportional share ``mix`` above the last level: the second chances of
  ``bench/experiments/second_chance.py``);
* a whole base is a :data:`~spectr_gbv.reference.coverage.BaseRule`, passed as
  ``NearOptBlockVerifier(priority=...)``: :func:`neutral_base` (C6a, a negative result);
* the torch kernel's proportional split (C4c in float64) is a
  :class:`~spectr_gbv.gpu.kernels.node_split.KernelSplit` in
  ``bench/experiments/near_opt_kernel_variants.py``.

Tests: ``tests/experiments/test_near_opt_variants.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from spectr_gbv.reference.coverage import (
    BASE_PRIORITIES,
    BaseRule,
    Coverage,
    Decomposition,
    acceptance_vector,
    coverage,
    decompose_base,
    hedged_base,
    min_threshold,
    mixture_rule,
    peel_step,
    raise_to_base,
    visit_order,
    water_fill,
)
from spectr_gbv.reference.near_opt_bv import NodeSplit
from spectr_gbv.reference.score_laws import ScoreCoverage


def neutral_base(t: Sequence[Fraction], q: Sequence[Fraction], counts: Coverage) -> tuple[Fraction, ...]:
    r"""The hedged base with its over-drafted tokens' mass also re-split towards q (floored at t).

    Let h be :func:`~spectr_gbv.reference.coverage.hedged_base`, T its under-drafted tokens and A
    the rest of the support of q (h >= t on A). On A the split does not change
    :math:`\sum_y \min\{t(y), h(y)\}` as long as it stays at or above t; ``hedge`` spreads h(A)
    in proportion to t (the lexicographic base), this rule in proportion to q, floored at t
    (water-filling from below):

    .. math::
        n(y) = \max\{t(y), \mu q(y)\} \ (y \in A), \qquad \sum_{y \in A} n(y) = h(A),
        \qquad n = h \text{ on } T.

    q is the base of a draft that no rule steers (every child's law equal to its parent's), so
    this rule moves the over-drafted mass towards that split as far as the floors allow. It is a
    base of the contraction of g by T: the threshold sets of n/q are the prefixes of A by t/q
    descending; on the floored prefix n = t <= h, and past it g's contraction is concave while
    n's sum is linear in q-mass, with equality at A. So it is on the same optimal face, lossless.

    Parameters
    ----------
    t : sequence of Fraction, length n
        Nonnegative weights (the target).
    q : sequence of Fraction, length n
        Draft law at the node.
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    tuple of Fraction, length n
        The base (sums to 1 on the support of q).

    References
    ----------
    This project (docs/near_opt_bv.md, "Candidates tried", C6a: a negative result).
    """
    d = list(hedged_base(t, q, counts))
    over = sorted((y for y in range(len(q)) if q[y] > 0 and not 0 < d[y] < t[y]), key=lambda y: (-(t[y] / q[y]), y))
    water_fill(d, over, t, q, cap=False)
    return tuple(d)


def _max_proportional(a: Sequence[Fraction], q: Sequence[Fraction], support: list[int], counts: Coverage) -> Fraction:
    r"""Largest :math:`\lambda \in [0, 1]` with :math:`(a - \lambda q)^+ / (1 - \lambda)` in the polymatroid.

    :math:`\phi(\lambda) = \min_X [(1 - \lambda) G(q(X)) - (a - \lambda q)(X)]` is concave in
    :math:`\lambda`, nonnegative at 0 (a is in the polymatroid); Dinkelbach from
    :math:`\lambda = 1` moves to the root of the minimiser's linear function until
    :math:`\phi \ge 0` (each minimiser a threshold set).
    """
    lam = Fraction(1)
    for _ in range(len(support) + 3):
        value, xs = min_threshold([a[y] - lam * q[y] for y in range(len(q))], q, support, 1 - lam, counts, Fraction(0))
        if value >= 0:
            return lam
        gx = coverage(sum((q[y] for y in xs), Fraction(0)), counts)
        lam = (gx - sum((a[y] for y in xs), Fraction(0))) / (gx - sum((q[y] for y in xs), Fraction(0)))
    raise AssertionError("max proportional share did not converge (a bug: it ends in at most |T| + 1 steps)")


def proportional_share(
    d: Sequence[Fraction], q: Sequence[Fraction], counts: Coverage
) -> tuple[Fraction, Decomposition]:
    r"""The largest :math:`\lambda` with :math:`d = \lambda q + (1 - \lambda) b`, b a base, and b's orders.

    Parameters
    ----------
    d : sequence of Fraction, length n
        A base of the polymatroid.
    q : sequence of Fraction, length n
    counts : Coverage

    Returns
    -------
    lam : Fraction
        In [0, 1] (1 when d = q).
    orders : Decomposition
        :func:`~spectr_gbv.reference.coverage.decompose_base` of b (empty when ``lam == 1``).
    """
    support = [y for y in range(len(q)) if q[y] > 0]
    if all(d[y] == q[y] for y in support):
        return Fraction(1), ()
    lam = peel_step(list(d), list(q), q, support, counts)
    return lam, decompose_base([(d[y] - lam * q[y]) / (1 - lam) for y in range(len(q))], q, counts)


@lru_cache(maxsize=8192)
def proportional_rule(
    t: tuple[Fraction, ...], q: tuple[Fraction, ...], counts: Coverage, priority: str = "ratio"
) -> tuple[tuple[Fraction, ...], Fraction, Decomposition]:
    r"""An optimal selection law with the largest proportional share: :math:`d = \lambda q + (1 - \lambda) b`.

    Among the bases :math:`d \ge a^*` (every one maximises :math:`\sum_y \min\{t(y), d(y)\}`,
    :math:`a^*` the acceptance vector of :func:`~spectr_gbv.reference.coverage.mixture_rule`'s
    step 1 in ``priority`` order),
    take the one with the largest weight :math:`\lambda` on q itself (q is a base, since
    :math:`G(x) \ge x`): :math:`\lambda` is the largest value with
    :math:`(a^* - \lambda q)^+/(1 - \lambda)` in the polymatroid, b is that vector raised to a
    base (step 2) and written as a mixture of priority orders (step 3). The proportional part
    is the rule "pick a drafted child at random in proportion to the drafts": a score-law split
    (:mod:`spectr_gbv.reference.score_laws`) gives every child the same share of every score,
    so each child keeps access to the top scores for its own children.

    Parameters
    ----------
    t, q, counts, priority
        As :func:`~spectr_gbv.reference.coverage.mixture_rule` (``priority`` ``"id"`` or ``"ratio"``).

    Returns
    -------
    d : tuple of Fraction, length n
        The base; :math:`\sum \min\{t, d\}` equals :func:`~spectr_gbv.reference.coverage.mixture_rule`'s value.
    lam : Fraction
        The proportional weight in [0, 1] (1: d = q).
    orders : Decomposition
        The priority-order mixture of b (empty when ``lam == 1``).

    Raises
    ------
    ValueError
        ``priority`` not ``"id"`` or ``"ratio"``.
    """
    support = visit_order(t, q, priority, ("id", "ratio"))
    a = acceptance_vector(t, q, support, counts)
    lam = _max_proportional(a, q, support, counts)
    if lam == 1:
        return tuple(q), lam, ()
    b = raise_to_base([max(a[y] - lam * q[y], Fraction(0)) / (1 - lam) for y in range(len(q))], q, support, counts)
    d = tuple(lam * q[y] + (1 - lam) * b[y] for y in range(len(q)))
    return d, lam, decompose_base(b, q, counts)


def split_name(split: str | NodeSplit) -> str:
    """The name of a score split: the string itself, or a ``NodeSplit``'s ``name``."""
    return split if isinstance(split, str) else split.name


def check_mix(mix: Fraction, split: str | NodeSplit) -> None:
    """Validate the proportional share ``mix`` of :class:`MixedOrdersSplit` for a requested ``split``.

    Raises
    ------
    ValueError
        ``mix`` outside [0, 1], or ``mix > 0`` with a ``split`` other than ``"orders"``.
    """
    if not 0 <= mix <= 1:
        raise ValueError(f"mix must be in [0, 1], got {mix}")
    if mix and split_name(split) != "orders":
        raise ValueError(f"mix > 0 needs split='orders', got split={split_name(split)!r}")


@dataclass(frozen=True)
class ProportionalSplit:
    """Candidate C4c: the optimal law with the largest proportional share (:func:`proportional_rule`).

    Defined for the visit-order priorities ``"id"`` and ``"ratio"`` only.

    Attributes
    ----------
    name : str
        ``"proportional"``.
    """

    name: str = "proportional"

    def check(self, priority: str | BaseRule) -> None:
        """Reject a whole-base priority.

        Raises
        ------
        ValueError
            ``priority`` a :data:`~spectr_gbv.reference.coverage.BaseRule` or in
            :data:`~spectr_gbv.reference.coverage.BASE_PRIORITIES`.
        """
        if callable(priority) or priority in BASE_PRIORITIES:
            raise ValueError(
                f"split='proportional' needs priority 'ratio' or 'id' (priority {priority!r} is a whole "
                "base, not defined for it)"
            )

    def __call__(
        self,
        target: tuple[Fraction, ...],
        q: tuple[Fraction, ...],
        cov: ScoreCoverage,
        priority: str | BaseRule,
        last: bool,
    ) -> tuple[tuple[Fraction, ...], Fraction, Decomposition]:
        """:func:`proportional_rule` of the node (a ``NodeSplit``)."""
        return proportional_rule(target, q, cov, priority)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RuleShareSplit:
    """Candidate C4b: :func:`~spectr_gbv.reference.coverage.mixture_rule`'s law with its largest proportional share.

    Attributes
    ----------
    name : str
        ``"rule"``.
    """

    name: str = "rule"

    def check(self, priority: str | BaseRule) -> None:
        """Every priority of :func:`~spectr_gbv.reference.coverage.mixture_rule` is defined (no check)."""

    def __call__(
        self,
        target: tuple[Fraction, ...],
        q: tuple[Fraction, ...],
        cov: ScoreCoverage,
        priority: str | BaseRule,
        last: bool,
    ) -> tuple[tuple[Fraction, ...], Fraction, Decomposition]:
        """``mixture_rule``'s d, written by :func:`proportional_share` (a ``NodeSplit``)."""
        d, _ = mixture_rule(target, q, cov, priority)
        share, orders = proportional_share(d, q, cov)
        return d, share, orders


@dataclass(frozen=True)
class MixedOrdersSplit:
    r"""The ``"orders"`` split with a proportional share ``mix`` at every node above the last level.

    The rule's law becomes :math:`(1 - \lambda) d + \lambda q` and every child gets
    :math:`\lambda` of every score (the second chances of docs/near_opt_bv.md, "Second chances
    and the real pair"; ``bench/experiments/second_chance.py``). ``mix = 0`` is the ``"orders"``
    split.

    Attributes
    ----------
    mix : Fraction
        :math:`\lambda` in [0, 1].
    name : str
        ``"orders"``.

    Raises
    ------
    ValueError
        ``mix`` outside [0, 1] (:func:`check_mix`).
    """

    mix: Fraction = Fraction(0)
    name: str = "orders"

    def __post_init__(self) -> None:
        check_mix(self.mix, self.name)

    def check(self, priority: str | BaseRule) -> None:
        """Every priority of :func:`~spectr_gbv.reference.coverage.mixture_rule` is defined (no check)."""

    def __call__(
        self,
        target: tuple[Fraction, ...],
        q: tuple[Fraction, ...],
        cov: ScoreCoverage,
        priority: str | BaseRule,
        last: bool,
    ) -> tuple[tuple[Fraction, ...], Fraction, Decomposition]:
        """``mixture_rule``'s d and orders, mixed with q above the last level (a ``NodeSplit``)."""
        d, orders = mixture_rule(target, q, cov, priority)
        share = Fraction(0)
        mix = self.mix
        if mix > 0 and not last:  # a share of every score for every child: (1 - mix) d + mix q
            d, share = tuple((1 - mix) * dv + mix * qv for dv, qv in zip(d, q, strict=True)), mix
        return d, share, orders


#: Candidate C4c's split (``split="proportional"`` before it left the package).
PROPORTIONAL = ProportionalSplit()
#: Candidate C4b's split (``split="rule"`` before it left the package).
RULE = RuleShareSplit()
