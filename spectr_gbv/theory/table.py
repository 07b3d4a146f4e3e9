"""All bounds of one instance side by side, per K (what ``spectr-gbv bound`` prints)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import Scalar, json_value
from spectr_gbv.theory import bounds
from spectr_gbv.theory.lp import check_lp_fits, optimal_coupling, optimal_lossless


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
        Bad K, or :class:`~spectr_gbv.theory.lp.LPTooLargeError` when an LP would not fit
        (every K's two LPs are checked before any is solved).

    References
    ----------
    THEORY.md sections 3-5.
    """
    p, q, L = instance.target, instance.draft, instance.L
    ks = list(ks)
    closed = bounds.closed_form_bounds(p, q, ks, L)  # checks every K before any work
    sd = bounds.sd_expected_accepted(p, q, L)
    bv = bounds.bv_expected_accepted(p, q, L)
    if with_lp:  # refuse a too-large LP before minutes of solving the others
        for k in ks:
            for kind in ("opt", "ot"):
                check_lp_fits(p, q, k, L, kind)
    rows = []
    for k in ks:
        rows.append(
            BoundRow(
                K=k,
                cic_bound=closed["cic_bound"][k],
                cic_bound_lossless=closed["cic_bound_lossless"][k],
                sd=sd,
                bv=bv,
                prefix_relaxation=closed["prefix_relaxation"][k],
                opt=optimal_lossless(p, q, k, L).value if with_lp else None,
                ot=optimal_coupling(p, q, k, L).value if with_lp else None,
            )
        )
    return rows
