r"""``near_opt_bv``'s research variants in the torch kernel: the proportional score split (C4c).

The float64 counterpart of :data:`bench.experiments.near_opt_variants.PROPORTIONAL` (read
``bench/experiments/near_opt_variants.py``), kept outside the package with it: a
:class:`~spectr_gbv.gpu.kernels.node_split.KernelSplit` passed as
``split_node_rule(..., split=KERNEL_PROPORTIONAL)`` or ``score_selection(inputs, KERNEL_PROPORTIONAL)``.

a*, the acceptance vector of step 1 (support by t/q descending, ties by id as
:func:`~spectr_gbv.gpu.kernels.coverage.mixture_node_rule`); :math:`\lambda`, the largest share
with :math:`(a^* - \lambda q)^+/(1 - \lambda)` in the polymatroid (:func:`max_share`); where
:math:`\lambda < 1`, b = that vector raised to a base (step 2, same order), which the caller
peels. Tests: ``tests/experiments/test_near_opt_kernel_variants.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spectr_gbv.gpu.kernels.coverage import raise_to_base, ratio_acceptance
from spectr_gbv.gpu.kernels.node_laws import NodeLaw

#: :func:`max_share`: a proportional share above ``1 - SHARE_ATOL`` is 1 (d = q).
SHARE_ATOL: float = 1e-12


def max_share(
    a: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Largest :math:`\lambda \in [0, 1]` with :math:`(a - \lambda q)^+/(1 - \lambda)` in the polymatroid; a tight set.

    The minimisers of :math:`(1 - \lambda) G(q(X)) - (a - \lambda q)(X)` are prefixes of the
    a/q order whatever :math:`\lambda` (the weights' ratios are :math:`a/q - \lambda`), so the
    reference's Dinkelbach iterations end at the closed form
    :math:`\lambda = \min(1, \min_j [G(Q_j) - A_j]/[G(Q_j) - Q_j])` over the prefixes j with
    :math:`G(Q_j) > Q_j` (Q, A prefix sums of q and a; through the complement past q-mass 1/2).
    Values above ``1 -`` :data:`SHARE_ATOL` are 1. The minimising prefix is tight for
    :math:`(a - \lambda q)^+/(1 - \lambda)` (returned as bool [N, n], empty where
    :math:`\lambda = 1`).

    Parameters
    ----------
    a : Tensor, float64 [N, n]
        A vector of each node's polymatroid (the acceptance vector) on compact positions.
    q : Tensor, float64 [N, n]
        Draft rows on the same positions.
    valid : Tensor, bool [N, n]
        Support.
    law : NodeLaw
        The nodes' concave functions.

    Returns
    -------
    lam : Tensor, float64 [N]
    tight : Tensor, bool [N, n]
    """
    N, n = q.shape
    key = torch.where(valid, a / torch.where(valid, q, 1.0), -torch.inf)  # a/q, padding last
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    vs = valid.gather(1, order)
    qs = torch.where(vs, q.gather(1, order), 0.0)
    avs = torch.where(vs, a.gather(1, order), 0.0)

    def suffix(x: torch.Tensor) -> torch.Tensor:  # sum strictly after each position
        return torch.flip(torch.cumsum(torch.flip(x, [-1]), -1), [-1]) - x

    mass, asum, rest, arest = torch.cumsum(qs, -1), torch.cumsum(avs, -1), suffix(qs), suffix(avs)
    direct = mass <= 0.5
    gx, tail = law.g_direct(mass), law.tail(rest.clamp_min(0.0))
    den = torch.where(direct, gx - mass, rest - tail)
    num = torch.where(direct, gx - asum, (1.0 - asum[:, -1:]) + arest - tail)
    ok = vs & (den > 0)
    ratio = torch.where(ok, num / torch.where(ok, den, 1.0), torch.inf)
    best, j = torch.min(ratio, -1)
    lam = best.clamp(0.0, 1.0)
    lam = torch.where(lam >= 1.0 - SHARE_ATOL, 1.0, lam)
    rank = torch.arange(n, device=q.device)
    inside = (rank.unsqueeze(0) <= j.unsqueeze(-1)) & (lam < 1).unsqueeze(-1)
    return lam, torch.zeros_like(valid).scatter(1, order, inside) & valid


@dataclass(frozen=True)
class KernelProportionalSplit:
    """The proportional split (candidate C4c) as a :class:`~spectr_gbv.gpu.kernels.node_split.KernelSplit`.

    Attributes
    ----------
    name : str
        ``"proportional"``.
    priorities : tuple of str
        ``("ratio",)``.
    """

    name: str = "proportional"
    priorities: tuple[str, ...] = ("ratio",)

    def __call__(
        self, t: torch.Tensor, q: torch.Tensor, valid: torch.Tensor, law: NodeLaw, priority: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The largest share and the raised base where it is below 1 (other rows: q)."""
        a = ratio_acceptance(t, q, valid, law)
        lam, tight = max_share(a, q, valid, law)
        part = (lam < 1).nonzero().squeeze(-1)
        b = q.clone()
        if part.numel():
            qp, vp, lp = q[part], valid[part], law[part]
            lam_p = lam[part].unsqueeze(-1)
            c = torch.where(vp, (a[part] - lam_p * qp).clamp_min(0.0) / (1.0 - lam_p), 0.0)
            b[part] = raise_to_base(c, qp, vp, lp, tight[part])
        return lam, b


#: The proportional split of the kernel (``split="proportional"`` before it left the package).
KERNEL_PROPORTIONAL = KernelProportionalSplit()
