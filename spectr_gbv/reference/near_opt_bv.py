r"""``near_opt_bv``: select one draft with BV-weighted optimal node rules, then block-verify it.

A lossless multi-draft block verifier (this project; the proof and the measurements are in
``docs/near_opt_bv.md``). Any rule that selects one of the K i.i.d. drafts gives the selected
block X a law r, and block verification of X against p with draft law r is lossless (BV is
lossless for any draft law that X is distributed as; Sun et al. 2024, Algorithm 2). The best
such r gives OPT(K) (:mod:`spectr_gbv.theory.single_path`). This verifier builds r node by
node along the drafted prefixes, so that every row it needs is computable from the rows of
the drafted prefixes. At a prefix :math:`u = x^t`:

* :math:`w_t`: block verification's running weight of u under r: :math:`w_0 = 1`,
  :math:`w_{t+1} = \min\{1, w_t\, p(x_{t+1}|u) / d_t(x_{t+1})\}`;
* the node rule chooses the law :math:`d_t = r(.|u)` of the selected block's next token among
  the bases of a polymatroid :math:`X \mapsto G(q(X|u))`, maximising
  :math:`\sum_v \min\{w_t p(v|u), d_t(v)\}` (the node's term of BV's value).

**Score selection** (``selection="score"``, the registered verifier). Each draft draws an
independent score from a law :math:`G_x` built top-down along its own prefixes, and the largest
score wins (module :mod:`spectr_gbv.reference.score_laws`). The root law is uniform; at u the
law H of a draft through u is split among the children, :math:`\sum_v q(v|u) G_{uv} = H`, and
:math:`r(uv)/r(u) = q(v|u) E_{G_{uv}}[S^{K-1}] / E_H[S^{K-1}]`. The reachable laws are the bases
of :math:`g_H(q(X))`, :math:`g_H(x)` the :math:`S^{K-1}`-moment of H's top x mass over the whole
moment (:math:`1 - (1 - x)^K` at the root). The rule (``priority="hedge"``) starts from the
lexicographically optimal base of that polymatroid with respect to the target
:math:`w_t p(.|u)` (Fujishige 1980; :func:`~spectr_gbv.reference.coverage.lexicographic_base`),
which maximises :math:`\sum_v \min\{w_t p(v|u), d(v)\}` and spreads the mass above the target
in proportion to it, and re-splits the mass of the under-drafted children (d < target) in
proportion to q, capped at the target (:func:`~spectr_gbv.reference.coverage.hedged_base`): the
node cannot see which under-drafted child continues better, and the split a uniformly random
draft would make hedges over that. BV's weight :math:`w_t` scales the target, so it decides
which children are under-drafted. ``priority="lex"`` (the lexicographic base alone, which
scaling leaves unchanged) was the registered rule before. The base is written as a mixture of
priority orders, and H is split by them: each order gives
the earlier tokens the higher scores of H, and a child's law is the mixture of its slices
(:func:`child_law`), so a child keeps a share of the top scores whenever an order ranks it
first, and can give them to its own under-drafted children. Because the K scores are i.i.d.
uniform whatever the blocks, :math:`r(x) = K q(x) E_{G_x}[S^{K-1}]`, and the win probabilities of the drafts are exact
integrals of piecewise polynomials.

**Walk** (``selection="walk"``, the first version). Walk down the trie with one priority order
per node, drawn from :func:`~spectr_gbv.reference.coverage.mixture_rule`'s mixture for the law
:math:`\pi_t` of the number of drafts through u given that the walk selects u
(:math:`\pi_0 = \delta_K`), moving to the first drafted child in it; the count law updates as

.. math::
    \pi_{t+1}(m') \propto \sum_m \pi_t(m) \sum_{(\lambda, \sigma)} \lambda
    \binom{m}{m'} q(y)^{m'} (1 - q(H_\sigma) - q(y))^{m - m'},

with y the path's next token and :math:`H_\sigma` the tokens before y in :math:`\sigma`. A walk
fixes one order per node for all the drafts below it; the scores instead let a child's share of
the top scores be used by its own children (docs/near_opt_bv.md, "Score selection").

At K = 1 the only base is q, so r = q and both are BV. At L = 1 the target is p and the law
is the optimal single-step selection law, so :math:`E[\tau] = OPT(K)`.

Complexity per iteration: one node rule at each of the at most K L drafted prefixes, over the
support n of q: O(n^2 (1 + D) log n) evaluations of G (module
:mod:`spectr_gbv.reference.coverage`); a score-law evaluation costs O(P) for a law of P pieces,
and a split adds at most two breakpoints per order, so P = O(L n) along a path; the win
probabilities cost O(K^2 P_total). Stateless: nothing carries over iterations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.coverage import (
    PRIORITIES,
    BaseRule,
    Counts,
    Decomposition,
    mixture_rule,
    selection_probabilities,
)
from spectr_gbv.reference.kernels import block_verify
from spectr_gbv.reference.score_laws import (
    UNIFORM,
    ScoreCoverage,
    ScoreLaw,
    split_law,
    win_probabilities,
)


def exact_row(row: np.ndarray, exact: bool) -> tuple[Fraction, ...]:
    """A row as Fractions; float64 rows converted exactly and renormalised (they sum to 1 only within rounding)."""
    vals = [v if exact else Fraction(v) for v in row.tolist()]
    if exact:
        return tuple(vals)
    total = sum(vals, Fraction(0))
    return tuple(v / total for v in vals)


def child_counts(q: tuple[Fraction, ...], orders: Decomposition, m: int, y: int) -> dict[int, Fraction]:
    r"""P(the rule selects y and m' of the m drafts carry y), for m' = 1..m.

    Parameters
    ----------
    q : tuple of Fraction, length n
        Draft law at the node.
    orders : Decomposition
        The node's priority-order mixture.
    m : int
        Number of drafts through the node, >= 1.
    y : int
        A token of the support of q.

    Returns
    -------
    dict of int to Fraction
        :math:`\sum_{(\lambda, \sigma)} \lambda \binom{m}{m'} q(y)^{m'} (1 - q(H_\sigma) - q(y))^{m - m'}`;
        the values sum to the vertex mixture's :math:`d(y)` for m drafts.
    """
    out: dict[int, Fraction] = {}
    for weight, order in orders:
        rest = 1 - sum((q[v] for v in order[: order.index(y)]), Fraction(0)) - q[y]
        for mm in range(1, m + 1):
            out[mm] = out.get(mm, Fraction(0)) + weight * math.comb(m, mm) * q[y] ** mm * rest ** (m - mm)
    return out


@dataclass(frozen=True)
class PathNode:
    """The rule at one node of the walk.

    Attributes
    ----------
    d : tuple of Fraction, length n
        Law of the selected child, r(.|x^t).
    orders : Decomposition
        Its priority-order mixture.
    counts : Counts
        Normalised law of the number of drafts through the node, given that the walk selects it.
    weight : Fraction
        BV's running weight :math:`w_t` of the node under r.
    """

    d: tuple[Fraction, ...]
    orders: Decomposition
    counts: Counts
    weight: Fraction


#: ``weighting`` values of :func:`path_rules`: the node target is BV's running weight times p
#: (``"bv"``, the registered verifier), p itself (``"none"``), or p except at the last level
#: (``"leaf"``); the last two are research-log variants (docs/near_opt_bv.md).
WEIGHTINGS: tuple[str, ...] = ("bv", "none", "leaf")


def path_rules(
    batch: VerifyInput, k: int, depth: int | None = None, priority: str | BaseRule = "ratio", weighting: str = "bv"
) -> list[PathNode]:
    """The node rules along draft ``k`` for t = 0..depth-1 (default L): module docstring.

    Parameters
    ----------
    batch : VerifyInput
        Fractions or float64 (converted exactly to Fractions, rows renormalised).
    k : int
        The draft whose prefix is the path.
    depth : int, optional
        Number of path nodes to build (``<= L``); the rule at depth t needs only ``x^t``.
    priority : str or BaseRule
        :func:`~spectr_gbv.reference.coverage.mixture_rule`'s priority (default ``"ratio"``).
    weighting : str
        One of :data:`WEIGHTINGS` (default ``"bv"``).

    Returns
    -------
    list of PathNode, length ``depth``

    Raises
    ------
    ValueError
        ``weighting`` not in :data:`WEIGHTINGS`, or ``priority`` unknown.
    """
    x = batch.draft(k)
    nodes, _ = _walk(batch, lambda t, node, tokens: x[t], priority, weighting, depth)
    return nodes


def _walk(
    batch: VerifyInput,
    pick: Callable[[int, PathNode, list[int]], int],
    priority: str | BaseRule,
    weighting: str,
    depth: int | None = None,
) -> tuple[list[PathNode], int]:
    """Walk down the draft trie for ``depth`` (default L) levels; ``pick(t, node, tokens)`` chooses the child.

    ``tokens`` are the next tokens of the drafts through the node (draft order). Returns the
    node rules along the walk and the lowest-index draft through the last node reached.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
    depth = batch.L if depth is None else depth
    active = list(range(batch.K))
    dist: dict[int, Fraction] = {batch.K: Fraction(1)}
    w = Fraction(1)
    nodes: list[PathNode] = []
    for t in range(depth):
        k = active[0]
        p = exact_row(batch.target_probs[k, t], batch.exact)
        q = exact_row(batch.draft_probs[k, t], batch.exact)
        total = sum(dist.values(), Fraction(0))
        counts: Counts = tuple((m, dist[m] / total) for m in sorted(dist))
        scale = w if weighting == "bv" or (weighting == "leaf" and t == batch.L - 1) else Fraction(1)
        d, orders = mixture_rule(tuple(scale * v for v in p), q, counts, priority)
        node = PathNode(d, orders, counts, w)
        nodes.append(node)
        y = pick(t, node, [int(batch.drafts[j, t]) for j in active])
        active = [j for j in active if int(batch.drafts[j, t]) == y]
        if t + 1 == depth:
            break
        new: dict[int, Fraction] = {}
        for m, pm in counts:
            for mm, pr in child_counts(q, orders, m, y).items():
                new[mm] = new.get(mm, Fraction(0)) + pm * pr
        dist = new
        w = min(Fraction(1), w * p[y] / d[y])
    return nodes, active[0]


#: ``selection`` values of :class:`NearOptBlockVerifier`: independent per-draft scores whose
#: maximum selects the draft (``"score"``, the registered verifier), or the walk down the trie
#: with one priority order per node (``"walk"``, the first version; docs/near_opt_bv.md).
SELECTIONS: tuple[str, ...] = ("score", "walk")

#: ``split`` names of :class:`NearOptBlockVerifier` (score selection): :func:`mixture_rule`'s law
#: split by its priority orders (``"orders"``, :data:`ORDERS`; the registered verifier, with the
#: ``"hedge"`` priority). A :class:`NodeSplit` may be given instead of a name (the research-log
#: variants of ``bench/experiments/near_opt_variants.py``; docs/near_opt_bv.md).
SPLITS: tuple[str, ...] = ("orders",)


@dataclass(frozen=True)
class ScoreNode:
    """The score-selection rule at one drafted prefix u.

    Attributes
    ----------
    d : tuple of Fraction, length n
        Law of the selected block's next token, r(.|u).
    share : Fraction
        Weight of the proportional part of the split (:class:`NodeSplit`; 0 with :data:`ORDERS`).
    orders : Decomposition
        Priority-order mixture of the rest.
    law : ScoreLaw
        H_u, the score law of a draft through u.
    weight : Fraction
        BV's running weight w_u of u under r.
    """

    d: tuple[Fraction, ...]
    share: Fraction
    orders: Decomposition
    law: ScoreLaw
    weight: Fraction


def child_law(node: ScoreNode, q: tuple[Fraction, ...], v: int) -> ScoreLaw:
    r"""The score law :math:`G_{uv}` of a draft through u whose next token is v (q(v) > 0).

    :math:`q(v) G_{uv} = \lambda q(v) H + (1 - \lambda) \sum_{(\mu, \sigma)} \mu\,
    H|_{[Q_\sigma(<v), Q_\sigma(\le v))}` with :math:`H|_{[a, b)}` the part of H between its
    top-quantiles a and b and :math:`Q_\sigma(<v)` the q-mass before v in :math:`\sigma`: the
    proportional part gives every child a share of every score, each order gives the earlier
    tokens the higher scores. Summed over v with weights q(v) the children's laws give H back.
    """
    slices = [(mu, sum((q[y] for y in order[: order.index(v)]), Fraction(0))) for mu, order in node.orders]
    return split_law(node.law, node.share, slices, q[v])


class NodeSplit(Protocol):
    r"""The node rule of score selection: a law d at a drafted prefix and its split of the score law.

    At a node u with target row t (BV-weighted p), draft row q and the score-law coverage
    :math:`x \mapsto g_H(x)` of H (:class:`~spectr_gbv.reference.score_laws.ScoreCoverage`), a
    split returns a base d of that polymatroid written as :math:`d = \lambda q + (1 - \lambda) b`,
    b a mixture of priority orders; :func:`child_law` then gives every child the share
    :math:`\lambda` of every score and splits the rest of H by the orders. Any base is lossless
    (the selected draft has law r exactly); the value depends on the base. :data:`ORDERS` is the
    package's split; the research-log variants are in ``bench/experiments/near_opt_variants.py``.
    """

    #: The split's name, used in error messages.
    name: str

    def check(self, priority: str | BaseRule) -> None:
        """Validate the priority the split will be called with.

        Raises
        ------
        ValueError
            ``priority`` not defined for this split.
        """
        ...

    def __call__(
        self,
        target: tuple[Fraction, ...],
        q: tuple[Fraction, ...],
        cov: ScoreCoverage,
        priority: str | BaseRule,
        last: bool,
    ) -> tuple[tuple[Fraction, ...], Fraction, Decomposition]:
        r"""The rule at one node.

        Parameters
        ----------
        target : tuple of Fraction, length n
            Nonnegative target row (total at most 1).
        q : tuple of Fraction, length n
            Draft row (sums to 1).
        cov : ScoreCoverage
            The node's concave function :math:`g_H` (hashable).
        priority : str or BaseRule
            :func:`~spectr_gbv.reference.coverage.mixture_rule`'s priority.
        last : bool
            Whether the node is at the last level (t = L - 1).

        Returns
        -------
        d : tuple of Fraction, length n
            The base :math:`\lambda q + (1 - \lambda) b`.
        share : Fraction
            :math:`\lambda` in [0, 1].
        orders : Decomposition
            b's priority-order mixture (empty when ``share == 1``).
        """
        ...


@dataclass(frozen=True)
class OrdersSplit:
    """:func:`mixture_rule`'s law split by its own priority orders (share 0): the ``"orders"`` split.

    Attributes
    ----------
    name : str
        ``"orders"``.
    """

    name: str = "orders"

    def check(self, priority: str | BaseRule) -> None:
        """Every priority of :func:`mixture_rule` is defined for this split (no check)."""

    def __call__(
        self,
        target: tuple[Fraction, ...],
        q: tuple[Fraction, ...],
        cov: ScoreCoverage,
        priority: str | BaseRule,
        last: bool,
    ) -> tuple[tuple[Fraction, ...], Fraction, Decomposition]:
        """``(d, 0, orders)`` with ``d, orders = mixture_rule(target, q, cov, priority)`` (:class:`NodeSplit`)."""
        d, orders = mixture_rule(target, q, cov, priority)
        return d, Fraction(0), orders


#: The package's score split (``split="orders"``, the registered verifier).
ORDERS = OrdersSplit()


def node_split(split: str | NodeSplit) -> NodeSplit:
    """The :class:`NodeSplit` of ``split``: a name of :data:`SPLITS`, or a split object as given.

    Raises
    ------
    ValueError
        ``split`` a string not in :data:`SPLITS`.
    """
    if not isinstance(split, str):
        return split
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return ORDERS


def _score_node(
    p: tuple[Fraction, ...],
    q: tuple[Fraction, ...],
    last: bool,
    num_drafts: int,
    law: ScoreLaw,
    w: Fraction,
    options: tuple[str | BaseRule, str, NodeSplit],
) -> ScoreNode:
    priority, weighting, split = options
    scale = w if weighting == "bv" or (weighting == "leaf" and last) else Fraction(1)
    target, cov = tuple(scale * v for v in p), ScoreCoverage(law, num_drafts - 1)
    d, share, orders = split(target, q, cov, priority, last)
    return ScoreNode(d, share, orders, law, w)


def _check_score_options(
    priority: str | BaseRule, weighting: str, split: str | NodeSplit, selection: str = "score"
) -> NodeSplit:
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
    if not callable(priority) and priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    rule = node_split(split)
    if selection == "score":
        rule.check(priority)
    return rule


def score_tree(
    batch: VerifyInput,
    priority: str | BaseRule = "hedge",
    weighting: str = "bv",
    split: str | NodeSplit = "orders",
) -> tuple[dict[tuple[int, ...], ScoreNode], list[ScoreLaw]]:
    """The score rules at every drafted prefix of length 0..L-1 and each draft's score law.

    Parameters
    ----------
    batch : VerifyInput
        Fractions or float64 (converted exactly to Fractions, rows renormalised).
    priority : str or BaseRule
        :func:`mixture_rule`'s priority (default ``"hedge"``: the lexicographically optimal base
        with its under-drafted children re-split in proportion to q; ``"lex"``: that base alone;
        ``"id"`` or ``"ratio"``; a split may accept fewer, :meth:`NodeSplit.check`).
    weighting : str
        One of :data:`WEIGHTINGS` (default ``"bv"``).
    split : str or NodeSplit
        One of :data:`SPLITS` (default ``"orders"``) or a :class:`NodeSplit`.

    Returns
    -------
    nodes : dict of tuple of int to ScoreNode
        One per distinct drafted prefix (the rows of the lowest-index draft through it).
    leaves : list of ScoreLaw, length K
        :math:`G_{x^{(k)}}`, the score law of draft k given its block.

    Raises
    ------
    ValueError
        ``weighting`` not in :data:`WEIGHTINGS`, ``split`` a name not in :data:`SPLITS`,
        ``priority`` neither a :data:`~spectr_gbv.reference.coverage.BaseRule` nor in
        :data:`~spectr_gbv.reference.coverage.PRIORITIES`, or a priority the split rejects
        (:meth:`NodeSplit.check`).
    """
    rule = _check_score_options(priority, weighting, split)
    nodes: dict[tuple[int, ...], ScoreNode] = {}
    rows: dict[tuple[int, ...], tuple[tuple[Fraction, ...], tuple[Fraction, ...]]] = {}
    laws: dict[tuple[int, ...], tuple[ScoreLaw, Fraction]] = {(): (UNIFORM, Fraction(1))}
    for k in range(batch.K):
        x = batch.draft(k)
        for t in range(batch.L):
            u = x[:t]
            if u not in nodes:
                law, w = laws[u]
                p = exact_row(batch.target_probs[k, t], batch.exact)
                q = exact_row(batch.draft_probs[k, t], batch.exact)
                rows[u] = (p, q)
                nodes[u] = _score_node(p, q, t == batch.L - 1, batch.K, law, w, (priority, weighting, rule))
            node, (p, q) = nodes[u], rows[u]
            child = x[: t + 1]
            if child not in laws:
                y = x[t]
                laws[child] = (child_law(node, q, y), min(Fraction(1), node.weight * p[y] / node.d[y]))
    return nodes, [laws[batch.draft(k)][0] for k in range(batch.K)]


class NearOptBlockVerifier(Verifier):
    r"""Near-optimal lossless multi-draft block verification (``near_opt_bv``; module docstring).

    Select one draft with a law r built node by node from the BV-weighted optimal node rule,
    then run block verification (Sun et al. 2024, Algorithm 2) on it with r as the draft law.

    * ``selection="score"`` (the registered verifier): each draft draws an independent score
      from a law built top-down along its own prefixes (:func:`score_tree`; module
      :mod:`spectr_gbv.reference.score_laws`); the largest score is selected. At a node the
      score law H is split among the children by the priority orders of the hedged base of H's
      polymatroid (the lexicographically optimal base with respect to the BV-weighted target
      row, its under-drafted children re-split in proportion to q; ``split`` ``"orders"``,
      ``priority`` ``"hedge"``); the other priorities are research variants, and further splits
      and bases plug in as a :class:`NodeSplit` and a
      :data:`~spectr_gbv.reference.coverage.BaseRule` (``bench/experiments/near_opt_variants.py``).
    * ``selection="walk"``: walk down the trie with one priority order per node, drawn from
      :func:`~spectr_gbv.reference.coverage.mixture_rule`'s mixture for the law of the number
      of drafts through the node (the first version; :func:`path_rules`).

    Lossless for any p and q (BV is lossless for any draft law, and the selected draft has law
    r exactly); K = 1 is BV; L = 1 is OPT(K); the law depends only on the multiset of drafts.
    Float64 inputs are converted to Fractions exactly for the rule (rows renormalised) and the
    block verification runs in float64 with r as floats.

    Parameters
    ----------
    priority : str or BaseRule, optional
        The optimal base's priority: ``"hedge"`` (the default with scores:
        :func:`~spectr_gbv.reference.coverage.hedged_base`), ``"lex"`` (the lexicographically
        optimal base, the registered rule before), ``"ratio"`` (the default with the walk),
        ``"id"``, or a :data:`~spectr_gbv.reference.coverage.BaseRule`.
    weighting : str
        The node target (default ``"bv"``; :data:`WEIGHTINGS`). The registered ``near_opt_bv``
        uses the defaults; the others are the research log's variants.
    selection : str
        ``"score"`` (default) or ``"walk"`` (:data:`SELECTIONS`).
    split : str or NodeSplit
        The score split (default ``"orders"``; :data:`SPLITS` or a :class:`NodeSplit`; unused by
        the walk).

    Raises
    ------
    ValueError
        An unknown ``priority``, ``weighting``, ``selection`` or ``split``, or, with scores, a
        priority the split rejects (:meth:`NodeSplit.check`).

    References
    ----------
    ``docs/near_opt_bv.md`` (construction, proof, measurements);
    Sun et al. 2024, arXiv 2403.10444, Algorithm 2 (block verification); Hu et al. 2025,
    arXiv 2502.18779 (the single-step optimum it attains at L = 1).
    """

    name = "near_opt_bv"
    lossless, structure, citation = class_facts(name)
    symmetric = True

    def __init__(
        self,
        priority: str | BaseRule | None = None,
        weighting: str = "bv",
        selection: str = "score",
        split: str | NodeSplit = "orders",
    ) -> None:
        super().__init__()
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
        if priority is None:
            priority = "hedge" if selection == "score" else "ratio"
        _check_score_options(priority, weighting, split, selection)  # the walk ignores split, not its typos
        self.priority, self.weighting, self.selection, self.split = priority, weighting, selection, split

    def _rules(self, batch: VerifyInput, k: int, depth: int | None = None) -> list[PathNode]:
        return path_rules(batch, k, depth, self.priority, self.weighting)

    def path_law_rows(self, batch: VerifyInput, k: int) -> list[tuple[Fraction, ...]]:
        """r(.|x^t) along draft ``k`` for t = 0..L-1 (Fractions), under this verifier's selection."""
        if self.selection == "walk":
            return [node.d for node in self._rules(batch, k)]
        nodes, _ = score_tree(batch, self.priority, self.weighting, self.split)
        x = batch.draft(k)
        return [nodes[x[:t]].d for t in range(batch.L)]

    def selected_draft_probability(self, batch: VerifyInput) -> Fraction:
        r"""P(x is selected) over K i.i.d. drafts, ``batch`` = K copies of x: :math:`\prod_t r(x_t|x^{t-1})`."""
        x = batch.draft(0)
        rows = self.path_law_rows(batch, 0)
        return math.prod((row[y] for row, y in zip(rows, x, strict=True)), start=Fraction(1))

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Select a draft (largest score, or the walk), then block verification with draft law r."""
        conv = (lambda v: v) if batch.exact else float
        if self.selection == "score":
            nodes, leaves = score_tree(batch, self.priority, self.weighting, self.split)
            wins = win_probabilities(leaves)
            k = chooser.categorical([conv(w) for w in wins]) if batch.K > 1 else 0
            x = batch.draft(k)
            d_rows = [nodes[x[:t]].d for t in range(batch.L)]
        else:

            def pick(t: int, node: PathNode, tokens: list[int]) -> int:
                sel = selection_probabilities(node.orders, tokens)
                cands = sorted(sel)
                return cands[chooser.categorical([conv(sel[v]) for v in cands])] if len(cands) > 1 else cands[0]

            walked, k = _walk(batch, pick, self.priority, self.weighting)
            x = batch.draft(k)
            d_rows = [node.d for node in walked]
        dtype = object if batch.exact else np.float64
        rows = [np.array([conv(v) for v in row], dtype=dtype) for row in d_rows]
        tau, law = block_verify(
            chooser, x, batch.target_probs[k, : batch.L], rows, batch.target_probs[k, batch.L], batch.exact
        )
        return Emission(x[:tau], law)


__all__ = [
    "ORDERS",
    "SELECTIONS",
    "SPLITS",
    "WEIGHTINGS",
    "NearOptBlockVerifier",
    "NodeSplit",
    "OrdersSplit",
    "PathNode",
    "ScoreNode",
    "child_counts",
    "child_law",
    "exact_row",
    "node_split",
    "path_rules",
    "score_tree",
]
