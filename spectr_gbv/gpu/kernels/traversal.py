r"""Traversal verification kernel (Weng et al. 2025) on the trie of the K drafts, batched."""

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


def first_through(drafts: torch.Tensor) -> torch.Tensor:
    """Lowest index of a draft sharing each draft's prefix: the trie node's identity.

    Parameters
    ----------
    drafts : Tensor, int64 [B, K, L]

    Returns
    -------
    Tensor, int64 [B, K, L]
        ``f[b, k, t]`` = the smallest j with ``drafts[b, j, :t+1] == drafts[b, k, :t+1]``
        (so ``f <= k``); two drafts are in the same node of depth t + 1 iff their f agree.
    """
    same = drafts.unsqueeze(2) == drafts.unsqueeze(1)  # [B, K, J, L]
    prefix = torch.cumprod(same.to(torch.int64), dim=-1).bool()
    return torch.argmax(prefix.to(torch.int8), dim=2)  # first j (self always matches)


def post_order(first: torch.Tensor) -> torch.Tensor:
    """Draft order of a post-order DFS of the trie, children in first-appearance order.

    Parameters
    ----------
    first : Tensor, int64 [B, K, L]
        From :func:`first_through`.

    Returns
    -------
    Tensor, int64 [B, K]
        Drafts sorted lexicographically by ``(f[.., 0], .., f[.., L-1])`` (stable sorts from
        the last key to the first); the leaves of the trie in traversal order, duplicates
        adjacent.
    """
    B, K, L = first.shape
    order = torch.arange(K, device=first.device).expand(B, K).contiguous()
    for t in range(L - 1, -1, -1):
        key = first[:, :, t].gather(1, order)
        perm = torch.sort(key, dim=1, stable=True).indices
        order = order.gather(1, perm)
    return order


