r"""Optimal single-step multi-draft verification kernel, node by node on the draft tree.

The batched float64 counterpart of :class:`spectr_gbv.reference.OptimalMultiDraftVerifier`
(read :mod:`spectr_gbv.reference.optimal_multidraft` for the algorithm and its proof sketch).
At a node with target p, draft q, the c drafts through it and the set S of their next tokens:

1. :math:`a^*`, the greedy vertex (support tokens in id order) of the box-truncated coverage
   polymatroid :math:`f'(X) = \min_{Y \subseteq X}[g(q(Y)) + p(X \setminus Y)]`,
   :math:`g(x) = 1 - (1 - x)^c`;
2. d: raise :math:`a^*` coordinate by coordinate (id order) to a base of
   :math:`f = g \circ q`;
3. peel d into priority orders :math:`\sigma` (tokens by d/q descending) with Dinkelbach
   iterations for the largest peel weight;

then select y in S with probability the weight of the orders whose first token of S is y,
accept it with probability :math:`\min\{1, p(y)/d(y)\}`, else draw
:math:`Z \sim \mathrm{normalize}(\max\{p - d, 0\})`.

Float64 and exact ties. The reference breaks ties of its sorts by token id on exact rational
ratios. In float64 an exact tie (equal rows, zero entries, symmetric instances, remainders of
a peel) may round either way, so every sort whose *order* is part of the result (the priority
orders of step 3) groups sorted ratios into ties when consecutive ones differ by at most
:data:`TIE_RTOL` times ``max(|r|, 1)`` (relative, with an absolute floor for ratios below 1;
chained), then orders each group by token id. The sorts inside the set minimisations of steps
1-3 need no tolerance (their minimum value does not depend on the order within a tie). The
exact decisions "vertex reached" and "Dinkelbach minimum = 0" use :data:`VERTEX_ATOL` and
:data:`DINKELBACH_ATOL`. Tokens with q = 0 are outside the support and never in an order.
c = 1 gives d = q and one order (speculative sampling). The tolerances of step 3 apply to the
un-normalised remainder (divided by the weight still to peel), since renormalising the
remainder amplifies its rounding by the same factor.

Losslessness in floating point. Acceptance and residual use the law the mixture actually
realises, :math:`\sum_i w_i v_{\sigma_i}` (``NodeRule.d``), not the base built in step 2,
so the kernel stays lossless even where the float peel does not close (counted in
``peel_fallbacks``: the remaining weight then goes to the current order, which costs
acceptance, never correctness). Measured on peaked softmax rows (bench/kernel_overhead.py's
rows, c = 4): acceptance within 1e-10 of OPT at V = 16, 1e-8 at V = 64, 3e-7 at V = 256; on the
small rational nodes of the tests, d and every order weight within 1e-12 of the exact reference.

The rule is the point-mass case of :func:`spectr_gbv.gpu.kernels.coverage.mixture_node_rule`
(the node rule over a law of the number of drafts, shared with ``near_opt_bv``); the names
below (:class:`NodeRule`, the tolerances) are re-exported from there.

Complexity per node with n = #supp(q) <= V: step 1 is O(n^2) (prefix sums of n prefixes,
chunked), step 2 one sorted prefix minimum per token not yet in a tight set (O(R n log n), R
raised tokens), step 3 P peels of 1 + D sorts each (D Dinkelbach iterations, in practice 2-4;
P <= n, measured 25-45 on softmax rows up to V = 4096), O(n^3 log n) in the worst case. The
loops over steps are Python loops, each a batched torch op over the rows that still need it;
draft laws truncated by top-k/top-p keep n small. Only rows with c >= 2 run the rule (c = 1 is
speculative sampling).
"""

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
    take,
)
from spectr_gbv.gpu.kernels.coverage import (
    DINKELBACH_ATOL,
    TIE_RTOL,
    VERTEX_ATOL,
    NodeRule,
    mixture_node_rule,
)


def optimal_node_rule(
    p: torch.Tensor,
    q: torch.Tensor,
    c: torch.Tensor,
    drafted: torch.Tensor | None = None,
    *,
    keep_orders: bool = False,
    priority: str = "id",
) -> NodeRule:
    r"""The optimal selection law d and its priority-order mixture at N nodes at once (float64).

    .. math::
        \sum_y \min\{p(y), d(y)\} = \min_A [p(A) + 1 - G(q(A))], \qquad
        d = \sum_i w_i v_{\sigma_i}, \quad v_\sigma(y) = G(q(H) + q(y)) - G(q(H)),

    :math:`G(x) = 1 - (1 - x)^c` for c drafts (or :math:`\sum_m \pi(m) [1 - (1 - x)^m]` for a
    count law).

    Parameters
    ----------
    p, q : Tensor, float [N, V]
        Target and draft laws at the nodes (computed in float64; rows used as given, callers
        renormalise; p may be a sub-probability).
    c : Tensor
        Drafts through each node: int64 [N] (>= 1), or a count law float64 [N, M] with
        ``c[:, m - 1] = P(M = m)`` (or a :class:`~spectr_gbv.gpu.kernels.node_laws.CountLaw`).
    drafted : Tensor, bool [N, V], optional
        The drafted set S of each node (inside the support of q); fills ``top``.
    keep_orders : bool
        Also return the orders (memory N (n+1) n).
    priority : str
        ``"id"`` (this kernel's rule) or ``"ratio"``
        (:func:`~spectr_gbv.gpu.kernels.coverage.mixture_node_rule`).

    Returns
    -------
    NodeRule
        ``d`` [N, V], ``weights`` [N, P], ``top`` [N, P], ``orders`` [N, P, n] or None.

    Raises
    ------
    ValueError
        Unknown ``priority`` or ``c`` of another shape.

    References
    ----------
    :func:`spectr_gbv.reference.optimal_multidraft.node_rule` (the exact rule this matches,
    ties as described in the module docstring); Fujishige, "Submodular functions and
    optimization", 2005 (polymatroid greedy vertices); Dinkelbach, "On nonlinear fractional
    programming", Management Science 13(7), 1967.
    """
    return mixture_node_rule(p, q, c, drafted, priority=priority, keep_orders=keep_orders)


