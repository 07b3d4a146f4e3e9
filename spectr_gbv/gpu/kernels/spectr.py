r"""SpecTr kernel: K-SEQ optimal-transport verification node by node on the draft tree."""

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
    residual_or_fallback,
    sample_categorical,
)
from spectr_gbv.gpu.kernels.kseq import kseq_residual, kseq_rho


def prefix_equal(drafts: torch.Tensor) -> torch.Tensor:
    """``eq[b, j, k, t]``: drafts j and k of row b agree on their first t tokens.

    Parameters
    ----------
    drafts : Tensor, int64 [B, K, L]

    Returns
    -------
    Tensor, bool [B, K, K, L+1] (``t = 0`` is always True).
    """
    same = drafts.unsqueeze(2) == drafts.unsqueeze(1)  # [B, K, K, L]
    ones = torch.ones(same.shape[:3] + (1,), dtype=torch.bool, device=drafts.device)
    return torch.cat([ones, torch.cumprod(same.to(torch.int8), dim=-1).bool()], dim=-1)


def node_counts(drafts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Number of drafts through the node ``X^(b,k)_{1:t}`` and whether k is the first of them.

    Parameters
    ----------
    drafts : Tensor, int64 [B, K, L]

    Returns
    -------
    counts : Tensor, int64 [B, K, L]
        For t = 0..L-1.
    first : Tensor, bool [B, K, L]
        No draft of lower index shares the prefix ``X^(b,k)_{1:t}``.
    """
    K, L = drafts.shape[1], drafts.shape[2]
    eq = prefix_equal(drafts)[..., :L]  # [B, K', K, L]
    lower = torch.ones(K, K, dtype=torch.bool, device=drafts.device).tril(-1).T  # k' < k
    first = ~(eq & lower.unsqueeze(0).unsqueeze(-1)).any(1)
    return eq.sum(1, dtype=torch.int64), first


def spectr_rho(inputs: KernelInputs) -> torch.Tensor:
    """K-SEQ rho at every node ``X^(b,k)_{1:t}`` of the draft tree that the walk can read.

    Only nodes where k is the lowest-index draft through the node and at least two drafts pass
    through it are solved (compacted with one ``nonzero``, a host sync on CUDA); rho = 1
    elsewhere (one draft: K-SEQ is speculative sampling).

    Parameters
    ----------
    inputs : KernelInputs

    Returns
    -------
    Tensor, float64 [B, K, L]
        rho with k = the number of drafts through the node.
    """
    counts, first = node_counts(inputs.drafts)
    rho = torch.ones(counts.shape, dtype=torch.float64, device=counts.device)
    bi, ki, ti = ((counts > 1) & first).nonzero(as_tuple=True)
    if bi.numel():
        p = inputs.target_probs[bi, ki, ti]
        q = inputs.draft_probs[bi, ki, ti]
        rho[bi, ki, ti] = kseq_rho(p, q, counts[bi, ki, ti])
    return rho


def verify_spectr(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""SpecTr K-SEQ on the draft tree (THEORY.md section 6).

    At the node u (depth t) with the k drafts through it (index order), p = p(.|u),
    q = q(.|u) and rho = :func:`~spectr_gbv.gpu.kernels.kseq.kseq_rho`: try the drafts in
    order, accepting draft j's token :math:`x_j` when :math:`u_j < \min\{1, p(x_j)/(\rho q(x_j))\}`
    (fresh uniform each); on acceptance move to the child, where all drafts carrying that token
    continue; if none is accepted draw
    :math:`Z \sim \max\{p - \min\{p/\rho, q\}(1 - (1-\beta)^k)/\beta, 0\}` (target row when
    identically zero, counted). After L accepted tokens draw the bonus :math:`Z \sim p(.|x^L)`.
    The rows read at a node are those of the lowest-index draft through it (rows of drafts
    sharing a prefix are assumed equal, as the reference layer requires).

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B, K] per depth (L draws) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the lowest-index draft through the final node (0 when tau = 0).
        Complexity: rho for the N' distinct shared nodes at once, O(N' V log V) (one sort
        each; N' <= B K L, typically a few per row); the walk is O(B K) per depth; one final
        O(B V) residual.

    References
    ----------
    Sun et al. 2023, "SpecTr: fast speculative decoding via optimal transport",
    arXiv 2310.15141, K-SEQ and its draft-tree extension; THEORY.md section 6; reference
    :class:`spectr_gbv.reference.SpecTrVerifier`.
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    b = batch_arange(drafts)
    rho_all = spectr_rho(inputs)
    active = torch.ones(B, K, dtype=torch.bool, device=device)
    alive = torch.ones(B, dtype=torch.bool, device=device)
    tau = torch.zeros(B, dtype=torch.int64, device=device)
    for t in range(L):
        j0 = first_true(active)
        tok = drafts[:, :, t]
        rho = rho_all[b, j0, t]
        p_x = p_all[b.unsqueeze(-1), j0.unsqueeze(-1), t, tok].to(torch.float64)  # [B, K]
        q_x = q_all[b.unsqueeze(-1), j0.unsqueeze(-1), t, tok].to(torch.float64)
        den = rho.unsqueeze(-1) * q_x
        ratio = torch.where(den > 0, p_x / torch.where(den > 0, den, 1.0), (p_x > 0).to(torch.float64))
        succ = active & (uniforms(B, K) < ratio.clamp_max(1.0))
        hit = succ.any(-1) & alive
        token = tok[b, first_true(succ)]
        tau = torch.where(hit, tau + 1, tau)
        alive = hit
        active = torch.where(alive.unsqueeze(-1), active & (tok == token.unsqueeze(-1)), active)
    j0 = first_true(active)
    t = tau.clamp_max(L - 1)
    p_row = p_all[b, j0, tau]
    k = active.sum(-1)
    resid = kseq_residual(p_row, q_all[b, j0, t], k, rho_all[b, j0, t], K)
    resid, used = residual_or_fallback(resid, p_row)
    law = torch.where(alive.unsqueeze(-1), p_row, resid)
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(drafts, j0, tau, z)
    return VerifyOutput(tokens, tau, j0, {"residual_fallbacks": count(used & ~alive)})
