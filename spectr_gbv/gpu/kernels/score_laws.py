r"""Batched float64 piecewise-uniform score laws: the node function of ``near_opt_bv``'s score selection.

The torch counterpart of :mod:`spectr_gbv.reference.score_laws` (read it for the construction).
A draft's score S in [0, 1] has, given its prefix u, a piecewise-uniform law :math:`H_u`; the
node rule at u is the polymatroid rule of

.. math::
    g_H(x) = \frac{\int_{\text{top } x \text{ of } H} s^k\, dH}{E_H[S^k]}, \qquad k = K - 1,

(:class:`ScoreLaws`, a :class:`~spectr_gbv.gpu.kernels.coverage.NodeLaw` for
:func:`~spectr_gbv.gpu.kernels.coverage.split_node_rule`), the children's laws are built
by :func:`split_laws` and the selection probabilities of the K leaves by :func:`win_probabilities`.

Layout. N laws at once: ``points`` float64 [N, P+1] nondecreasing breakpoints and ``density``
float64 [N, P] >= 0, piece j being density ``density[:, j]`` on ``[points[:, j], points[:, j+1]]``
(gaps have density 0; rows with fewer pieces are padded at the top with zero-width pieces).
Masses are counted in quantiles: the *bottom* quantile s is the score below which H has mass s,
the *top* quantile x the score above which it has mass x.

Precision. Every moment is a sum of nonnegative piece terms (cumulative sums from the bottom and,
separately, from the top), a piece's term is its mass times :math:`\frac{1}{k+1}\sum_{i=0}^{k}
a^i b^{k-i}` (no cancellation of :math:`b^{k+1} - a^{k+1}`), and a slice's moment is computed from
its own end pieces (its middle part is a difference of cumulative sums only when it spans whole
pieces), so :math:`g`, :math:`1 - g(1 - s)` and the vertices keep their relative precision.

Complexity. One evaluation at M points per law: O(M log P) (``torch.searchsorted``). A split
builds P + 1 + 2C breakpoints (C orders) and merges equal-density neighbours, O((P + C) C) per
child; :func:`win_probabilities` costs O(K^3 S) per row over its S elementary segments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch


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

    A :class:`~spectr_gbv.gpu.kernels.coverage.NodeLaw`: :meth:`g` is :math:`g_H`, :meth:`tail`
    :math:`1 - g_H(1 - s)` (the moment of the bottom s), :meth:`vertex` the moment of a slice.

    Attributes
    ----------
    points : Tensor, float64 [N, P+1]
        Nondecreasing breakpoints in [0, 1].
    density : Tensor, float64 [N, P]
        Densities (>= 0); total mass 1 within rounding.
    k : int
        K - 1 >= 0 (k = 0: g(x) = x, the rule is d = q).
    """

    points: torch.Tensor
    density: torch.Tensor
    k: int
    _cache: dict[str, torch.Tensor] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def uniform(n: int, k: int, device: torch.device | str = "cpu") -> ScoreLaws:
        """``n`` copies of the uniform law on [0, 1] (the root's law)."""
        pts = torch.tensor([0.0, 1.0], dtype=torch.float64, device=device).expand(n, 2).contiguous()
        return ScoreLaws(pts, torch.ones(n, 1, dtype=torch.float64, device=device), k)

    def _get(self, name: str) -> torch.Tensor:
        c = self._cache
        if not c:
            pts, dens = self.points, self.density
            lo, hi = pts[:, :-1], pts[:, 1:]
            mass = dens * (hi - lo)
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
        return ScoreLaws(self.points[rows], self.density[rows], self.k)

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

    def slice_moment(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Moment of H between its bottom quantiles ``a <= b`` (float64 [N, M]; unnormalised).

        Within one piece the slice's own term; across pieces its two end parts plus the whole
        pieces between them (a difference of cumulative sums, exactly 0 when there are none).
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
        same = (b - a).clamp_min(0.0) * _mean_power(sa, sb_same, self.k)
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
        val = self.slice_moment(rest - qs, rest) / self.total_moment.unsqueeze(-1)
        return torch.where((qs > 0) & (rest > 0), val, 0.0)

    def score_at(self, s: torch.Tensor) -> torch.Tensor:
        """The score at bottom quantile ``s`` (float64 [N, M]; clamped to the support's range)."""
        cb, P = self._get("cb"), self.num_pieces
        s = s.contiguous()
        j = torch.searchsorted(cb, s, side="left").clamp(1, P) - 1
        lo, rho = _gather(self.points, j), _gather(self.density, j)
        out = torch.where(rho > 0, lo + (s - _gather(cb, j)) / torch.where(rho > 0, rho, 1.0), lo)
        return out.clamp(self.points[:, :1], self.points[:, -1:])

    def cdf(self, s: torch.Tensor) -> torch.Tensor:
        """Mass below the scores ``s`` (float64 [N, M])."""
        cb, P = self._get("cb"), self.num_pieces
        s = s.contiguous()
        j = torch.searchsorted(self.points.contiguous(), s, side="right").clamp(1, P) - 1
        lo, rho = _gather(self.points, j), _gather(self.density, j)
        val = _gather(cb, j) + rho * (s - lo).clamp_min(0.0)
        return val.clamp(_gather(cb, j), _gather(cb, j + 1))

    def density_at(self, s: torch.Tensor) -> torch.Tensor:
        """Density at the scores ``s`` (float64 [N, M]; 0 outside the support)."""
        P = self.num_pieces
        j = torch.searchsorted(self.points.contiguous(), s.contiguous(), side="right") - 1
        inside = (j >= 0) & (j < P) & (s < self.points[:, -1:])
        return torch.where(inside, _gather(self.density, j.clamp(0, P - 1)), 0.0)


def _select_points(points: torch.Tensor, seg: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the breakpoints ``keep`` (bool [N, S+1]); ``seg[:, i]`` is the density of the piece ending at point i."""
    cnt = keep.sum(-1)
    width = max(2, int(cnt.max()))
    order = torch.sort((~keep).to(torch.int8), dim=-1, stable=True).indices[:, :width]
    pos = torch.arange(width, device=points.device).unsqueeze(0)
    real = pos < cnt.unsqueeze(-1)
    top = points.gather(1, order.gather(1, (cnt - 1).clamp_min(0).unsqueeze(-1)))
    pts = torch.where(real, points.gather(1, order), top)
    dens = torch.where(real, seg.gather(1, order), 0.0)
    return pts, dens


def _compact(points: torch.Tensor, density: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop zero-width pieces, then merge neighbours of equal density (padding to the longest row)."""
    seg = torch.cat([torch.zeros_like(density[:, :1]), density], -1)
    keep = torch.cat([torch.ones_like(points[:, :1], dtype=torch.bool), points[:, 1:] > points[:, :-1]], -1)
    pts, seg = _select_points(points, seg, keep)
    S1 = pts.shape[1]
    cnt = torch.cat([torch.ones_like(pts[:, :1], dtype=torch.bool), pts[:, 1:] > pts[:, :-1]], -1).sum(-1)
    pos = torch.arange(S1, device=pts.device).unsqueeze(0)
    last = (cnt - 1).unsqueeze(-1)
    nxt = torch.cat([seg[:, 1:], torch.zeros_like(seg[:, :1])], -1)
    interior = (pos > 0) & (pos < last)
    keep2 = (pos <= last) & ~(interior & (seg == nxt))
    pts, seg = _select_points(pts, seg, keep2)
    return pts, seg[:, 1:]


def split_laws(
    parent: ScoreLaws, share: torch.Tensor, weights: torch.Tensor, after: torch.Tensor, q_v: torch.Tensor
) -> ScoreLaws:
    r"""Children's score laws :math:`G_{uv}` (:func:`spectr_gbv.reference.near_opt_bv.child_law`), N at once.

    .. math::
        q(v) G_{uv} = \lambda q(v) H + (1 - \lambda) \sum_i \mu_i H|_{\text{bottom quantiles }
        [R_i, R_i + q(v)]},

    :math:`R_i` the q-mass after v in order i (the top-quantile slice
    :math:`[Q_i(<v), Q_i(<v) + q(v))` of the reference). The child's density is H's times the
    piecewise-constant factor :math:`\lambda + (1 - \lambda) \sum_{i: s \in \text{slice}_i}
    \mu_i / q(v)`, on H's breakpoints and the slices' ends.

    Parameters
    ----------
    parent : ScoreLaws
        H of each child's parent, N laws.
    share : Tensor, float64 [N]
        :math:`\lambda`.
    weights : Tensor, float64 [N, C]
        :math:`\mu_i` (0 in unused columns).
    after : Tensor, float64 [N, C]
        :math:`R_i`.
    q_v : Tensor, float64 [N]
        q(v) > 0.

    Returns
    -------
    ScoreLaws
        N laws (masses 1 within rounding), zero-width pieces dropped and equal neighbours merged.
    """
    used = (weights > 0).any(0)
    cols = used.nonzero().squeeze(-1)
    weights, after = weights[:, cols], after[:, cols]
    active = weights > 0
    lo = parent.score_at(after)
    hi = parent.score_at(after + q_v.unsqueeze(-1))
    bottom = parent.points[:, :1].expand_as(lo)
    lo, hi = torch.where(active, lo, bottom), torch.where(active, hi, bottom)
    pts = torch.sort(torch.cat([parent.points, lo, hi], -1), -1).values
    mid = 0.5 * (pts[:, 1:] + pts[:, :-1])
    rho = parent.density_at(mid)
    inside = active.unsqueeze(1) & (lo.unsqueeze(1) < mid.unsqueeze(-1)) & (mid.unsqueeze(-1) < hi.unsqueeze(1))
    mix = (inside.to(torch.float64) * weights.unsqueeze(1)).sum(-1)
    factor = share.unsqueeze(-1) + (1.0 - share).unsqueeze(-1) * mix / q_v.unsqueeze(-1)
    pts, dens = _compact(pts, rho * factor)
    return ScoreLaws(pts, dens, parent.k)


def win_probabilities(laws: ScoreLaws, B: int, K: int) -> torch.Tensor:
    r"""P(score k is the largest) for K independent scores per row, B rows at once.

    The batched counterpart of :func:`spectr_gbv.reference.score_laws.win_probabilities`.

    :math:`P_k = \int \prod_{j \ne k} F_j\, dG_k`, exactly per elementary segment of the union of
    the K laws' breakpoints (there every :math:`F_j` is linear and every density constant).

    Parameters
    ----------
    laws : ScoreLaws
        B K laws, row-major ``[b * K + k]``.
    B, K : int

    Returns
    -------
    Tensor, float64 [B, K]
        Rows summing to 1 within rounding.
    """
    P1 = laws.points.shape[1]
    u = torch.sort(laws.points.reshape(B, K * P1), -1).values  # [B, S+1]
    S = u.shape[1] - 1
    left = u[:, :-1]
    width = (u[:, 1:] - left).clamp_min(0.0)  # [B, S]
    mid = 0.5 * (u[:, 1:] + left)

    def rep(x: torch.Tensor) -> torch.Tensor:  # [B, S] -> [B K, S]
        return x.unsqueeze(1).expand(B, K, S).reshape(B * K, S)

    F = laws.cdf(rep(left)).view(B, K, S)
    rho = laws.density_at(rep(mid)).view(B, K, S)
    out = torch.zeros(B, K, dtype=torch.float64, device=u.device)
    powers = [width ** (i + 1) / (i + 1) for i in range(K)]
    for k in range(K):
        poly = [torch.ones_like(width)]  # coefficients in (s - left)
        for j in range(K):
            if j == k:
                continue
            nxt = [torch.zeros_like(width) for _ in range(len(poly) + 1)]
            for i, c in enumerate(poly):
                nxt[i] = nxt[i] + c * F[:, j]
                nxt[i + 1] = nxt[i + 1] + c * rho[:, j]
            poly = nxt
        integral = sum((c * powers[i] for i, c in enumerate(poly)), torch.zeros_like(width))
        out[:, k] = (rho[:, k] * integral).sum(-1)
    return out


__all__ = ["ScoreLaws", "split_laws", "win_probabilities"]
