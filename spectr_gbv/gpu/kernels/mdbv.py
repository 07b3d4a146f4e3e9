r"""MDBV kernel: this project's stateless multi-draft block verification (THEORY.md section 6)."""

from __future__ import annotations

import torch

from spectr_gbv.gpu.kernels.block import block_next_law, block_stop, block_weights
from spectr_gbv.gpu.kernels.common import (
    KernelInputs,
    UniformSource,
    VerifyOutput,
    assemble,
    batch_arange,
    count,
    sample_categorical,
)


def continues(x: torch.Tensor, prefix: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Whether draft rows ``x`` [N, L] start with the accepted prefix: ``prefix[:, :a]`` (int64 [N, L], a [N]).

    MDBV verifies draft k only where it agrees with the draft the accepted prefix came from on
    its first a tokens (Lin et al. 2026, Step 2; THEORY.md section 6). Returns bool [N].
    """
    positions = torch.arange(x.shape[-1], device=x.device)
    return ((x == prefix) | (positions >= a.unsqueeze(-1))).all(-1)


def verify_mdbv(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Multi-draft block verification: block verification draft after draft, each continuing the last.

    Per row keep an accepted prefix P (length ``a``, initially empty) and the law R of the
    target token at position ``a + 1`` (:math:`p(.|\emptyset)`). For k = 0..K-1 in order: skip
    draft k unless it starts with P (or P already has length L); else run block verification
    on its tokens :math:`x_{a+1..L}` against the target whose first conditional is R and later
    ones p (:mod:`spectr_gbv.gpu.kernels.block`), extend P by the accepted tokens and set R to
    the normalised residual at the stop (:math:`p(.|P)` if accepted to L). Finally
    :math:`Z \sim R`. K = 1 is BV; L = 1 is recursive rejection sampling.

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B, L] per draft (eta; K draws) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the last draft that ran block verification in the row (it starts
        with P, so its first tau tokens are the accepted prefix; draft 0 always runs, so the
        index is 0 only when no later draft started with P). ``diagnostics["residual_fallbacks"]``
        counts (row, draft) pairs whose residual was identically zero. Complexity O(B K L V):
        a Python loop over K, each step batched over B (rows that skip draft k compute and
        discard its weights).

    References
    ----------
    Lin et al. 2026, SpecTr-GBV, arXiv 2604.25925, Steps 1-3 (lossless reading of this
    project); Sun et al. 2024, arXiv 2403.10444, Algorithm 2; THEORY.md section 6; reference
    :class:`spectr_gbv.reference.MultiDraftBlockVerifier`.
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    b = batch_arange(drafts)
    a = torch.zeros(B, dtype=torch.int64, device=device)
    src = torch.zeros(B, dtype=torch.int64, device=device)
    law = p_all[:, 0, 0]
    fallbacks = torch.zeros((), dtype=torch.int64, device=device)
    for k in range(K):
        x = drafts[:, k]
        active = continues(x, drafts[b, src], a) & (a < L)
        start = a.clamp_max(L - 1)
        p, q = p_all[:, k], q_all[:, k]
        weights = block_weights(x, law, p[:, :L], q, start)
        end = block_stop(weights, uniforms(B, L), start)
        nxt, used = block_next_law(weights, end, law, p[:, :L], q, p[:, L], start)
        nxt = torch.where((end == L).unsqueeze(-1), nxt, nxt / nxt.sum(-1, keepdim=True))
        law = torch.where(active.unsqueeze(-1), nxt, law)
        a = torch.where(active, end, a)
        src = torch.where(active, torch.full_like(src, k), src)
        fallbacks = fallbacks + count(used & active)
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(drafts, src, a, z)
    return VerifyOutput(tokens, a, src, {"residual_fallbacks": fallbacks})
