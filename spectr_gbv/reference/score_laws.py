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
This project (issue 18, docs/near_opt_bv.md, "Score selection"); the selection of the largest
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


def _cdf_at(law: ScoreLaw, s: Fraction) -> Fraction:
    total = Fraction(0)
    for lo, hi, m in law:
        if s >= hi:
            total += m
        elif s > lo:
            total += m * (s - lo) / (hi - lo)
    return total


def _density(law: ScoreLaw, a: Fraction, b: Fraction) -> Fraction:
    """Density of ``law`` on the elementary segment (a, b) (inside one piece or none)."""
    for lo, hi, m in law:
        if lo <= a and b <= hi:
            return m / (hi - lo)
    return Fraction(0)


def win_probabilities(laws: Sequence[ScoreLaw]) -> list[Fraction]:
    r"""P(score k is the largest) for independent scores with the given laws.

    :math:`P_k = \int \prod_{j \ne k} F_j(s)\, dG_k(s)`, integrated exactly piece by piece (on
    each elementary segment every F_j is linear and every density constant, so the integrand is
    a polynomial of degree K - 1). Ties have probability 0.

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
    out = [Fraction(0)] * len(laws)
    for a, b in zip(points, points[1:], strict=False):
        width = b - a
        cdf = [_cdf_at(law, a) for law in laws]
        dens = [_density(law, a, b) for law in laws]
        for k in range(len(laws)):
            if dens[k] == 0:
                continue
            poly = [Fraction(1)]  # coefficients in u = s - a
            for j in range(len(laws)):
                if j != k:
                    nxt = [Fraction(0)] * (len(poly) + 1)
                    for i, c in enumerate(poly):
                        nxt[i] += c * cdf[j]
                        nxt[i + 1] += c * dens[j]
                    poly = nxt
            out[k] += dens[k] * sum((c * width ** (i + 1) / (i + 1) for i, c in enumerate(poly)), Fraction(0))
    return out


__all__ = [
    "UNIFORM",
    "ScoreCoverage",
    "ScoreLaw",
    "add_measures",
    "moment",
    "scaled",
    "top_slice",
    "win_probabilities",
]
