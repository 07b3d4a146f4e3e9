"""All bounds of one instance side by side, per K (what ``spectr-gbv bound`` prints)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import Scalar, json_value, scalar_one, sum_exact
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory import bounds
from spectr_gbv.theory._checks import check_models
from spectr_gbv.theory.lp import optimal_coupling, optimal_lossless


@dataclass(frozen=True)
class BoundRow:
    """Expected accepted tokens E[tau] of every bound at one K (add 1 for block efficiency).

    Attributes
    ----------
    K : int
    cic_bound, cic_bound_lossless, sd, bv, prefix_relaxation : Fraction or float
        B(K), B_BV(K), SD, BV (single draft, independent of K) and PR(K); exact when the
        instance is.
    opt, ot : float or None
        LP optima OPT(K) and OT(K) (HiGHS, float64); None when not computed.
    """

    K: int
    cic_bound: Scalar
    cic_bound_lossless: Scalar
    sd: Scalar
    bv: Scalar
    prefix_relaxation: Scalar
    opt: float | None
    ot: float | None

    def to_json(self) -> dict[str, int | str | float | None]:
        """JSON row: exact values as ``"a/b"`` strings, LP values as numbers."""
        return {
            "K": self.K,
            "cic_bound": json_value(self.cic_bound),
            "cic_bound_lossless": json_value(self.cic_bound_lossless),
            "sd": json_value(self.sd),
            "bv": json_value(self.bv),
            "prefix_relaxation": json_value(self.prefix_relaxation),
            "opt": self.opt,
            "ot": self.ot,
        }


def bound_table(instance: Instance, ks: Sequence[int], *, with_lp: bool = True) -> list[BoundRow]:
    """Compute B, B_BV, SD, BV, PR (closed forms) and OPT, OT (LPs) for each K in ``ks``.

    Parameters
    ----------
    instance : Instance
    ks : sequence of int
        Numbers of drafts, each >= 1.
    with_lp : bool
        Solve the OPT(K) and OT(K) linear programs (else they are None).

    Returns
    -------
    list of BoundRow, one per K in the given order.

    Raises
    ------
    ValueError
        Bad K, or :class:`~spectr_gbv.theory.lp.LPTooLargeError` when an LP would not fit.

    References
    ----------
    THEORY.md sections 3-5.
    """
    p, q, L = instance.target, instance.draft, instance.L
    ks = list(ks)
    for k in ks:
        check_models(p, q, L, k)  # every K checked before any work
    sd = bounds.sd_expected_accepted(p, q, L)
    closed = _closed_forms(p, q, L, ks)
    bv = closed[1][1] if 1 in closed else bounds.bv_expected_accepted(p, q, L)
    rows = []
    for k in ks:
        cic, lossless, relaxation = closed[k]
        rows.append(
            BoundRow(
                K=k,
                cic_bound=cic,
                cic_bound_lossless=lossless,
                sd=sd,
                bv=bv,
                prefix_relaxation=relaxation,
                opt=optimal_lossless(p, q, k, L).value if with_lp else None,
                ot=optimal_coupling(p, q, k, L).value if with_lp else None,
            )
        )
    return rows


def _closed_forms(p: TabularAR, q: TabularAR, L: int, ks: Sequence[int]) -> dict[int, tuple[Scalar, Scalar, Scalar]]:
    """B(K), B_BV(K) and PR(K) for every K, sharing the per-level ratios and weights across K.

    The same sums as :func:`~spectr_gbv.theory.bounds.cic_bound`,
    :func:`~spectr_gbv.theory.bounds.cic_bound_lossless` and
    :func:`~spectr_gbv.theory.bounds.prefix_relaxation` (identical values), with the ratio
    ``r``, the running minimum ``beta`` and ``1 - r``, ``1 - beta``, ``1 - q`` computed once
    per prefix length instead of once per bound and K.
    """
    one = scalar_one(p.exact)
    totals = {k: [one * 0, one * 0, one * 0] for k in ks}
    weight = None
    for _, p_joint, q_joint, ratio in bounds._prefix_levels(p, q, L):
        weight = ratio if weight is None else np.minimum(weight[..., None], ratio)
        miss_r, miss_beta, miss_q = one - ratio, one - weight, one - q_joint
        for k in totals:
            totals[k][0] += sum_exact(p_joint * (one - miss_r**k))
            totals[k][1] += sum_exact(p_joint * (one - miss_beta**k))
            totals[k][2] += sum_exact(np.minimum(p_joint, one - miss_q**k))
    return {k: (a, b, c) for k, (a, b, c) in totals.items()}
