r"""LOSSY on purpose: the SpecTr-GBV rule as released by its authors (THEORY.md section 6a).

Only reachable through :func:`spectr_gbv.gpu.kernels.verify` with ``allow_lossy=True``; kept to
measure the released code's bias on real models, never as a decoding default.

Numerics: for a sub-block :math:`b = x_j^i` with joint probabilities P = p(x^i), Q = q(x^i)
along draft j, the released weight is

.. math::
    h_i = \frac{\sum_v P p'(v)(1 - r(v))^K - P(1 - r_0)^K}
               {1 - (1 - Q)^K - \sum_v P p'(v)(1 - (1 - r(v))^K)},\qquad
    r(v) = \min\{1, Q q'(v)/(P p'(v))\},\ r_0 = \min\{1, Q/P\}.

The kernel divides numerator and denominator by P and keeps P, Q in log space
(:math:`\log P = \sum_t \log p(x_t)`), so L = 64 does not underflow; r and
:math:`1-(1-Q)^K = -\mathrm{expm1}(K\,\mathrm{log1p}(-Q))` are formed from the log ratio
:math:`\log Q - \log P`. P = 0 gives h = 0 (the reference's value). A 0/0 sub-block (both
scaled numerator and denominator within 1e-12 of 0, relative to their terms) gets h = 0, the
exact-arithmetic value (a zero denominator forces a zero numerator, THEORY.md 6a); a zero
denominator with a positive (negative) numerator gives +inf (-inf), then clamped, as the
reference's limit convention does. Sums over V are formed in float64.
"""

from __future__ import annotations

import math

import torch

from spectr_gbv.gpu.kernels.common import (
    KernelInputs,
    UniformSource,
    VerifyOutput,
    assemble,
    batch_arange,
    count,
    residual_or_fallback,
    sample_categorical,
    take,
)
from spectr_gbv.gpu.kernels.spectr import prefix_equal

#: Scaled numerators/denominators within this (relative) distance of 0 count as exactly 0.
ZERO_SNAP = 1e-12


def _log_cover(log_x: torch.Tensor, K: int) -> torch.Tensor:
    """``log(1 - (1 - x)^K)`` from ``log x`` (x in [0, 1]); accurate for tiny and underflowing x."""
    x = torch.exp(log_x)
    direct = torch.log(-torch.expm1(K * torch.log1p(-x.clamp_max(1.0))))
    return torch.where(log_x > -700.0, direct, math.log(K) + log_x)


def _cover(x: torch.Tensor, K: int) -> torch.Tensor:
    """``1 - (1 - x)^K`` for x in [0, 1] without cancellation."""
    return -torch.expm1(K * torch.log1p(-x.clamp(0.0, 1.0)))


def _ratios(s: torch.Tensor, p_row: torch.Tensor, q_row: torch.Tensor) -> torch.Tensor:
    """``r(v) = min{1, exp(s) q'(v)/p'(v)}`` with ``s = log Q - log P``; 1 where ``p'(v) = 0``."""
    log_r = s.unsqueeze(-1) + torch.log(q_row) - torch.log(torch.where(p_row > 0, p_row, 1.0))
    return torch.where(p_row > 0, torch.exp(torch.clamp_max(log_r, 0.0)), 1.0)


def released_weights(inputs: KernelInputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Raw acceptance weights of every sub-block of every draft, and the joint log probabilities.

    Parameters
    ----------
    inputs : KernelInputs

    Returns
    -------
    h : Tensor, float64 [B, K, L+1]
        ``h[:, j, i]`` = raw :math:`h_i` of draft j's sub-block of length i (index 0 unused,
        0), ``h[:, j, L]`` = :math:`h_L = P[1 - (1 - r_0)^K] / [1 - (1 - Q)^K]`; may leave
        [0, 1] (rounding) or be +-inf (zero denominator).
    log_P, log_Q : Tensor, float64 [B, K, L+1]
        :math:`\log p(x_j^i)`, :math:`\log q(x_j^i)` (``-inf`` where P = 0).

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925, as released in junemily/SpecTr-GBV ``src/engine.py`` @
    e399f44; THEORY.md section 6a; reference :func:`spectr_gbv.reference.spectr_gbv_released.released_weights`.
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    x = inputs.drafts
    p = inputs.target_probs.to(torch.float64)
    q = inputs.draft_probs.to(torch.float64)
    zeros = torch.zeros(B, K, 1, dtype=torch.float64, device=inputs.device)
    log_P = torch.cat([zeros, torch.cumsum(torch.log(take(p[:, :, :L], x)), -1)], -1)
    log_Q = torch.cat([zeros, torch.cumsum(torch.log(take(q, x)), -1)], -1)
    h = torch.zeros(B, K, L + 1, dtype=torch.float64, device=inputs.device)
    alive = torch.isfinite(log_P)  # P > 0
    s = torch.where(alive, log_Q - log_P, 0.0)
    if L > 1:
        pi, qi, si = p[:, :, 1:L], q[:, :, 1:L], s[:, :, 1:L]
        r = _ratios(si, pi, qi)
        r0 = torch.exp(torch.clamp_max(si, 0.0))
        num = (pi * (1.0 - r) ** K).sum(-1) - (1.0 - r0) ** K
        log_P_mid = torch.where(alive[:, :, 1:L], log_P[:, :, 1:L], 0.0)
        cover_q_over_p = torch.exp(_log_cover(log_Q[:, :, 1:L], K) - log_P_mid)
        mass_cover = (pi * _cover(r, K)).sum(-1)
        den = cover_q_over_p - mass_cover
        num_zero = num.abs() <= ZERO_SNAP
        den_zero = den.abs() <= ZERO_SNAP * torch.clamp_min(cover_q_over_p, 1.0)
        limit = torch.where(num_zero, 0.0, torch.where(num > 0, torch.inf, -torch.inf))
        raw = torch.where(den_zero, limit, num / torch.where(den_zero, 1.0, den))
        h[:, :, 1:L] = torch.where(alive[:, :, 1:L], raw, 0.0)
    sL, log_PL, log_QL = s[:, :, L], log_P[:, :, L], log_Q[:, :, L]
    h_whole = torch.exp(log_PL + _log_cover(torch.clamp_max(sL, 0.0), K) - _log_cover(log_QL, K))
    h[:, :, L] = torch.where(alive[:, :, L], h_whole, 0.0)
    return h, log_P, log_Q