def verify_optimal_multidraft(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    r"""Optimal single-step multi-draft verification on the draft tree (greedy lift to L >= 2).

    At the node u (depth t) with the c drafts through it (rows read from the lowest-index
    one), :math:`p = p(.|u)` and :math:`q = q(.|u)` renormalised in float64, and the set S of
    their next tokens: build d and its priority-order mixture (:func:`optimal_node_rule`;
    d = q when c = 1), select the order by a fresh uniform and y = its first token in S, accept
    y when :math:`u < \min\{1, p(y)/d(y)\}`; on acceptance move to the child, where all drafts
    carrying y continue; otherwise draw :math:`Z \sim \mathrm{normalize}(\max\{p - d, 0\})`
    (the target row when identically zero, counted). After L accepted tokens draw the bonus
    :math:`Z \sim p(.|x^L)`. At L = 1 the expected accepted count is OPT(K)
    (:func:`spectr_gbv.theory.bounds.l1_optimum`).

    Parameters
    ----------
    inputs : KernelInputs
        Rows of drafts sharing a prefix must agree there (the lowest-index draft's are read).
    uniforms : UniformSource
        Draws [B] twice per depth (selection, acceptance; 2L draws) then [B] (final token).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the lowest-index draft through the final node (0 when tau = 0).
        ``diagnostics``: ``residual_fallbacks`` and ``peel_fallbacks`` (rows whose peel did
        not close within tolerance; :class:`NodeRule`). Complexity: the module docstring, per
        node with c >= 2 reached by the walk (at most B per depth), O(n^3 log n) worst case
        with n = #supp(q) <= V, plus O(B K + B V) per depth.

    References
    ----------
    Hu et al. 2025, "Towards optimal multi-draft speculative decoding", arXiv 2502.18779 (the
    optimum's value); Khisti et al. 2024, arXiv 2410.18234 (selection then speculative
    sampling); THEORY.md section 5; reference
    :class:`spectr_gbv.reference.OptimalMultiDraftVerifier` (the construction).
    """
    B, K, L, V = inputs.B, inputs.K, inputs.L, inputs.V
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    b = batch_arange(drafts)
    active = torch.ones(B, K, dtype=torch.bool, device=device)
    alive = torch.ones(B, dtype=torch.bool, device=device)
    tau = torch.zeros(B, dtype=torch.int64, device=device)
    final = torch.zeros(B, V, dtype=torch.float64, device=device)
    fallbacks = torch.zeros((), dtype=torch.int64, device=device)
    peel_fallbacks = torch.zeros((), dtype=torch.int64, device=device)
    for t in range(L):
        j0 = first_true(active)
        p = p_all[b, j0, t].to(torch.float64)
        q = q_all[b, j0, t].to(torch.float64)
        p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
        tok = drafts[:, :, t]
        c = active.sum(-1)
        u_select, u_accept = uniforms(B), uniforms(B)
        y = tok[b, j0]  # c = 1: the only drafted token, d = q
        d = q.clone()
        idx = (alive & (c > 1)).nonzero().squeeze(-1)
        if idx.numel():
            hits = torch.zeros(idx.numel(), V, dtype=torch.int64, device=device)
            drafted = hits.scatter_add_(1, tok[idx], active[idx].to(torch.int64)) > 0
            rule = optimal_node_rule(p[idx], q[idx], c[idx], drafted)
            pick = sample_categorical(rule.weights, u_select[idx])
            y[idx] = rule.top.gather(1, pick.unsqueeze(-1)).squeeze(-1)
            d[idx] = rule.d
            peel_fallbacks = peel_fallbacks + rule.peel_fallbacks
        d_y, p_y = take(d, y), take(p, y)
        accept = torch.where(d_y > 0, p_y / torch.where(d_y > 0, d_y, 1.0), 1.0).clamp_max(1.0)
        accepted = alive & (u_accept < accept)
        stop = alive & ~accepted
        resid, used = residual_or_fallback((p - d).clamp_min(0.0), p)
        final = torch.where(stop.unsqueeze(-1), resid, final)
        fallbacks = fallbacks + count(used & stop)
        tau = torch.where(accepted, tau + 1, tau)
        alive = accepted
        active = torch.where(alive.unsqueeze(-1), active & (tok == y.unsqueeze(-1)), active)
    j0 = first_true(active)
    law = torch.where(alive.unsqueeze(-1), p_all[b, j0, L].to(torch.float64), final)
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(drafts, j0, tau, z)
    return VerifyOutput(tokens, tau, j0, {"residual_fallbacks": fallbacks, "peel_fallbacks": peel_fallbacks})


__all__ = [
    "DINKELBACH_ATOL",
    "TIE_RTOL",
    "VERTEX_ATOL",
    "NodeRule",
    "optimal_node_rule",
    "verify_optimal_multidraft",
]
