r"""Batched block verification (Sun et al. 2024, Algorithm 2), shared by BV, MDBV and multi-path.

One draft per batch row, verified from a per-row start position ``a`` (0 for plain BV; the
accepted-prefix length for MDBV) against a target whose first conditional is a per-row law R
(``p(.|x^a)`` for plain BV, the previous residual for MDBV) and later ones ``p``:

.. math::
    w_0 = 1,\quad w_i = \min\{1, w_{i-1}\, p(x_i|x^{i-1}) / q(x_i|x^{i-1})\},\quad
    r_i = \sum_v \max\{w_i p(v|x^i) - q(v|x^i), 0\},

:math:`h_i = r_i / (r_i + 1 - w_i)` for :math:`i < m` (0 when the denominator is 0),
:math:`h_m = w_m`; :math:`\tau = \max\{i : \eta_i < h_i\}` over independent uniforms (0 if
none); the next token is drawn from :math:`p(.|x^m)` if :math:`\tau = m`, else from
:math:`\max\{w_\tau p(.|x^\tau) - q(.|x^\tau), 0\}` (the target row there when that is
identically zero in floating point, as the reference layer does).

Numerics: the weights are computed in float64 in log space,
:math:`\log w_i = \min\{0, \log w_{i-1} + \log p(x_i) - \log q(x_i)\}`, so a long block
(L = 64) of small probabilities never forms a product of probabilities and never underflows
(a ratio of 0 gives :math:`\log w = -\infty` exactly, no ``0 * inf``). The residual sums
:math:`r_i` are formed in the input dtype from ``w_i * p - q``.

Complexity: O(B L V) work in a handful of batched tensor operations plus an O(L) loop of
[B]-sized float64 operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spectr_gbv.gpu.kernels.common import residual_or_fallback, take


@dataclass(frozen=True)
class BlockWeightsT:
    """Block-verification weights per batch row and position.

    Attributes
    ----------
    w : Tensor, float64 [B, L]
        ``w[:, t]`` = :math:`w_{t-a+1}`, the weight after accepting the token at 0-based
        position ``t`` (``t >= a``); 0 for ``t < a``.
    h : Tensor, float64 [B, L]
        ``h[:, t]`` = acceptance weight of the sub-block ending at position ``t``
        (:math:`h_{t-a+1}`); 0 for ``t < a``.
    """

    w: torch.Tensor
    h: torch.Tensor


def log_weight_step(log_w: torch.Tensor, p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
    r"""One step :math:`\log w \leftarrow \min\{0, \log w + \log p(x) - \log q(x)\}` in float64.

    Mirrors :func:`spectr_gbv.reference.kernels.block_weights` exactly at the edges:
    ``p(x) = 0`` gives ``-inf`` (w = 0); ``q(x) = 0`` (only for a draft law that underflowed,
    e.g. multi-path's skewed law) gives w = 1 when ``w p(x) > 0``, else 0. Never NaN.

    Parameters
    ----------
    log_w : Tensor, float64 [B]
    p_x, q_x : Tensor [B]
        Target and draft probability of the drafted token.

    Returns
    -------
    Tensor, float64 [B]
    """
    p64, q64 = p_x.to(torch.float64), q_x.to(torch.float64)
    ratio = torch.where(
        p64 <= 0,
        torch.full_like(p64, -torch.inf),
        torch.where(q64 <= 0, torch.full_like(p64, torch.inf), torch.log(p64) - torch.log(q64)),
    )
    dead = torch.isneginf(log_w) | (p64 <= 0)
    step = torch.clamp_max(log_w + torch.where(dead, torch.zeros_like(ratio), ratio), 0.0)
    return torch.where(dead, torch.full_like(step, -torch.inf), step)


def block_weights(
    tokens: torch.Tensor,
    first_target: torch.Tensor,
    target_rows: torch.Tensor,
    draft_rows: torch.Tensor,
    start: torch.Tensor | None = None,
) -> BlockWeightsT:
    """Weights ``w`` and acceptance weights ``h`` of block verification, batched.

    Parameters
    ----------
    tokens : Tensor, int64 [B, L]
        The draft verified in each row.
    first_target : Tensor, float [B, V]
        Target law at position ``start`` (R); replaces ``target_rows[:, start]``.
    target_rows : Tensor, float [B, L, V]
        ``p(. | x^t)`` for t = 0..L-1 (positions after ``start`` are read).
    draft_rows : Tensor, float [B, L, V]
        ``q(. | x^t)`` (or the law the draft was drawn from, e.g. multi-path's skewed law).
    start : Tensor, int64 [B], optional
        First position verified in each row (default 0).

    Returns
    -------
    BlockWeightsT

    References
    ----------
    Sun et al. 2024, "Block verification accelerates speculative decoding", arXiv 2403.10444,
    Algorithm 2; THEORY.md section 3.
    """
    B, L = tokens.shape
    device = tokens.device
    if start is None:
        start = torch.zeros(B, dtype=torch.int64, device=device)
    p_tok = take(target_rows, tokens)  # [B, L]
    q_tok = take(draft_rows, tokens)
    p_first = take(first_target, tokens.gather(1, start.clamp_max(L - 1).unsqueeze(-1)).squeeze(-1))
    log_w = torch.zeros(B, dtype=torch.float64, device=device)
    logs = []
    for t in range(L):
        at_start = start == t
        p_x = torch.where(at_start, p_first, p_tok[:, t])
        log_w = torch.where(at_start, torch.zeros_like(log_w), log_w)
        log_w = log_weight_step(log_w, p_x, q_tok[:, t])
        logs.append(log_w)
    positions = torch.arange(L, device=device)
    live = positions.unsqueeze(0) >= start.unsqueeze(-1)  # [B, L]
    w = torch.where(live, torch.exp(torch.stack(logs, dim=1)), torch.zeros((), dtype=torch.float64, device=device))
    h = w.clone()  # h at the last position is w_m
    if L > 1:
        w_mid = w[:, : L - 1].to(target_rows.dtype).unsqueeze(-1)
        r = (w_mid * target_rows[:, 1:] - draft_rows[:, 1:]).clamp_min(0).sum(-1).to(torch.float64)
        den = r + 1.0 - w[:, : L - 1]
        h_mid = torch.where(den > 0, r / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(den))
        h[:, : L - 1] = torch.where(live[:, : L - 1], h_mid, torch.zeros_like(h_mid))
    return BlockWeightsT(w, h)


def block_stop(weights: BlockWeightsT, eta: torch.Tensor, start: torch.Tensor | None = None) -> torch.Tensor:
    r"""Accepted length :math:`a + \max\{i : \eta_i < h_i\}` (``a`` if none), per row.

    Parameters
    ----------
    weights : BlockWeightsT
    eta : Tensor, float64 [B, L]
        Fresh uniforms, one per position (positions before ``start`` are ignored).
    start : Tensor, int64 [B], optional

    Returns
    -------
    Tensor, int64 [B]
        The end of the accepted prefix (absolute position, ``start..L``).
    """
    B, L = eta.shape
    if start is None:
        start = torch.zeros(B, dtype=torch.int64, device=eta.device)
    accept = eta < weights.h  # h = 0 before start: never accepted
    ends = torch.arange(1, L + 1, device=eta.device).expand(B, L)
    return torch.where(accept, ends, start.unsqueeze(-1)).amax(-1)


def block_next_law(
    weights: BlockWeightsT,
    end: torch.Tensor,
    first_target: torch.Tensor,
    target_rows: torch.Tensor,
    draft_rows: torch.Tensor,
    bonus_row: torch.Tensor,
    start: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Unnormalised law of the token after the accepted prefix, per row.

    ``bonus_row`` if ``end = L``; else :math:`\max\{w_\tau R_e - q(.|x^e), 0\}` at position
    ``e = end`` with :math:`w_0 = 1` and :math:`R_e` = ``first_target`` if ``e = start``,
    ``target_rows[:, e]`` otherwise; an identically-zero residual is replaced by
    :math:`R_e` (counted).

    Parameters
    ----------
    weights : BlockWeightsT
    end : Tensor, int64 [B]
        From :func:`block_stop`.
    first_target : Tensor [B, V]
    target_rows, draft_rows : Tensor [B, L, V]
    bonus_row : Tensor [B, V]
        ``p(. | x^L)``.
    start : Tensor, int64 [B], optional

    Returns
    -------
    law : Tensor [B, V]
        Non-negative weights with a positive entry.
    fallback : Tensor, bool [B]
        Rows whose residual was identically zero (never when ``end = L``).
    """
    B, L = weights.w.shape
    b = torch.arange(B, device=end.device)
    if start is None:
        start = torch.zeros(B, dtype=torch.int64, device=end.device)
    e = end.clamp_max(L - 1)
    at_start = (end == start).unsqueeze(-1)
    w_tau = torch.where(end == start, torch.ones_like(weights.w[:, 0]), weights.w[b, (e - 1).clamp_min(0)])
    target_e = torch.where(at_start, first_target, target_rows[b, e])
    resid = (w_tau.to(target_e.dtype).unsqueeze(-1) * target_e - draft_rows[b, e]).clamp_min(0)
    resid, used = residual_or_fallback(resid, target_e)
    done = end == L
    return torch.where(done.unsqueeze(-1), bonus_row, resid), used & ~done
