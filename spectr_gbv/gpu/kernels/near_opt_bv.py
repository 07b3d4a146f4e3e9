r"""``near_opt_bv`` kernel: select one draft path with BV-weighted optimal node rules, then block-verify it.

The batched float64 counterpart of :class:`spectr_gbv.reference.NearOptBlockVerifier` (read
:mod:`spectr_gbv.reference.near_opt_bv` for the construction and its proof). Per batch row,
walk down the trie of the K drafts for t = 0..L-1, at the node u of the path so far (rows read
from the lowest-index draft through it, p and q renormalised in float64):

* :math:`\pi_t`: the law of the number of drafts through u given that the walk selects it
  (float64 [B, K], ``pi[:, m - 1]``; :math:`\pi_0 = \delta_K`);
* :math:`w_t`: block verification's running weight (:math:`w_0 = 1`,
  :math:`w_{t+1} = \min\{1, w_t\, p(y)/d_t(y)\}`);
* the node rule :func:`~spectr_gbv.gpu.kernels.coverage.mixture_node_rule` with target
  :math:`w_t\, p`, draft law q, counts :math:`\pi_t` and the ``"ratio"`` priority: the law
  :math:`d_t` and its priority-order mixture; one fresh uniform picks an order by its weight
  and y = its first drafted token (drafts carrying y continue); a law with all its mass on
  m = 1 gives d = q (one draft: speculative sampling's law, no rule is built);
* the count update :math:`\pi_{t+1}(m') \propto \sum_m \pi_t(m) \sum_i \lambda_i \binom{m}{m'}
  q(y)^{m'} R_i^{m - m'}`, :math:`R_i` the q-mass after y in order i (from the moments
  :math:`\sum_i \lambda_i R_i^j`, j < K).

Then block verification (Sun et al. 2024, Algorithm 2; :mod:`spectr_gbv.gpu.kernels.block`)
of the selected path against p with draft rows :math:`d_0..d_{L-1}`. The rows d are the laws
the float mixtures realise (:class:`~spectr_gbv.gpu.kernels.coverage.NodeRule`), which is the
law the path is selected with, so the kernel is lossless whatever the peel's rounding.

Complexity per depth: one node rule per row whose count law is not :math:`\delta_1`
(module :mod:`spectr_gbv.gpu.kernels.coverage`: O(S n log n) for step 1, one sorted prefix
minimum per raised token, P peels of 1 + D sorts, n = #supp(q) <= V, S <= K), plus
O(B (P K + K^2 + V)); the block verification is O(B L V).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

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
)
from spectr_gbv.gpu.kernels.coverage import mixture_node_rule


def child_count_law(pi: torch.Tensor, weights: torch.Tensor, after: torch.Tensor, q_y: torch.Tensor) -> torch.Tensor:
    r"""Normalised law of the number of drafts through the child y: :math:`\pi_{t+1}`.

    .. math::
        \pi_{t+1}(m') \propto \sum_{m \ge m'} \pi_t(m) \binom{m}{m'} q(y)^{m'}
        \sum_i \lambda_i R_i^{m - m'}

    (:func:`spectr_gbv.reference.near_opt_bv.child_counts` summed over m).

    Parameters
    ----------
    pi : Tensor, float64 [N, K]
        ``pi[:, m - 1]`` = :math:`\pi_t(m)`.
    weights : Tensor, float64 [N, P]
        Order weights :math:`\lambda_i` (unused columns 0).
    after : Tensor, float64 [N, P]
        q-mass :math:`R_i` of the tokens after y in order i.
    q_y : Tensor, float64 [N]

    Returns
    -------
    Tensor, float64 [N, K]
        Rows summing to 1 (their unnormalised total is :math:`d(y)` under :math:`\pi_t`).
    """
    N, K = pi.shape
    j = torch.arange(K, dtype=torch.float64, device=pi.device)
    moments = (weights.unsqueeze(-1) * torch.pow(after.unsqueeze(-1), j)).sum(1)  # [N, K]: sum_i w_i R_i^j
    new = torch.zeros_like(pi)
    for mp in range(1, K + 1):
        acc = torch.zeros(N, dtype=torch.float64, device=pi.device)
        for m in range(mp, K + 1):
            acc = acc + pi[:, m - 1] * math.comb(m, mp) * moments[:, m - mp]
        new[:, mp - 1] = acc * torch.pow(q_y, mp)
    total = new.sum(-1, keepdim=True)
    return torch.where(total > 0, new / torch.where(total > 0, total, 1.0), pi)


@dataclass(frozen=True)
class SelectedPath:
    """The path the walk selects in each batch row, with its node rules.

    Attributes
    ----------
    draft_index : Tensor, int64 [B]
        Lowest-index draft carrying the selected path.
    rows : Tensor, float64 [B, L, V]
        :math:`d_t = r(.|x^t)` along the path (the law each token of the path was selected with).
    peel_fallbacks : Tensor, int64 0-d
        Summed over the node rules (:class:`~spectr_gbv.gpu.kernels.coverage.NodeRule`).
    """

    draft_index: torch.Tensor
    rows: torch.Tensor
    peel_fallbacks: torch.Tensor


def select_path(inputs: KernelInputs, uniforms: UniformSource) -> SelectedPath:
    r"""Walk down the draft trie with the BV-weighted node rules (module docstring).

    Parameters
    ----------
    inputs : KernelInputs
    uniforms : UniformSource
        Draws [B] once per depth (L draws): the order of each node's mixture.

    Returns
    -------
    SelectedPath
        Its ``rows`` equal :func:`spectr_gbv.reference.near_opt_bv.path_rules` ``.d`` of the
        selected draft (within ~1e-12 on small rational nodes).
    """
    B, K, L, V = inputs.B, inputs.K, inputs.L, inputs.V
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    b = batch_arange(drafts)
    active = torch.ones(B, K, dtype=torch.bool, device=device)
    pi = torch.zeros(B, K, dtype=torch.float64, device=device)
    pi[:, K - 1] = 1.0
    w = torch.ones(B, dtype=torch.float64, device=device)
    rows_d = torch.zeros(B, L, V, dtype=torch.float64, device=device)
    peel_fallbacks = torch.zeros((), dtype=torch.int64, device=device)
    for t in range(L):
        j0 = first_true(active)
        p = p_all[b, j0, t].to(torch.float64)
        q = q_all[b, j0, t].to(torch.float64)
        p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
        tok = drafts[:, :, t]
        u_select = uniforms(B)
        y = tok[b, j0]  # law delta_1: the only drafted token, d = q
        d = q.clone()
        idx = (pi[:, 1:] > 0).any(-1).nonzero().squeeze(-1)
        if idx.numel():
            act, ti = active[idx], tok[idx]
            hits = torch.zeros(idx.numel(), V, dtype=torch.int64, device=device)
            drafted = hits.scatter_add_(1, ti, act.to(torch.int64)) > 0
            marked = torch.where(act, ti, y[idx].unsqueeze(-1))  # inactive slots: a drafted token
            rule = mixture_node_rule(
                w[idx].unsqueeze(-1) * p[idx], q[idx], pi[idx], drafted, marked=marked, priority="ratio"
            )
            pick = sample_categorical(rule.weights, u_select[idx])
            yi = rule.top.gather(1, pick.unsqueeze(-1)).squeeze(-1)
            y[idx] = yi
            d[idx] = rule.d
            peel_fallbacks = peel_fallbacks + rule.peel_fallbacks
            after_all = rule.after if rule.after is not None else torch.zeros_like(rule.weights).unsqueeze(-1)
            slot = first_true(act & (ti == yi.unsqueeze(-1)))
            after = after_all.gather(2, slot.view(-1, 1, 1).expand(-1, after_all.shape[1], 1)).squeeze(-1)
            pi[idx] = child_count_law(pi[idx], rule.weights, after, take(q[idx], yi))
        d_y, p_y = take(d, y), take(p, y)
        w = torch.where(d_y > 0, w * p_y / torch.where(d_y > 0, d_y, 1.0), 1.0).clamp_max(1.0)
        rows_d[:, t] = d
        active = active & (tok == y.unsqueeze(-1))
    return SelectedPath(first_true(active), rows_d, peel_fallbacks)


def verify_near_opt_bv(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Near-optimal multi-draft block verification: BV-weighted path selection, then BV (module docstring).

    Parameters
    ----------
    inputs : KernelInputs
        Rows of drafts sharing a prefix must agree there (the lowest-index draft's are read).
    uniforms : UniformSource
        Draws [B] once per depth (the order of each node's mixture; L draws, :func:`select_path`),
        then [B, L] (block verification's eta) and [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the lowest-index draft carrying the selected path. ``diagnostics``:
        ``residual_fallbacks`` (identically-zero BV residual: target row used) and
        ``peel_fallbacks`` (:class:`~spectr_gbv.gpu.kernels.coverage.NodeRule`). K = 1 is BV
        (d = q); at L = 1 the expected accepted count is OPT(K). Complexity: module docstring.

    References
    ----------
    Reference :class:`spectr_gbv.reference.NearOptBlockVerifier` (issue 18 of this project,
    ``docs/near_opt_bv.md``); Sun et al. 2024, "Block verification accelerates speculative
    decoding", arXiv 2403.10444, Algorithm 2; Hu et al. 2025, arXiv 2502.18779 (the single-step
    optimum reached at L = 1).
    """
    B, L = inputs.B, inputs.L
    sel = select_path(inputs, uniforms)
    b = batch_arange(inputs.drafts)
    k = sel.draft_index
    path = inputs.drafts[b, k]  # [B, L]
    p_path = inputs.target_probs[b, k].to(torch.float64)
    p_path = p_path / p_path.sum(-1, keepdim=True)  # [B, L + 1, V]
    weights = block_weights(path, p_path[:, 0], p_path[:, :L], sel.rows)
    end = block_stop(weights, uniforms(B, L))
    law, used = block_next_law(weights, end, p_path[:, 0], p_path[:, :L], sel.rows, p_path[:, L])
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(inputs.drafts, k, end, z)
    return VerifyOutput(tokens, end, k, {"residual_fallbacks": count(used), "peel_fallbacks": sel.peel_fallbacks})


__all__ = ["SelectedPath", "child_count_law", "select_path", "verify_near_opt_bv"]
