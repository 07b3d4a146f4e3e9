r"""Optimal single-step multi-draft verification kernel, node by node on the draft tree.

The batched float64 counterpart of :class:`spectr_gbv.reference.OptimalMultiDraftVerifier`
(read :mod:`spectr_gbv.reference.optimal_multidraft` for the algorithm and its proof sketch).
At a node with target p, draft q, the c drafts through it and the set S of their next tokens:

1. :math:`a^*`, the greedy vertex (support tokens in id order) of the box-truncated coverage
   polymatroid :math:`f'(X) = \min_{Y \subseteq X}[g(q(Y)) + p(X \setminus Y)]`,
   :math:`g(x) = 1 - (1 - x)^c`;
2. d: raise :math:`a^*` coordinate by coordinate (id order) to a base of
   :math:`f = g \circ q`;
3. peel d into priority orders :math:`\sigma` (tokens by d/q descending) with Dinkelbach
   iterations for the largest peel weight;

then select y in S with probability the weight of the orders whose first token of S is y,
accept it with probability :math:`\min\{1, p(y)/d(y)\}`, else draw
:math:`Z \sim \mathrm{normalize}(\max\{p - d, 0\})`.

Float64 and exact ties. The reference breaks ties of its sorts by token id on exact rational
ratios. In float64 an exact tie (equal rows, zero entries, symmetric instances, remainders of
a peel) may round either way, so every sort whose *order* is part of the result (the priority
orders of step 3) groups sorted ratios into ties when consecutive ones differ by at most
:data:`TIE_RTOL` times ``max(|r|, 1)`` (relative, with an absolute floor for ratios below 1;
chained), then orders each group by token id. The sorts inside the set minimisations of steps
1-3 need no tolerance (their minimum value does not depend on the order within a tie). The
exact decisions "vertex reached" and "Dinkelbach minimum = 0" use :data:`VERTEX_ATOL` and
:data:`DINKELBACH_ATOL`. Tokens with q = 0 are outside the support and never in an order.
c = 1 gives d = q and one order (speculative sampling). The tolerances of step 3 apply to the
un-normalised remainder (divided by the weight still to peel), since renormalising the
remainder amplifies its rounding by the same factor.

Losslessness in floating point. Acceptance and residual use the law the mixture actually
realises, :math:`\sum_i w_i v_{\sigma_i}` (``NodeRule.d``), not the base built in step 2,
so the kernel stays lossless even where the float peel does not close (counted in
``peel_fallbacks``: the remaining weight then goes to the current order, which costs
acceptance, never correctness). Measured on peaked softmax rows (bench/kernel_overhead.py's
rows, c = 4): acceptance within 1e-10 of OPT at V = 16, 1e-8 at V = 64, 3e-7 at V = 256; on the
small rational nodes of the tests, d and every order weight within 1e-12 of the exact reference.

Complexity per node with n = #supp(q) <= V: step 1 is O(n^2) (prefix sums of n prefixes,
chunked), step 2 is n sorts, O(n^2 log n), step 3 at most n peels of 1 + D sorts each
(D Dinkelbach iterations, D <= n + 2, in practice 2-4), O(n^2 D log n), i.e. O(n^3 log n) in the
worst case. The loops over steps are Python loops of length up to n, each a batched torch op
over the rows that still need it, so large vocabularies with a wide draft support are slow
(thousands of batched sorts per depth at n = 1024); draft laws truncated by top-k/top-p keep n
small. Only rows with c >= 2 run the rule (c = 1 is speculative sampling).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spectr_gbv.gpu.kernels.common import (
    KernelInputs,
    UniformSource,
    VerifyOutput,
    assemble,
    batch_arange,
    count,
    first_true,
    residual_or_fallback,
    sample_categorical,
    take,
)

#: Relative tolerance (floor 1 on the scale) under which two consecutive sorted ratios d/q are
#: an exact tie of the reference, broken by token id (priority orders of the peel).
TIE_RTOL: float = 1e-9
#: Absolute tolerance of "the remainder equals the vertex of its order" (last peel).
VERTEX_ATOL: float = 1e-10
#: Absolute tolerance of "the Dinkelbach minimum is >= 0" (peel weight found).
DINKELBACH_ATOL: float = 1e-12
#: Largest number of float64 entries of one [rows, prefixes, n] block of step 1.
_BLOCK: int = 1 << 22


@dataclass
class NodeRule:
    r"""The optimal rule at N nodes: selection law d and its priority-order mixture.

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
    """

    d: torch.Tensor
    weights: torch.Tensor
    top: torch.Tensor
    orders: torch.Tensor | None
    peel_fallbacks: torch.Tensor


# ---------------------------------------------------------------------------- set functions
def _g(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Coverage ``1 - (1 - x)^c`` (``c`` float64 [N, 1]; ``1 - x`` clamped to [0, 1])."""
    return 1.0 - torch.pow((1.0 - x).clamp(0.0, 1.0), c)


