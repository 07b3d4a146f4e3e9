r"""SpecTr's K-SEQ parameter rho, batched, and the K-SEQ residual (Sun et al. 2023).

.. math::
    \beta(\rho) = \sum_v \min\{p(v)/\rho, q(v)\},\qquad
    \rho^* = \min\{\rho \in [1, k] : 1 - (1 - \beta(\rho))^k \le \rho\,\beta(\rho)\}

The gap :math:`g(\rho) = \rho\beta(\rho) - 1 + (1 - \beta(\rho))^k` is nondecreasing in rho
and :math:`g(k) \ge 0`. :math:`\beta` is piecewise of the form :math:`P_a/\rho + Q_b` between
consecutive ratios :math:`p(v)/q(v)`, so instead of bisecting over full rows (O(V) per step)
the kernel sorts the ratios once, evaluates g at every breakpoint in (1, k) with cumulative
sums, brackets the root between two consecutive breakpoints and solves the closed form
:math:`g(\rho) = P_a + Q_b\rho - 1 + (1 - Q_b - P_a/\rho)^k` on [N] scalars by safeguarded
Newton (float64). Result: the feasible end of the final bracket, like the reference's float
bisection (:func:`spectr_gbv.reference.kernels.kseq_rho`): a feasible rho (g >= -1e-12 on
float64-renormalised rows, so the residual is non-negative up to ~1e-12 and K-SEQ stays
lossless) within ~1e-12 relative of rho*. Deviation from the reference's float path: the
tolerance makes rounding-flat cases (``p = q`` up to rounding, where the reference's
``(1 - beta)^k`` with ``1 - beta ~ 1e-16`` can move rho by a percent at k = 8) take the
exact-arithmetic value.

Complexity: O(N V log V) for the sort of the N nodes given (the tree kernel passes one node per
distinct prefix with at least two drafts through it), then O(N) per Newton step.
"""

from __future__ import annotations

import torch

#: Safeguarded Newton steps on the bracketed closed form (float64).
RHO_NEWTON_STEPS = 30
#: Relative nudge that makes the converged root feasible.
RHO_NUDGE = 1e-13
#: A gap >= -RHO_GAP_TOL counts as feasible (rows are renormalised in float64 first).
RHO_GAP_TOL = 1e-12


