r"""Multi-path greedy block verification kernel (Thomas & Pal 2026, as THEORY.md section 6 reads it)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from spectr_gbv.gpu.kernels.block import block_next_law, block_stop, block_weights
from spectr_gbv.gpu.kernels.common import (
    KernelInputs,
    UniformSource,
    VerifyOutput,
    assemble,
    batch_arange,
    count,
    first_true,
    sample_categorical,
    take,
    take_many,
)

#: Rank keys are min{1, p/q} rounded to multiples of 2^-RANK_BITS, so ratios that tie in exact
#: arithmetic but differ by a few ulps after rounding to floats still tie (broken by token id).
RANK_BITS = 36


def rank_ratio(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    r"""Rank key :math:`\min\{1, p(v)/q(v)\}` (1 where ``q(v) = 0``), quantised, in float64.

    The ratio is rounded to a multiple of :math:`2^{-36}` (:data:`RANK_BITS`): exact ties of
    the reference's rational arithmetic (e.g. 4/5 : 6/7 and 1/15 : 1/14, equal ratios whose
    float64 quotients differ in the last bit) stay ties and are broken by token id, as the
    reference's exact ranking does; ratios closer than ~1.5e-11 also count as ties (any fixed
    ranking keeps the method lossless, since the skewed law is computed with the same ranks).

    Parameters
    ----------
    p, q : Tensor [..., V]

    Returns
    -------
    Tensor, float64 [..., V]
        Integers ``0..2^36`` (exact in float64).
    """
    p64, q64 = p.to(torch.float64), q.to(torch.float64)
    ratio = torch.where(q64 > 0, torch.clamp_max(p64 / torch.where(q64 > 0, q64, 1.0), 1.0), 1.0)
    return torch.round(ratio * float(2**RANK_BITS))


def select_path(inputs: KernelInputs) -> torch.Tensor:
    """Lowest index of a draft equal to the lexicographic maximum of the drafts under the ranks.

    Walks from the root: at each node keep the drafts whose token has the highest rank key
    (:func:`rank_ratio` of the node's rows), ties broken by the larger token id.

    Parameters
    ----------
    inputs : KernelInputs

    Returns
    -------
    Tensor, int64 [B]
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    b = batch_arange(inputs.drafts)
    active = torch.ones(B, K, dtype=torch.bool, device=inputs.device)
    for t in range(L):
        j0 = first_true(active)
        tok = inputs.drafts[:, :, t]
        key = rank_ratio(take_many(inputs.target_probs[b, j0, t], tok), take_many(inputs.draft_probs[b, j0, t], tok))
        key = torch.where(active, key, -1.0)
        best = key.amax(-1, keepdim=True)
        best_tok = torch.where(active & (key == best), tok, -1).amax(-1, keepdim=True)
        active = active & (tok == best_tok)
    return first_true(active)


def skewed_rows(tokens: torch.Tensor, p_rows: torch.Tensor, q_rows: torch.Tensor, K: int) -> torch.Tensor:
    r"""Conditionals of the lexicographic maximum of K i.i.d. drafts along the selected path.

    At depth t with c = q(u) / (A + q(u)) and d = 1 - c = A / (A + q(u)) (A = q-mass of the
    length-t prefixes ranked below u; c = 1, d = 0 at the root), b(v) = q-mass of the tokens
    ranked below v at u, :math:`\ell(v) = d + c\,b(v)` and :math:`h(v) = \ell(v) + c\,q(v)`:

    .. math::
        q_{skew}(v|u) \propto \frac{h^K - \ell^K}{c}
            = q(v)\,\frac{h^K - \ell^K}{h - \ell}
            = q(v)\, h^{K-1}\, \frac{1 - e^{-K\lambda}}{1 - e^{-\lambda}},
        \qquad \lambda = \log(1 + c\,q(v)/\ell)

    (THEORY.md section 6's formula with A, x, y, z divided by A + x). The last form is
    evaluated in float64 in log space (``log1p``/``expm1``, then a softmax over v), so
    nothing overflows for any K (no binomial coefficient is formed: ``math.comb(K, j)``
    overflowed int64 from K = 68 on) and nothing cancels; ``l = 0`` gives
    :math:`\lambda = \infty` and the factor 1 (the law :math:`h^{K-1} q`), and
    :math:`K\lambda < 2^{-60}` (e.g. c underflowing to 0 on a long path) uses its limit K
    (relative error below :math:`2^{-61}`), so the law tends to q, never to 0/0. c and d are
    carried in float64 without cancellation: :math:`c' = c\,q(x)/h(x)`,
    :math:`d' = \ell(x)/h(x)`. Work O(B L V) for any K.

    Parameters
    ----------
    tokens : Tensor, int64 [B, L]
        The selected path.
    p_rows, q_rows : Tensor [B, L, V]
        Target and draft rows along it.
    K : int
        Number of drafts (>= 1).

    Returns
    -------
    Tensor [B, L, V], dtype of ``q_rows``; rows sum to 1 (a mass below the dtype's smallest
    number rounds to 0; :func:`~spectr_gbv.gpu.kernels.block.log_weight_step` handles a drafted
    token of skewed probability 0).
    """
    B, L, V = q_rows.shape
    key = rank_ratio(p_rows, q_rows)
    order = torch.sort(key, dim=-1, stable=True).indices  # ascending key, ties by token id
    q64 = q_rows.to(torch.float64)
    q_sorted = torch.gather(q64, -1, order)
    below_sorted = F.pad(torch.cumsum(q_sorted, -1)[..., :-1], (1, 0))
    below = torch.empty_like(below_sorted).scatter_(-1, order, below_sorted)  # [B, L, V] float64
    b_x, q_x = take(below, tokens), take(q64, tokens)  # [B, L]
    cs, ds = [], []
    c = torch.ones(B, dtype=torch.float64, device=q_rows.device)
    d = torch.zeros_like(c)
    for t in range(L):
        cs.append(c)
        ds.append(d)
        ell_x = d + c * b_x[:, t]
        hi_x = ell_x + c * q_x[:, t]
        c, d = c * q_x[:, t] / hi_x, ell_x / hi_x
    cc = torch.stack(cs, dim=1).unsqueeze(-1)  # [B, L, 1]
    dd = torch.stack(ds, dim=1).unsqueeze(-1)
    ell = dd + cc * below
    hi = ell + cc * q64
    live = q64 > 0  # then hi > 0
    lam = torch.log1p(cc * q64 / torch.where(ell > 0, ell, 1.0))
    lam = torch.where(ell > 0, lam, torch.inf)
    small = K * lam < 2.0**-60
    lam_s = torch.where(small | ~live, 1.0, lam)
    ratio = torch.log(-torch.expm1(-K * lam_s)) - torch.log(-torch.expm1(-lam_s))
    ratio = torch.where(small, math.log(K), ratio)
    safe_hi = torch.where(live, hi, 1.0)
    logw = torch.log(torch.where(live, q64, 1.0)) + (K - 1) * torch.log(safe_hi) + ratio
    logw = torch.where(live, logw, -torch.inf)
    return torch.softmax(logw, dim=-1).to(q_rows.dtype)


def verify_gbv_multipath(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Multi-path greedy block verification (THEORY.md section 6).

    Rank tokens at each node by :math:`\min\{1, p(v|u)/q(v|u)\}` ascending (ties by token id),
    select the lexicographic maximum of the K drafts (:func:`select_path`), and run block
    verification (:mod:`spectr_gbv.gpu.kernels.block`) on it against p with the draft law
    replaced by the skewed law :func:`skewed_rows`. K = 1 is BV.

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B, L] (eta) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the selected draft (lowest index on the selected path).
        Complexity O(B L V log V) (one sort per path node) plus O(B L V K) for the skewed law.

    References
    ----------
    Thomas & Pal 2026, arXiv 2602.16961 (multi-path greedy block verification); Sun et al.
    2024, arXiv 2403.10444, Algorithm 2; THEORY.md section 6; reference
    :class:`spectr_gbv.reference.MultiPathGreedyVerifier`.
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    b = batch_arange(inputs.drafts)
    k = select_path(inputs)
    x = inputs.drafts[b, k]
    p = inputs.target_probs[b, k]  # [B, L+1, V]
    q = inputs.draft_probs[b, k]
    if K > 1:  # at K = 1 the skewed law is q itself (the sum reduces to q(v)), so skip the sort
        q = skewed_rows(x, p[:, :L], q, K)
    weights = block_weights(x, p[:, 0], p[:, :L], q)
    end = block_stop(weights, uniforms(B, L))
    law, used = block_next_law(weights, end, p[:, 0], p[:, :L], q, p[:, L])
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(inputs.drafts, k, end, z)
    return VerifyOutput(tokens, end, k, {"residual_fallbacks": count(used)})
