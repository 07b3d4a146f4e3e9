r"""The score-law node rule of ``near_opt_bv`` in torch: a base of the node's polymatroid, split.

At N nodes with target weights t, draft rows q and score-law functions
(:class:`~spectr_gbv.gpu.kernels.score_laws.ScoreLaws`), :func:`split_node_rule` builds the
hedged or the lexicographically optimal base d (:mod:`spectr_gbv.gpu.kernels.lex_base`) and writes
it as :math:`d = \lambda q + (1 - \lambda) b`, b a priority-order mixture peeled by
:func:`~spectr_gbv.gpu.kernels.coverage.decompose_orders`; the registered split (``"orders"``,
:data:`ORDERS`) has :math:`\lambda = 0`. Other splits plug in through :class:`KernelSplit`
(``bench/experiments/near_opt_kernel_variants.py`` has the proportional one). The torch
counterpart of :func:`spectr_gbv.reference.near_opt_bv.score_tree`'s node rule; the shared steps
(compact positions, the peel) are those of :mod:`spectr_gbv.gpu.kernels.coverage`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from spectr_gbv.gpu.kernels.coverage import (
    compact_rows,
    decompose_orders,
)
from spectr_gbv.gpu.kernels.lex_base import hedged_base, lexicographic_base
from spectr_gbv.gpu.kernels.node_laws import NodeLaw

#: ``split`` names of :func:`split_node_rule` (as :data:`spectr_gbv.reference.near_opt_bv.SPLITS`);
#: a :class:`KernelSplit` may be given instead.
SPLITS: tuple[str, ...] = ("orders",)

#: The base priorities each split of :func:`split_node_rule` takes, its default first (the
#: reference's :data:`spectr_gbv.reference.coverage.PRIORITIES` of the same name).
SPLIT_PRIORITIES: dict[str, tuple[str, ...]] = {"orders": ("hedge", "lex")}


@dataclass(frozen=True)
class SplitRule:
    r"""The rule of :func:`split_node_rule` at N nodes: :math:`d = \lambda q + (1 - \lambda) b`.

    Attributes
    ----------
    d : Tensor, float64 [N, V]
        The realised law :math:`\lambda q + (1 - \lambda) \sum_i w_i v_{\sigma_i}` (0 outside
        the support of q).
    share : Tensor, float64 [N]
        :math:`\lambda` in [0, 1] (1: d = q, no orders; 0 with the ``"orders"`` split).
    weights : Tensor, float64 [N, P]
        Weights of b's priority orders (each row sums to 1 where ``share < 1``, else 0; unused
        columns 0; P = max support size + 1).
    orders : Tensor, int64 [N, P, n] or None
        With ``keep_orders``: each order as token ids of the support (padded with -1).
    peel_fallbacks : Tensor, int64 0-d
        As :class:`~spectr_gbv.gpu.kernels.coverage.NodeRule`.
    after : Tensor, float64 [N, P, M] or None
        With ``marked`` tokens [N, M]: the q-mass of the tokens after each marked token in each
        order (0 in unused columns).
    """

    d: torch.Tensor
    share: torch.Tensor
    weights: torch.Tensor
    orders: torch.Tensor | None
    peel_fallbacks: torch.Tensor
    after: torch.Tensor | None = None


class KernelSplit(Protocol):
    r"""A score-law node rule of :func:`split_node_rule`: :math:`d = \lambda q + (1 - \lambda) b`, b a base.

    Called on the nodes with more than one draft, on compact positions (support by t/q
    descending, ties by id), it returns the share :math:`\lambda` and the base b; the caller
    peels b into priority orders where :math:`\lambda < 1`. :data:`ORDERS` is the package's
    split; ``bench/experiments/near_opt_variants.py`` has the research log's proportional one.
    """

    #: The split's name, used in error messages.
    name: str
    #: The base priorities it takes, its default first.
    priorities: tuple[str, ...]

    def __call__(
        self, t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw, priority: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The share and the base at N nodes.

        Parameters
        ----------
        t, q : Tensor, float64 [N, n]
            Target and draft rows on compact positions.
        valid : Tensor, bool [N, n]
            Support (padding last).
        law : NodeLaw
            The nodes' concave functions.
        priority : str
            One of the split's ``priorities``.

        Returns
        -------
        share : Tensor, float64 [N]
            :math:`\lambda` in [0, 1].
        base : Tensor, float64 [N, n]
            b, a base of each node's polymatroid where ``share < 1`` (other rows are ignored).
        """
        ...


