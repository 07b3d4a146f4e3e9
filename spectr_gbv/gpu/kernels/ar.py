"""Autoregressive baseline kernel: ignore the drafts, emit one token from the target."""

from __future__ import annotations

import torch

from spectr_gbv.gpu.kernels.common import KernelInputs, UniformSource, VerifyOutput, sample_categorical


def verify_ar(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Plain autoregressive sampling: :math:`Z \sim p(.|\emptyset)` = ``target_probs[:, 0, 0]``.

    Parameters
    ----------
    inputs : KernelInputs
        ``L = 0`` is allowed (drafts [B, K, 0]); the drafts are never read.
    uniforms : UniformSource
        One [B] draw.

    Returns
    -------
    VerifyOutput
        ``tokens`` [B, L+1] = (Z, -1, ..), ``num_accepted = 0``, ``draft_index = 0``.

    References
    ----------
    THEORY.md sections 2 and 6 (AR); reference :class:`spectr_gbv.reference.AutoregressiveVerifier`.
    """
    B, L, device = inputs.B, inputs.L, inputs.device
    z = sample_categorical(inputs.target_probs[:, 0, 0], uniforms(B))
    tokens = torch.full((B, L + 1), -1, dtype=torch.int64, device=device)
    tokens[:, 0] = z
    zeros = torch.zeros(B, dtype=torch.int64, device=device)
    return VerifyOutput(tokens, zeros, zeros.clone(), {"residual_fallbacks": zeros.sum()})
