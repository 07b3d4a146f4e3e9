r"""Batched float64 lexicographically optimal bases of concave coverage polymatroids.

The torch counterpart of :func:`spectr_gbv.reference.coverage.lexicographic_base`, for a generic
concave coverage function g (a count law :math:`g(x) = \sum_m \pi(m)[1 - (1 - x)^m]`, a score-law
function :math:`g_H`, ...). A node of N rows has the polymatroid :math:`f(X) = g(q(X))` on the
support of its draft law q, and a nonnegative target t; the lexicographically optimal base d
with respect to t (Fujishige 1980) is built in two parts.

1. The tokens with t > 0, sorted by t/q descending (ties by token id), with cumulative sums
   :math:`T_i = t(\text{first } i)`, :math:`Q_i = q(\text{first } i)`. The reference's greedy
   ("take the largest prefix block minimising :math:`\lambda = [g(Q_e) - g(Q_s)]/(T_e - T_s)`")
   walks the lower convex hull of the points :math:`(T_i, g(Q_i))`, i = 0..m, from the origin:
   each hull edge is a block and every token in it gets :math:`d = \lambda t`, :math:`\lambda`
   the edge's slope. Collinear points are inside an edge (strict hull vertices only), as the
   reference's ``lam <= best`` (the largest minimiser) puts them in one block.
2. The tokens with t = 0 (in the support) take the remaining mass in token-id order by greedy
   increments, :math:`d(y) = g(Q + q(y)) - g(Q)`, Q accumulating from :math:`Q_m`.

The hull is built by divide and conquer over the positions 0..L-1 (L the power of two above
n): at level k every pair of neighbouring blocks of :math:`2^k` positions merges its two
hulls, stored as compact lists of vertex positions, through their bridge. With
:math:`\sigma^*` the bridge's slope, the left hull keeps its edges of slope :math:`< \sigma^*`
(a prefix) and the right hull its edges of slope :math:`> \sigma^*` (a suffix); an edge of
slope e of the left hull, from vertex a, is kept iff :math:`e < \mathrm{slope}(a, b(e))`, b(e)
the right hull's vertex touched by the support line of slope e (``torch.searchsorted`` in the
right hull's edge slopes), and symmetrically for the right hull, so each pair needs two binary
searches over its edges, vectorised over all pairs and rows.

Precision. The hull's abscissae are :math:`-\sum_{j > i} t_j` (suffix sums of the sorted
targets): the steep edges sit at the end of the order, where these sums are small and exact to
their own relative precision (an abscissa error costs its edge's slope times the error in
ordinates). Points whose abscissa equals the next one's in float64 (a negligible target,
:math:`t_i < \epsilon \sum_{j > i} t_j`, which forces :math:`q_i < \epsilon` too) are left out of
the hull and ride in the block of the next vertex. A block's slope is recomputed from its own
sums, :math:`\lambda = \sum_{\text{block}} \Delta g / \sum_{\text{block}} t`, so every block
holds exactly its increment of g and the base sums to :math:`g(1) = 1` up to rounding. g is
called once, on float64 [N, 2n] points clamped to [0, 1].

Complexity per row of n tokens: the sort O(n log n); the hull O(n log n) work (log2 L levels of
O(L) gathers, plus O(log^2 w) per merged pair of width w) in O(log^2 n) batched torch steps;
2n evaluations of g; the rest O(n). Memory O(N L).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _edge_slopes(xs: torch.Tensor, ys: torch.Tensor, cnt: torch.Tensor) -> torch.Tensor:
    """Slopes of the edges of compact hulls [B, w] with ``cnt`` [B] vertices; +inf past the last edge."""
    e = torch.full_like(xs, float("inf"))
    if xs.shape[1] > 1:
        slope = (ys[:, 1:] - ys[:, :-1]) / (xs[:, 1:] - xs[:, :-1])
        ok = torch.arange(xs.shape[1] - 1, device=xs.device) < (cnt - 1)[:, None]
        e[:, :-1] = torch.where(ok, slope, e[:, :-1])
    return e


def _kept_edges(
    e_own: torch.Tensor,
    e_other: torch.Tensor,
    x_own: torch.Tensor,
    y_own: torch.Tensor,
    x_other: torch.Tensor,
    y_other: torch.Tensor,
    n_edges: torch.Tensor,
    left: bool,
) -> torch.Tensor:
    """Binary search, per row, of the boundary between the kept and the dropped edges of one hull.

    ``left``: the kept edges of the left hull are a prefix (slope below the bridge's); returns
    their number. Otherwise the kept edges of the right hull are a suffix (slope above the
    bridge's); returns the index of the first one (``n_edges`` when none). All [B] int64.
    """
    width = e_own.shape[1]
    lo = torch.zeros_like(n_edges)
    hi = n_edges.clone()
    for _ in range(width.bit_length()):
        active = lo < hi
        mid = ((lo + hi) // 2).clamp(max=width - 1)[:, None]
        e = e_own.gather(1, mid)
        touch = torch.searchsorted(e_other, e).clamp(max=width - 1)
        xo, yo = x_own.gather(1, mid), y_own.gather(1, mid)
        xt, yt = x_other.gather(1, touch), y_other.gather(1, touch)
        if left:
            kept = (e < (yt - yo) / (xt - xo))[:, 0]
            lo = torch.where(active & kept, mid[:, 0] + 1, lo)
            hi = torch.where(active & ~kept, mid[:, 0], hi)
        else:
            kept = (e > (yo - yt) / (xo - xt))[:, 0]
            hi = torch.where(active & kept, mid[:, 0], hi)
            lo = torch.where(active & ~kept, mid[:, 0] + 1, lo)
    return lo


def _lower_hull(x: torch.Tensor, y: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """Strict vertices of the lower convex hull of the present points, per row.

    Parameters
    ----------
    x, y : Tensor, float64 [N, L]
        Coordinates, x strictly increasing along the present points; L a power of two.
    present : Tensor, bool [N, L]

    Returns
    -------
    Tensor, bool [N, L]
        True at the hull's strict vertices (collinear points excluded).
    """
    N, L = x.shape
    H = torch.arange(L, device=x.device).expand(N, L).reshape(N, L, 1)
    C = present.to(torch.int64)
    w = 1
    while w < L:
        P = H.shape[1] // 2
        B = N * P
        HA, HB = H[:, 0::2].reshape(B, w), H[:, 1::2].reshape(B, w)
        CA, CB = C[:, 0::2].reshape(B), C[:, 1::2].reshape(B)
        xA, yA = x.gather(1, HA.reshape(N, P * w)).reshape(B, w), y.gather(1, HA.reshape(N, P * w)).reshape(B, w)
        xB, yB = x.gather(1, HB.reshape(N, P * w)).reshape(B, w), y.gather(1, HB.reshape(N, P * w)).reshape(B, w)
        eA, eB = _edge_slopes(xA, yA, CA), _edge_slopes(xB, yB, CB)
        nA, nB = (CA - 1).clamp(min=0), (CB - 1).clamp(min=0)
        i_end = _kept_edges(eA, eB, xA, yA, xB, yB, nA, left=True)
        j_start = _kept_edges(eB, eA, xB, yB, xA, yA, nB, left=False)
        # an empty half: the merged hull is the other one
        i_end = torch.where(CA == 0, -1, torch.where(CB == 0, CA - 1, i_end))
        j_start = torch.where((CA == 0) | (CB == 0), 0, j_start)
        r = torch.arange(2 * w, device=x.device)[None, :]
        src = torch.where(r <= i_end[:, None], r, w + j_start[:, None] + r - i_end[:, None] - 1).clamp(0, 2 * w - 1)
        H = torch.cat([HA, HB], dim=1).gather(1, src).reshape(N, P, 2 * w)
        C = (i_end + 1 + CB - j_start).reshape(N, P)
        w *= 2
    verts = H.reshape(N, L)
    on = torch.arange(L, device=x.device)[None, :] < C.reshape(N, 1)
    out = torch.zeros(N, L + 1, dtype=torch.bool, device=x.device)
    return out.scatter_(1, torch.where(on, verts, L), True)[:, :L]


def lexicographic_base(
    t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, g: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    r"""The lexicographically optimal base of :math:`X \mapsto g(q(X))` with respect to t, per row.

    .. math::
        d = \operatorname{lex\,max}_{d \in B(f)} \left(d(y)/t(y)\right)_{\text{increasing}},
        \qquad f(X) = g(q(X)),

    the base maximising :math:`\sum_y t(y)\,\phi(d(y)/t(y))` for every concave :math:`\phi`, in
    particular :math:`\sum_y \min\{t(y), d(y)\}`. Algorithm and precision: the module docstring.

    Parameters
    ----------
    t : Tensor, float64 [N, n]
        Nonnegative targets (sub-probabilities); entries outside ``valid`` are ignored.
    q : Tensor, float64 [N, n]
        Draft laws: each row sums to 1 over ``valid``.
    valid : Tensor, bool [N, n]
        The supports of q (``q > 0``).
    g : callable
        Concave increasing coverage function with g(0) = 0 and g(1) = 1, vectorised and row-wise:
        given float64 [N, M] points in [0, 1] it returns float64 [N, M], row i evaluated with row
        i's function (e.g. ``lambda x: 1 - (1 - x) ** K[:, None]`` for per-row draft counts K).

    Returns
    -------
    Tensor, float64 [N, n]
        The base d: sums to 1 over ``valid`` (up to rounding), 0 outside it.

    Raises
    ------
    ValueError
        ``t``, ``q``, ``valid`` not of one shape [N, n], or not float64, float64, bool.

    Notes
    -----
    O(n log n) per row (sort and hull), O(log^2 n) batched torch steps, one call of g on
    [N, 2n] points.

    References
    ----------
    Fujishige, "Lexicographically optimal base of a polymatroid with respect to a weight
    vector", Math. Oper. Res. 5 (1980); :func:`spectr_gbv.reference.coverage.lexicographic_base`
    (the exact reference).

    Examples
    --------
    >>> t = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
    >>> q = torch.tensor([[0.25, 0.25, 0.5]], dtype=torch.float64)
    >>> lexicographic_base(t, q, q > 0, lambda x: 1 - (1 - x) ** 2)
    tensor([[0.3750, 0.3750, 0.2500]], dtype=torch.float64)
    """
    if t.dim() != 2 or t.shape != q.shape or t.shape != valid.shape:
        raise ValueError(
            f"lexicographic_base: t, q, valid must share one shape [N, n], got "
            f"{tuple(t.shape)}, {tuple(q.shape)}, {tuple(valid.shape)}"
        )
    if t.dtype != torch.float64 or q.dtype != torch.float64 or valid.dtype != torch.bool:
        raise ValueError(
            f"lexicographic_base: dtypes must be float64, float64, bool, got {t.dtype}, {q.dtype}, {valid.dtype}"
        )
    N, n = t.shape
    if N == 0 or n == 0:
        return torch.zeros_like(t)
    dev = t.device
    zero_col = torch.zeros(N, 1, dtype=t.dtype, device=dev)
    cand = valid & (t > 0)
    ratio = torch.where(cand, t / torch.where(cand, q, torch.ones_like(q)), torch.full_like(t, -float("inf")))
    perm = torch.sort(-ratio, dim=1, stable=True).indices
    cs = cand.gather(1, perm)
    ts = torch.where(cs, t.gather(1, perm), 0.0)
    qs = torch.where(cs, q.gather(1, perm), 0.0)
    m = cs.sum(dim=1)

    # hull points 0..n: abscissa -(t after the first i), ordinate g(q of the first i)
    L = 1 << n.bit_length()
    suffix = ts.flip(1).cumsum(1).flip(1)
    x = torch.cat([-suffix, zero_col], dim=1).cummax(dim=1).values
    Q = torch.cat([zero_col, qs.cumsum(1)], dim=1).cummax(dim=1).values.clamp(0.0, 1.0)
    Qm = Q.gather(1, m[:, None])
    zmask = valid & (t == 0)
    Z = torch.where(zmask, q, 0.0).cumsum(1)
    gv = g(torch.cat([Q[:, 1:], (Qm + Z).clamp(0.0, 1.0)], dim=1))
    y = torch.cat([zero_col, gv[:, :n]], dim=1)
    pos = torch.arange(n + 1, device=dev)[None, :]
    nxt = torch.cat([x[:, 1:], x[:, -1:]], dim=1)
    present = (pos <= m[:, None]) & ((pos == m[:, None]) | (x < nxt))
    pad = L - (n + 1)
    xp = torch.nn.functional.pad(x, (0, pad))
    yp = torch.nn.functional.pad(y, (0, pad))
    vert = _lower_hull(xp, yp, torch.nn.functional.pad(present, (0, pad)))

    # blocks: sorted token i (point i + 1) lies in the edge ending at the first vertex >= i + 1
    vert[:, 0] = False
    block = vert[:, :n].to(torch.int64).cumsum(1)
    dy = torch.where(cs, y[:, 1:] - y[:, :-1], 0.0)
    t_block = torch.zeros(N, n + 1, dtype=t.dtype, device=dev).scatter_add_(1, block, ts)
    g_block = torch.zeros(N, n + 1, dtype=t.dtype, device=dev).scatter_add_(1, block, dy)
    share = ts / torch.where(cs, t_block.gather(1, block), 1.0)
    ds = torch.where(cs, g_block.gather(1, block) * share, 0.0)
    d = torch.zeros_like(t).scatter(1, perm, ds)

    # tokens with t = 0: greedy increments in id order from g(Q_m)
    vals = gv[:, n:]
    prev = torch.cat([y.gather(1, m[:, None]), vals[:, :-1]], dim=1)
    return d + torch.where(zmask, vals - prev, 0.0)


#: A token is under-drafted in :func:`hedged_base` when its lexicographic entry is below
#: ``(1 - HEDGE_RTOL)`` times its target (float64 rounding leaves targets met exactly within it).
HEDGE_RTOL: float = 1e-12


def hedged_base(
    t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, g: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    r""":func:`lexicographic_base` with its under-drafted tokens re-split in proportion to q, per row.

    With d the lexicographic base and T the tokens with :math:`0 < d < (1 - \epsilon) t`
    (:data:`HEDGE_RTOL`), the entries on T become :math:`\min\{t, \lambda q\}` with the same
    total (water-filling), the others stay: the torch counterpart of
    :func:`spectr_gbv.reference.coverage.hedged_base` (which states why it is a base on the same
    optimal face).

    Parameters
    ----------
    t, q, valid, g
        As :func:`lexicographic_base`.

    Returns
    -------
    Tensor, float64 [N, n]
        The base: sums to 1 over ``valid`` (up to rounding), 0 outside it.

    Raises
    ------
    ValueError
        As :func:`lexicographic_base`.

    Notes
    -----
    :func:`lexicographic_base`, then one sort and two cumulative sums per row: O(n log n).

    References
    ----------
    This project (docs/near_opt_bv.md, "The hedged split").
    """
    d = lexicographic_base(t, q, valid, g)
    under = valid & (t > 0) & (d > 0) & (d < t * (1.0 - HEDGE_RTOL))
    rows = (under.sum(1) >= 2).nonzero().squeeze(-1)
    if rows.numel() == 0:
        return d
    du, tu, qu, uu = d[rows], t[rows], q[rows], under[rows]
    mass = torch.where(uu, du, 0.0).sum(1, keepdim=True)
    # tokens of T by t/q ascending (the ones that hit their cap first), the others last
    ratio = torch.where(uu, tu / torch.where(uu, qu, torch.ones_like(qu)), torch.full_like(tu, float("inf")))
    perm = torch.sort(ratio, dim=1, stable=True).indices
    us = uu.gather(1, perm)
    ts, qs = torch.where(us, tu.gather(1, perm), 0.0), torch.where(us, qu.gather(1, perm), 0.0)
    capped = ts.cumsum(1) - ts  # t of the tokens before position i
    rest = qs.flip(1).cumsum(1).flip(1)  # q of position i and after
    lam = (mass - capped) / torch.where(us, rest, torch.ones_like(rest))
    # the water level: lam at the first position whose token is not capped (t >= lam q); the
    # last token of T always qualifies since t(T) > d(T)
    first = torch.where(us & (ts >= lam * qs), torch.arange(ts.shape[1], device=t.device), ts.shape[1]).amin(1)
    level = lam.gather(1, first.clamp_max(ts.shape[1] - 1).unsqueeze(-1))
    d[rows] = torch.where(uu, torch.minimum(tu, level * qu), du)
    return d


__all__ = ["HEDGE_RTOL", "hedged_base", "lexicographic_base"]
