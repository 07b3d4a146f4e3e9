r"""SpecInfer's recursive rejection sampling (RRS) kernel on the draft tree."""

from __future__ import annotations

import torch

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
)


def verify_rrs(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Recursive rejection sampling on the draft tree (SpecInfer multi-step speculative sampling).

    At the node u with the drafts through it (index order) and their next tokens
    :math:`x_1..x_k` (repeats allowed): R = p(.|u); for i = 1..k accept :math:`x_i` when
    :math:`u_i < \min\{1, R(x_i)/q(x_i|u)\}` (fresh uniform each), else
    :math:`R \leftarrow \mathrm{normalize}(\max\{R - q(.|u), 0\})`. When
    :math:`\max\{R - q, 0\}` is identically zero (R = q, in floating point up to rounding) the
    trial accepts surely, as in the reference layer (counted in
    ``diagnostics["zero_residual_sure_accepts"]``). On acceptance move to the child, where all
    drafts carrying that token continue; if all are rejected :math:`Z \sim R`; after L accepted
    tokens draw the bonus :math:`Z \sim p(.|x^L)`.

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B, K] per depth (L draws) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the lowest-index draft through the final node (0 when tau = 0).
        ``diagnostics["residual_fallbacks"]`` is always 0 (RRS needs no fallback).
        Complexity O(B K L V): a Python loop over depth and drafts, each step batched over B.

    References
    ----------
    Miao et al. 2024, "SpecInfer", arXiv 2305.09781, multi-step speculative sampling
    (stochastic token-tree verification); THEORY.md section 6; reference
    :class:`spectr_gbv.reference.RecursiveRejectionVerifier`.
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    b = batch_arange(drafts)
    active = torch.ones(B, K, dtype=torch.bool, device=device)
    alive = torch.ones(B, dtype=torch.bool, device=device)
    tau = torch.zeros(B, dtype=torch.int64, device=device)
    final = p_all[:, 0, 0]
    sure = torch.zeros((), dtype=torch.int64, device=device)
    for t in range(L):
        j0 = first_true(active)
        R, q_row = p_all[b, j0, t], q_all[b, j0, t]
        tok = drafts[:, :, t]
        u = uniforms(B, K)
        accepted = torch.zeros(B, dtype=torch.bool, device=device)
        token = torch.zeros(B, dtype=torch.int64, device=device)
        for j in range(K):
            trial = alive & active[:, j] & ~accepted
            x = tok[:, j]
            q_x = take(q_row, x).to(torch.float64)
            a = take(R, x).to(torch.float64) / torch.where(q_x > 0, q_x, 1.0)
            nxt = (R - q_row).clamp_min(0)
            zero = ~(nxt > 0).any(-1)
            a = torch.where(zero, torch.ones_like(a), a.clamp_max(1.0))
            acc = trial & (u[:, j] < a)
            accepted = accepted | acc
            token = torch.where(acc, x, token)
            reject = trial & ~acc
            total = nxt.sum(-1, keepdim=True)
            R = torch.where(reject.unsqueeze(-1), nxt / torch.where(total > 0, total, 1.0), R)
            sure = sure + count(trial & zero)
        stop = alive & ~accepted
        final = torch.where(stop.unsqueeze(-1), R, final)
        tau = torch.where(accepted, tau + 1, tau)
        alive = accepted
        active = torch.where(alive.unsqueeze(-1), active & (tok == token.unsqueeze(-1)), active)
    j0 = first_true(active)
    law = torch.where(alive.unsqueeze(-1), p_all[b, j0, L], final)
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(drafts, j0, tau, z)
    zero = torch.zeros((), dtype=torch.int64, device=device)
    return VerifyOutput(tokens, tau, j0, {"residual_fallbacks": zero, "zero_residual_sure_accepts": sure})
