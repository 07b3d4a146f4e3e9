r"""Token-level speculative decoding kernel (Leviathan et al. 2023) on draft 0."""

from __future__ import annotations

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


def sd_acceptance_probs(inputs: KernelInputs) -> torch.Tensor:
    r"""Per-position acceptance probabilities :math:`\min\{1, p(x_t|x^{t-1}) / q(x_t|x^{t-1})\}`.

    Parameters
    ----------
    inputs : KernelInputs
        Draft 0 is read.

    Returns
    -------
    Tensor, float64 [B, L]
        In [0, 1] (``q(x_t) > 0`` is guaranteed by validation).

    References
    ----------
    Leviathan et al. 2023, arXiv 2211.17192, Algorithm 1; THEORY.md section 3.
    """
    x = inputs.drafts[:, 0]
    p_x = take(inputs.target_probs[:, 0, : inputs.L], x).to(torch.float64)
    q_x = take(inputs.draft_probs[:, 0], x).to(torch.float64)
    return torch.clamp_max(p_x / q_x, 1.0)


def verify_sd(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Speculative sampling of draft 0 (drafts 1..K-1 are ignored).

    For t = 1..L accept :math:`x_t` when :math:`u_t < \min\{1, p(x_t)/q(x_t)\}` (fresh
    uniforms, [B, L] in one draw), stop at the first rejection and draw
    :math:`Z \sim \max\{p(.|x^{t-1}) - q(.|x^{t-1}), 0\}` with a further fresh uniform (the
    target row there if that residual is identically zero, counted in
    ``diagnostics["residual_fallbacks"]``); if all L are accepted draw the bonus
    :math:`Z \sim p(.|x^L)`.

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B, L] (acceptance) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index = 0``. Complexity O(B L) for the decisions plus O(B V) for the draw.

    References
    ----------
    Leviathan et al. 2023, arXiv 2211.17192, Algorithm 1; Chen et al. 2023,
    arXiv 2302.01318, Algorithm 2; THEORY.md section 3; reference
    :class:`spectr_gbv.reference.SpeculativeDecodingVerifier`.
    """
    B, L = inputs.B, inputs.L
    accept = uniforms(B, L) < sd_acceptance_probs(inputs)
    tau = torch.cumprod(accept.to(torch.int64), dim=1).sum(1)
    b = batch_arange(tau)
    t = tau.clamp_max(L - 1)
    p_row = inputs.target_probs[b, 0, tau]
    resid = (p_row - inputs.draft_probs[b, 0, t]).clamp_min(0)
    resid, used = residual_or_fallback(resid, p_row)
    done = tau == L
    law = torch.where(done.unsqueeze(-1), p_row, resid)
    z = sample_categorical(law, uniforms(B))
    index = torch.zeros_like(tau)
    tokens = assemble(inputs.drafts, index, tau, z)
    return VerifyOutput(tokens, tau, index, {"residual_fallbacks": count(used & ~done)})