def verify_spectr_gbv_released(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""The released SpecTr-GBV scan and residual (THEORY.md 6a). LOSSY.

    Scan: a = 0, seen = {}. For drafts j = 0..K-1 in order: for i = a+1..L-1 (a as at the start
    of draft j) skip the sub-block :math:`x_j^i` if it is in seen, else accept it with
    probability clamp(:math:`h_i`) (a = i, remember j) or add it to seen; then accept the whole
    draft with probability clamp(:math:`h_L`) (no seen check); if accepted a = L and stop.
    Finally, if a < L, :math:`Z \sim P p'(v)(1 - r(v)^K)` at position a + 1 of the remembered
    draft (draft 0 with P = Q = 1 when a = 0; the target row if identically zero, counted);
    else :math:`Z \sim p(.|x^L)`. "seen" is held as a [B, K, L] mask of rejected sub-blocks and
    the [B, K, K, L+1] prefix-equality of the drafts.

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Per draft: [B, L] (sub-blocks, index 0 unused) then [B] (whole draft); then [B]
        (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the remembered draft (0 when a = 0). Diagnostics: ``residual_fallbacks``,
        ``h_evaluations`` (weights tested), ``h_clamped`` (tested weights that left [0, 1]).
        Complexity O(B K L V) for the weights; the scan is O(K L) batched steps.

    References
    ----------
    Lin et al. 2026, "SpecTr-GBV", arXiv 2604.25925; junemily/SpecTr-GBV ``src/engine.py`` @
    e399f44; THEORY.md section 6a; reference :class:`spectr_gbv.reference.ReleasedSpecTrGBVVerifier`.
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    device = inputs.device
    bidx = batch_arange(inputs.drafts)
    h_raw, log_P, log_Q = released_weights(inputs)
    h = h_raw.clamp(0.0, 1.0)
    out_of_range = (h_raw < 0) | (h_raw > 1)
    eq = prefix_equal(inputs.drafts)  # [B, K, K, L+1]
    rejected = torch.zeros(B, K, L + 1, dtype=torch.bool, device=device)
    a = torch.zeros(B, dtype=torch.int64, device=device)
    sel = torch.zeros(B, dtype=torch.int64, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    evaluations = torch.zeros((), dtype=torch.int64, device=device)
    clamped = torch.zeros((), dtype=torch.int64, device=device)
    for j in range(K):
        a_start = a
        u = uniforms(B, L)
        for i in range(1, L):
            seen = (eq[:, :j, j, i] & rejected[:, :j, i]).any(-1)
            test = ~done & (i > a_start) & ~seen
            acc = test & (u[:, i] < h[:, j, i])
            a = torch.where(acc, i, a)
            sel = torch.where(acc, j, sel)
            rejected[:, j, i] = test & ~acc
            evaluations = evaluations + count(test)
            clamped = clamped + count(test & out_of_range[:, j, i])
        test = ~done
        acc = test & (uniforms(B) < h[:, j, L])
        evaluations = evaluations + count(test)
        clamped = clamped + count(test & out_of_range[:, j, L])
        a = torch.where(acc, L, a)
        sel = torch.where(acc, j, sel)
        done = done | acc
    p_row = inputs.target_probs[bidx, sel, a]
    t = a.clamp_max(L - 1)
    q_row = inputs.draft_probs[bidx, sel, t]
    lp, lq = log_P[bidx, sel, a], log_Q[bidx, sel, a]
    P_pos = torch.isfinite(lp)
    s = torch.where(P_pos, lq - lp, 0.0).to(torch.float64)
    r = _ratios(s, p_row.to(torch.float64), q_row.to(torch.float64))
    resid = torch.where(P_pos.unsqueeze(-1), p_row.to(torch.float64) * (1.0 - r**K), 0.0).to(p_row.dtype)
    resid, used = residual_or_fallback(resid, p_row)
    law = torch.where(done.unsqueeze(-1), p_row, resid)
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(inputs.drafts, sel, a, z)
    diagnostics = {"residual_fallbacks": count(used & ~done), "h_evaluations": evaluations, "h_clamped": clamped}
    return VerifyOutput(tokens, a, sel, diagnostics)
