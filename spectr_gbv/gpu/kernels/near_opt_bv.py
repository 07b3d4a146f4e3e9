r"""``near_opt_bv`` kernel: select one draft by the largest of independent scores, then block-verify it.

The batched float64 counterpart of :class:`spectr_gbv.reference.NearOptBlockVerifier` (read
:mod:`spectr_gbv.reference.near_opt_bv` for the construction and its proof).

**Score selection** (``selection="score"``, the registered verifier; :func:`score_selection`).
Per batch row, over the trie of the K drafts (a node's rows read from the lowest-index draft
through it, p and q renormalised in float64), top-down by depth with every row's nodes of one
depth in one batch:

* the root's score law H is uniform on [0, 1] and its BV weight w = 1;
* at a drafted prefix u with law H and weight w, the node rule is
  :func:`~spectr_gbv.gpu.kernels.node_split.split_node_rule` for the target :math:`w\, p(.|u)`,
  the draft law q(.|u) and the polymatroid :math:`X \mapsto g_H(q(X))`
  (:class:`~spectr_gbv.gpu.kernels.score_laws.ScoreLaws`): with the default ``split="orders"``
  the hedged base (the reference default, ``priority="hedge"``: the lexicographically optimal
  base with its under-drafted children re-split in proportion to q; ``priority="lex"`` the
  lexicographic base alone), with a :class:`~spectr_gbv.gpu.kernels.node_split.KernelSplit`
  a law :math:`d = \lambda q + (1 - \lambda) b`; b as a mixture of priority orders
  :math:`(\mu_i, \sigma_i)`;
* a drafted child v gets :math:`q(v) G_{uv} = \lambda q(v) H + (1 - \lambda) \sum_i \mu_i
  H|_{[Q_i(<v), Q_i(<v) + q(v))}` (top quantiles), built in exact rationals
  (:func:`exact_child`, "Exact score laws" below), and the weight
  :math:`w_{uv} = \min\{1, w\, p(v|u)/d(v)\}`;
* each draft's leaf law :math:`G_x` gives its win probability
  :math:`\int \prod_{j \ne k} F_j\, dG_k`, exact
  (:func:`spectr_gbv.reference.score_laws.win_probabilities`); one uniform per row draws the draft.

Then block verification (Sun et al. 2024, Algorithm 2; :mod:`spectr_gbv.gpu.kernels.block`)
of the selected draft against p with draft rows :math:`d_0..d_{L-1}` at its prefixes.

Exact score laws. Along a draft of tokens with small q-slices the score laws narrow (widths of
1e-12 and less around a score far from 0 after a few depths), below what float64 breakpoints in
[0, 1] resolve; float64 laws then lost mass and the win probabilities stopped summing to 1 (found
on the real pair at the full vocabulary: the win probabilities were all 0 and the selected draft,
of target probability ~1e-11, was accepted whole). So the laws along the drafted paths are kept
in exact rationals: the V-sized node rule runs in float64 and returns its parameters
(:math:`\lambda`, the orders' weights :math:`\mu_i` and the q-mass :math:`R_i` after v in each),
each converted exactly; the child's law is the exact split with those parameters, normalised
(:func:`spectr_gbv.reference.score_laws.split_law`); the drafted entry of d is
:math:`q(v) E_{G_{uv}}[S^{K-1}] / E_H[S^{K-1}]` of the exact laws and the win probabilities are
exact. The next depth's rule reads each law through its float64 view
(:meth:`~spectr_gbv.gpu.kernels.score_laws.ScoreLaws.from_exact`: the pieces' masses are kept, so
a piece narrower than float64 resolves keeps its mass and g keeps its absolute precision).
Losslessness under rounding: a row d is the law the float rule realises
(:math:`\lambda q + (1 - \lambda) \sum_i \mu_i v_{\sigma_i}`, the vertices computed as slice
moments of H's view, within float64 rounding of the exact children's entries), at the drafted
children the entry is the exact one, and the selection draws with the exact win probabilities
of the exact laws. The rounding of the rule's parameters makes :math:`\sum_v q(v) G_{uv}` equal H
within float64 rounding of the parameters (not of the laws' widths), so the drafts' scores are
uniform within that rounding at every depth.

Guard. A batch row whose drafted entry :math:`d(v)` is not a positive, finite float64 (an exact
moment ratio below the float64 range), or whose float rule returned a non-finite entry, is
verified by the walk instead (``precision_fallbacks`` in the diagnostics); on such a row the
output law is within total variation P(fallback) of p. On the real pair at L = 8 no row falls
back (docs/near_opt_bv.md, "On the real pair").

**Walk** (``selection="walk"``, the first version; :func:`select_path`). Walk down the trie for
t = 0..L-1, at the node u of the path so far:

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

The walk's rows d are the laws its float mixtures realise
(:class:`~spectr_gbv.gpu.kernels.coverage.NodeRule`), so it is lossless whatever the peel's rounding.

Complexity per depth, n = #supp(q) <= V. Scores: one node rule per distinct prefix (at most
B K): the lexicographic base by hull pruning (rounds of O(n log n)), P peels of 1 + D sorts
(module :mod:`spectr_gbv.gpu.kernels.coverage`), each evaluation of g O(log P_H) per token for a
law of P_H pieces (P_H grows by at most 2 per order per level); a child's exact split
O((P_H + C) log(P_H + C)) rational operations (C orders); the exact win probabilities
O(K^3 S) rational operations per row over its S elementary segments (on the CPU, the laws' few
pieces per draft moved there). The walk: one count-law node rule per row, plus
O(B (P K + K^2 + V)). Block verification: O(B L V).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

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
from spectr_gbv.gpu.kernels.node_split import KernelSplit, check_split, split_node_rule
from spectr_gbv.gpu.kernels.score_laws import ScoreLaws
from spectr_gbv.reference.score_laws import UNIFORM, ScoreLaw, moment, split_law, win_probabilities


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


@dataclass(frozen=True)
class ScoreSelection:
    r"""The score rules at every drafted prefix of each batch row, and the drafts' win probabilities.

    Attributes
    ----------
    win : Tensor, float64 [B, K]
        P(draft k has the largest score), exact, rounded to float64 (duplicate drafts share).
    node_rows : list of Tensor, float64 [N_t, V]
        Per depth t = 0..L-1: r(.|u) at the N_t distinct prefixes u of length t (batch-major,
        then by lowest draft index), with the drafted children's entries from their exact
        child laws' moments.
    node_of : Tensor, int64 [B, K, L]
        ``node_of[b, k, t]``: the row of ``node_rows[t]`` of draft k's prefix of length t.
    first : Tensor, int64 [B, K]
        The lowest-index draft equal to draft k.
    shares : list of Tensor, float64 [N_t]
        The proportional share :math:`\lambda` of each node rule.
    peel_fallbacks : Tensor, int64 0-d
        Summed over the node rules (:class:`~spectr_gbv.gpu.kernels.node_split.SplitRule`).
    unresolved : Tensor, bool [B]
        Rows with a drafted child's entry that is not a positive, finite float64 (module
        docstring, "Guard"). Their ``win`` and rows must not be used.
    """

    win: torch.Tensor
    node_rows: list[torch.Tensor]
    node_of: torch.Tensor
    first: torch.Tensor
    shares: list[torch.Tensor]
    peel_fallbacks: torch.Tensor
    unresolved: torch.Tensor

    def rows(self, k: torch.Tensor) -> torch.Tensor:
        """r(.|x^t) along draft ``k[b]`` of each row, t = 0..L-1: float64 [B, L, V]."""
        b = torch.arange(k.shape[0], device=k.device)
        return torch.stack([rows[self.node_of[b, k, t]] for t, rows in enumerate(self.node_rows)], 1)


def exact_child(parent: ScoreLaw, share: float, weights: list[float], after: list[float], q_v: float) -> ScoreLaw:
    r"""A drafted child's score law in exact rationals, from its node rule's float64 parameters.

    :func:`spectr_gbv.reference.score_laws.split_law` of the parent law with :math:`\lambda` =
    ``share``, one top-quantile slice :math:`[a_j, a_j + q(v)]`, :math:`a_j = 1 - q(v) - R_j`
    clipped to :math:`[0, 1 - q(v)]`, of weight ``weights[j]`` per used order (:math:`R_j` =
    ``after[j]``, the q-mass after v in order j) and ``q_v``, every float converted exactly. The
    laws along the drafted paths therefore never lose mass or resolution however narrow they
    become (module docstring, "Exact score laws").

    Parameters
    ----------
    parent : ScoreLaw
        The node's law H.
    share, q_v : float
        :math:`\lambda` and q(v) > 0.
    weights, after : list of float, length C
        The orders' weights (0 in unused columns) and :math:`R_j`.

    Returns
    -------
    ScoreLaw
        Of mass exactly 1.
    """
    qv = Fraction(q_v)
    # clipped to [0, 1 - q(v)]: R is a float suffix sum, and where q(v) is below its rounding
    # (q(v) < ~1e-16) the unclipped slice could leave H's mass and be empty
    top = 1 - qv
    slices = [
        (Fraction(mu), min(max(top - Fraction(r), Fraction(0)), top))
        for mu, r in zip(weights, after, strict=True)
        if mu > 0
    ]
    return split_law(parent, Fraction(share), slices, qv)


class _ExactLaws:
    """The distinct exact score laws of one :func:`score_selection` call, their children and wins cached.

    Batch rows that repeat (equal drafts and rows) give equal rule parameters, so each distinct
    split, float view and win computation is done once (a parity batch of 100,000 copies of two
    draft sets costs a handful of exact splits).
    """

    def __init__(self, k: int, device: torch.device) -> None:
        self.k, self.device = k, device
        self.laws: list[ScoreLaw] = [UNIFORM]
        self.moments: list[Fraction] = [moment(UNIFORM, k)]
        self._children: dict[tuple, tuple[int, float]] = {}
        self._wins: dict[tuple[int, ...], list[float]] = {}

    def view(self, ids: list[int]) -> ScoreLaws:
        """Float64 views of the laws ``ids`` (one row each)."""
        distinct = sorted(set(ids))
        pos = {i: j for j, i in enumerate(distinct)}
        views = ScoreLaws.from_exact([self.laws[i] for i in distinct], self.k, self.device)
        return views[torch.tensor([pos[i] for i in ids], dtype=torch.int64, device=self.device)]

    def children(
        self, parents: list[int], share: torch.Tensor, weights: torch.Tensor, after: torch.Tensor, q_v: torch.Tensor
    ) -> tuple[list[int], list[float]]:
        """The children's law ids and drafted entries :math:`q(v) E_G[S^k] / E_H[S^k]` (:func:`exact_child`)."""
        out_ids, out_d = [], []
        rows = zip(parents, share.tolist(), weights.tolist(), after.tolist(), q_v.tolist(), strict=True)
        for pid, lam, mu, r, qv in rows:
            key = (pid, lam, tuple(mu), tuple(r), qv)
            if key not in self._children:
                law = exact_child(self.laws[pid], lam, mu, r, qv)
                mom = moment(law, self.k)
                self.laws.append(law)
                self.moments.append(mom)
                self._children[key] = (len(self.laws) - 1, float(Fraction(qv) * mom / self.moments[pid]))
            cid, d = self._children[key]
            out_ids.append(cid)
            out_d.append(d)
        return out_ids, out_d

    def win(self, leaves: list[int]) -> list[float]:
        """Exact win probabilities of the leaf laws ``leaves`` (one per draft), as float64."""
        key = tuple(leaves)
        if key not in self._wins:
            self._wins[key] = [float(x) for x in win_probabilities([self.laws[i] for i in leaves])]
        return self._wins[key]


