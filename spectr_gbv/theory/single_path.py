r"""OPT(K) as a single-path problem: the best law of one selected draft, block-verified.

Any rule that selects one of K i.i.d. drafts (using the drafts and independent randomness)
gives the selected draft X a law r in the base polytope of the coverage function on blocks,

.. math::
    f(S) = P(\text{some draft lies in } S) = 1 - (1 - q(S))^K, \qquad S \subseteq V^L,

and block verification of X with draft law r (Sun et al. 2024, Algorithm 2) is lossless with
value :math:`V_{BV}(p, r) = \sum_{i=1}^{L} \sum_{x^i} p(x^i) \min_{j \le i} \min\{1, r(x^j)/p(x^j)\}`
(THEORY.md section 3). Conversely, any stateless lossless K-draft verifier is a single-draft
verifier of the draft X its output follows furthest (lowest index among ties, draft 1 when
nothing is accepted; the other drafts become the verifier's private randomness given X), and
X's law is a base of f; since BV is optimal among single-draft verifiers for every draft law,
its E[tau] is at most :math:`V_{BV}(p, r)`. Hence

.. math::
    OPT(K) = \max_{r \in B(f)} V_{BV}(p, r),

a concave maximisation over a polymatroid base polytope (docs/near_opt_bv.md, "The optimum is
a single path"). :func:`single_path_optimum` solves it as a linear program (HiGHS): variables
r(x) on the blocks with q(x) > 0 and z(u) = :math:`\min_{j \le |u|} \min\{1, r(u^j)/p(u^j)\}`
on the prefixes with p(u) > 0,

.. math::
    \max \sum_u p(u) z(u) \quad \text{s.t.} \quad p(u) z(u) \le r(u),\ z(u) \le z(u^{|u|-1}),\
    0 \le z \le 1,\ \sum_x r(x) = 1,\ r(S) \le f(S),

the exponentially many polymatroid rows generated lazily: the most violated set is a threshold
set of r/q (f is concave in q(S)), so each round checks the prefixes of one sorted order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory.checks import check_models

#: Refuse instances with more draft blocks of positive probability than this (the LP has one
#: variable per block and per prefix).
MAX_SINGLE_PATH_BLOCKS = 20_000

#: A polymatroid row counts as violated when r(S) exceeds f(S) by more than this (HiGHS's
#: primal feasibility tolerance is 1e-7; a row already in the LP is never added again).
SEPARATION_TOL = 1e-9

#: HiGHS feasibility tolerances (tighter than its 1e-7 default, so that the generated rows hold
#: to about 1e-10 and the value is within about 1e-9 of the optimum).
HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}

#: Most rounds of row generation before :class:`RuntimeError`.
MAX_ROUNDS = 2_000


@dataclass(frozen=True)
class SinglePathResult:
    r"""Optimum of :func:`single_path_optimum`.

    Attributes
    ----------
    value : float
        :math:`\max_{r \in B(f)} V_{BV}(p, r)` = OPT(K), expected accepted tokens (HiGHS, float64).
    path_law : dict of tuple of int to float
        An optimal r on the blocks with q(x) > 0 (zero entries omitted).
    rounds : int
        LP solves (row-generation rounds).
    polymatroid_rows : int
        Polymatroid rows generated.
    value_exact_check : Fraction
        :math:`V_{BV}(p, \hat r)` in exact arithmetic, :math:`\hat r` the float r read exactly
        and renormalised.
    polymatroid_excess : Fraction
        :math:`\max_S [\hat r(S) - f(S)]` over the threshold sets of :math:`\hat r/q` (the
        maximum over all S), exactly; at most a few ULPs when the LP is solved.
    """

    value: float
    path_law: dict[tuple[int, ...], float] = field(repr=False)
    rounds: int
    polymatroid_rows: int
    value_exact_check: Fraction
    polymatroid_excess: Fraction


def bv_value(target: TabularAR, path_law: dict[tuple[int, ...], Fraction], draft_length: int) -> Fraction:
    r"""Block verification's exact E[tau] for a draft law given on blocks: :math:`V_{BV}(p, r)`.

    Parameters
    ----------
    target : TabularAR
        p (Fractions), laws at prefixes of length 0..L-1 at least.
    path_law : dict of tuple of int to Fraction
        r on V^L (missing blocks have probability 0; need not be normalised).
    draft_length : int
        L.

    Returns
    -------
    Fraction
        :math:`\sum_i \sum_{x^i} p(x^i) \min_{j \le i} \min\{1, r(x^j)/p(x^j)\}` (THEORY.md section 3).
    """
    prefix_mass: dict[tuple[int, ...], Fraction] = {}
    for x, w in path_law.items():
        for i in range(1, draft_length + 1):
            prefix_mass[x[:i]] = prefix_mass.get(x[:i], Fraction(0)) + w
    total = Fraction(0)
    stack: list[tuple[tuple[int, ...], Fraction]] = [((), Fraction(1))]
    while stack:
        u, beta = stack.pop()
        if len(u) == draft_length:
            continue
        for v in range(target.n):
            pu = Fraction(target.prob(u + (v,)))
            if pu == 0:
                continue
            b = min(beta, Fraction(1), prefix_mass.get(u + (v,), Fraction(0)) / pu)
            if b == 0:
                continue
            total += pu * b
            stack.append((u + (v,), b))
    return total


def single_path_optimum(
    target: TabularAR, draft: TabularAR, num_drafts: int, draft_length: int, *, max_blocks: int | None = None
) -> SinglePathResult:
    r"""OPT(K) by the single-path LP (module docstring), with an optimal selected-draft law.

    Parameters
    ----------
    target : TabularAR
        p, laws at prefixes of length 0..L-1 at least.
    draft : TabularAR
        q, laws at prefixes of length 0..L-1, same vocabulary.
    num_drafts : int
        K >= 1 i.i.d. drafts.
    draft_length : int
        L >= 1.
    max_blocks : int, optional
        Refuse more draft blocks of positive probability (default :data:`MAX_SINGLE_PATH_BLOCKS`).

    Returns
    -------
    SinglePathResult

    Raises
    ------
    ValueError
        Invalid models, K or L (the checks of :func:`~spectr_gbv.theory.lp.optimal_lossless`), or more
        blocks than ``max_blocks`` (the message names the argument).
    RuntimeError
        HiGHS fails, or row generation does not close within :data:`MAX_ROUNDS` rounds.

    References
    ----------
    This project (docs/near_opt_bv.md); Sun et al. 2024, arXiv 2403.10444 (BV and its
    optimality for one draft); Fujishige 2005 (polymatroids).
    """
    target, draft = check_models(target, draft, draft_length, num_drafts)
    limit = MAX_SINGLE_PATH_BLOCKS if max_blocks is None else max_blocks
    n, L, K = target.n, draft_length, num_drafts
    blocks = [x for x in itertools.product(range(n), repeat=L) if draft.prob(x) > 0]
    if len(blocks) > limit:
        raise ValueError(
            f"max_blocks: {len(blocks)} draft blocks of positive probability exceed the limit {limit} "
            f"(n={n}, L={L}); raise max_blocks or use a smaller instance"
        )
    qf = np.array([float(draft.prob(x)) for x in blocks])
    prefixes = [u for i in range(1, L + 1) for u in itertools.product(range(n), repeat=i) if target.prob(u) > 0]
    nb, nz = len(blocks), len(prefixes)
    zi = {u: nb + j for j, u in enumerate(prefixes)}
    cost = np.zeros(nb + nz)
    rows, cols, vals, rhs = [], [], [], []

    def add_row(entries: list[tuple[int, float]], bound: float) -> None:
        r = len(rhs)
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        rhs.append(bound)

    extensions: dict[tuple[int, ...], list[int]] = {}
    for i, x in enumerate(blocks):
        for j in range(1, L + 1):
            extensions.setdefault(x[:j], []).append(i)
    for u in prefixes:
        pu = float(target.prob(u))
        cost[zi[u]] = -pu
        add_row([(zi[u], pu)] + [(i, -1.0) for i in extensions.get(u, [])], 0.0)
        if len(u) > 1:
            add_row([(zi[u], 1.0), (zi[u[:-1]], -1.0)], 0.0)  # the parent has p > 0 when u does
    base_rows = len(rhs)
    a_eq = sparse.csr_matrix((np.ones(nb), (np.zeros(nb, dtype=int), np.arange(nb))), shape=(1, nb + nz))
    bounds = [(0.0, None)] * nb + [(0.0, 1.0)] * nz
    generated: set[frozenset[int]] = set()
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        a_ub = sparse.csr_matrix((vals, (rows, cols)), shape=(len(rhs), nb + nz))
        res = linprog(
            cost, A_ub=a_ub, b_ub=rhs, A_eq=a_eq, b_eq=[1.0], bounds=bounds, method="highs", options=HIGHS_OPTIONS
        )
        if res.status != 0:
            raise RuntimeError(f"single_path_optimum: HiGHS status {res.status}: {res.message}")
        r = res.x[:nb]
        order = np.argsort(-(r / qf), kind="stable")
        mass = np.cumsum(qf[order])
        load = np.cumsum(r[order])
        with np.errstate(divide="ignore"):  # mass 1 (all blocks): log1p(-1) = -inf, coverage 1
            cover = -np.expm1(K * np.log1p(-np.minimum(mass, 1.0)))
        fresh = [
            j
            for j in np.nonzero(load > cover + SEPARATION_TOL)[0]
            if frozenset(order[: j + 1].tolist()) not in generated
        ]
        if not fresh:
            break
        for j in fresh[:: max(1, len(fresh) // 8)]:  # at most about 8 rows a round
            generated.add(frozenset(order[: j + 1].tolist()))
            add_row([(int(i), 1.0) for i in order[: j + 1]], float(cover[j]))
    else:
        raise RuntimeError(f"single_path_optimum: row generation did not close in {MAX_ROUNDS} rounds")
    exact = [Fraction(float(v)) for v in np.clip(r, 0.0, None)]
    total = sum(exact, Fraction(0))
    law = {x: v / total for x, v in zip(blocks, exact, strict=True) if v > 0}
    # exact separation of the rounded law: the worst set is a threshold set of r/q
    qe = [Fraction(draft.prob(x)) for x in blocks]
    idx = sorted(range(nb), key=lambda i: -(law.get(blocks[i], Fraction(0)) / qe[i]))
    excess, m_acc, r_acc = Fraction(0), Fraction(0), Fraction(0)
    for i in idx:
        m_acc += qe[i]
        r_acc += law.get(blocks[i], Fraction(0))
        excess = max(excess, r_acc - (1 - (1 - m_acc) ** K))
    return SinglePathResult(
        value=float(-res.fun),
        path_law={x: float(v) for x, v in law.items()},
        rounds=rounds,
        polymatroid_rows=len(rhs) - base_rows,
        value_exact_check=bv_value(target, law, L),
        polymatroid_excess=excess,
    )


__all__ = [
    "HIGHS_OPTIONS",
    "MAX_ROUNDS",
    "MAX_SINGLE_PATH_BLOCKS",
    "SEPARATION_TOL",
    "SinglePathResult",
    "bv_value",
    "single_path_optimum",
]
