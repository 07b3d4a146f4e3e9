r"""Batched float64 node rules of the coverage polymatroid over a law of the number of drafts.

The torch counterpart of :func:`spectr_gbv.reference.coverage.mixture_rule` (read
:mod:`spectr_gbv.reference.coverage` for the algorithm). A node is reached by a random number
M of i.i.d. drafts with law :math:`\pi(m)` (:class:`~spectr_gbv.gpu.kernels.node_laws.CountLaw`;
a point mass c for ``optimal_multidraft``), its polymatroid is :math:`f(X) = G(q(X))`,
:math:`G(x) = \sum_m \pi(m) [1 - (1 - x)^m]`, and for a nonnegative target t (total <= 1) the
rule is:

1. :math:`a^*`, the greedy vertex (support tokens in the ``priority`` order) of the
   box-truncated polymatroid :math:`f'(X) = \min_{Y \subseteq X}[G(q(Y)) + t(X \setminus Y)]`;
2. d: raise :math:`a^*` coordinate by coordinate (same order) to a base of f;
3. peel d into priority orders :math:`\sigma` (tokens by d/q descending) with Dinkelbach
   iterations for the largest peel weight.

``priority`` is ``"id"`` (token id; ``optimal_multidraft``) or ``"ratio"`` (t/q descending,
ties by id; ``near_opt_bv``). The compact positions of a row are its support tokens in the
priority order, so both steps 1-2 walk positions 0..n-1; every tie is broken by token id.

Float64 and exact ties. The reference breaks ties of its sorts by token id on exact rational
ratios. In float64 an exact tie (equal rows, zero entries, symmetric instances, remainders of
a peel) may round either way, so every sort whose *order* is part of the result (the
``"ratio"`` priority order and the priority orders of step 3) groups sorted ratios into ties
when consecutive ones differ by at most :data:`TIE_RTOL` times ``max(|r|, 1)`` (relative, with
an absolute floor for ratios below 1; chained), then orders each group by token id. The sorts
inside the set minimisations of steps 1-3 need no tolerance (their minimum value does not depend
on the order within a tie). The exact decisions "vertex reached" and "Dinkelbach minimum = 0"
use :data:`VERTEX_ATOL` and :data:`DINKELBACH_ATOL`, applied to the un-normalised remainder.
Tokens with q = 0 are outside the support and never in an order. A law with all its mass on
m = 1 gives d = q and one order (id order). G and the vertices are evaluated term by term,
:math:`\sum_m \pi(m) (\ldots)^m` with ``expm1``/``log1p`` (a point mass evaluates exactly as
before the generalisation).

Other concave functions. Every step reads G only through a
:class:`~spectr_gbv.gpu.kernels.node_laws.NodeLaw` (``g``, its complement ``tail``, the vertex
entries; module :mod:`spectr_gbv.gpu.kernels.node_laws`), so the same rules run on the score-law functions of
:mod:`spectr_gbv.gpu.kernels.score_laws`; :mod:`spectr_gbv.gpu.kernels.node_split` builds the
score-law node rule of ``near_opt_bv`` on this module's shared steps (:func:`compact_rows`,
:func:`decompose_orders`).

Losslessness in floating point. The rule's ``d`` is the law the mixture actually realises,
:math:`\sum_i w_i v_{\sigma_i}`, not the base built in step 2, so a kernel using it stays
lossless where the float peel does not close (counted in ``peel_fallbacks``: the remaining
weight goes to the current order).

Complexity per node, n = #supp(q) <= V, S = #supp(pi) <= K, P = number of orders peeled.
Step 1: O(S n log n) for ``"ratio"`` (the prefixes of the visit order are threshold sets, one
prefix minimum), O(S n^2) in [rows, prefixes, n] blocks for ``"id"``. Step 2: one sorted prefix
minimum per token *not yet in a tight set* (tight sets are found by steps 1-2 and skipped,
which is exact: their slack is 0), O(R S n log n) with R the number of raised tokens, in
practice a few dozen. Step 3: P peels of 1 + D sorts each, O(P D S n log n) with D the
Dinkelbach iterations (2-4); P <= n, measured 25-45 on softmax rows up to V = 4096. The loops are
Python loops over positions/peels, each a batched torch op over the rows that still need it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spectr_gbv.gpu.kernels.common import count, first_true
from spectr_gbv.gpu.kernels.node_laws import CountLaw, NodeLaw, count_law

#: Relative tolerance (floor 1 on the scale) under which two consecutive sorted ratios are an
#: exact tie of the reference, broken by token id (``"ratio"`` priority, priority orders of the peel).
TIE_RTOL: float = 1e-9
#: Absolute tolerance of "the remainder equals the vertex of its order" (last peel).
VERTEX_ATOL: float = 1e-10
#: Absolute tolerance of "the Dinkelbach minimum is >= 0" (peel weight found).
DINKELBACH_ATOL: float = 1e-12
#: ``priority`` values of :func:`mixture_node_rule` (as :data:`spectr_gbv.reference.coverage.PRIORITIES`).
PRIORITIES: tuple[str, ...] = ("id", "ratio")
#: Largest number of float64 entries of one [rows, prefixes, n] block of step 1 (``"id"``).
_BLOCK: int = 1 << 22


# ---------------------------------------------------------------------------- set functions
def _g(x: torch.Tensor, law: NodeLaw) -> torch.Tensor:
    """G(x) of each node's law (``x`` [N, ...])."""
    return law.g(x)