def _gap_and_slope(
    pa: torch.Tensor, qb: torch.Tensor, rho: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shifted gap ``g + tol`` of the closed form on a bracket, and its derivative in rho."""
    y = 1.0 - qb - pa / rho  # 1 - beta
    y_km1 = torch.pow(y, k - 1.0)
    g = pa + qb * rho - 1.0 + y_km1 * y + RHO_GAP_TOL
    return g, qb + k * y_km1 * pa / (rho * rho)


def _solve_bracketed(
    pa: torch.Tensor, qb: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, k: torch.Tensor
) -> torch.Tensor:
    """Smallest root of the shifted gap in [lo, hi], where ``g(lo) < 0 <= g(hi)``.

    Safeguarded Newton: a step that leaves the bracket, or follows a step that did not halve
    it, is replaced by bisection. Returns the last iterate nudged up by :data:`RHO_NUDGE` when
    that is feasible and inside the bracket, else the bracket's feasible end.
    """
    x = hi.clone()
    width = hi - lo
    for _ in range(RHO_NEWTON_STEPS):
        g, dg = _gap_and_slope(pa, qb, x, k)
        feasible = g >= 0
        hi = torch.where(feasible, x, hi)
        lo = torch.where(feasible, lo, x)
        new_width = hi - lo
        newton = x - g / torch.where(dg > 0, dg, 1.0)
        ok = (dg > 0) & (newton >= lo) & (newton <= hi) & (new_width <= 0.5 * width)
        width = torch.where(ok, width, new_width)
        x = torch.where(ok, newton, 0.5 * (lo + hi))
    nudged = x * (1.0 + RHO_NUDGE)
    g, _ = _gap_and_slope(pa, qb, nudged, k)
    return torch.where((g >= 0) & (nudged < hi), nudged, hi)


def kseq_rho(p: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    r"""Smallest feasible :math:`\rho \in [1, k]` of K-SEQ for every node (row).

    Rows are renormalised in float64 and a gap within :data:`RHO_GAP_TOL` of 0 counts as
    feasible, so ``p = q`` gives rho = 1 (and not the ~1.01 that a sum rounded to
    ``1 - 1e-16`` would give at k = 8: :math:`(1-\beta)^k = 10^{-16}` at
    :math:`1 - \beta = 0.01`).

    Parameters
    ----------
    p, q : Tensor, float [N, V]
        Target and draft laws at each node.
    k : Tensor, int64 [N]
        Number of i.i.d. draft tokens at each node (``>= 1``); rho = 1 where ``k = 1``.

    Returns
    -------
    Tensor, float64 [N]

    References
    ----------
    Sun et al. 2023, "SpecTr: fast speculative decoding via optimal transport",
    arXiv 2310.15141, K-SEQ and its choice of rho; THEORY.md section 6.
    """
    p64, q64 = p.to(torch.float64), q.to(torch.float64)
    p64 = p64 / p64.sum(-1, keepdim=True)
    q64 = q64 / q64.sum(-1, keepdim=True)
    kf = k.to(torch.float64)
    beta1 = torch.minimum(p64, q64).sum(-1)
    trivial = (k <= 1) | (beta1 - 1.0 + torch.pow(1.0 - beta1, kf) + RHO_GAP_TOL >= 0)  # g(1) >= 0
    # breakpoints p/q (p = 0 -> 0, contributes p/rho = 0; q = 0 < p -> inf, contributes q = 0)
    ratio = torch.where(
        p64 <= 0,
        torch.zeros_like(p64),
        torch.where(q64 <= 0, torch.full_like(p64, torch.inf), p64 / torch.where(q64 > 0, q64, 1.0)),
    )
    sorted_ratio, order = torch.sort(ratio, dim=-1)
    cum_p = torch.cumsum(torch.gather(p64, -1, order), -1)
    cum_q = torch.cumsum(torch.gather(q64, -1, order), -1)
    q_above = cum_q[:, -1:] - cum_q
    kcol = kf.unsqueeze(-1)
    inside = (sorted_ratio > 1.0) & (sorted_ratio < kcol)
    c = torch.where(inside, sorted_ratio, torch.ones_like(sorted_ratio))
    gap = cum_p + c * q_above - 1.0 + torch.pow(1.0 - cum_p / c - q_above, kcol) + RHO_GAP_TOL
    hi = torch.where(inside & (gap >= 0), c, torch.full_like(c, torch.inf)).amin(-1)
    hi = torch.minimum(hi, kf)
    lo = torch.where(inside & (gap < 0) & (c < hi.unsqueeze(-1)), c, torch.ones_like(c)).amax(-1)
    below = ratio <= lo.unsqueeze(-1)
    pa = torch.where(below, p64, 0.0).sum(-1)
    qb = torch.where(below, 0.0, q64).sum(-1)
    return torch.where(trivial, 1.0, _solve_bracketed(pa, qb, lo, hi, kf))


def kseq_residual(p: torch.Tensor, q: torch.Tensor, k: torch.Tensor, rho: torch.Tensor, max_k: int) -> torch.Tensor:
    r"""K-SEQ residual weights :math:`\max\{p - \min\{p/\rho, q\}\,(1 - (1-\beta)^k)/\beta, 0\}`.

    The factor is evaluated as :math:`\sum_{j<k}(1 - \beta)^j` (no division; k when
    :math:`\beta = 0`), as the reference does. Unnormalised.

    Parameters
    ----------
    p, q : Tensor, float [B, V]
    k : Tensor, int64 [B]
    rho : Tensor, float64 [B]
    max_k : int
        An upper bound on ``k`` (the number of drafts K; no host sync to find it).

    Returns
    -------
    Tensor, float [B, V] (dtype of ``p``)
    """
    capped = torch.minimum(p / rho.to(p.dtype).unsqueeze(-1), q)
    one_minus = 1.0 - capped.sum(-1, dtype=torch.float64)
    factor = torch.zeros_like(one_minus)
    term = torch.ones_like(one_minus)
    for j in range(max_k):
        factor = factor + torch.where(k > j, term, torch.zeros_like(term))
        term = term * one_minus
    return (p - capped * factor.to(p.dtype).unsqueeze(-1)).clamp_min(0)