def verify_traversal(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Traversal verification on the trie of the drafts (leaf to root, sequence-level).

    The tree is the trie of distinct draft prefixes, children ordered by first appearance
    in draft order, :math:`M_s = q(.|u)` at every node (the reference's mapping,
    :class:`spectr_gbv.reference.TraversalVerifier`). Post-order DFS: a child c of u enters
    with :math:`w_c = \min\{1, w_u M_b^u(c)/M_s^u(c)\}` (:math:`w_{root} = 1`,
    :math:`M_b = p(.|u)`, :math:`M_s = q(.|u)` at first); a node is tested after all its
    children were rejected, accepting the path with probability :math:`w_u` (fresh uniform
    per node) and then :math:`Z \sim M_b^u` (:math:`p(.|x^L)` at a leaf). Rejecting c updates
    its parent u with :math:`d = \max\{w_u M_b^u - M_s^u, 0\}`, :math:`r = \sum d`:
    :math:`w_u \leftarrow r/(r + 1 - w_u)` (0 when the denominator is 0),
    :math:`M_b^u \leftarrow d/r`, :math:`M_s^u(c) \leftarrow 0`, renormalised. When every
    node is rejected :math:`Z \sim M_b^{root}` (the target row at the root when that residual
    is identically zero in floating point, counted in ``diagnostics["residual_fallbacks"]``).

    Batched form: the drafts are visited in post-order (:func:`post_order`); draft s opens
    its nodes below its common prefix with draft s - 1 and closes (tests) its nodes below its
    common prefix with draft s + 1, deepest first. Per row a stack of L + 1 node states
    (:math:`w`, :math:`M_b`, :math:`M_s`) in float64.

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B, K, L] (one per node test; node (s, t) of the post-order uses ``[:, s, t]``)
        then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the lowest-index draft through the accepted node (0 when tau = 0).
        ``diagnostics``: ``residual_fallbacks`` (rows that fell back at the root) and
        ``nodes_tested`` (node tests performed, all rows). Complexity O(B K L V) work in a
        loop of K (2 L) steps of [B, V] float64 operations, plus O(B K^2 L) for the trie;
        memory O(B L V).

    References
    ----------
    Weng et al. 2025, "Traversal Verification for Speculative Tree Decoding", NeurIPS 2025,
    arXiv 2505.12398, Algorithm 1; reference :class:`spectr_gbv.reference.TraversalVerifier`.
    """
    B, K, L = inputs.B, inputs.K, inputs.L
    drafts = inputs.drafts
    p_all = inputs.target_probs.to(torch.float64)
    q_all = inputs.draft_probs.to(torch.float64)
    device, V = drafts.device, inputs.V
    b = batch_arange(drafts)
    f64 = torch.float64

    first = first_through(drafts)
    order = post_order(first)
    sorted_drafts = drafts.gather(1, order.unsqueeze(-1).expand(B, K, L))  # [B, K, L]
    same_next = torch.cumprod((sorted_drafts[:, 1:] == sorted_drafts[:, :-1]).to(torch.int64), -1).sum(-1)
    zeros_b = torch.zeros(B, 1, dtype=torch.int64, device=device)
    lcp_prev = torch.cat([zeros_b, same_next], 1)  # [B, K]: common prefix with the previous draft
    lcp_next = torch.cat([same_next, zeros_b], 1)  # with the next draft (0 after the last)

    w = torch.zeros(B, L + 1, dtype=f64, device=device)
    w[:, 0] = 1.0
    m_b = torch.zeros(B, L + 1, V, dtype=f64, device=device)
    m_s = torch.zeros(B, L, V, dtype=f64, device=device)
    m_b[:, 0] = p_all[:, 0, 0]
    m_s[:, 0] = q_all[:, 0, 0]
    u = uniforms(B, K, L)
    alive = torch.ones(B, dtype=torch.bool, device=device)
    tau = torch.zeros(B, dtype=torch.int64, device=device)
    index = torch.zeros(B, dtype=torch.int64, device=device)
    law = torch.zeros(B, V, dtype=f64, device=device)
    tested = torch.zeros((), dtype=torch.int64, device=device)
    for s in range(K):
        k = order[:, s]
        x = sorted_drafts[:, s]  # [B, L]
        for t in range(1, L + 1):  # open the nodes of depth t below the shared prefix
            new = (t > lcp_prev[:, s]).unsqueeze(-1)
            tok = x[:, t - 1]
            q_tok = take(m_s[:, t - 1], tok)
            ratio = take(m_b[:, t - 1], tok) / torch.where(q_tok > 0, q_tok, 1.0)
            w_t = torch.where(q_tok > 0, (w[:, t - 1] * ratio).clamp_max(1.0), torch.zeros_like(ratio))
            w[:, t] = torch.where(new.squeeze(-1), w_t, w[:, t])
            m_b[:, t] = torch.where(new, p_all[b, k, t], m_b[:, t])
            if t < L:
                m_s[:, t] = torch.where(new, q_all[b, k, t], m_s[:, t])
        for t in range(L, 0, -1):  # close (test) the nodes of depth t below the next shared prefix
            closing = alive & (t > lcp_next[:, s])
            tested = tested + count(closing)
            acc = closing & (u[:, s, t - 1] < w[:, t])
            tau = torch.where(acc, t, tau)
            index = torch.where(acc, first[b, k, t - 1], index)
            law = torch.where(acc.unsqueeze(-1), m_b[:, t], law)
            alive = alive & ~acc
            rej = (closing & ~acc).unsqueeze(-1)
            parent_w = w[:, t - 1]
            d = (parent_w.unsqueeze(-1) * m_b[:, t - 1] - m_s[:, t - 1]).clamp_min(0.0)
            r = d.sum(-1)
            den = r + 1.0 - parent_w
            new_w = torch.where(den > 0, r / torch.where(den > 0, den, 1.0), torch.zeros_like(r))
            w[:, t - 1] = torch.where(rej.squeeze(-1), new_w, parent_w)
            m_b[:, t - 1] = torch.where(rej, d / torch.where(r > 0, r, 1.0).unsqueeze(-1), m_b[:, t - 1])
            removed = m_s[:, t - 1].scatter(1, x[:, t - 1 : t], 0.0)
            total = removed.sum(-1, keepdim=True)
            m_s[:, t - 1] = torch.where(rej, removed / torch.where(total > 0, total, 1.0), m_s[:, t - 1])
    root_law, used = residual_or_fallback(m_b[:, 0], p_all[:, 0, 0])
    law = torch.where(alive.unsqueeze(-1), root_law, law)
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(drafts, index, tau, z)
    return VerifyOutput(tokens, tau, index, {"residual_fallbacks": count(used & alive), "nodes_tested": tested})
