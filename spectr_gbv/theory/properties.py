"""Checks of the SpecTr-GBV paper's stated properties of the CIC bound on concrete instances.

Each check returns a :class:`PropertyReport` (holds / not, the values compared, and the
counterexample when one fails) instead of raising, so the claims ledger and property tests
can read the verdict. Exact instances are compared exactly (Fractions); LP optima (floats)
are compared with the stated tolerance :data:`LP_TOL`; float instances use :data:`FLOAT_TOL`.
The term-level identities behind them are proved symbolically in
:mod:`spectr_gbv.theory.symbolic`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.numbers import Scalar, json_value, safe_divide, scalar_one, sum_exact
from spectr_gbv.theory import bounds
from spectr_gbv.theory.lp import optimal_coupling, optimal_lossless

#: Tolerance for comparisons that involve an LP optimum (HiGHS, float64).
LP_TOL = 1e-8
#: Tolerance for identities evaluated on float64 instances.
FLOAT_TOL = 1e-12


@dataclass
class PropertyReport:
    """Verdict of one property check on one instance.

    Attributes
    ----------
    name : str
        ``"monotonicity"``, ``"convergence"``, ``"k1_reduction"`` or ``"orderings"``.
    holds : bool
        True when every sub-check passed.
    instance : str
        The instance's name.
    checks : list of dict
        One entry per sub-check: ``{"check": str, "holds": bool, "values": {...}}`` with
        values JSON-ready (``"a/b"`` strings when exact, floats otherwise).
    counterexample : dict or None
        The first failing sub-check (with the instance name), None when ``holds``.
    """

    name: str
    holds: bool
    instance: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    counterexample: dict[str, Any] | None = None

    def add(self, check: str, holds: bool, **values: Any) -> None:
        """Record one sub-check (values may be Fractions, floats or bools)."""
        enc = {k: json_value(v) if not isinstance(v, bool | int | str) else v for k, v in values.items()}
        entry = {"check": check, "holds": bool(holds), "values": enc}
        self.checks.append(entry)
        if not holds:
            self.holds = False
            if self.counterexample is None:
                self.counterexample = {"instance": self.instance, **entry}


def _eq(a: Scalar, b: Scalar, exact: bool, tol: float = FLOAT_TOL) -> bool:
    return a == b if exact else abs(float(a) - float(b)) <= tol


def _le(a: Scalar, b: Scalar, tol: float) -> bool:
    return float(a) <= float(b) + tol


def _check_ks(ks: Sequence[int]) -> list[int]:
    out = [int(k) for k in ks]
    if not out or any(k < 1 for k in out):
        raise ValueError(f"ks (numbers of drafts K) must be a non-empty list of ints >= 1, got {ks!r}")
    return out


def check_monotonicity(instance: Instance, ks: Sequence[int] = (1, 2, 3, 4)) -> PropertyReport:
    r"""Monotonicity: :math:`B(K+1) - B(K) = \sum p\,r(1-r)^K \ge 0` (and the same for B_BV).

    Also checks strictness: the increment is > 0 iff some prefix with p > 0 has 0 < r < 1.

    Parameters
    ----------
    instance : Instance
    ks : sequence of int
        The K values at which the increment is checked.

    Returns
    -------
    PropertyReport

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925 (monotone bound, as reported); THEORY.md section 4.
    """
    p, q, L = instance.target, instance.draft, instance.L
    rep = PropertyReport("monotonicity", True, instance.name)
    one = scalar_one(instance.exact)
    strict_possible = False
    for i in range(1, L + 1):
        pj = p.joint(i)
        r = np.minimum(safe_divide(q.joint(i), pj, fill=one), one)
        strict_possible |= bool(np.any((pj > 0) & (r > 0) & (r < 1)))
    for k in _check_ks(ks):
        b0, b1 = bounds.cic_bound(p, q, k, L), bounds.cic_bound(p, q, k + 1, L)
        inc = bounds.cic_bound_increment(p, q, k, L)
        rep.add(
            f"B({k + 1}) - B({k}) == sum p r (1-r)^K",
            _eq(b1 - b0, inc, instance.exact),
            K=k,
            difference=b1 - b0,
            increment=inc,
        )
        rep.add(f"B({k + 1}) >= B({k})", b1 >= b0, K=k, B_K=b0, B_K1=b1)
        rep.add(
            f"B({k + 1}) > B({k}) iff some p > 0 has 0 < r < 1",
            (b1 > b0) == strict_possible if instance.exact else True,
            K=k,
            strict=bool(b1 > b0),
            expected_strict=strict_possible,
        )
        l0, l1 = bounds.cic_bound_lossless(p, q, k, L), bounds.cic_bound_lossless(p, q, k + 1, L)
        rep.add(f"B_BV({k + 1}) >= B_BV({k})", l1 >= l0, K=k, B_BV_K=l0, B_BV_K1=l1)
    return rep


def check_convergence(instance: Instance, ks: Sequence[int] = (1, 2, 4, 8, 16, 64)) -> PropertyReport:
    r"""Convergence: :math:`B(K) \uparrow \sum_i P_{Y\sim p}(q(Y^i) > 0)`, which is L iff q covers p.

    Checks, at each K: ``B(K) <= limit`` and the exact gap identity
    ``limit - B(K) = sum_{r > 0} p (1 - r)^K`` (so the gap vanishes geometrically, at rate
    ``1 - min r``); the same for B_BV; and ``limit == L`` iff
    :func:`~spectr_gbv.theory.bounds.draft_covers_target`.

    Returns
    -------
    PropertyReport

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925 (convergence to L, as reported); THEORY.md section 4.
    """
    p, q, L = instance.target, instance.draft, instance.L
    exact = instance.exact
    rep = PropertyReport("convergence", True, instance.name)
    limit = bounds.cic_limit(p, q, L)
    covers = bounds.draft_covers_target(p, q, L)
    rep.add(
        "limit == L iff q covers supp p on V^L",
        (limit == L) == covers if exact else True,
        limit=limit,
        L=L,
        covers=covers,
    )
    one = scalar_one(exact)
    for k in _check_ks(ks):
        gap: Scalar = one * 0
        for i in range(1, L + 1):
            pj = p.joint(i)
            r = np.minimum(safe_divide(q.joint(i), pj, fill=one), one)
            gap += sum_exact(np.where(r > 0, pj * (one - r) ** k, pj * 0))
        b = bounds.cic_bound(p, q, k, L)
        rep.add(
            f"limit - B({k}) == sum_(r>0) p (1-r)^K",
            _eq(limit - b, gap, exact),
            K=k,
            gap=limit - b,
            identity=gap,
        )
        rep.add(f"B({k}) <= limit", _le(b, limit, 0 if exact else FLOAT_TOL), K=k, B=b, limit=limit)
        bl = bounds.cic_bound_lossless(p, q, k, L)
        rep.add(f"B_BV({k}) <= limit", _le(bl, limit, 0 if exact else FLOAT_TOL), K=k, B_BV=bl)
    return rep


def check_k1_reduction(instance: Instance, *, with_lp: bool = True) -> PropertyReport:
    """K = 1 reduction: B(1) = greedy value = OT(1) and B_BV(1) = BV = OPT(1).

    Closed forms are compared exactly; the LP optima (``with_lp``) within :data:`LP_TOL`.

    Returns
    -------
    PropertyReport

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925 (consistency at K = 1, as reported); Sun et al. 2024,
    arXiv 2403.10444 (BV optimality); THEORY.md sections 3-5.
    """
    p, q, L = instance.target, instance.draft, instance.L
    exact = instance.exact
    rep = PropertyReport("k1_reduction", True, instance.name)
    b1 = bounds.cic_bound(p, q, 1, L)
    greedy = bounds.greedy_expected_accepted(p, q, L)
    bl1 = bounds.cic_bound_lossless(p, q, 1, L)
    bv = bounds.bv_expected_accepted(p, q, L)
    rep.add("B(1) == greedy value", _eq(b1, greedy, exact), B_1=b1, greedy=greedy)
    rep.add("B_BV(1) == BV", _eq(bl1, bv, exact), B_BV_1=bl1, BV=bv)
    if with_lp:
        ot1 = optimal_coupling(p, q, 1, L).value
        opt1 = optimal_lossless(p, q, 1, L).value
        rep.add("OT(1) == B(1)", abs(ot1 - float(b1)) <= LP_TOL, OT_1=ot1, B_1=b1)
        rep.add("OPT(1) == BV", abs(opt1 - float(bv)) <= LP_TOL, OPT_1=opt1, BV=bv)
    return rep


def check_orderings(instance: Instance, ks: Sequence[int] = (1, 2, 3)) -> PropertyReport:
    """Orderings: B_BV(K) <= OPT(K) <= OT(K) <= PR(K) and B(K) <= OT(K), within :data:`LP_TOL`.

    ``B(K) <= OT(K)`` is not implied by the definitions (CIC couplings need not have i.i.d.
    draft marginals, THEORY.md section 4); this check is where a counterexample would show.

    Returns
    -------
    PropertyReport

    References
    ----------
    THEORY.md sections 4-5 (observed orderings, to be re-checked).
    """
    p, q, L = instance.target, instance.draft, instance.L
    rep = PropertyReport("orderings", True, instance.name)
    for k in _check_ks(ks):
        b = bounds.cic_bound(p, q, k, L)
        bl = bounds.cic_bound_lossless(p, q, k, L)
        pr = bounds.prefix_relaxation(p, q, k, L)
        opt = optimal_lossless(p, q, k, L).value
        ot = optimal_coupling(p, q, k, L).value
        rep.add(f"B_BV({k}) <= OPT({k})", _le(bl, opt, LP_TOL), K=k, B_BV=bl, OPT=opt)
        rep.add(f"OPT({k}) <= OT({k})", _le(opt, ot, LP_TOL), K=k, OPT=opt, OT=ot)
        rep.add(f"OT({k}) <= PR({k})", _le(ot, pr, LP_TOL), K=k, OT=ot, PR=pr)
        rep.add(f"B({k}) <= OT({k})", _le(b, ot, LP_TOL), K=k, B=b, OT=ot)
    return rep


def check_all(instance: Instance, ks: Sequence[int] = (1, 2, 3), *, with_lp: bool = True) -> list[PropertyReport]:
    """Run every property check of this module on one instance.

    Parameters
    ----------
    instance : Instance
    ks : sequence of int
        K values for monotonicity and orderings.
    with_lp : bool
        Include the LP-based checks (OPT, OT); they dominate the run time.

    Returns
    -------
    list of PropertyReport
    """
    out = [
        check_monotonicity(instance, ks),
        check_convergence(instance),
        check_k1_reduction(instance, with_lp=with_lp),
    ]
    if with_lp:
        out.append(check_orderings(instance, ks))
    return out