def _ratio_key(w: torch.Tensor, q: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``w / q`` on the support, ``-inf`` on padding (so padding sorts last, descending)."""
    return torch.where(valid, w / torch.where(valid, q, 1.0), -torch.inf)


def _tie_order(key: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Positions sorted by ``key`` descending, near-equal keys (:data:`TIE_RTOL`) by position.

    Parameters
    ----------
    key : Tensor, float64 [N, n]
    valid : Tensor, bool [N, n]
        Support; padding goes last.

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
    perm = torch.argsort(group * n + idx, dim=-1)
    return idx.gather(1, perm)


def _prefix_min(
    weights: torch.Tensor,
    q: torch.Tensor,
    valid: torch.Tensor,
    scale: torch.Tensor,
    c: torch.Tensor,
    base: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""``min`` over X of ``scale g(base + q(X)) - weights(X)``, X within ``valid``; threshold sets.

    Parameters
    ----------
    weights, q : Tensor, float64 [N, n]
    valid : Tensor, bool [N, n]
        The pool (q > 0 on it).
    scale, c, base : Tensor, float64 [N, 1]

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
    vals = torch.where(vs, scale * _g(mass, c) - wsum, torch.inf)
    vals = torch.cat([scale * _g(base, c), vals], -1)
    value, length = torch.min(vals, -1)  # first minimal index: the reference's strict "<"
    return value, length, order


# ---------------------------------------------------------------------------- steps 1-2
def _acceptance_vector(p: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Greedy vertex a* of the truncated polymatroid f' (step 1), support in id order.

    ``f'(X_i) = p(X_i) + min_{Y <= X_i}[g(q(Y)) - p(Y)]`` for the prefixes X_i of the
    support; the minimiser is a prefix of the global p/q order restricted to X_i, so one sort
    and masked prefix sums over [N, prefixes, n] blocks give every X_i at once.
    """
    N, n = q.shape
    order = torch.sort(_ratio_key(p, q, valid), dim=-1, descending=True, stable=True).indices
    vs = valid.gather(1, order)
    qs = torch.where(vs, q.gather(1, order), 0.0)
    ps = torch.where(vs, p.gather(1, order), 0.0)
    best = torch.empty(N, n, dtype=torch.float64, device=q.device)
    step = max(1, _BLOCK // max(1, N * n))
    for lo in range(0, n, step):
        i = torch.arange(lo, min(n, lo + step), device=q.device)
        member = order.unsqueeze(1) <= i.view(1, -1, 1)  # [N, ci, n]: sorted token in X_i
        mass = torch.cumsum(torch.where(member, qs.unsqueeze(1), 0.0), -1)
        wsum = torch.cumsum(torch.where(member, ps.unsqueeze(1), 0.0), -1)
        vals = _g(mass, c.unsqueeze(1)) - wsum
        best[:, lo : lo + len(i)] = vals.min(-1).values.clamp_max(0.0)  # empty Y: 0
    trunc = torch.cumsum(torch.where(valid, p, 0.0), -1) + best
    a = trunc - torch.cat([torch.zeros_like(trunc[:, :1]), trunc[:, :-1]], -1)
    return torch.where(valid, a, 0.0)


def _raise_to_base(d: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Raise each coordinate (id order) to ``min_{Y not containing y} g(q(y) + q(Y)) - d(Y)`` (step 2)."""
    d = d.clone()
    one = torch.ones_like(c)
    for i in range(q.shape[1]):
        others = valid.clone()
        others[:, i] = False
        value, _, _ = _prefix_min(d, q, others, one, c, q[:, i : i + 1])
        d[:, i] = torch.where(valid[:, i], value, d[:, i])
    return d


# ---------------------------------------------------------------------------- step 3
def _order_vertex(q: torch.Tensor, order: torch.Tensor, valid: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    r"""Vertex ``v(y) = R^c - (R - q(y))^c`` of each order, R = q of y and the tokens after it.

    R is a suffix sum and :math:`v = -R^c \operatorname{expm1}(c \log(1 - q(y)/R))`, so the
    tail of an order (tiny R, tiny q) keeps its relative precision.
    """
    qs = torch.where(valid.gather(1, order), q.gather(1, order), 0.0)
    rest = torch.flip(torch.cumsum(torch.flip(qs, [-1]), -1), [-1])
    frac = torch.where(rest > 0, qs / torch.where(rest > 0, rest, 1.0), 0.0).clamp(0.0, 1.0)
    vs = -torch.pow(rest, c) * torch.expm1(c * torch.log1p(-frac))
    return torch.zeros_like(q).scatter(1, order, torch.where(rest > 0, vs, 0.0))


def _gaps(
    mass: torch.Tensor,
    cur_in: torch.Tensor,
    v_in: torch.Tensor,
    rest: torch.Tensor,
    cur_out: torch.Tensor,
    v_out: torch.Tensor,
    c: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``N = f(X) - cur(X)`` and ``D = f(X) - v(X)`` from sums over X and over its complement.

    Direct when :math:`q(X) \le 1/2` (:math:`f = -\operatorname{expm1}(c \log(1 - q(X)))`),
    else through the complement S (``cur`` and ``v`` are bases: :math:`N = cur(S) - q(S)^c`,
    :math:`D = v(S) - q(S)^c`), so small gaps are not lost to cancellation.
    """
    direct = mass <= 0.5
    fx = -torch.expm1(c * torch.log1p(-mass.clamp(0.0, 1.0)))
    tail = torch.pow(rest.clamp_min(0.0), c)
    n = torch.where(direct, fx - cur_in, cur_out - tail)
    d = torch.where(direct, fx - v_in, v_out - tail)
    return n, d


def _set_ratio(
    mask: torch.Tensor, cur: torch.Tensor, v: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, c: torch.Tensor
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
        c.squeeze(-1),
    )
    return torch.where(d > 0, n / torch.where(d > 0, d, 1.0), torch.nan)


def _peel_weight(
    cur: torch.Tensor, v: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, c: torch.Tensor, atol: torch.Tensor
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
    cc = c.squeeze(-1).unsqueeze(-1)
    lam = _set_ratio(valid & (v < cur), cur, v, q, valid, c)
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
        num, den = _gaps(mass, cin, vin, rest, cout, vout, cc)
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


def _decompose(
    d: torch.Tensor,
    q: torch.Tensor,
    valid: torch.Tensor,
    c: torch.Tensor,
    drafted: torch.Tensor | None,
    keep_orders: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Peel the bases d [N, n] into priority orders (step 3), in compact positions.

    Returns weights [N, n+1], first drafted position per order [N, n+1] (-1 unused/none),
    orders [N, n+1, n] (or None), the realised law ``sum_i w_i v_i`` [N, n] and the fallback
    count.
    """
    N, n = q.shape
    dev = q.device
    weights = torch.zeros(N, n + 1, dtype=torch.float64, device=dev)
    tops = torch.full((N, n + 1), -1, dtype=torch.int64, device=dev)
    orders = torch.full((N, n + 1, n), -1, dtype=torch.int64, device=dev) if keep_orders else None
    fallbacks = torch.zeros((), dtype=torch.int64, device=dev)
    mixed = torch.zeros_like(d)
    cur = d.clone()
    remaining = torch.ones(N, dtype=torch.float64, device=dev)
    rows = torch.arange(N, device=dev)
    for it in range(n + 1):
        cr, qr, vr, ccr = cur[rows], q[rows], valid[rows], c[rows]
        order = _tie_order(_ratio_key(cr, qr, vr), vr)
        v = _order_vertex(qr, order, vr, ccr)
        scale = remaining[rows].unsqueeze(-1)  # tolerances apply to the un-normalised remainder
        close = ((cr - v).abs() * scale <= VERTEX_ATOL).logical_or(~vr).all(-1)
        peel = ~close
        lam = torch.zeros(len(rows), dtype=torch.float64, device=dev)
        if bool(peel.any()):
            atol = DINKELBACH_ATOL / scale[peel].squeeze(-1)
            lam[peel] = _peel_weight(cr[peel], v[peel], qr[peel], vr[peel], ccr[peel], atol)
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
        lam_ = lam.unsqueeze(-1)
        cur[rows] = torch.where(peel.unsqueeze(-1), (cr - lam_ * v) / torch.where(peel, 1 - lam, 1.0).unsqueeze(-1), cr)
        remaining[rows] = torch.where(peel, remaining[rows] * (1 - lam), 0.0)
        rows = rows[peel]
        if rows.numel() == 0:
            break
    return weights, tops, orders, mixed, fallbacks


# ---------------------------------------------------------------------------- the rule
def optimal_node_rule(
    p: torch.Tensor,
    q: torch.Tensor,
    c: torch.Tensor,
    drafted: torch.Tensor | None = None,
    *,
    keep_orders: bool = False,
) -> NodeRule:
    r"""The optimal selection law d and its priority-order mixture at N nodes at once (float64).

    .. math::
        \sum_y \min\{p(y), d(y)\} = \min_A [p(A) + 1 - q(A)^c], \qquad
        d = \sum_i w_i v_{\sigma_i}, \quad v_\sigma(y) = (1 - q(H))^c - (1 - q(H) - q(y))^c

    Parameters
    ----------
    p, q : Tensor, float [N, V]
        Target and draft laws at the nodes (computed in float64; rows used as given, callers
        renormalise).
    c : Tensor, int64 [N]
        Drafts through each node, >= 1.
    drafted : Tensor, bool [N, V], optional
        The drafted set S of each node (inside the support of q); fills ``top``.
    keep_orders : bool
        Also return the orders (memory N (n+1) n).

    Returns
    -------
    NodeRule
        ``d`` [N, V], ``weights`` [N, P], ``top`` [N, P], ``orders`` [N, P, n] or None.

    References
    ----------
    :func:`spectr_gbv.reference.optimal_multidraft.node_rule` (the exact rule this matches,
    ties as described in the module docstring); Fujishige, "Submodular functions and
    optimization", 2005 (polymatroid greedy vertices); Dinkelbach, "On nonlinear fractional
    programming", Management Science 13(7), 1967.
    """
    p, q = p.to(torch.float64), q.to(torch.float64)
    N, V = q.shape
    dev = q.device
    support = q > 0
    n = max(1, int(support.sum(-1).max()))
    ids = torch.sort((~support).to(torch.int8), dim=-1, stable=True).indices[:, :n]  # support first, id order
    valid = support.gather(1, ids)
    qc = torch.where(valid, q.gather(1, ids), 0.0)
    pc = torch.where(valid, p.gather(1, ids), 0.0)
    cf = c.to(torch.float64).unsqueeze(-1)
    dc = qc.clone()  # c = 1: d = q, one order (every ratio 1: id order)
    weights = torch.zeros(N, n + 1, dtype=torch.float64, device=dev)
    weights[:, 0] = 1.0
    ident = torch.arange(n, device=dev).expand(N, n)
    sc = drafted.gather(1, ids) & valid if drafted is not None else None
    tops = torch.full((N, n + 1), -1, dtype=torch.int64, device=dev)
    if sc is not None:
        tops[:, 0] = _first_of(ident, sc)
    orders = torch.full((N, n + 1, n), -1, dtype=torch.int64, device=dev) if keep_orders else None
    if orders is not None:
        orders[:, 0] = torch.where(valid, ident, -1)
    fallbacks = torch.zeros((), dtype=torch.int64, device=dev)
    multi = (c > 1).nonzero().squeeze(-1)
    if multi.numel():
        pm, qm, vm, cm = pc[multi], qc[multi], valid[multi], cf[multi]
        dm = _raise_to_base(_acceptance_vector(pm, qm, vm, cm), qm, vm, cm)
        w, t, o, mixed, fallbacks = _decompose(dm, qm, vm, cm, None if sc is None else sc[multi], keep_orders)
        dc[multi], weights[multi], tops[multi] = mixed, w, t
        if orders is not None and o is not None:
            orders[multi] = o
    d = torch.zeros(N, V, dtype=torch.float64, device=dev).scatter_add(1, ids, torch.where(valid, dc, 0.0))
    top = torch.where(tops >= 0, ids.gather(1, tops.clamp_min(0)), -1)
    if orders is not None:
        orders = torch.where(orders >= 0, ids.unsqueeze(1).expand(N, n + 1, n).gather(2, orders.clamp_min(0)), -1)
    return NodeRule(d, weights, top, orders, fallbacks)


def verify_optimal_multidraft(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Optimal single-step multi-draft verification on the draft tree (greedy lift to L >= 2).

    At the node u (depth t) with the c drafts through it (rows read from the lowest-index
    one), :math:`p = p(.|u)` and :math:`q = q(.|u)` renormalised in float64, and the set S of
    their next tokens: build d and its priority-order mixture (:func:`optimal_node_rule`;
    d = q when c = 1), select the order by a fresh uniform and y = its first token in S, accept
    y when :math:`u < \min\{1, p(y)/d(y)\}`; on acceptance move to the child, where all drafts
    carrying y continue; otherwise draw :math:`Z \sim \mathrm{normalize}(\max\{p - d, 0\})`
    (the target row when identically zero, counted). After L accepted tokens draw the bonus
    :math:`Z \sim p(.|x^L)`. At L = 1 the expected accepted count is OPT(K)
    (:func:`spectr_gbv.theory.bounds.l1_optimum`).

    Parameters
    ----------
    inputs : KernelInputs
        Rows of drafts sharing a prefix must agree there (the lowest-index draft's are read).
    uniforms : UniformSource
        Draws [B] twice per depth (selection, acceptance; 2L draws) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the lowest-index draft through the final node (0 when tau = 0).
        ``diagnostics``: ``residual_fallbacks`` and ``peel_fallbacks`` (rows whose peel did
        not close within tolerance; :class:`NodeRule`). Complexity: the module docstring, per
        node with c >= 2 reached by the walk (at most B per depth), O(n^3 log n) worst case
        with n = #supp(q) <= V, plus O(B K + B V) per depth.

    References
    ----------
    Hu et al. 2025, "Towards optimal multi-draft speculative decoding", arXiv 2502.18779 (the
    optimum's value); Khisti et al. 2024, arXiv 2410.18234 (selection then speculative
    sampling); THEORY.md section 5; reference
    :class:`spectr_gbv.reference.OptimalMultiDraftVerifier` (the construction).
    """
    B, K, L, V = inputs.B, inputs.K, inputs.L, inputs.V
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    b = batch_arange(drafts)
    active = torch.ones(B, K, dtype=torch.bool, device=device)
    alive = torch.ones(B, dtype=torch.bool, device=device)
    tau = torch.zeros(B, dtype=torch.int64, device=device)
    final = torch.zeros(B, V, dtype=torch.float64, device=device)
    fallbacks = torch.zeros((), dtype=torch.int64, device=device)
    peel_fallbacks = torch.zeros((), dtype=torch.int64, device=device)
    for t in range(L):
        j0 = first_true(active)
        p = p_all[b, j0, t].to(torch.float64)
        q = q_all[b, j0, t].to(torch.float64)
        p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
        tok = drafts[:, :, t]
        c = active.sum(-1)
        u_select, u_accept = uniforms(B), uniforms(B)
        y = tok[b, j0]  # c = 1: the only drafted token, d = q
        d = q.clone()
        idx = (alive & (c > 1)).nonzero().squeeze(-1)
        if idx.numel():
            hits = torch.zeros(idx.numel(), V, dtype=torch.int64, device=device)
            drafted = hits.scatter_add_(1, tok[idx], active[idx].to(torch.int64)) > 0
            rule = optimal_node_rule(p[idx], q[idx], c[idx], drafted)
            pick = sample_categorical(rule.weights, u_select[idx])
            y[idx] = rule.top.gather(1, pick.unsqueeze(-1)).squeeze(-1)
            d[idx] = rule.d
            peel_fallbacks = peel_fallbacks + rule.peel_fallbacks
        d_y, p_y = take(d, y), take(p, y)
        accept = torch.where(d_y > 0, p_y / torch.where(d_y > 0, d_y, 1.0), 1.0).clamp_max(1.0)
        accepted = alive & (u_accept < accept)
        stop = alive & ~accepted
        resid, used = residual_or_fallback((p - d).clamp_min(0.0), p)
        final = torch.where(stop.unsqueeze(-1), resid, final)
        fallbacks = fallbacks + count(used & stop)
        tau = torch.where(accepted, tau + 1, tau)
        alive = accepted
        active = torch.where(alive.unsqueeze(-1), active & (tok == y.unsqueeze(-1)), active)
    j0 = first_true(active)
    law = torch.where(alive.unsqueeze(-1), p_all[b, j0, L].to(torch.float64), final)
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(drafts, j0, tau, z)
    return VerifyOutput(tokens, tau, j0, {"residual_fallbacks": fallbacks, "peel_fallbacks": peel_fallbacks})


__all__ = [
    "DINKELBACH_ATOL",
    "TIE_RTOL",
    "VERTEX_ATOL",
    "NodeRule",
    "optimal_node_rule",
    "verify_optimal_multidraft",
]
