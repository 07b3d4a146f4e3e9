r"""Batched float64 piecewise-uniform score laws: the node function of ``near_opt_bv``'s score selection.

The torch counterpart of :mod:`spectr_gbv.reference.score_laws` (read it for the construction).
A draft's score S in [0, 1] has, given its prefix u, a piecewise-uniform law :math:`H_u`; the
node rule at u is the polymatroid rule of

.. math::
    g_H(x) = \frac{\int_{\text{top } x \text{ of } H} s^k\, dH}{E_H[S^k]}, \qquad k = K - 1,

(:class:`ScoreLaws`, a :class:`~spectr_gbv.gpu.kernels.node_laws.NodeLaw` for
:func:`~spectr_gbv.gpu.kernels.node_split.split_node_rule`). The laws themselves are exact
rationals (:mod:`spectr_gbv.reference.score_laws`; :func:`spectr_gbv.gpu.kernels.near_opt_bv.exact_child`
builds the children's): a :class:`ScoreLaws` is their float64 view for the V-sized rule
(:meth:`ScoreLaws.from_exact`).

Layout. N laws at once: ``points`` float64 [N, P+1] nondecreasing breakpoints and ``density``
float64 [N, P] >= 0, piece j being density ``density[:, j]`` on ``[points[:, j], points[:, j+1]]``
(gaps have density 0; rows with fewer pieces are padded at the top with zero-width pieces), and
optionally ``mass`` float64 [N, P], the pieces' masses (a view of exact laws keeps them, so a
piece narrower than float64 resolves, of zero width and density ``inf``, keeps its mass).
Masses are counted in quantiles: the *bottom* quantile s is the score below which H has mass s,
the *top* quantile x the score above which it has mass x.

Precision. Every moment is a sum of nonnegative piece terms (cumulative sums from the bottom and,
separately, from the top), a piece's term is its mass times :math:`\frac{1}{k+1}\sum_{i=0}^{k}
a^i b^{k-i}` (no cancellation of :math:`b^{k+1} - a^{k+1}`), and a slice's moment is computed from
its own end pieces (its middle part is a difference of cumulative sums only when it spans whole
pieces), so :math:`g`, :math:`1 - g(1 - s)` and the vertices keep their relative precision.

Complexity. One evaluation at M points per law: O(M log P) (``torch.searchsorted``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from spectr_gbv.reference.score_laws import ScoreLaw


def _mean_power(a: torch.Tensor, b: torch.Tensor, k: int) -> torch.Tensor:
    r""":math:`\frac{1}{b - a}\int_a^b s^k ds = \frac{1}{k+1} \sum_{i=0}^{k} a^i b^{k-i}` (a, b >= 0)."""
    if k == 0:
        return torch.ones_like(a)
    out, ap = a + b, a  # S_j = a^j + b S_{j-1}, S_0 = 1
    for _ in range(2, k + 1):
        ap = ap * a
        out = ap + b * out
    return out / (k + 1)


def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return x.gather(1, idx)


@dataclass(frozen=True)
class ScoreLaws:
    r"""N piecewise-uniform score laws (module docstring) with the moment order ``k = K - 1``.

    A :class:`~spectr_gbv.gpu.kernels.node_laws.NodeLaw`: :meth:`g` is :math:`g_H`, :meth:`tail`
    :math:`1 - g_H(1 - s)` (the moment of the bottom s), :meth:`vertex` the moment of a slice.

    Attributes
    ----------
    points : Tensor, float64 [N, P+1]
        Nondecreasing breakpoints in [0, 1].
    density : Tensor, float64 [N, P]
        Densities (>= 0, ``inf`` for a zero-width piece of positive mass); total mass 1 within
        rounding.
    k : int
        K - 1 >= 0 (k = 0: g(x) = x, the rule is d = q).
    mass : Tensor, float64 [N, P], optional
        The pieces' masses (default: density times width).
    """

    points: torch.Tensor
    density: torch.Tensor
    k: int
    mass: torch.Tensor | None = None
    _cache: dict[str, torch.Tensor] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def from_exact(laws: Sequence[ScoreLaw], k: int, device: torch.device | str = "cpu") -> ScoreLaws:
        """Float64 views of exact laws (:mod:`spectr_gbv.reference.score_laws`), one per row.

        The pieces' masses are kept as given (rounded once), not recomputed from densities, so a
        piece narrower than float64 resolves around its score keeps its mass: it becomes a
        zero-width piece (density ``inf``) at that score, and :meth:`g`, :meth:`tail` and
        :meth:`vertex` stay accurate relative to the law's moment. Scores are divided by the
        law's top score, which leaves g, the tail and the vertices unchanged (ratios of moments
        of one order) and keeps the moments of a law near 0 from underflowing; the view's
        :attr:`total_moment` is therefore that of the rescaled law. Gaps are zero-mass pieces;
        rows are padded at the top with zero-width, zero-mass pieces.

        Parameters
        ----------
        laws : sequence of ScoreLaw
            Normalised exact laws (N of them, N >= 1).
        k : int
            K - 1 >= 0.
        device : torch.device or str

        Returns
        -------
        ScoreLaws
            N laws with explicit ``mass``.
        """
        pts, mass = [], []
        for law in laws:
            top = law[-1][1]  # scores divided by the top one: g is scale-free, and the moments
            pp, mm = [float(law[0][0] / top)], []  # of a law near 0 then do not underflow
            prev = law[0][0]
            for lo, hi, m in law:
                if lo > prev:
                    pp.append(float(lo / top))
                    mm.append(0.0)
                pp.append(float(hi / top))
                mm.append(float(m))
                prev = hi
            pts.append(pp)
            mass.append(mm)
        P = max(len(m) for m in mass)
        for pp, mm in zip(pts, mass, strict=True):
            mm += [0.0] * (P - len(mm))
            pp += [pp[-1]] * (P + 1 - len(pp))
        points = torch.tensor(pts, dtype=torch.float64, device=device)
        masses = torch.tensor(mass, dtype=torch.float64, device=device)
        width = points[:, 1:] - points[:, :-1]
        safe = torch.where(width > 0, width, 1.0)
        density = torch.where(width > 0, masses / safe, torch.where(masses > 0, torch.inf, 0.0))
        return ScoreLaws(points, density, k, masses)

    def _get(self, name: str) -> torch.Tensor:
        c = self._cache
        if not c:
            pts, dens = self.points, self.density
            lo, hi = pts[:, :-1], pts[:, 1:]
            mass = dens * (hi - lo) if self.mass is None else self.mass
            mom = mass * _mean_power(lo, hi, self.k)
            zero = torch.zeros_like(pts[:, :1])
            c["mass"] = mass
            c["cb"] = torch.cat([zero, torch.cumsum(mass, -1)], -1).contiguous()
            c["mb"] = torch.cat([zero, torch.cumsum(mom, -1)], -1)
            c["ct"] = torch.cat([zero, torch.cumsum(torch.flip(mass, [-1]), -1)], -1).contiguous()
            c["mt"] = torch.cat([zero, torch.cumsum(torch.flip(mom, [-1]), -1)], -1)
            c["pf"] = torch.flip(pts, [-1])
            c["df"] = torch.flip(dens, [-1])
            c["mf"] = torch.flip(mass, [-1])
            c["moment"] = c["mb"][:, -1]
        return c[name]

    @property
    def num_pieces(self) -> int:
        """P (padded)."""
        return int(self.density.shape[1])

    @property
    def total_moment(self) -> torch.Tensor:
        r""":math:`E_H[S^k]` (times the total mass), float64 [N]."""
        return self._get("moment")

    @property
    def total_mass(self) -> torch.Tensor:
        """Total mass (1 within rounding), float64 [N]."""
        return self._get("cb")[:, -1]

    def __getitem__(self, rows: torch.Tensor) -> ScoreLaws:
        """The laws ``rows`` (int64 or bool index)."""
        mass = None if self.mass is None else self.mass[rows]
        return ScoreLaws(self.points[rows], self.density[rows], self.k, mass)

    @property
    def multi(self) -> torch.Tensor:
        """bool [N]: ``k >= 1`` (at k = 0, g(x) = x and the rule is d = q)."""
        return torch.full((self.points.shape[0],), self.k >= 1, dtype=torch.bool, device=self.points.device)

    def _bottom_moment(self, s: torch.Tensor) -> torch.Tensor:
        """Moment of the bottom ``s`` of the mass ([N, M], s >= 0)."""
        cb, P = self._get("cb"), self.num_pieces
        j = (torch.searchsorted(cb, s.contiguous(), side="left").clamp(1, P) - 1).clamp_min(0)
        part = (s - _gather(cb, j)).clamp_min(0.0).minimum(_gather(self._get("mass"), j))
        lo, rho = _gather(self.points, j), _gather(self.density, j)
        hi = torch.where(rho > 0, lo + part / torch.where(rho > 0, rho, 1.0), lo)
        return _gather(self._get("mb"), j) + part * _mean_power(lo, hi, self.k)

    def _top_moment(self, x: torch.Tensor) -> torch.Tensor:
        """Moment of the top ``x`` of the mass ([N, M], x >= 0)."""
        ct, P = self._get("ct"), self.num_pieces
        j = torch.searchsorted(ct, x.contiguous(), side="left").clamp(1, P) - 1
        part = (x - _gather(ct, j)).clamp_min(0.0).minimum(_gather(self._get("mf"), j))
        hi, rho = _gather(self._get("pf"), j), _gather(self._get("df"), j)
        lo = torch.where(rho > 0, hi - part / torch.where(rho > 0, rho, 1.0), hi)
        return _gather(self._get("mt"), j) + part * _mean_power(lo, hi, self.k)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        N = self.points.shape[0]
        flat = x.reshape(N, -1)
        return fn(flat).reshape(x.shape)

    def g(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`g_H(x)`: the moment of the top x of H over the whole ([N, ...]; 0 at x <= 0)."""
        out = self._apply(self._top_moment, x.clamp_min(0.0))
        return out / self.total_moment.view((-1,) + (1,) * (x.dim() - 1))

    def g_direct(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`g` (already accurate relative to its value)."""
        return self.g(x)

    def tail(self, s: torch.Tensor) -> torch.Tensor:
        r""":math:`1 - g_H(1 - s)`: the moment of the bottom s of H over the whole ([N, ...])."""
        out = self._apply(self._bottom_moment, s.clamp_min(0.0))
        return out / self.total_moment.view((-1,) + (1,) * (s.dim() - 1))

    def slice_moment(self, a: torch.Tensor, b: torch.Tensor, width: torch.Tensor | None = None) -> torch.Tensor:
        """Moment of H between its bottom quantiles ``a <= b`` (float64 [N, M]; unnormalised).

        Within one piece the slice's own term (its mass ``width``, default ``b - a``: pass the
        mass itself when ``a`` was computed as ``b`` minus it, so a tiny slice keeps its
        relative precision); across pieces its two end parts plus the whole pieces between
        them (a difference of cumulative sums, exactly 0 when there are none).
        """
        cb, mb, P = self._get("cb"), self._get("mb"), self.num_pieces
        mass = self._get("mass")
        a, b = a.clamp_min(0.0).contiguous(), b.contiguous()
        ia = torch.searchsorted(cb, a, side="right").clamp(1, P) - 1
        ib = torch.searchsorted(cb, b, side="left").clamp(1, P) - 1
        lo_a, rho_a, base_a = _gather(self.points, ia), _gather(self.density, ia), _gather(cb, ia)
        lo_b, rho_b, base_b = _gather(self.points, ib), _gather(self.density, ib), _gather(cb, ib)
        safe_a, safe_b = torch.where(rho_a > 0, rho_a, 1.0), torch.where(rho_b > 0, rho_b, 1.0)
        sa = torch.where(rho_a > 0, lo_a + (a - base_a) / safe_a, lo_a)
        # same piece
        sb_same = torch.where(rho_a > 0, lo_a + (b - base_a) / safe_a, lo_a)
        same = ((b - a) if width is None else width).clamp_min(0.0) * _mean_power(sa, sb_same, self.k)
        # across pieces: top of piece ia, whole pieces ia+1..ib-1, bottom of piece ib
        top_a = (_gather(mass, ia) - (a - base_a)).clamp_min(0.0)
        hi_a = _gather(self.points, ia + 1)
        part_b = (b - base_b).clamp_min(0.0).minimum(_gather(mass, ib))
        sb = torch.where(rho_b > 0, lo_b + part_b / safe_b, lo_b)
        middle = (_gather(mb, ib) - _gather(mb, (ia + 1).clamp_max(P))).clamp_min(0.0)
        cross = top_a * _mean_power(sa, hi_a, self.k) + middle + part_b * _mean_power(lo_b, sb, self.k)
        return torch.where(ia >= ib, same, cross)

    def vertex(self, qs: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
        """The moment of the bottom-quantile slice ``[rest - qs, rest]`` over the whole ([N, n])."""
        val = self.slice_moment(rest - qs, rest, torch.minimum(qs, rest)) / self.total_moment.unsqueeze(-1)
        return torch.where((qs > 0) & (rest > 0), val, 0.0)


__all__ = ["ScoreLaws"]
