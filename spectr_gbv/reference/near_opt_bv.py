r"""``near_opt_bv``: select one draft path with BV-weighted optimal node rules, then block-verify it.

A lossless multi-draft block verifier (issue 18; the proof and the measurements are in
``docs/near_opt_bv.md``). Walk down the trie of the K i.i.d. drafts choosing one path. At the
node :math:`u = x^t` of the path so far:

* :math:`\pi_t(m)`: the probability, over K fresh i.i.d. drafts, that the walk selects u and
  that m drafts pass through u, normalised by the total :math:`r(u)`; :math:`\pi_0 = \delta_K`.
* :math:`w_t`: block verification's running weight of u under the path law r (Sun et al. 2024,
  Algorithm 2): :math:`w_0 = 1`, :math:`w_{t+1} = \min\{1, w_t\, p(x_{t+1}|u) / d_t(x_{t+1})\}`.
* the node rule: :func:`~spectr_gbv.reference.coverage.mixture_rule` with target
  :math:`w_t\, p(.|u)`, draft law q(.|u), counts :math:`\pi_t` and the ``"ratio"`` priority: a
  law :math:`d_t` of the selected child maximising :math:`\sum_v \min\{w_t p(v|u), d_t(v)\}` over
  every selection rule, written as a mixture of priority orders. The walk picks one order of
  the mixture with its weight (the same mixture whatever the number of drafts through u) and
  moves to the first drafted child in it; the drafts carrying it continue.

The selected path X has the autoregressive law :math:`r(v|x^t) = d_t(v)`, so block
verification of X against p with draft law r is lossless (BV is lossless for any draft law
that X is distributed as). The count law updates along the path as

.. math::
    \pi_{t+1}(m') \propto \sum_m \pi_t(m) \sum_{(\lambda, \sigma)} \lambda
    \binom{m}{m'} q(y)^{m'} (1 - q(H_\sigma) - q(y))^{m - m'},

with y the path's next token and :math:`H_\sigma` the tokens before y in :math:`\sigma`.

At K = 1 the only base is q, so r = q and this is BV. At L = 1 the target is p, the counts are
:math:`\delta_K`, and :math:`d_0` is the optimal single-step selection law, so
:math:`E[\tau] = OPT(K)`. At the last level the node rule is optimal for the levels above
(its term of BV's value is exactly :math:`\sum_v \min\{w_t p(v|u) r(u), r(uv)\}`).

Complexity per iteration: at each of the L path nodes one :func:`mixture_rule` over the
support n of q with at most K count terms (O(n^2 (1 + D) log n) evaluations of G, each O(K);
module :mod:`spectr_gbv.reference.coverage`) and the count update, O(n K^2) per order, so
O(L (K n^2 D log n + n^2 K^2)) Fraction operations at worst. Stateless: nothing carries over
iterations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.coverage import PRIORITIES, Counts, Decomposition, mixture_rule, selection_probabilities
from spectr_gbv.reference.kernels import block_verify


def _exact_row(row: np.ndarray, exact: bool) -> tuple[Fraction, ...]:
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
    batch: VerifyInput, k: int, depth: int | None = None, priority: str = "ratio", weighting: str = "bv"
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
    priority : str
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
    priority: str,
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
        p = _exact_row(batch.target_probs[k, t], batch.exact)
        q = _exact_row(batch.draft_probs[k, t], batch.exact)
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


class NearOptBlockVerifier(Verifier):
    r"""Near-optimal lossless multi-draft block verification (``near_opt_bv``; module docstring).

    Select one path of the draft trie node by node with the BV-weighted optimal node rule over
    the law of the number of drafts through the node, then run block verification (Sun et al.
    2024, Algorithm 2) on it with the selected path's exact law r as the draft law.

    Lossless for any p and q (BV is lossless for any draft law, and the selected path has law r
    exactly); K = 1 is BV; L = 1 is OPT(K); the law depends only on the multiset of drafts.
    Float64 inputs are converted to Fractions exactly for the rule (row renormalised) and the
    block verification runs in float64 with r as floats.

    Parameters
    ----------
    priority : str
        The optimal base's priority (default ``"ratio"``; :func:`path_rules`).
    weighting : str
        The node target (default ``"bv"``; :data:`WEIGHTINGS`). The registered ``near_opt_bv``
        uses the defaults; the others are the research log's variants.

    Raises
    ------
    ValueError
        An unknown ``priority`` or ``weighting``.

    References
    ----------
    Issue 18 of this project and ``docs/near_opt_bv.md`` (construction, proof, measurements);
    Sun et al. 2024, arXiv 2403.10444, Algorithm 2 (block verification); Hu et al. 2025,
    arXiv 2502.18779 (the single-step optimum it attains at L = 1).
    """

    name = "near_opt_bv"
    lossless = True
    symmetric = True
    structure = "selected_draft"
    citation = (
        "near_opt_bv (this project, issue 18): BV-weighted optimal selection of one draft path "
        "(polymatroid node rule over the draft-count law), then block verification with its law "
        "(Sun et al. 2024, arXiv 2403.10444, Algorithm 2)"
    )

    def __init__(self, priority: str = "ratio", weighting: str = "bv") -> None:
        super().__init__()
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
        self.priority, self.weighting = priority, weighting

    def _rules(self, batch: VerifyInput, k: int, depth: int | None = None) -> list[PathNode]:
        return path_rules(batch, k, depth, self.priority, self.weighting)

    def selected_draft_probability(self, batch: VerifyInput) -> Fraction:
        r"""P(the walk selects x) over K i.i.d. drafts, ``batch`` = K copies of x: :math:`\prod_t r(x_t|x^{t-1})`."""
        x = batch.draft(0)
        return math.prod((node.d[y] for node, y in zip(self._rules(batch, 0), x, strict=True)), start=Fraction(1))

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Select the path node by node, then block verification with draft law r."""
        conv = (lambda v: v) if batch.exact else float

        def pick(t: int, node: PathNode, tokens: list[int]) -> int:
            sel = selection_probabilities(node.orders, tokens)
            cands = sorted(sel)
            return cands[chooser.categorical([conv(sel[v]) for v in cands])] if len(cands) > 1 else cands[0]

        nodes, k = _walk(batch, pick, self.priority, self.weighting)
        x = batch.draft(k)
        dtype = object if batch.exact else np.float64
        rows = [np.array([conv(v) for v in node.d], dtype=dtype) for node in nodes]
        tau, law = block_verify(
            chooser, x, batch.target_probs[k, : batch.L], rows, batch.target_probs[k, batch.L], batch.exact
        )
        return Emission(x[:tau], law)


__all__ = ["WEIGHTINGS", "NearOptBlockVerifier", "PathNode", "child_counts", "path_rules"]