def score_selection(
    inputs: KernelInputs, split: str | KernelSplit = "orders", priority: str | None = None
) -> ScoreSelection:
    r"""Score laws down the draft trie and the win probabilities of the K drafts (module docstring).

    Parameters
    ----------
    inputs : KernelInputs
        Rows of drafts sharing a prefix must agree there (the lowest-index draft's are read).
    split : str or KernelSplit
        The node rule and its split of the score law (:func:`~spectr_gbv.gpu.kernels.node_split.split_node_rule`):
        ``"orders"`` (default; the reference's default ``split="orders"``) or a
        :class:`~spectr_gbv.gpu.kernels.node_split.KernelSplit` (the research log's proportional
        split: ``bench/experiments/near_opt_variants.py``).
    priority : str, optional
        The base (:data:`~spectr_gbv.gpu.kernels.node_split.SPLIT_PRIORITIES`): with ``"orders"``,
        ``"hedge"`` (default, the reference default) or ``"lex"``.

    Returns
    -------
    ScoreSelection
        Its rows equal :func:`spectr_gbv.reference.near_opt_bv.score_tree`'s ``d`` and its
        ``win`` :func:`spectr_gbv.reference.score_laws.win_probabilities` of the leaves (within
        ~1e-12 on small rational nodes).
    """
    priority = check_split(split, priority)
    B, K, L = inputs.B, inputs.K, inputs.L
    drafts, p_all, q_all = inputs.drafts, inputs.target_probs, inputs.draft_probs
    device = drafts.device
    eq = (drafts.unsqueeze(2) == drafts.unsqueeze(1)).to(torch.int8)  # [B, K, K, L]
    pref = torch.cat([torch.ones_like(eq[..., :1]), torch.cumprod(eq, -1)], -1).bool()  # same prefix of length t
    rep = first_true(pref.transpose(2, 3))  # [B, K, L + 1]: lowest draft with the same prefix
    ks = torch.arange(K, device=device)
    is_rep = rep == ks.view(1, K, 1)
    store = _ExactLaws(K - 1, device)
    ids = [0] * B  # each node's law in ``store`` (the root's: uniform)
    laws = store.view(ids)
    w = torch.ones(B, dtype=torch.float64, device=device)
    node_of = torch.zeros(B, K, L, dtype=torch.int64, device=device)
    node_rows: list[torch.Tensor] = []
    shares: list[torch.Tensor] = []
    peel_fallbacks = torch.zeros((), dtype=torch.int64, device=device)
    unresolved = torch.zeros(B, dtype=torch.bool, device=device)
    for t in range(L):
        nb, nk = is_rep[:, :, t].nonzero(as_tuple=True)  # this depth's nodes, in the order of ``laws``
        N = nb.numel()
        index = torch.full((B, K), -1, dtype=torch.int64, device=device)
        index[nb, nk] = torch.arange(N, device=device)
        node_of[:, :, t] = index.gather(1, rep[:, :, t])
        p = p_all[nb, nk, t].to(torch.float64)
        q = q_all[nb, nk, t].to(torch.float64)
        p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
        tok = drafts[nb, :, t]  # [N, K]
        through = rep[nb, :, t] == nk.unsqueeze(-1)
        marked = torch.where(through, tok, drafts[nb, nk, t].unsqueeze(-1))
        rule = split_node_rule(w.unsqueeze(-1) * p, q, laws, split=split, priority=priority, marked=marked)
        peel_fallbacks = peel_fallbacks + rule.peel_fallbacks
        d = rule.d
        cb, ck = is_rep[:, :, t + 1].nonzero(as_tuple=True)  # the children, in the next depth's order
        parent = index[cb, rep[cb, ck, t]]
        v = drafts[cb, ck, t]
        q_v, p_v = q[parent, v], p[parent, v]
        after = rule.after[parent, :, ck] if rule.after is not None else torch.zeros_like(rule.weights[parent])
        # the children's laws in exact rationals from the float rule's parameters (module
        # docstring, "Exact score laws"), then their float views for the next depth's rules
        ids, dv = store.children(
            [ids[i] for i in parent.tolist()], rule.share[parent], rule.weights[parent], after, q_v
        )
        d_v = torch.tensor(dv, dtype=torch.float64, device=device)
        lost = ~(d_v > 0) | ~torch.isfinite(d_v)
        unresolved[cb[lost]] = True
        unresolved[nb[~torch.isfinite(d).all(-1)]] = True  # a float rule that did not evaluate
        d[parent, v] = d_v
        w = torch.where(d_v > 0, w[parent] * p_v / torch.where(d_v > 0, d_v, 1.0), 1.0).clamp_max(1.0)
        node_rows.append(d)
        shares.append(rule.share)
        laws = store.view(ids)
    leaf = torch.full((B, K), -1, dtype=torch.int64, device=device)
    lb, lk = is_rep[:, :, L].nonzero(as_tuple=True)
    leaf[lb, lk] = torch.arange(lb.numel(), device=device)
    first = rep[:, :, L]
    leaves = leaf.gather(1, first).tolist()
    win = torch.tensor([store.win([ids[i] for i in row]) for row in leaves], dtype=torch.float64, device=device)
    return ScoreSelection(win, node_rows, node_of, first, shares, peel_fallbacks, unresolved)


