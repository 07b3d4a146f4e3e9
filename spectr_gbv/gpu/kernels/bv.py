r"""Block verification kernel (Sun et al. 2024, Algorithm 2) on draft 0."""

from __future__ import annotations

import torch

from spectr_gbv.gpu.kernels.block import BlockWeightsT, block_next_law, block_stop, block_weights
from spectr_gbv.gpu.kernels.common import (
    KernelInputs,
    UniformSource,
    VerifyOutput,
    assemble,
    count,
    sample_categorical,
)


def bv_weights(inputs: KernelInputs) -> BlockWeightsT:
    r"""Block-verification weights :math:`w_i` and :math:`h_i` of draft 0, per batch row.

    Parameters
    ----------
    inputs : KernelInputs

    Returns
    -------
    BlockWeightsT
        ``w`` float64 [B, L] (:math:`w_1..w_L`), ``h`` float64 [B, L] (:math:`h_1..h_L`),
        equal to :func:`spectr_gbv.reference.kernels.block_weights` (float64) within rounding.

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, Algorithm 2; THEORY.md section 3.
    """
    L = inputs.L
    p = inputs.target_probs[:, 0]
    return block_weights(inputs.drafts[:, 0], p[:, 0], p[:, :L], inputs.draft_probs[:, 0])


def verify_bv(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Block verification of draft 0 (drafts 1..K-1 are ignored).

    :math:`\tau = \max\{i : \eta_i < h_i\}` over L fresh uniforms (the scan does not stop at a
    failure); :math:`Z \sim p(.|x^L)` if :math:`\tau = L`, else
    :math:`Z \sim \max\{w_\tau p(.|x^\tau) - q(.|x^\tau), 0\}` (target row when identically
    zero, counted in ``diagnostics["residual_fallbacks"]``). Weights in log space
    (:mod:`spectr_gbv.gpu.kernels.block`), so L = 64 does not underflow.

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B, L] (eta) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index = 0``. Complexity O(B L V).

    References
    ----------
    Sun et al. 2024, "Block verification accelerates speculative decoding", arXiv 2403.10444,
    Algorithm 2; THEORY.md section 3; reference :class:`spectr_gbv.reference.BlockVerifier`.
    """
    B, L = inputs.B, inputs.L
    p, q = inputs.target_probs[:, 0], inputs.draft_probs[:, 0]
    weights = bv_weights(inputs)
    end = block_stop(weights, uniforms(B, L))
    law, used = block_next_law(weights, end, p[:, 0], p[:, :L], q, p[:, L])
    z = sample_categorical(law, uniforms(B))
    index = torch.zeros_like(end)
    tokens = assemble(inputs.drafts, index, end, z)
    return VerifyOutput(tokens, end, index, {"residual_fallbacks": count(used)})
