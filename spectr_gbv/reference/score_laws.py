r"""Score laws: independent per-draft scores whose maximum selects the draft (exact rationals).

Each draft gets a score S in [0, 1] drawn, given its block x, from a law :math:`G_x`; the draft
with the largest score is selected. When the q-mixture of the laws is uniform,
:math:`\sum_x q(x) G_x = U[0, 1]`, every score is uniform whatever the block, so the K scores
are i.i.d. uniform and the selected block X has the law

.. math::
    r(x) = K\, q(x)\, E_{G_x}[S^{K-1}], \qquad r(u) = K\, q(u)\, E_{G_u}[S^{K-1}]

for a prefix u, with :math:`G_u = \sum_{x \supseteq u} q(x|u) G_x` (the draft's score law given
that it passes through u). Such laws are built top-down: the root law is uniform, and the law
H of a node is split among its children, :math:`\sum_v q(v|u) G_{uv} = H`, by the node rule of
:mod:`spectr_gbv.reference.near_opt_bv`. The children's next-token law is then
:math:`r(v|u) = q(v|u) E_{G_{uv}}[S^{K-1}] / E_H[S^{K-1}]`, and the laws reachable at a node are
the bases of the polymatroid :math:`X \mapsto g_H(q(X))`, where :math:`g_H(x)` is the
:math:`S^{K-1}`-moment of the top x of H's mass over the whole moment (:class:`ScoreCoverage`;
:math:`g_U(x) = 1 - (1 - x)^K`, the coverage of K drafts). A split only ever reads the rows of its
own node, so every law a verifier needs is computable from the rows of the drafted prefixes.

A law is a tuple of pieces ``(lo, hi, mass)``: mass ``mass`` spread uniformly on ``[lo, hi]``,
pieces sorted and disjoint, ``lo < hi``, masses positive. Measures (unnormalised laws) use the
same layout. Everything is exact in Fractions; a split adds at most two breakpoints per order
of its mixture, so laws along a path stay small.

References
----------
This project (docs/near_opt_bv.md, "Score selection"); the selection of the largest
of independent scores: the classical race construction of a selection rule with a prescribed law.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

# A piecewise-uniform law (or measure) on [0, 1]: ``((lo, hi, mass), ...)``, sorted, disjoint.
ScoreLaw = tuple[tuple[Fraction, Fraction, Fraction], ...]

#: The uniform law on [0, 1] (the root's law).
UNIFORM: ScoreLaw = ((Fraction(0), Fraction(1), Fraction(1)),)


def _piece_moment(lo: Fraction, hi: Fraction, mass: Fraction, k: int) -> Fraction:
    return mass * (hi ** (k + 1) - lo ** (k + 1)) / ((k + 1) * (hi - lo))


def moment(law: ScoreLaw, k: int) -> Fraction:
    r""":math:`\int s^k\, dG(s)` of a law or measure G (``k >= 0``)."""
    return sum((_piece_moment(lo, hi, m, k) for lo, hi, m in law), Fraction(0))


def top_slice(law: ScoreLaw, a: Fraction, b: Fraction) -> ScoreLaw:
    """The part of ``law`` between its top-quantiles ``a <= b`` (mass counted from the highest score).

    Parameters
    ----------
    law : ScoreLaw
    a, b : Fraction
        ``0 <= a <= b <= total mass``.

    Returns
    -------
    ScoreLaw
        A measure of mass ``b - a`` (pieces sorted by score).
    """
    out: list[tuple[Fraction, Fraction, Fraction]] = []
    above = Fraction(0)
    for lo, hi, m in reversed(law):
        s, e = max(a, above), min(b, above + m)
        if e > s:
            dens = m / (hi - lo)
            out.append((hi - (e - above) / dens, hi - (s - above) / dens, e - s))
        above += m
        if above >= b:
            break
    return tuple(reversed(out))


@dataclass(frozen=True)
class ScoreCoverage:
    r"""The node polymatroid's concave function :math:`g_H(x)` (callable; hashable).

    :math:`g_H(x) = \int_{\text{top } x \text{ of } H} s^{k}\, dH / E_H[S^{k}]` for x in [0, 1]
    (0 below, 1 above), ``k = K - 1``: the share of the selection mass that the children holding
    the top x of the node's score mass receive. Concave and increasing, g(0) = 0, g(1) = 1; at
    the root (H uniform) it is the coverage :math:`1 - (1 - x)^K` of K drafts.

    Attributes
    ----------
    law : ScoreLaw
        H, normalised.
    k : int
        K - 1 >= 0.
    """

    law: ScoreLaw
    k: int

    def __call__(self, x: Fraction) -> Fraction:
        """g_H(x)."""
        if x <= 0:
            return Fraction(0)
        if x >= 1:
            return Fraction(1)
        return moment(top_slice(self.law, Fraction(0), x), self.k) / moment(self.law, self.k)


def add_measures(parts: Sequence[ScoreLaw]) -> ScoreLaw:
    """Sum of measures, as disjoint pieces on the union of their breakpoints (empty pieces dropped)."""
    points = sorted({p for part in parts for lo, hi, _ in part for p in (lo, hi)})
    out: list[tuple[Fraction, Fraction, Fraction]] = []
    for a, b in zip(points, points[1:], strict=False):
        inside = (m * (b - a) / (hi - lo) for part in parts for lo, hi, m in part if lo <= a and b <= hi)
        mass = sum(inside, Fraction(0))
        if mass > 0:
            out.append((a, b, mass))
    return tuple(out)


def scaled(law: ScoreLaw, weight: Fraction) -> ScoreLaw:
    """``weight`` times a measure (``weight > 0``)."""
    return tuple((lo, hi, m * weight) for lo, hi, m in law)


def split_law(law: ScoreLaw, share: Fraction, slices: Sequence[tuple[Fraction, Fraction]], q_v: Fraction) -> ScoreLaw:
    r"""A child's score law from its node's split, normalised exactly.

    .. math::
        G \propto \lambda H + \frac{1 - \lambda}{q(v)} \sum_i \mu_i\,
        H|_{\text{top quantiles } [a_i, a_i + q(v)]}

    (the numerator of :func:`spectr_gbv.reference.near_opt_bv.child_law`: there the slices of
    the children partition H's mass in every order, so the mass is exactly 1; with parameters
    rounded to float64, as the torch kernel's rules are, it is 1 only within rounding, and the
    division makes G a law whatever the parameters).

    Parameters
    ----------
    law : ScoreLaw
        H, normalised.
    share : Fraction
        :math:`\lambda \in [0, 1]`.
    slices : sequence of (Fraction, Fraction)
        ``(mu_i, a_i)``: an order's weight and the q-mass before v in it (top quantiles;
        clipped to H's mass).
    q_v : Fraction
        q(v) > 0.

    Returns
    -------
    ScoreLaw
        Mass exactly 1.

    Raises
    ------
    ValueError
        The measure is empty (no mass to normalise).
    """
    parts: list[ScoreLaw] = []
    if share > 0:
        parts.append(scaled(law, share * q_v))
    for mu, before in slices:
        if mu > 0 and share < 1:
            parts.append(scaled(top_slice(law, max(before, Fraction(0)), before + q_v), (1 - share) * mu))
    measure = add_measures(parts)
    total = sum((m for _, _, m in measure), Fraction(0))
    if total <= 0:
        raise ValueError("split_law: the child's measure is empty (share, slices and q_v give it no mass)")
    return scaled(measure, 1 / total)


def _cdf_on(law: ScoreLaw, points: Sequence[Fraction]) -> list[Fraction]:
    """The law's CDF at sorted ``points`` that include all its breakpoints (one merge pass)."""
    out, below, j = [], Fraction(0), 0
    for s in points:
        while j < len(law) and law[j][1] <= s:
            below += law[j][2]
            j += 1
        lo, hi, m = law[j] if j < len(law) else (s, s, Fraction(0))
        out.append(below + (m * (s - lo) / (hi - lo) if lo < s else Fraction(0)))
    return out