#: ``selection`` values of :func:`verify_near_opt_bv` (as :data:`spectr_gbv.reference.near_opt_bv.SELECTIONS`).
SELECTIONS: tuple[str, ...] = ("score", "walk")


def verify_near_opt_bv(
    inputs: KernelInputs,
    uniforms: UniformSource,
    selection: str = "score",
    split: str | KernelSplit = "orders",
    priority: str | None = None,
) -> VerifyOutput:
    r"""Near-optimal multi-draft block verification: select a draft, then BV with its law (module docstring).

    Parameters
    ----------
    inputs : KernelInputs
        Rows of drafts sharing a prefix must agree there (the lowest-index draft's are read).
    uniforms : UniformSource
        ``"score"``: draws [B] once (the selected draft, by its win probability), then, when a
        row falls back (module docstring, "Guard"), the walk's L draws over the rows
        that fall back; ``"walk"``:
        [B] once per depth (the order of each node's mixture; L draws, :func:`select_path`);
        then [B, L] (block verification's eta) and [B] (final token).
    selection : str
        ``"score"`` (default, the registered ``near_opt_bv``) or ``"walk"`` (:data:`SELECTIONS`).
    split : str or KernelSplit
        With scores: :data:`~spectr_gbv.gpu.kernels.node_split.SPLITS` or a
        :class:`~spectr_gbv.gpu.kernels.node_split.KernelSplit` (:func:`score_selection`).
    priority : str, optional
        With scores: the split's base (:func:`score_selection`; default ``"hedge"`` with
        ``"orders"``, the registered ``near_opt_bv``).

    Returns
    -------
    VerifyOutput
        ``draft_index`` = the lowest-index draft equal to the selected one (``"score"``) or
        carrying the selected path (``"walk"``). ``diagnostics``: ``residual_fallbacks``
        (identically-zero BV residual: target row used), ``peel_fallbacks`` and
        ``precision_fallbacks`` (rows verified by the walk, module docstring "Guard"; always 0
        with ``"walk"``). K = 1 is BV
        (d = q); at L = 1 the expected accepted count is OPT(K). Complexity: module docstring.

    Raises
    ------
    ValueError
        ``selection`` not in :data:`SELECTIONS`, ``split`` a name not in
        :data:`~spectr_gbv.gpu.kernels.node_split.SPLITS`, or ``priority`` not one of its
        priorities (:data:`~spectr_gbv.gpu.kernels.node_split.SPLIT_PRIORITIES`).

    References
    ----------
    Reference :class:`spectr_gbv.reference.NearOptBlockVerifier` (this project,
    ``docs/near_opt_bv.md``); Sun et al. 2024, "Block verification accelerates speculative
    decoding", arXiv 2403.10444, Algorithm 2; Hu et al. 2025, arXiv 2502.18779 (the single-step
    optimum reached at L = 1).
    """
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
    priority = check_split(split, priority)
    B, L = inputs.B, inputs.L
    b = batch_arange(inputs.drafts)
    if selection == "score":
        sel = score_selection(inputs, split, priority)
        bad = sel.unresolved
        safe = torch.where(bad.unsqueeze(-1), torch.ones_like(sel.win), sel.win)  # exact: no NaN
        pick = sample_categorical(safe, uniforms(B))
        k = sel.first[b, pick]
        rows, peel_fallbacks = sel.rows(k), sel.peel_fallbacks
        if bool(bad.any()):  # the walk on those rows instead (module docstring, "Guard")
            sub = KernelInputs(inputs.drafts[bad], inputs.draft_probs[bad], inputs.target_probs[bad])
            walk = select_path(sub, uniforms)
            k, rows = k.clone(), rows.clone()
            k[bad], rows[bad] = walk.draft_index, walk.rows
            peel_fallbacks = peel_fallbacks + walk.peel_fallbacks
        precision_fallbacks = count(bad)
    else:
        walk = select_path(inputs, uniforms)
        k, rows, peel_fallbacks = walk.draft_index, walk.rows, walk.peel_fallbacks
        precision_fallbacks = torch.zeros((), dtype=torch.int64, device=inputs.drafts.device)
    path = inputs.drafts[b, k]  # [B, L]
    p_path = inputs.target_probs[b, k].to(torch.float64)
    p_path = p_path / p_path.sum(-1, keepdim=True)  # [B, L + 1, V]
    weights = block_weights(path, p_path[:, 0], p_path[:, :L], rows)
    end = block_stop(weights, uniforms(B, L))
    law, used = block_next_law(weights, end, p_path[:, 0], p_path[:, :L], rows, p_path[:, L])
    z = sample_categorical(law, uniforms(B))
    tokens = assemble(inputs.drafts, k, end, z)
    diagnostics = {
        "residual_fallbacks": count(used),
        "peel_fallbacks": peel_fallbacks,
        "precision_fallbacks": precision_fallbacks,
    }
    return VerifyOutput(tokens, end, k, diagnostics)


__all__ = [
    "SELECTIONS",
    "ScoreSelection",
    "SelectedPath",
    "child_count_law",
    "exact_child",
    "score_selection",
    "select_path",
    "verify_near_opt_bv",
]
