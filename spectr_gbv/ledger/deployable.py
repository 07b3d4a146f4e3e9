r"""What a deployed verifier can reach: verifiers that read only the rows of the drafted prefixes.

OPT(K) (:func:`~spectr_gbv.theory.lp.optimal_lossless`) optimises every instance with all of
its rows. A deployed verifier reads only p and q at the prefixes of the K drafts (and p after
each whole draft), so on two instances whose rows agree along a draft multiset M it must use the
same kernel on M. Two tools measure what that costs (docs/near_opt_bv.md, "Never below the
list"):

* :func:`joint_optimum`: the joint LP over a family of instances, one kernel per class of
  indistinguishable multisets, lossless on every member; it maximises a weighted sum of the
  members' E[tau] (float64, HiGHS).
* :func:`mirrored_pair` and :func:`mirrored_pair_bound`: two instances A and B with the same
  root rows whose continuations favour opposite root tokens, and an exact upper bound on
  E_A[tau] + E_B[tau] for every such verifier.

**The mirrored pair.** Tokens 0 and 1 are live at the root (p(0), p(1) > 0), token 2 is dead
(p(2) = 0 < q(2)); L = 2. Below every root token the draft is certain, q(.|a) = e_0. In A the
target continues a draft through token 1 (p(.|1) = e_0) and never one through 0
(p(.|0) = e_1); B swaps the roles. Let D be the set of drafted root tokens,
:math:`f_a = P(a \in D) = 1 - (1 - q(a))^K`, :math:`c = P(D = \{2\}) = q(2)^K`, Y_1 the first
output token, and :math:`\alpha_a = P(Y_1 = a, a \in D)`. Then

* :math:`E_A[\tau] \le P(Y_1 \in D) + P(Y_1 = 1, 1 \in D) \le (1 - c) + \alpha^A_1`, and
  :math:`E_B[\tau] \le (1 - c) + \alpha^B_0` (a second token is accepted only along the good
  root token; :math:`\alpha_0 + \alpha_1 \le P(D \cap \{0, 1\} \ne \emptyset) = 1 - c`);
* :math:`\alpha_a \le f_a` and :math:`\alpha_a \le p(a) - c\,\rho_a`, where :math:`\rho` is
  the law of Y_1 when every draft starts with 2. Those drafts carry the same rows in A and B,
  so :math:`\rho` is the same in both (and :math:`\rho_0 + \rho_1 = 1` since p(2) = 0).

Hence, for every lossless verifier that reads only the drafted rows,

.. math::
    E_A[\tau] + E_B[\tau] \le 2 (1 - c) + \max_{\rho_1 \in [0, 1]}
    \big[\min\{f_1, p(1) - c \rho_1\} + \min\{f_0, p(0) - c (1 - \rho_1)\}\big],

while a verifier tuned to A alone can reach up to :math:`(1 - c) + f_1` there, and one tuned to
B up to :math:`(1 - c) + f_0`. On the default rows at K = 2 the bound is 5/3, and multi-path GBV
reaches 335/324 on A while ``optimal_multidraft`` reaches 215/324 on B (both OPT(K)): 550/324 >
540/324, so no verifier that reads only the drafted rows is at least as good as both on both
(``spectr-gbv report --ledger field``, claim ``never_below``, computes this live).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory.checks import check_models

#: Root rows of the default mirrored pair: p = (1/4, 3/4, 0), q = (1/18, 5/18, 2/3).
DEFAULT_PAIR_ROOT: tuple[tuple[Fraction, ...], tuple[Fraction, ...]] = (
    (Fraction(1, 4), Fraction(3, 4), Fraction(0)),
    (Fraction(1, 18), Fraction(5, 18), Fraction(2, 3)),
)

#: Refuse a joint LP with more (multiset, output) variables than this.
MAX_JOINT_COLUMNS = 200_000

#: HiGHS feasibility tolerances of the joint LP (values good to about 1e-9).
JOINT_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


def _root_row(row: Sequence[Fraction | int], name: str) -> tuple[Fraction, ...]:
    if len(row) != 3:
        raise ValueError(f"{name}: expected 3 probabilities (tokens 0, 1 live, 2 dead), got {len(row)}")
    out = []
    for v in row:
        if isinstance(v, bool) or not isinstance(v, Fraction | int):
            raise ValueError(f"{name}: expected Fractions or ints (exact), got {v!r}")
        if v < 0:
            raise ValueError(f"{name}: negative probability {v}")
        out.append(Fraction(v))
    if sum(out) != 1:
        raise ValueError(f"{name}: probabilities sum to {sum(out)}, not 1")
    return tuple(out)


def _checked_root(
    target_root: Sequence[Fraction | int], draft_root: Sequence[Fraction | int]
) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    p, q = _root_row(target_root, "target_root"), _root_row(draft_root, "draft_root")
    if p[2] != 0 or p[0] == 0 or p[1] == 0:
        raise ValueError(f"target_root: need p(0), p(1) > 0 and p(2) = 0, got {tuple(map(str, p))}")
    if min(q) == 0:
        raise ValueError(f"draft_root: need q > 0 on all three tokens, got {tuple(map(str, q))}")
    return p, q


def mirrored_pair(
    target_root: Sequence[Fraction | int] = DEFAULT_PAIR_ROOT[0],
    draft_root: Sequence[Fraction | int] = DEFAULT_PAIR_ROOT[1],
) -> tuple[Instance, Instance]:
    """The mirrored pair (A, B) of the module docstring: n = 3, L = 2, exact rows.

    Parameters
    ----------
    target_root, draft_root : sequence of 3 Fractions
        Root rows p and q: p(0), p(1) > 0 = p(2); q > 0 everywhere (default
        :data:`DEFAULT_PAIR_ROOT`).

    Returns
    -------
    (Instance, Instance)
        A (drafts through token 1 continue, through 0 never) and B (the reverse), named
        ``mirrored_pair:A`` and ``mirrored_pair:B``. Rows at depth 2 are uniform.

    Raises
    ------
    ValueError
        A row of the wrong length, not exact, negative or not summing to 1, or violating the
        conditions above (the message names the argument).

    References
    ----------
    This project (docs/near_opt_bv.md, "Never below the list").
    """
    p_root, q_root = _checked_root(target_root, draft_root)
    one, zero, third = Fraction(1), Fraction(0), Fraction(1, 3)
    out = []
    for good, name in ((1, "A"), (0, "B")):
        p: dict[tuple[int, ...], list[Fraction]] = {(): list(p_root)}
        q: dict[tuple[int, ...], list[Fraction]] = {(): list(q_root)}
        for a in range(3):
            q[(a,)] = [one, zero, zero]
            p[(a,)] = [one, zero, zero] if a == good else [zero, one, zero]
            for b in range(3):
                p[(a, b)] = [third] * 3
                q[(a, b)] = [third] * 3
        target, draft = TabularAR(3, p, depth=2, name="target"), TabularAR(3, q, depth=2, name="draft")
        out.append(Instance(target, draft, 2, name=f"mirrored_pair:{name}"))
    return out[0], out[1]


def mirrored_pair_bound(
    num_drafts: int,
    target_root: Sequence[Fraction | int] = DEFAULT_PAIR_ROOT[0],
    draft_root: Sequence[Fraction | int] = DEFAULT_PAIR_ROOT[1],
) -> Fraction:
    r"""Exact upper bound on :math:`E_A[\tau] + E_B[\tau]` for every lossless verifier that reads only drafted rows.

    .. math::
        2 (1 - c) + \max_{\rho_1 \in [0, 1]} \big[\min\{f_1, p(1) - c \rho_1\}
        + \min\{f_0, p(0) - c (1 - \rho_1)\}\big]

    with :math:`f_a = 1 - (1 - q(a))^K` and :math:`c = q(2)^K` (module docstring for the proof).
    The bracket is concave and piecewise linear in :math:`\rho_1`, so it is maximised at one of
    its breakpoints, evaluated exactly.

    Parameters
    ----------
    num_drafts : int
        K >= 1.
    target_root, draft_root : sequence of 3 Fractions
        As in :func:`mirrored_pair`.

    Returns
    -------
    Fraction
        Expected accepted tokens, summed over A and B.

    Raises
    ------
    ValueError
        ``num_drafts`` not an int in 1..10,000, or bad rows (:func:`mirrored_pair`).

    References
    ----------
    This project (docs/near_opt_bv.md, "Never below the list").

    Examples
    --------
    >>> mirrored_pair_bound(2)
    Fraction(5, 3)
    """
    if isinstance(num_drafts, bool) or not isinstance(num_drafts, int) or not 1 <= num_drafts <= 10_000:
        raise ValueError(f"num_drafts (K) must be an int in 1..10000, got {num_drafts!r}")
    p, q = _checked_root(target_root, draft_root)
    k = num_drafts
    f = [1 - (1 - q[a]) ** k for a in (0, 1)]
    c = q[2] ** k

    def bracket(r1: Fraction) -> Fraction:
        return min(f[1], p[1] - c * r1) + min(f[0], p[0] - c * (1 - r1))

    points = {Fraction(0), Fraction(1), (p[1] - f[1]) / c, (f[0] - p[0] + c) / c}
    return 2 * (1 - c) + max(bracket(min(Fraction(1), max(Fraction(0), r))) for r in points)


@dataclass(frozen=True)
class JointOptimum:
    """Result of :func:`joint_optimum`.

    Attributes
    ----------
    value : float
        The maximum of sum_i weights_i E_i[tau] (expected accepted tokens, HiGHS float64).
    values : tuple of float
        E_i[tau] of each member under the optimal shared kernels.
    kernels : int
        Distinct (indistinguishable-multiset) kernels in the LP.
    columns : int
        LP variables.
    """

    value: float
    values: tuple[float, ...]
    kernels: int
    columns: int


def _rows_along(inst: Instance, multiset: tuple[tuple[int, ...], ...]) -> tuple:
    key = []
    for x in multiset:
        for t in range(inst.L + 1):
            key.append(tuple(inst.target.cond(x[:t]).tolist()))
            if t < inst.L:
                key.append(tuple(inst.draft.cond(x[:t]).tolist()))
    return tuple(key)


def _joint_lp(instances: Sequence[Instance], num_drafts: int) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, int]:
    """The joint LP's equality rows (kernels are laws, lossless on every member) and value rows.

    Returns (A_eq, b_eq, values, kernels), ``values`` sparse [members, columns] with
    ``values[i] @ x`` = E_i[tau] for member i.
    Raises what :func:`joint_optimum` documents.
    """
    if not instances:
        raise ValueError("instances: need at least one instance")
    n, L = instances[0].n, instances[0].L
    for i, inst in enumerate(instances):
        if inst.n != n or inst.L != L:
            raise ValueError(f"instances[{i}]: n={inst.n}, L={inst.L}, expected n={n}, L={L} as instances[0]")
        check_models(inst.target, inst.draft, L, num_drafts)
    k = num_drafts
    blocks = list(itertools.product(range(n), repeat=L))

    def outputs(m: tuple) -> list[tuple[int, ...]]:
        prefixes = {()} | {x[:t] for x in m for t in range(1, L + 1)}
        return [z + (v,) for z in sorted(prefixes) for v in range(n)]

    per = []
    for inst in instances:
        qd = {x: Fraction(inst.draft.prob(x)) for x in blocks}
        live = [x for x in blocks if qd[x] > 0]
        size = math.comb(len(live) + k - 1, k) * n * (L + 1) * k  # multisets x outputs, at most
        if size > MAX_JOINT_COLUMNS:
            raise ValueError(
                f"instances: about {size} LP variables exceed "
                f"MAX_JOINT_COLUMNS = {MAX_JOINT_COLUMNS} (n={n}, L={L}, K={k})"
            )
        ms = []
        for m in itertools.combinations_with_replacement(live, k):
            mult = math.factorial(k) // math.prod(math.factorial(m.count(x)) for x in set(m))
            ms.append((m, float(mult * math.prod(qd[x] for x in m)), (m, _rows_along(inst, m))))
        per.append(ms)
    cols: dict[tuple, int] = {}
    entries: list[tuple[int, int, float]] = []
    rhs: list[float] = []
    seen: set = set()
    # Variables are joint masses z = P(M) pi(o | M): the masses of rare multisets (1e-11 at
    # K = 4) then sit in the right-hand side, not in the coefficients (HiGHS's simplex called the
    # pi-scaled LP infeasible on such families). Shared kernels share P(M): the draft rows along
    # M fix it.
    for ms in per:
        for m, mass, tag in ms:
            if tag not in seen:
                seen.add(tag)
                entries.extend((len(rhs), cols.setdefault((tag, o), len(cols)), 1.0) for o in outputs(m))
                rhs.append(mass)
    value_entries: list[tuple[int, int, float]] = []
    ys = list(itertools.product(range(n), repeat=L + 1))
    for i, (inst, ms) in enumerate(zip(instances, per, strict=True)):
        row_of = {y: len(rhs) + j for j, y in enumerate(ys)}
        rhs.extend(float(inst.target.prob(y)) for y in ys)
        for m, _, tag in ms:
            for o in outputs(m):
                c = cols[(tag, o)]
                value_entries.append((i, c, float(len(o) - 1)))
                for y in ys:
                    if y[: len(o)] == o:
                        cont = float(inst.target.prob(y[len(o) :], given=o)) if len(o) <= L else 1.0
                        if cont:
                            entries.append((row_of[y], c, cont))
    a = sp.csr_matrix(
        ([e[2] for e in entries], ([e[0] for e in entries], [e[1] for e in entries])), shape=(len(rhs), len(cols))
    )
    values = sp.csr_matrix(
        ([e[2] for e in value_entries], ([e[0] for e in value_entries], [e[1] for e in value_entries])),
        shape=(len(instances), len(cols)),
    )
    return a, np.array(rhs), values, len(seen)


def joint_optimum(
    instances: Sequence[Instance], num_drafts: int, weights: Sequence[float] | None = None
) -> JointOptimum:
    r"""The best deployable verifier of a family: one kernel per class of indistinguishable draft multisets.

    .. math::
        \max_\pi \sum_i w_i E_i[\tau] \quad \text{s.t.} \quad \pi(\cdot \mid M) \text{ a law on the
        outputs of } M, \text{ lossless on every member } i,

    where M runs over the multisets of K blocks of positive draft probability, an output is a
    drafted prefix z followed by one token (z + v, v then continued by p), and two (instance,
    M) pairs share their kernel when the target and draft rows at every prefix of the drafts of
    M are equal (the rows a deployed verifier reads). With a single instance this is OPT(K).

    Parameters
    ----------
    instances : sequence of Instance
        Same n and L (exact or float; rows are compared as floats).
    num_drafts : int
        K >= 1.
    weights : sequence of float, optional
        One per instance (default all 1).

    Returns
    -------
    JointOptimum

    Raises
    ------
    ValueError
        No instances, different n or L, a wrong number of weights, a bad K (the checks of
        :func:`~spectr_gbv.theory.lp.optimal_lossless`), or more than
        :data:`MAX_JOINT_COLUMNS` variables.
    RuntimeError
        HiGHS does not report an optimum (its message is passed through).

    References
    ----------
    This project (docs/near_opt_bv.md, "The deployable optimum"); THEORY.md section 5 (the
    draft-multiset LP it extends).
    """
    w = [1.0] * len(instances) if weights is None else [float(v) for v in weights]
    if len(w) != len(instances):
        raise ValueError(f"weights: expected {len(instances)} values, got {len(w)}")
    a, rhs, values, kernels = _joint_lp(instances, num_drafts)
    res = linprog(
        -(values.T @ np.array(w)), A_eq=a, b_eq=rhs, bounds=(0, None), method="highs", options=JOINT_HIGHS_OPTIONS
    )
    if res.status != 0:
        raise RuntimeError(f"joint LP: HiGHS status {res.status}: {res.message}")
    return JointOptimum(float(-res.fun), tuple(float(v) for v in values @ res.x), kernels, a.shape[1])


#: Refuse a :func:`subtree_twins` family with more members than this.
MAX_TWINS = 64


def _permuted(instance: Instance, node: tuple[int, ...], perm: tuple[int, ...]) -> Instance:
    d = len(node)
    models = []
    for model in (instance.target, instance.draft):
        laws = {}
        for pre, row in model.items():
            if len(pre) > d and pre[:d] == node:
                pre = node + (perm[pre[d]],) + pre[d + 1 :]
            laws[pre] = list(row)
        models.append(TabularAR(model.n, laws, depth=model.depth, name=model.name))
    label = "".join(map(str, node)) or "root"
    return Instance(models[0], models[1], instance.L, name=f"{instance.name}:twin[{label}:{''.join(map(str, perm))}]")


def subtree_twins(instance: Instance) -> list[Instance]:
    """The instance and its *subtree twins*: at one prefix u, the subtrees of u's children permuted.

    A twin keeps every row at u and above (and outside u's subtree) and moves the rows below
    u's child u+v to u+sigma(v), for a non-identity permutation sigma of the vocabulary, at each
    prefix u of length 0..L-2. A verifier that reads only the drafted rows sees the same rows on
    the twins whenever no draft enters u's subtree, so :func:`joint_margin` over the twins asks
    whether one verifier can meet a floor on every arrangement of the same continuations.

    Parameters
    ----------
    instance : Instance
        n, L >= 2 (exact or float rows).

    Returns
    -------
    list of Instance
        ``instance`` first, then 1 + (number of prefixes u) x (n! - 1) members in all, in the
        order of u (by length, then lexicographic) and of sigma (lexicographic).

    Raises
    ------
    ValueError
        L < 2 (there is nothing below the root's children to move), or more than
        :data:`MAX_TWINS` members.

    References
    ----------
    This project (docs/near_opt_bv.md, "Never below the list").
    """
    n, L = instance.n, instance.L
    if L < 2:
        raise ValueError(f"instance: L={L}, subtree twins need L >= 2")
    nodes = [u for t in range(L - 1) for u in itertools.product(range(n), repeat=t)]
    size = 1 + len(nodes) * (math.factorial(n) - 1)
    if size > MAX_TWINS:
        raise ValueError(f"instance: n={n}, L={L} gives {size} subtree twins, above MAX_TWINS = {MAX_TWINS}")
    identity = tuple(range(n))
    out = [instance]
    for u in nodes:
        out.extend(_permuted(instance, u, perm) for perm in itertools.permutations(range(n)) if perm != identity)
    return out


@dataclass(frozen=True)
class JointMargin:
    """Result of :func:`joint_margin`.

    Attributes
    ----------
    margin : float
        max over deployable verifiers of min_i (E_i[tau] - floors_i), in expected accepted
        tokens (HiGHS float64, good to about 1e-9). Negative: no verifier that reads only the
        drafted rows reaches every floor of the family.
    values : tuple of float
        E_i[tau] of each member under the maximising kernels.
    kernels : int
        Distinct (indistinguishable-multiset) kernels in the LP.
    """

    margin: float
    values: tuple[float, ...]
    kernels: int


def joint_margin(instances: Sequence[Instance], num_drafts: int, floors: Sequence[float]) -> JointMargin:
    r"""How close one deployable verifier can come to a floor on every member of a family.

    .. math::
        \max_\pi \min_i \big(E_i[\tau] - \text{floor}_i\big)

    over the kernels of :func:`joint_optimum` (one per class of indistinguishable draft
    multisets, lossless on every member). A negative margin proves, up to the LP tolerance,
    that no lossless verifier reading only the drafted rows is at or above every floor: the
    "never below the list" question of docs/near_opt_bv.md with the floors set to the list's
    best on each member.

    Parameters
    ----------
    instances : sequence of Instance
        As for :func:`joint_optimum`.
    num_drafts : int
        K >= 1.
    floors : sequence of float
        One floor per instance, in expected accepted tokens per iteration.

    Returns
    -------
    JointMargin

    Raises
    ------
    ValueError
        A wrong number of floors, a non-finite floor, or what :func:`joint_optimum` raises.
    RuntimeError
        HiGHS does not report an optimum (its message is passed through).

    References
    ----------
    This project (docs/near_opt_bv.md, "Never below the list").
    """
    fl = np.array([float(v) for v in floors], dtype=np.float64)
    if fl.shape != (len(instances),):
        raise ValueError(f"floors: expected {len(instances)} values, got {fl.size}")
    if not np.isfinite(fl).all():
        raise ValueError("floors: every floor must be finite")
    a, rhs, values, kernels = _joint_lp(instances, num_drafts)
    # Variables (x, t): maximise t subject to values_i @ x - t >= floors_i.
    a_eq = sp.hstack([a, sp.csr_matrix((a.shape[0], 1))]).tocsr()
    a_ub = sp.hstack([-values, sp.csr_matrix(np.ones((len(fl), 1)))]).tocsr()
    cost = np.zeros(a.shape[1] + 1)
    cost[-1] = -1.0
    bounds = [(0, None)] * a.shape[1] + [(None, None)]
    res = linprog(
        cost, A_ub=a_ub, b_ub=-fl, A_eq=a_eq, b_eq=rhs, bounds=bounds, method="highs", options=JOINT_HIGHS_OPTIONS
    )
    if res.status != 0:
        raise RuntimeError(f"joint margin LP: HiGHS status {res.status}: {res.message}")
    x = res.x[:-1]
    return JointMargin(float(res.x[-1]), tuple(float(v) for v in values @ x), kernels)


__all__ = [
    "DEFAULT_PAIR_ROOT",
    "JOINT_HIGHS_OPTIONS",
    "MAX_JOINT_COLUMNS",
    "MAX_TWINS",
    "JointMargin",
    "JointOptimum",
    "joint_margin",
    "joint_optimum",
    "mirrored_pair",
    "mirrored_pair_bound",
    "subtree_twins",
]