def _densities_on(law: ScoreLaw, points: Sequence[Fraction]) -> list[Fraction]:
    """The law's density on each elementary segment of sorted ``points`` (one merge pass)."""
    out, j = [], 0
    for a, b in zip(points, points[1:], strict=False):
        while j < len(law) and law[j][1] <= a:
            j += 1
        inside = j < len(law) and law[j][0] <= a and b <= law[j][1]
        out.append(law[j][2] / (law[j][1] - law[j][0]) if inside else Fraction(0))
    return out


def _times_linear(poly: list[Fraction], c0: Fraction, c1: Fraction) -> list[Fraction]:
    """``poly`` (coefficients in u, lowest first) times ``c0 + c1 u``."""
    out = [Fraction(0)] * (len(poly) + 1)
    for e, c in enumerate(poly):
        out[e] += c * c0
        out[e + 1] += c * c1
    return out


def _integral(poly: list[Fraction], width: Fraction) -> Fraction:
    """The integral of ``poly`` (coefficients in u) over u in [0, width]."""
    return sum((c * width ** (e + 1) / (e + 1) for e, c in enumerate(poly)), Fraction(0))


def win_probabilities(laws: Sequence[ScoreLaw]) -> list[Fraction]:
    r"""P(score k is the largest) for independent scores with the given laws.

    :math:`P_k = \int \prod_{j \ne k} F_j(s)\, dG_k(s)`, integrated exactly piece by piece (on
    each elementary segment every F_j is linear and every density constant, so the integrand is
    a polynomial of degree K - 1). Ties have probability 0. One sweep over the S elementary
    segments of the union of the breakpoints: O(S K^3 + sum of the laws' sizes) operations.

    Parameters
    ----------
    laws : sequence of ScoreLaw, length K >= 1
        Normalised laws.

    Returns
    -------
    list of Fraction, length K
        Sums to 1.
    """
    points = sorted({p for law in laws for lo, hi, _ in law for p in (lo, hi)})
    cdfs = [_cdf_on(law, points) for law in laws]
    denss = [_densities_on(law, points) for law in laws]
    out = [Fraction(0)] * len(laws)
    for i, (a, b) in enumerate(zip(points, points[1:], strict=False)):
        for k in range(len(laws)):
            if denss[k][i] == 0:
                continue
            poly = [Fraction(1)]  # coefficients in u = s - a
            for j in range(len(laws)):
                if j != k:
                    poly = _times_linear(poly, cdfs[j][i], denss[j][i])
            out[k] += denss[k][i] * _integral(poly, b - a)
    return out


__all__ = [
    "UNIFORM",
    "ScoreCoverage",
    "ScoreLaw",
    "add_measures",
    "moment",
    "scaled",
    "split_law",
    "top_slice",
    "win_probabilities",
]