@dataclass(frozen=True)
class OrdersSplit:
    """The ``"orders"`` split: share 0, b the hedged (``"hedge"``) or lexicographically optimal (``"lex"``) base.

    Attributes
    ----------
    name : str
        ``"orders"``.
    priorities : tuple of str
        ``("hedge", "lex")``.
    """

    name: str = "orders"
    priorities: tuple[str, ...] = ("hedge", "lex")

    def __call__(
        self, t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw, priority: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero shares and :func:`~spectr_gbv.gpu.kernels.lex_base.hedged_base` or ``lexicographic_base``."""
        lam = torch.zeros(q.shape[0], dtype=torch.float64, device=q.device)
        base = hedged_base if priority == "hedge" else lexicographic_base
        return lam, base(t, q, valid, lambda x, lp=law: lp.g(x))


#: The package's score split of :func:`split_node_rule` (``split="orders"``).
ORDERS = OrdersSplit()


def kernel_split(split: str | KernelSplit) -> KernelSplit:
    """The :class:`KernelSplit` of ``split``: a name of :data:`SPLITS`, or a split object as given.

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


def check_split(split: str | KernelSplit, priority: str | None) -> str:
    """The priority :func:`split_node_rule` uses for ``split`` (the default where None).

    Raises
    ------
    ValueError
        ``split`` a name not in :data:`SPLITS`, or ``priority`` not one of its priorities
        (:data:`SPLIT_PRIORITIES`, a :class:`KernelSplit`'s ``priorities``).
    """
    rule = kernel_split(split)
    allowed = rule.priorities
    if priority is None:
        return allowed[0]
    if priority not in allowed:
        raise ValueError(f"priority must be one of {', '.join(allowed)} with split={rule.name!r}, got {priority!r}")
    return priority


def split_node_rule(
    t: torch.Tensor,
    q: torch.Tensor,
    counts: torch.Tensor | NodeLaw,
    *,
    split: str | KernelSplit = "orders",
    priority: str | None = None,
    marked: torch.Tensor | None = None,
    keep_orders: bool = False,
) -> SplitRule:
    r"""An optimal selection law as :math:`\lambda q + (1 - \lambda) b`, b a priority-order mixture; N nodes at once.

    The score-law split of :func:`spectr_gbv.reference.near_opt_bv.score_tree` (``split``):
    ``"orders"``: d = the hedged base (``priority="hedge"``, the default:
    :func:`spectr_gbv.reference.coverage.hedged_base`;
    :func:`~spectr_gbv.gpu.kernels.lex_base.hedged_base`) or the lexicographically optimal
    base w.r.t. t (``"lex"``: :func:`spectr_gbv.reference.coverage.lexicographic_base`;
    :func:`~spectr_gbv.gpu.kernels.lex_base.lexicographic_base`), :math:`\lambda = 0`, b = d
    peeled into priority orders. Any :class:`KernelSplit` gives :math:`\lambda` and b instead
    (the research log's proportional split: ``bench/experiments/near_opt_variants.py``).

    Parameters
    ----------
    t : Tensor, float [N, V]
        Nonnegative targets, totals <= 1.
    q : Tensor, float [N, V]
        Draft laws (rows sum to 1).
    counts : Tensor or NodeLaw
        The node's concave function: as :func:`~spectr_gbv.gpu.kernels.coverage.mixture_node_rule`'s ``counts``, or any
        :class:`~spectr_gbv.gpu.kernels.node_laws.NodeLaw` (e.g. :class:`spectr_gbv.gpu.kernels.score_laws.ScoreLaws`).
    marked : Tensor, int64 [N, M], optional
        Tokens (inside the support of q) whose q-mass after them in every order is returned.
    split : str or KernelSplit
        ``"orders"`` (default; :data:`SPLITS`) or a :class:`KernelSplit`.
    priority : str, optional
        The base: one of the split's priorities (:data:`SPLIT_PRIORITIES`; default its first:
        ``"hedge"`` for ``"orders"``).
    keep_orders : bool
        Also return the orders.

    Returns
    -------
    SplitRule

    Raises
    ------
    ValueError
        ``split`` a name not in :data:`SPLITS`, ``priority`` not one of the split's
        priorities, a marked token outside the support of q, or ``counts`` of another shape.

    References
    ----------
    :func:`spectr_gbv.reference.coverage.lexicographic_base` and
    :func:`~spectr_gbv.reference.coverage.hedged_base` (the exact rules this matches);
    Fujishige, "Lexicographically optimal base of a polymatroid with respect to a weight
    vector", Math. Oper. Res. 5 (1980).
    """
    priority = check_split(split, priority)
    rule = kernel_split(split)
    prep = compact_rows(t, q, counts, marked, by_id=False)
    law, ids, valid, qc, tc, mc, after = prep.law, prep.ids, prep.valid, prep.qc, prep.tc, prep.mc, prep.after
    N, V, n, dev = prep.N, prep.V, prep.n, prep.device
    dc = qc.clone()
    share = torch.ones(N, dtype=torch.float64, device=dev)
    weights = torch.zeros(N, n + 1, dtype=torch.float64, device=dev)
    orders = torch.full((N, n + 1, n), -1, dtype=torch.int64, device=dev) if keep_orders else None
    fallbacks = torch.zeros((), dtype=torch.int64, device=dev)
    multi = law.multi.nonzero().squeeze(-1)
    if multi.numel():
        qm, vm, lm = qc[multi], valid[multi], law[multi]
        lam, b = rule(tc[multi], qm, vm, lm, priority)
        part = (lam < 1).nonzero().squeeze(-1)
        share[multi] = lam
        if part.numel():
            rows = multi[part]
            qp, vp, lp = qm[part], vm[part], lm[part]
            lam_p = lam[part].unsqueeze(-1)
            marked_rows = None if mc is None else mc[rows]
            peeled = decompose_orders(b[part], qp, vp, lp, ids[rows], None, marked_rows, keep_orders)
            dc[rows] = lam_p * qp + (1.0 - lam_p) * peeled.mixed
            weights[rows] = peeled.weights
            fallbacks = peeled.fallbacks
            if orders is not None and peeled.orders is not None:
                orders[rows] = peeled.orders
            if after is not None and peeled.after is not None:
                after[rows] = peeled.after
    d = torch.zeros(N, V, dtype=torch.float64, device=dev).scatter_add(1, ids, torch.where(valid, dc, 0.0))
    if orders is not None:
        orders = torch.where(orders >= 0, ids.unsqueeze(1).expand(N, n + 1, n).gather(2, orders.clamp_min(0)), -1)
    return SplitRule(d, share, weights, orders, fallbacks, after)


__all__ = [
    "ORDERS",
    "SPLITS",
    "SPLIT_PRIORITIES",
    "KernelSplit",
    "OrdersSplit",
    "SplitRule",
    "check_split",
    "kernel_split",
    "split_node_rule",
]
