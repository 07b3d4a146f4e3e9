r"""Symbolic proofs (sympy) of the CIC bound's identities, per prefix term.

Each bound is a sum over prefixes of one term in ``p = p(x^i)`` and a weight ``r`` in
``[0, 1]`` (``r = min{1, q/p}`` for B(K), ``beta`` for B_BV(K)), so an identity that holds
for the term with symbolic ``p``, ``r`` and a symbolic positive integer ``K`` holds for the
sums on every instance. These functions let sympy do the algebra and return a record of
what was proved; the instance-level checks in :mod:`spectr_gbv.theory.properties` then
confirm the same identities exactly (Fractions) on concrete instances.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True)
class SymbolicProof:
    """Record of one identity proved with sympy.

    Attributes
    ----------
    name : str
        Short identifier (``"monotonicity_identity"``, ...).
    statement : str
        The identity in words and symbols.
    lhs, rhs : sympy.Expr
        Both sides as sympy expressions.
    residual : sympy.Expr
        ``simplify(lhs - rhs)`` (after case splitting where needed); 0 when proved.
    holds : bool
        ``residual == 0``.
    assumptions : str
        Assumptions on the symbols.
    """

    name: str
    statement: str
    lhs: sp.Expr
    rhs: sp.Expr
    residual: sp.Expr
    holds: bool
    assumptions: str


def _term(p: sp.Expr, r: sp.Expr, K: sp.Expr) -> sp.Expr:
    """One prefix's contribution to the bound: p [1 - (1 - r)^K]."""
    return p * (1 - (1 - r) ** K)


def prove_monotonicity_identity() -> SymbolicProof:
    r"""Prove :math:`B(K+1) - B(K) = \sum p\,r\,(1-r)^K` term by term, for symbolic p, r, K.

    The same algebra proves the identity for B_BV (r replaced by beta).

    Returns
    -------
    SymbolicProof

    References
    ----------
    Lin et al., SpecTr-GBV, arXiv 2604.25925 (monotonicity of the CIC bound, as reported);
    THEORY.md section 4.

    Examples
    --------
    >>> prove_monotonicity_identity().holds
    True
    """
    p, r = sp.symbols("p r", real=True)
    K = sp.Symbol("K", integer=True, positive=True)
    lhs = _term(p, r, K + 1) - _term(p, r, K)
    rhs = p * r * (1 - r) ** K
    residual = sp.simplify(sp.expand(sp.powsimp(sp.expand_power_exp(lhs - rhs))))
    return SymbolicProof(
        name="monotonicity_identity",
        statement="p[1-(1-r)^(K+1)] - p[1-(1-r)^K] = p r (1-r)^K",
        lhs=lhs,
        rhs=rhs,
        residual=residual,
        holds=residual == 0,
        assumptions="p, r real; K a positive integer",
    )


def prove_k1_reduction() -> SymbolicProof:
    r"""Prove the K = 1 reduction :math:`p[1-(1-\min\{1, q/p\})] = \min\{p, q\}` for p > 0, q >= 0.

    ``min`` is written as a sympy Piecewise and the difference folded into cases (q <= p and
    q > p), each simplifying to 0; summed over prefixes this is B(1) = sum min{p(x^i), q(x^i)},
    the greedy-BV value. (For B_BV, ``p[1-(1-beta)] = p beta`` is the BV value by definition.)

    Returns
    -------
    SymbolicProof

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925 (consistency with greedy block verification, as
    reported); THEORY.md section 4.
    """
    p, q = sp.symbols("p q", positive=True)
    r = sp.Piecewise((q / p, q <= p), (1, True))
    lhs = _term(p, r, 1)
    rhs = sp.Piecewise((q, q <= p), (p, True))
    residual = sp.simplify(sp.piecewise_fold(lhs - rhs))
    return SymbolicProof(
        name="k1_reduction",
        statement="p[1-(1-min{1,q/p})] = min{p, q}",
        lhs=lhs,
        rhs=rhs,
        residual=residual,
        holds=residual == 0,
        assumptions="p > 0, q > 0 (q = 0 gives 0 = 0 directly)",
    )


def prove_convergence() -> SymbolicProof:
    r"""Prove :math:`\lim_{K\to\infty} p[1-(1-r)^K] = p` for 0 < r <= 1.

    Writes ``1 - r = a/(1+a)`` with ``a > 0`` (which covers every r in (0, 1)) and lets sympy
    take the limit; at r = 1 the term is p for every K >= 1 and at r = 0 it is 0 for every K
    (both checked symbolically too). Summed over prefixes:
    ``lim B(K) = sum_i P_{Y~p}(q(Y^i) > 0)``.

    Returns
    -------
    SymbolicProof

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925 (convergence, as reported); THEORY.md section 4.
    """
    p = sp.Symbol("p", positive=True)
    a = sp.Symbol("a", positive=True)
    K = sp.Symbol("K", integer=True, positive=True)
    lhs = sp.limit(_term(p, 1 - a / (1 + a), K), K, sp.oo)
    residual = sp.simplify(lhs - p)
    if sp.simplify(_term(p, sp.Integer(1), K) - p) != 0 or sp.simplify(_term(p, sp.Integer(0), K)) != 0:
        residual = sp.Symbol("edge_case_failed")
    return SymbolicProof(
        name="convergence",
        statement="lim_{K->oo} p[1-(1-r)^K] = p for 0 < r <= 1 (1-r = a/(1+a), a > 0; r = 1 direct)",
        lhs=lhs,
        rhs=p,
        residual=residual,
        holds=residual == 0,
        assumptions="p > 0, a > 0, K a positive integer",
    )


def all_proofs() -> list[SymbolicProof]:
    """Run every symbolic proof of this module (monotonicity, K = 1 reduction, convergence)."""
    return [prove_monotonicity_identity(), prove_k1_reduction(), prove_convergence()]