def _ratio_key(w: torch.Tensor, q: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``w / q`` on the support, ``-inf`` on padding (so padding sorts last, descending)."""
    return torch.where(valid, w / torch.where(valid, q, 1.0), -torch.inf)


def _tie_order(key: torch.Tensor, valid: torch.Tensor, tiebreak: torch.Tensor | None = None) -> torch.Tensor:
    """Positions sorted by ``key`` descending, near-equal keys (:data:`TIE_RTOL`) by ``tiebreak``.

    Parameters
    ----------
    key : Tensor, float64 [N, n]
    valid : Tensor, bool [N, n]
        Support; padding goes last.
    tiebreak : Tensor, int64 [N, n], optional
        Nonnegative tie-break key of each position (its token id); default the position.

    Returns
    -------
    Tensor, int64 [N, n]
    """
    n = key.shape[-1]
    k = torch.where(valid, key, -torch.inf)
    vals, idx = torch.sort(k, dim=-1, descending=True, stable=True)
    prev, nxt = vals[:, :-1], vals[:, 1:]
    scale = torch.maximum(prev.abs(), nxt.abs()).nan_to_num(posinf=0.0).clamp_min(1.0)
    new_group = (prev - nxt) > TIE_RTOL * scale  # -inf - -inf = nan: same group (padding)
    group = torch.cat([torch.zeros_like(idx[:, :1]), torch.cumsum(new_group.to(torch.int64), -1)], -1)
    if tiebreak is None:
        perm = torch.argsort(group * n + idx, dim=-1)
    else:
        span = int(tiebreak.max()) + 1 if tiebreak.numel() else 1
        perm = torch.argsort(group * span + tiebreak.gather(1, idx), dim=-1)
    return idx.gather(1, perm)


def _prefix_min(
    weights: torch.Tensor,
    q: torch.Tensor,
    valid: torch.Tensor,
    scale: torch.Tensor,
    law: NodeLaw,
    base: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""``min`` over X of ``scale G(base + q(X)) - weights(X)``, X within ``valid``; threshold sets.

    Parameters
    ----------
    weights, q : Tensor, float64 [N, n]
    valid : Tensor, bool [N, n]
        The pool (q > 0 on it).
    scale, base : Tensor, float64 [N, 1]
    law : CountLaw
        N rows.

    Returns
    -------
    value : Tensor, float64 [N]
    length : Tensor, int64 [N]
        Length of the first minimising prefix (0 = the empty set).
    order : Tensor, int64 [N, n]
        Positions by weights/q descending (pool first).
    """
    order = torch.sort(_ratio_key(weights, q, valid), dim=-1, descending=True, stable=True).indices
    vs = valid.gather(1, order)
    mass = base + torch.cumsum(torch.where(vs, q.gather(1, order), 0.0), -1)
    wsum = torch.cumsum(torch.where(vs, weights.gather(1, order), 0.0), -1)
    vals = torch.where(vs, scale * _g(mass, law) - wsum, torch.inf)
    vals = torch.cat([scale * _g(base, law), vals], -1)
    value, length = torch.min(vals, -1)  # first minimal index: the reference's strict "<"
    return value, length, order


# ---------------------------------------------------------------------------- steps 1-2
def _acceptance_vector(
    t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy vertex a* of the truncated polymatroid f' (step 1), support in position order.

    ``f'(X_i) = t(X_i) + min_{Y <= X_i}[G(q(Y)) - t(Y)]`` for the prefixes X_i of the
    positions; the minimiser is a prefix of the global t/q order restricted to X_i, so one sort
    and masked prefix sums over [N, prefixes, n] blocks give every X_i at once (for positions
    sorted by t/q, :func:`_ratio_base` does steps 1-2 in O(n)). Also returns the union of the
    prefixes tight for f (``a*(X_i) = G(q(X_i))``), bool [N, n].
    """
    N, n = q.shape
    order = torch.sort(_ratio_key(t, q, valid), dim=-1, descending=True, stable=True).indices
    vs = valid.gather(1, order)
    qs = torch.where(vs, q.gather(1, order), 0.0)
    ts = torch.where(vs, t.gather(1, order), 0.0)
    best = torch.empty(N, n, dtype=torch.float64, device=q.device)
    full = torch.empty(N, n, dtype=torch.float64, device=q.device)
    step = max(1, _BLOCK // max(1, N * n))
    for lo in range(0, n, step):
        i = torch.arange(lo, min(n, lo + step), device=q.device)
        member = order.unsqueeze(1) <= i.view(1, -1, 1)  # [N, ci, n]: sorted token in X_i
        mass = torch.cumsum(torch.where(member, qs.unsqueeze(1), 0.0), -1)
        wsum = torch.cumsum(torch.where(member, ts.unsqueeze(1), 0.0), -1)
        vals = _g(mass, law) - wsum
        best[:, lo : lo + len(i)] = vals.min(-1).values.clamp_max(0.0)  # empty Y: 0
        full[:, lo : lo + len(i)] = vals[..., -1]  # Y = X_i
    trunc = torch.cumsum(torch.where(valid, t, 0.0), -1) + best
    a = trunc - torch.cat([torch.zeros_like(trunc[:, :1]), trunc[:, :-1]], -1)
    tight = valid & (full <= best)  # the min over Y <= X_i is attained at Y = X_i
    pos = torch.arange(n, device=q.device).expand(N, n)
    last = torch.where(tight, pos, -1).amax(-1, keepdim=True)
    return torch.where(valid, a, 0.0), pos <= last


def raise_to_base(
    d: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw, saturated: torch.Tensor | None = None
) -> torch.Tensor:
    """Raise each coordinate (position order) to ``min_{Y not containing y} G(q(y) + q(Y)) - d(Y)`` (step 2).

    A coordinate inside a known tight set (``saturated`` [N, n], then the minimisers of the
    raises: each is tight once raised, tight sets stay tight and their union is tight) has slack
    0 exactly and is skipped. Each pass raises, in every row that still has one, its first
    position not yet saturated (the reference's position order, skipping slack-0 tokens), so the
    passes number the largest count of raised tokens of a row, not n.

    Parameters
    ----------
    d : Tensor, float64 [N, n]
        A vector of each node's polymatroid on compact positions (not modified).
    q : Tensor, float64 [N, n]
        Draft rows on the same positions.
    valid : Tensor, bool [N, n]
        Support.
    law : NodeLaw
        The nodes' concave functions.
    saturated : Tensor, bool [N, n], optional
        Positions known to lie in a tight set of ``d``.

    Returns
    -------
    Tensor, float64 [N, n]
        The raised base (reference: :func:`spectr_gbv.reference.coverage.raise_to_base`).
    """
    N, n = q.shape
    d = d.clone()
    sat = (torch.zeros_like(valid) if saturated is None else saturated.clone()) | ~valid
    ones = torch.ones(N, 1, dtype=torch.float64, device=q.device)
    rank = torch.arange(n, device=q.device)
    for _ in range(n):
        rows = (~sat).any(-1).nonzero().squeeze(-1)
        if rows.numel() == 0:
            break
        i = first_true(~sat[rows])
        others = valid[rows].scatter(1, i.unsqueeze(-1), False)
        base = q[rows].gather(1, i.unsqueeze(-1))
        value, length, order = _prefix_min(d[rows], q[rows], others, ones[rows], law[rows], base)
        d[rows, i] = value
        inside = torch.zeros_like(others).scatter_(1, order, rank.unsqueeze(0) < length.unsqueeze(-1))
        sat[rows] |= inside.scatter(1, i.unsqueeze(-1), True)
    return d


def _ratio_base(t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw) -> torch.Tensor:
    r"""Steps 1-2 at once when the positions are sorted by t/q descending (``"ratio"`` priority).

    With :math:`F_j = G(Q_j) - T_j` over the position prefixes, step 1 gives
    :math:`a^*` from the running minimum of F and its tight prefix :math:`[0, j^*]`. In step 2
    the tight set before the token y being raised is always the prefix [0, y) (every earlier token
    is raised or inside a tight minimiser, the minimisers can be taken to contain the tight set
    by submodularity, and the not-yet-raised tokens keep a = t, so their d/q order is the position
    order): the raise is :math:`d_y = t_y + \min_{j \ge y} F_j - F_{y-1}` and the next token raised
    is the one after the first minimiser. The raised tokens are therefore :math:`j^* + 1` and
    :math:`j + 1` for every j past it with :math:`F_j \le \min_{j' > j} F_{j'}`: one running
    minimum each way, O(S n), the same d as :func:`_acceptance_vector` then
    :func:`raise_to_base` in exact arithmetic.
    """
    N, n = q.shape
    ts, full, best, a = _ratio_step1(t, q, valid, law)
    pos = torch.arange(n, device=q.device).expand(N, n)
    first = torch.where(valid & (full <= best), pos, -1).amax(-1, keepdim=True) + 1  # first raised token
    suffix = torch.flip(torch.cummin(torch.flip(full, [-1]), -1).values, [-1])  # min_{j >= y} F_j
    after = torch.cat([suffix[:, 1:], torch.full_like(suffix[:, :1], torch.inf)], -1)  # min_{j > y} F_j
    chain = valid & (pos >= first) & (full <= after)
    raised = valid & ((pos == first) | torch.cat([torch.zeros_like(chain[:, :1]), chain[:, :-1]], -1))
    prev = torch.cat([torch.zeros_like(full[:, :1]), full[:, :-1]], -1)  # F_{y-1}, F_{-1} = 0
    return torch.where(raised, ts + suffix - prev, a)


def _ratio_step1(
    t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Step 1 for positions sorted by t/q descending: (t masked, F_j, its running minimum clamped at 0, a*)."""
    qs, ts = torch.where(valid, q, 0.0), torch.where(valid, t, 0.0)
    tsum = torch.cumsum(ts, -1)
    full = torch.where(valid, _g(torch.cumsum(qs, -1), law) - tsum, torch.inf)
    best = torch.cummin(full, -1).values.clamp_max(0.0)
    trunc = tsum + best
    a = trunc - torch.cat([torch.zeros_like(trunc[:, :1]), trunc[:, :-1]], -1)
    return ts, full, best, torch.where(valid, a, 0.0)


# ---------------------------------------------------------------------------- step 3
def _order_vertex(q: torch.Tensor, order: torch.Tensor, valid: torch.Tensor, law: NodeLaw) -> torch.Tensor:
    r"""Vertex :math:`v(y) = G(1 - R + q(y)) - G(1 - R)` of each order, R = q of y and the tokens after it."""
    qs = torch.where(valid.gather(1, order), q.gather(1, order), 0.0)
    rest = torch.flip(torch.cumsum(torch.flip(qs, [-1]), -1), [-1])
    return torch.zeros_like(q).scatter(1, order, law.vertex(qs, rest))


def _gaps(
    mass: torch.Tensor,
    cur_in: torch.Tensor,
    v_in: torch.Tensor,
    rest: torch.Tensor,
    cur_out: torch.Tensor,
    v_out: torch.Tensor,
    law: NodeLaw,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``N = f(X) - cur(X)`` and ``D = f(X) - v(X)`` from sums over X and over its complement.

    Direct when :math:`q(X) \le 1/2` (``law.g_direct``), else through the complement S (``cur``
    and ``v`` are bases: :math:`N = cur(S) - (1 - G(1 - q(S)))`, :math:`D = v(S) - (1 - G(1 - q(S)))`,
    ``law.tail``), so small gaps are not lost to cancellation.
    """
    direct = mass <= 0.5
    fx = law.g_direct(mass)
    tail = law.tail(rest.clamp_min(0.0))
    n = torch.where(direct, fx - cur_in, cur_out - tail)
    d = torch.where(direct, fx - v_in, v_out - tail)
    return n, d


def _set_ratio(
    mask: torch.Tensor, cur: torch.Tensor, v: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw
) -> torch.Tensor:
    """``(f - cur)(X) / (f - v)(X)`` for the sets ``mask`` (bool [N, n]); ``nan`` where ``(f - v)(X) <= 0``."""
    out = (valid & ~mask).to(q.dtype)
    mask = (valid & mask).to(q.dtype)
    n, d = _gaps(
        (q * mask).sum(-1),
        (cur * mask).sum(-1),
        (v * mask).sum(-1),
        (q * out).sum(-1),
        (cur * out).sum(-1),
        (v * out).sum(-1),
        law,
    )
    return torch.where(d > 0, n / torch.where(d > 0, d, 1.0), torch.nan)


def _peel_weight(
    cur: torch.Tensor, v: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw, atol: torch.Tensor
) -> torch.Tensor:
    r"""Largest :math:`\lambda` with :math:`(cur - \lambda v)/(1 - \lambda)` a base (Dinkelbach).

    :math:`\lambda^* = \min_X N(X)/D(X)`, :math:`N = f - cur`, :math:`D = f - v`
    (:func:`_gaps`): start from the set :math:`\{v < cur\}`, minimise :math:`N - \lambda D`
    over the threshold sets of :math:`(cur - \lambda v)/q` and move to the minimiser's ratio
    until the minimum is :math:`\ge -` ``atol`` [N] (:data:`DINKELBACH_ATOL` over the remaining
    weight). ``nan`` marks a row without a valid ratio.

    Returns
    -------
    Tensor, float64 [N]
    """
    n = q.shape[1]
    lam = _set_ratio(valid & (v < cur), cur, v, q, valid, law)
    search = ~torch.isnan(lam)
    for _ in range(n + 2):
        lam0 = lam.nan_to_num(0.0).unsqueeze(-1)
        order = torch.sort(_ratio_key(cur - lam0 * v, q, valid), dim=-1, descending=True, stable=True).indices
        vs = valid.gather(1, order)
        qs, cs, ws = (torch.where(vs, x.gather(1, order), 0.0) for x in (q, cur, v))

        def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            inside = torch.cumsum(x, -1)
            return inside, torch.flip(torch.cumsum(torch.flip(x, [-1]), -1), [-1]) - x

        (mass, rest), (cin, cout), (vin, vout) = split(qs), split(cs), split(ws)
        num, den = _gaps(mass, cin, vin, rest, cout, vout, law)
        vals = torch.where(vs, num - lam0 * den, torch.inf)
        value, arg = torch.min(torch.cat([torch.zeros_like(vals[:, :1]), vals], -1), -1)  # empty set: 0
        search = search & (value < -atol)
        if not bool(search.any()):
            break
        j = (arg - 1).clamp_min(0).unsqueeze(-1)
        nj, dj = num.gather(1, j).squeeze(-1), den.gather(1, j).squeeze(-1)
        new = torch.where(dj > 0, nj / torch.where(dj > 0, dj, 1.0), torch.nan)
        lam = torch.where(search, new, lam)
        search = search & ~torch.isnan(lam)
    return lam


def _first_of(order: torch.Tensor, drafted: torch.Tensor) -> torch.Tensor:
    """Position (in ``order``'s index space) of the first drafted token of each order [N]."""
    pos = first_true(drafted.gather(1, order))
    return order.gather(1, pos.unsqueeze(-1)).squeeze(-1)


def _mass_after(q: torch.Tensor, order: torch.Tensor, valid: torch.Tensor, marked: torch.Tensor) -> torch.Tensor:
    """q-mass of the tokens strictly after each ``marked`` position [N, M] in ``order`` [N, n] (suffix sums)."""
    qs = torch.where(valid.gather(1, order), q.gather(1, order), 0.0)
    after = torch.flip(torch.cumsum(torch.flip(qs, [-1]), -1), [-1]) - qs
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(order.shape[1], device=q.device).expand_as(order))
    return after.gather(1, rank.gather(1, marked))


@dataclass
class PeeledOrders:
    r"""Bases peeled into priority orders, in compact positions (:func:`decompose_orders`).

    Attributes
    ----------
    weights : Tensor, float64 [N, n+1]
        Weight of each order (0 past the last).
    tops : Tensor, int64 [N, n+1]
        First drafted position of each order (-1: unused, or none drafted).
    orders : Tensor, int64 [N, n+1, n] or None
        The orders' positions (-1 padded), kept only when asked for.
    mixed : Tensor, float64 [N, n]
        The realised law :math:`\sum_i w_i v_i`.
    fallbacks : Tensor, int64 []
        Number of peels that did not close in floating point (their weight went to the current order).
    after : Tensor, float64 [N, n+1, M] or None
        For each marked position, the q-mass after it in each order (None without ``marked``).
    """

    weights: torch.Tensor
    tops: torch.Tensor
    orders: torch.Tensor | None
    mixed: torch.Tensor
    fallbacks: torch.Tensor
    after: torch.Tensor | None


def decompose_orders(
    d: torch.Tensor,
    q: torch.Tensor,
    valid: torch.Tensor,
    law: NodeLaw,
    ids: torch.Tensor,
    drafted: torch.Tensor | None,
    marked: torch.Tensor | None,
    keep_orders: bool,
) -> PeeledOrders:
    """Peel the bases d into priority orders (step 3 of the module docstring), in compact positions.

    Parameters
    ----------
    d, q : Tensor, float64 [N, n]
        The bases to peel and the draft rows, on compact positions (:class:`CompactRows`).
    valid : Tensor, bool [N, n]
        Support positions.
    law : NodeLaw
        The nodes' concave functions.
    ids : Tensor, int64 [N, n]
        Token id of each position (the orders' tie-break).
    drafted : Tensor, bool [N, n] or None
        Drafted positions; with it, ``PeeledOrders.tops`` holds each order's first drafted one.
    marked : Tensor, int64 [N, M] or None
        Positions whose q-mass after them each order records (``PeeledOrders.after``).
    keep_orders : bool
        Keep the orders themselves (``PeeledOrders.orders``).

    Returns
    -------
    PeeledOrders
    """
    N, n = q.shape
    dev = q.device
    weights = torch.zeros(N, n + 1, dtype=torch.float64, device=dev)
    tops = torch.full((N, n + 1), -1, dtype=torch.int64, device=dev)
    orders = torch.full((N, n + 1, n), -1, dtype=torch.int64, device=dev) if keep_orders else None
    after = None if marked is None else torch.zeros(N, n + 1, marked.shape[1], dtype=torch.float64, device=dev)
    fallbacks = torch.zeros((), dtype=torch.int64, device=dev)
    mixed = torch.zeros_like(d)
    cur = d.clone()
    remaining = torch.ones(N, dtype=torch.float64, device=dev)
    rows = torch.arange(N, device=dev)
    for it in range(n + 1):
        cr, qr, vr, lr = cur[rows], q[rows], valid[rows], law[rows]
        order = _tie_order(_ratio_key(cr, qr, vr), vr, ids[rows])
        v = _order_vertex(qr, order, vr, lr)
        scale = remaining[rows].unsqueeze(-1)  # tolerances apply to the un-normalised remainder
        close = ((cr - v).abs() * scale <= VERTEX_ATOL).logical_or(~vr).all(-1)
        peel = ~close
        lam = torch.zeros(len(rows), dtype=torch.float64, device=dev)
        if bool(peel.any()):
            atol = DINKELBACH_ATOL / scale[peel].squeeze(-1)
            lam[peel] = _peel_weight(cr[peel], v[peel], qr[peel], vr[peel], lr[peel], atol)
        bad = peel & ~((lam > 0) & (lam < 1))  # nan included
        if it == n:
            bad = peel
        fallbacks = fallbacks + count(bad)
        peel = peel & ~bad
        part = torch.where(peel, remaining[rows] * lam, remaining[rows])
        weights[rows, it] = part
        mixed[rows] += part.unsqueeze(-1) * v
        if drafted is not None:
            tops[rows, it] = _first_of(order, drafted[rows])
        if orders is not None:
            orders[rows, it] = torch.where(vr.gather(1, order), order, -1)
        if after is not None and marked is not None:
            after[rows, it] = _mass_after(qr, order, vr, marked[rows])
        lam_ = lam.unsqueeze(-1)
        cur[rows] = torch.where(peel.unsqueeze(-1), (cr - lam_ * v) / torch.where(peel, 1 - lam, 1.0).unsqueeze(-1), cr)
        remaining[rows] = torch.where(peel, remaining[rows] * (1 - lam), 0.0)
        rows = rows[peel]
        if rows.numel() == 0:
            break
    return PeeledOrders(weights, tops, orders, mixed, fallbacks, after)


# ---------------------------------------------------------------------------- the rules
@dataclass(frozen=True)
class CompactRows:
    """N node rows in compact positions: each row's support of q in its visit order (:func:`compact_rows`).

    ``law`` the rows' ``NodeLaw``; ``ids`` int64 [N, n] the token of each position (n = the
    largest support, at least 1; padding positions hold tokens outside the support);
    ``valid`` bool [N, n] the support positions; ``qc``, ``tc`` float64 [N, n] q and t at the
    positions (0 on padding); ``mc`` int64 [N, M] the positions of the marked tokens and
    ``after`` a zero float64 [N, n + 1, M] to fill (both None without ``marked``); ``N``, ``V``,
    ``n`` and ``device`` the sizes and the device of q.
    """

    law: NodeLaw
    ids: torch.Tensor
    valid: torch.Tensor
    qc: torch.Tensor
    tc: torch.Tensor
    mc: torch.Tensor | None
    after: torch.Tensor | None
    N: int
    V: int
    n: int
    device: torch.device


def compact_rows(
    t: torch.Tensor, q: torch.Tensor, counts: torch.Tensor | NodeLaw, marked: torch.Tensor | None, *, by_id: bool
) -> CompactRows:
    """The preparation every node rule shares: each row's support of q as compact positions.

    Used by :func:`mixture_node_rule` and :func:`spectr_gbv.gpu.kernels.node_split.split_node_rule`.
    Positions are the support of q in id order (``by_id``) or by t/q descending, ties by id.

    Parameters
    ----------
    t, q : Tensor, float [N, V]
        Target weights and draft rows (cast to float64).
    counts : Tensor or NodeLaw
        The nodes' laws (:func:`~spectr_gbv.gpu.kernels.node_laws.count_law`).
    marked : Tensor, int64 [N, M] or None
        Tokens whose positions the rule reports.
    by_id : bool
        Id order (True) or t/q descending (False).

    Returns
    -------
    CompactRows

    Raises
    ------
    ValueError
        ``counts`` of another shape (:func:`~spectr_gbv.gpu.kernels.node_laws.count_law`), or a
        marked token outside the support of q.
    """
    law = count_law(counts)
    t, q = t.to(torch.float64), q.to(torch.float64)
    N, V = q.shape
    dev = q.device
    support = q > 0
    n = max(1, int(support.sum(-1).max())) if N else 1
    if by_id:  # support first, id order
        ids = torch.sort((~support).to(torch.int8), dim=-1, stable=True).indices[:, :n]
    else:  # support by t/q descending, ties by id
        ids = _tie_order(_ratio_key(t, q, support), support)[:, :n]
    valid = support.gather(1, ids)
    qc = torch.where(valid, q.gather(1, ids), 0.0)
    tc = torch.where(valid, t.gather(1, ids), 0.0)
    mc = after = None
    if marked is not None:
        where = torch.full((N, V), -1, dtype=torch.int64, device=dev)
        where.scatter_(1, ids, torch.arange(n, device=dev).expand(N, n))
        mc = where.gather(1, marked)
        if bool((mc < 0).any()) or not bool(valid.gather(1, mc.clamp_min(0)).all()):
            raise ValueError("marked: every marked token must lie in the support of q")
        after = torch.zeros(N, n + 1, marked.shape[1], dtype=torch.float64, device=dev)
    return CompactRows(law, ids, valid, qc, tc, mc, after, N, V, n, dev)


@dataclass
class NodeRule:
    r"""The rule at N nodes: selection law d and its priority-order mixture.

    Attributes
    ----------
    d : Tensor, float64 [N, V]
        Law of the selected token realised by the mixture, :math:`\sum_i w_i v_{\sigma_i}`
        (0 outside the support of q; sums to 1); equals the constructed base within ~1e-12
        when no peel fell back.
    weights : Tensor, float64 [N, P]
        Weights of the priority orders (P = max support size + 1 columns, unused ones 0;
        each row sums to 1).
    top : Tensor, int64 [N, P]
        First token of the drafted set S in each order (-1 when no S was given or the column
        is unused).
    orders : Tensor, int64 [N, P, n] or None
        With ``keep_orders``: each order as token ids of the support (padded with -1).
    peel_fallbacks : Tensor, int64 0-d
        Rows where the peel did not close within tolerance (no valid weight in (0, 1) or
        more than n peels); their remaining weight went to the current order (``d`` is still
        the realised law). 0 on small nodes; a few per hundred on peaked rows at V >= 64, with a
        remaining weight ~1e-6 or less.
    after : Tensor, float64 [N, P, M] or None
        With ``marked`` tokens [N, M]: the q-mass of the tokens after each marked token in each
        order (:math:`1 - q(H_\sigma) - q(y)`; 0 in unused columns).
    """

    d: torch.Tensor
    weights: torch.Tensor
    top: torch.Tensor
    orders: torch.Tensor | None
    peel_fallbacks: torch.Tensor
    after: torch.Tensor | None = None


def mixture_node_rule(
    t: torch.Tensor,
    q: torch.Tensor,
    counts: torch.Tensor | CountLaw,
    drafted: torch.Tensor | None = None,
    *,
    marked: torch.Tensor | None = None,
    priority: str = "id",
    keep_orders: bool = False,
) -> NodeRule:
    r"""A selection law d maximising :math:`\sum_y \min\{t(y), d(y)\}` and its priority-order mixture, N nodes at once.

    .. math::
        \sum_y \min\{t(y), d(y)\} = \min_A [t(A) + 1 - G(q(A))], \qquad
        d = \sum_i w_i v_{\sigma_i}, \quad v_\sigma(y) = G(q(H) + q(y)) - G(q(H)),

    :math:`G(x) = \sum_m \pi(m) [1 - (1 - x)^m]`, H the tokens before y in :math:`\sigma`.

    Parameters
    ----------
    t : Tensor, float [N, V]
        Nonnegative targets, totals <= 1 (computed in float64; used as given).
    q : Tensor, float [N, V]
        Draft laws (rows sum to 1; callers renormalise).
    counts : Tensor or CountLaw
        The law of the number of drafts through each node: int64 [N] (that many for sure),
        float64 [N, M] with ``counts[:, m - 1] = P(M = m)`` (rows summing to 1), or a
        :class:`~spectr_gbv.gpu.kernels.node_laws.CountLaw`.
    drafted : Tensor, bool [N, V], optional
        The drafted set S of each node (inside the support of q); fills ``top``.
    marked : Tensor, int64 [N, M], optional
        Tokens (inside the support of q) whose q-mass after them in every order is returned in
        ``after``.
    priority : str
        ``"id"`` or ``"ratio"`` (:data:`PRIORITIES`; module docstring).
    keep_orders : bool
        Also return the orders (memory N (n+1) n).

    Returns
    -------
    NodeRule

    Raises
    ------
    ValueError
        ``priority`` not in :data:`PRIORITIES`, or ``counts`` of another shape.

    References
    ----------
    :func:`spectr_gbv.reference.coverage.mixture_rule` (the exact rule this matches, ties as
    described in the module docstring); Fujishige, "Submodular functions and optimization",
    2005 (polymatroid greedy vertices); Dinkelbach, "On nonlinear fractional programming",
    Management Science 13(7), 1967.
    """
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    prep = compact_rows(t, q, counts, marked, by_id=priority == "id")
    law, ids, valid, qc, tc, mc, after = prep.law, prep.ids, prep.valid, prep.qc, prep.tc, prep.mc, prep.after
    N, V, n, dev = prep.N, prep.V, prep.n, prep.device
    id_order = torch.argsort(torch.where(valid, ids, ids + V), dim=-1)  # support in id order
    dc = qc.clone()  # G(x) = x: d = q, one order (every ratio 1: id order)
    weights = torch.zeros(N, n + 1, dtype=torch.float64, device=dev)
    weights[:, 0] = 1.0
    sc = drafted.gather(1, ids) & valid if drafted is not None else None
    tops = torch.full((N, n + 1), -1, dtype=torch.int64, device=dev)
    if sc is not None:
        tops[:, 0] = _first_of(id_order, sc)
    orders = torch.full((N, n + 1, n), -1, dtype=torch.int64, device=dev) if keep_orders else None
    if orders is not None:
        orders[:, 0] = torch.where(valid.gather(1, id_order), id_order, -1)
    if after is not None and mc is not None:
        after[:, 0] = _mass_after(qc, id_order, valid, mc)
    fallbacks = torch.zeros((), dtype=torch.int64, device=dev)
    multi = law.multi.nonzero().squeeze(-1)
    if multi.numel():
        tm, qm, vm, lm = tc[multi], qc[multi], valid[multi], law[multi]
        if priority == "ratio":
            dm = _ratio_base(tm, qm, vm, lm)
        else:
            a, sat = _acceptance_vector(tm, qm, vm, lm)
            dm = raise_to_base(a, qm, vm, lm, sat)
        peeled = decompose_orders(
            dm,
            qm,
            vm,
            lm,
            ids[multi],
            None if sc is None else sc[multi],
            None if mc is None else mc[multi],
            keep_orders,
        )
        dc[multi], weights[multi], tops[multi] = peeled.mixed, peeled.weights, peeled.tops
        fallbacks = peeled.fallbacks
        if orders is not None and peeled.orders is not None:
            orders[multi] = peeled.orders
        if after is not None and peeled.after is not None:
            after[multi] = peeled.after
    d = torch.zeros(N, V, dtype=torch.float64, device=dev).scatter_add(1, ids, torch.where(valid, dc, 0.0))
    top = torch.where(tops >= 0, ids.gather(1, tops.clamp_min(0)), -1)
    if orders is not None:
        orders = torch.where(orders >= 0, ids.unsqueeze(1).expand(N, n + 1, n).gather(2, orders.clamp_min(0)), -1)
    return NodeRule(d, weights, top, orders, fallbacks, after)


# ---------------------------------------------------------------------------- score splits
def ratio_acceptance(t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw) -> torch.Tensor:
    """Step 1 alone for positions sorted by t/q descending: a* from the running minimum of F.

    The first half of :func:`mixture_node_rule`'s ``"ratio"`` steps 1-2, which it runs at once.

    Parameters
    ----------
    t, q : Tensor, float64 [N, n]
        Target and draft rows on compact positions (support by t/q descending, ties by id).
    valid : Tensor, bool [N, n]
        Support (padding last).
    law : NodeLaw
        The nodes' concave functions.

    Returns
    -------
    Tensor, float64 [N, n]
        The acceptance vector :math:`a^*` (0 on padding).
    """
    return _ratio_step1(t, q, valid, law)[3]


__all__ = [
    "DINKELBACH_ATOL",
    "PRIORITIES",
    "TIE_RTOL",
    "VERTEX_ATOL",
    "CompactRows",
    "CountLaw",
    "NodeLaw",
    "NodeRule",
    "PeeledOrders",
    "compact_rows",
    "count_law",
    "decompose_orders",
    "mixture_node_rule",
    "raise_to_base",
    "ratio_acceptance",
]
