r"""Selection laws of i.i.d. drafts: the coverage polymatroid, its optimal bases and their peeling.

A node of the draft trie is reached by a random number M of i.i.d. drafts, with law
:math:`\pi(m) = P(M = m)` (a point mass m = c at the root), and their next tokens are i.i.d.
q. A rule that selects one drafted token induces a law d of the selected token (averaged over
the drafts and over M). The laws d that such rules can induce are the bases of the polymatroid

.. math::
    f(X) = P(\text{some drafted token lies in } X) = G(q(X)), \qquad
    G(x) = \sum_m \pi(m) \left[1 - (1 - x)^m\right],

a concave function of q(X) (a mixture of coverage functions), whose vertices are the priority
orders :math:`\sigma` ("select the first drafted token in :math:`\sigma`"), the same order for
every m: :math:`v_\sigma(y) = G(q(H) + q(y)) - G(q(H))` with H the tokens before y.

Given a nonnegative target t (a sub-probability: p at the root, a BV-weighted p below it), this
module builds a base d maximising :math:`\sum_y \min\{t(y), d(y)\}`, whose value is the min-cut
:math:`\min_A [t(A) + G(q(T \setminus A))]`, and writes d as a mixture of at most :math:`|T|` priority
orders, in exact rational arithmetic:

1. acceptance vector :math:`a^*`: the greedy vertex of the box-truncated polymatroid
   :math:`f'(X) = \min_{Y \subseteq X}[G(q(Y)) + t(X \setminus Y)]`, so :math:`a^* \le t`,
   :math:`a^* \in P(f)`, and :math:`a^*(T)` is the min-cut;
2. d: raise :math:`a^*` coordinate by coordinate to a base of f (``d >= a*``);
3. peel: with :math:`\sigma` = tokens by d/q descending (consistent with every tight set of d),
   take the largest :math:`\lambda` keeping :math:`(d - \lambda v_\sigma)/(1 - \lambda)` in the
   base polytope (Dinkelbach iterations), record :math:`(\lambda, \sigma)` and repeat on the
   remainder, which has one more tight set.

Every minimisation over sets is of a concave function of q(X) plus a modular one, so its
minimiser is a threshold set of a ratio (the concave-conjugate argument) and the n + 1 prefixes
of one sorted order are checked. T is the support of q (tokens with q = 0 are never drafted).
Cost per node: O(n^2 log n) evaluations of G for steps 1-2 and O(n^2 D log n) for step 3 (at
most n - 1 peels, D Dinkelbach iterations each, D <= n and in practice 2-3); one evaluation of
G costs :math:`O(|\mathrm{supp}\, \pi|)` Fraction operations.

``Counts`` (the law of the number of drafts through a node) is a tuple ``((m, P(M = m)), ...)``
with m >= 1 increasing and probabilities positive summing to 1; ``((c, Fraction(1)),)`` is c
drafts for sure. ``Decomposition`` (a selection rule as a mixture of priority orders) is a tuple
``((weight, order), ...)`` with positive weights summing to 1.

References
----------
Fujishige, "Submodular functions and optimization", 2005 (polymatroid base polytopes, greedy
vertices, the min-cut for :math:`\max \sum \min\{t, d\}`); Hu et al. 2025, arXiv 2502.18779
(the L = 1 value for a point mass); the construction and its peeling: this project.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import lru_cache

# Law of the number of drafts through a node: ``((m, P(M = m)), ...)``, m >= 1 increasing,
# probabilities positive and summing to 1. ``((c, Fraction(1)),)`` is c drafts for sure.
Counts = tuple[tuple[int, Fraction], ...]

# The node polymatroid's concave function G: a count law (``Counts``) or any hashable callable
# x -> G(x), concave increasing on [0, 1] with G(0) = 0 and G(1) = 1 (e.g. the score-law
# function :class:`~spectr_gbv.reference.score_laws.ScoreCoverage`).
Coverage = Counts | Callable[[Fraction], Fraction]

# A selection rule as a mixture of priority orders: ``((weight, order), ...)``, weights
# positive and summing to 1, each order a tuple of the tokens of the support of q.
Decomposition = tuple[tuple[Fraction, tuple[int, ...]], ...]

#: ``priority`` values of :func:`mixture_rule`: the order in which steps 1-2 visit the tokens
#: (``"id"``, ``"ratio"``), or instead of steps 1-2 ``"lex"``, the lexicographically optimal base
#: (:func:`lexicographic_base`), or ``"hedge"``, that base with its under-drafted tokens re-split
#: in proportion to q (:func:`hedged_base`). :func:`mixture_rule` also takes a :data:`BaseRule`
#: in place of a name (the research variants of ``bench/experiments/near_opt_variants.py``).
PRIORITIES: tuple[str, ...] = ("id", "ratio", "lex", "hedge")

#: The priorities of :func:`mixture_rule` that are whole bases, not visit orders of steps 1-2.
BASE_PRIORITIES: tuple[str, ...] = ("lex", "hedge")

#: A whole-base priority given as a function: ``rule(t, q, counts)`` returns a base of the
#: polymatroid of ``counts`` (a tuple of Fraction of length n, summing to 1 on the support of q)
#: maximising :math:`\sum_y \min\{t(y), d(y)\}`, as :func:`lexicographic_base` and
#: :func:`hedged_base` do; it must be hashable (:func:`mixture_rule` caches on it).
BaseRule = Callable[[Sequence[Fraction], Sequence[Fraction], Coverage], tuple[Fraction, ...]]


def point_mass(c: int) -> Counts:
    """The ``Counts`` of exactly ``c`` drafts (``c >= 1``)."""
    return ((c, Fraction(1)),)


def coverage(x: Fraction, counts: Coverage) -> Fraction:
    r""":math:`G(x) = \sum_m \pi(m) [1 - (1 - x)^m]`: P(some drafted token lands in a set of q-mass x).

    ``counts`` may also be a coverage function, which is then evaluated at x.
    """
    if callable(counts):
        return counts(x)
    return sum((w * (1 - (1 - x) ** m) for m, w in counts), Fraction(0))


def order_vertex(q: Sequence[Fraction], order: Sequence[int], counts: Coverage) -> list[Fraction]:
    r"""Law of the first drafted token in ``order``: :math:`G(q(H) + q(y)) - G(q(H))`.

    Parameters
    ----------
    q : sequence of Fraction, length n
        Draft law at the node.
    order : sequence of int
        A priority order of the support T of q (tokens outside it get 0).
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    list of Fraction, length n
        The vertex :math:`v_\sigma` of the polymatroid (sums to 1 over T).
    """
    v = [Fraction(0)] * len(q)
    before, g_before = Fraction(0), Fraction(0)
    for y in order:
        before += q[y]
        g_now = coverage(before, counts)
        v[y] = g_now - g_before
        g_before = g_now
    return v


def min_threshold(
    weights: Sequence[Fraction],
    q: Sequence[Fraction],
    pool: Sequence[int],
    scale: Fraction,
    counts: Coverage,
    base: Fraction,
) -> tuple[Fraction, list[int]]:
    r"""``min`` over X of ``scale * G(base + q(X)) - weights(X)``, X a subset of ``pool``.

    A concave function of q(X) (``scale >= 0``) plus a modular one, so a minimiser is a prefix
    of ``pool`` sorted by weights/q descending (every token of ``pool`` has q > 0); the n + 1
    prefixes are checked (the set minimisation of every step of the module docstring).

    Parameters
    ----------
    weights : sequence of Fraction, length n
        The modular part (indexed by token).
    q : sequence of Fraction, length n
        Draft law at the node.
    pool : sequence of int
        The tokens X ranges over (each with q > 0).
    scale : Fraction
        Nonnegative factor of G.
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.
    base : Fraction
        q-mass added to q(X) inside G (a contraction).

    Returns
    -------
    value : Fraction
        The minimum (``scale * G(base)`` for the empty set).
    prefix : list of int
        A minimising prefix of ``pool`` in weights/q descending order (ties by token id).
    """
    order = sorted(pool, key=lambda y: (-(weights[y] / q[y]), y))
    mass, wsum = base, Fraction(0)
    best, best_len = scale * coverage(base, counts), 0
    for i, y in enumerate(order, start=1):
        mass += q[y]
        wsum += weights[y]
        val = scale * coverage(mass, counts) - wsum
        if val < best:
            best, best_len = val, i
    return best, order[:best_len]


def acceptance_vector(
    t: Sequence[Fraction], q: Sequence[Fraction], support: list[int], counts: Coverage
) -> list[Fraction]:
    r"""Greedy vertex :math:`a^*` of the box-truncated polymatroid f' (step 1 of the module docstring).

    Parameters
    ----------
    t : sequence of Fraction, length n
        Nonnegative target.
    q : sequence of Fraction, length n
        Draft law at the node.
    support : list of int
        The support of q in the visit order (:func:`visit_order`).
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    list of Fraction, length n
        :math:`a^* \le t`, in the polymatroid, :math:`a^*(T)` the min-cut (0 outside ``support``).
    """
    a = [Fraction(0)] * len(t)
    prefix: list[int] = []
    prev, t_sum = Fraction(0), Fraction(0)
    for y in support:
        prefix.append(y)
        t_sum += t[y]
        # f'(X) = t(X) + min_{Y <= X} [G(q(Y)) - t(Y)]
        value, _ = min_threshold(t, q, prefix, Fraction(1), counts, Fraction(0))
        a[y] = t_sum + value - prev
        prev = t_sum + value
    return a


def raise_to_base(d: list[Fraction], q: Sequence[Fraction], support: list[int], counts: Coverage) -> list[Fraction]:
    r"""Raise each coordinate of ``d`` (in P(f)) by its slack :math:`\min_{X \ni y} f(X) - d(X)` (step 2).

    After the pass every token lies in a tight set, and tight sets are closed under union, so
    the result is a base: it sums to ``f(T) = 1``.

    Parameters
    ----------
    d : list of Fraction, length n
        A vector of the polymatroid (not modified).
    q : sequence of Fraction, length n
        Draft law at the node.
    support : list of int
        The support of q in the order the tokens are raised.
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    list of Fraction, length n
        The raised base (``>= d``).
    """
    d = list(d)
    for y in support:
        others = [z for z in support if z != y]
        d[y], _ = min_threshold(d, q, others, Fraction(1), counts, q[y])
    return d


def peel_step(
    d: list[Fraction], v: list[Fraction], q: Sequence[Fraction], support: list[int], counts: Coverage
) -> Fraction:
    r"""Largest :math:`\lambda < 1` with :math:`(d - \lambda v)/(1 - \lambda)` in the base polytope.

    :math:`\lambda^* = \min_X N(X)/D(X)` over X with :math:`D(X) > 0`, where
    :math:`N = f - d \ge 0`, :math:`D = f - v \ge 0` (Dinkelbach: from :math:`\lambda = 1`,
    minimise :math:`N - \lambda D = (1 - \lambda) G(q(X)) - (d - \lambda v)(X)` and move to
    the minimiser's ratio until the minimum is 0; each minimiser is a threshold set).

    Parameters
    ----------
    d : list of Fraction, length n
        A base of the polymatroid.
    v : list of Fraction, length n
        Another base (a vertex, or q itself).
    q : sequence of Fraction, length n
        Draft law at the node.
    support : list of int
        The support of q.
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    Fraction
        :math:`\lambda^*`.

    Raises
    ------
    AssertionError
        Dinkelbach did not end in ``|T| + 2`` steps (a bug: it ends in at most ``|T| + 1``).
    """

    def ratio(xs: list[int]) -> Fraction:
        fx = coverage(sum((q[y] for y in xs), Fraction(0)), counts)
        return (fx - sum((d[y] for y in xs), Fraction(0))) / (fx - sum((v[y] for y in xs), Fraction(0)))

    # lambda = 1: N - D = v(X) - d(X) is modular, minimised by {y : v(y) < d(y)}
    lam = ratio([y for y in support if v[y] < d[y]])
    for _ in range(len(support) + 2):
        shifted = [d[y] - lam * v[y] for y in range(len(d))]
        value, xs = min_threshold(shifted, q, support, 1 - lam, counts, Fraction(0))
        if value >= 0:
            return lam
        lam = ratio(xs)
    raise AssertionError("Dinkelbach did not converge (a bug: it ends in at most |T| + 1 steps)")


def decompose_base(d: Sequence[Fraction], q: Sequence[Fraction], counts: Coverage) -> Decomposition:
    r"""Write a base d of the polymatroid of ``counts`` as a mixture of priority orders (step 3).

    Parameters
    ----------
    d : sequence of Fraction, length n
        A base: sums to 1 on the support T of q, with :math:`d(X) \le G(q(X))` for every X.
    q : sequence of Fraction, length n
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    Decomposition
        At most :math:`|T|` ``(weight, order)`` pairs with :math:`\sum_i w_i v_{\sigma_i} = d` exactly.

    Raises
    ------
    AssertionError
        ``d`` not a base (a caller bug; the verifiers only pass bases they built).
    """
    support = [y for y in range(len(q)) if q[y] > 0]
    cur = list(d)
    weight = Fraction(1)
    parts: list[tuple[Fraction, tuple[int, ...]]] = []
    for _ in range(len(support) + 1):
        order = tuple(sorted(support, key=lambda y: (-(cur[y] / q[y]), y)))
        v = order_vertex(q, order, counts)
        if all(cur[y] == v[y] for y in support):
            parts.append((weight, order))
            return tuple(parts)
        lam = peel_step(cur, v, q, support, counts)
        if not 0 < lam < 1:
            raise AssertionError(f"decompose: peel weight {lam} outside (0, 1); d is not a base")
        parts.append((weight * lam, order))
        weight *= 1 - lam
        cur = [(cur[y] - lam * v[y]) / (1 - lam) for y in range(len(cur))]
    raise AssertionError("decompose: more peels than support tokens (d is not a base)")


def lexicographic_base(t: Sequence[Fraction], q: Sequence[Fraction], counts: Coverage) -> tuple[Fraction, ...]:
    r"""The lexicographically optimal base of the polymatroid with respect to the weights t.

    Fujishige's decomposition: with C the tokens already assigned (empty at first), take the
    set X of the remaining tokens with t > 0 minimising :math:`\lambda = [G(q(C) + q(X)) - G(q(C))]/t(X)`
    (the largest such X), set :math:`d = \lambda t` on X, add X to C and repeat; the tokens with
    t = 0 take the remaining mass in id order (greedy increments). Every minimiser is a prefix of
    the tokens sorted by t/q descending (the contraction is again concave in q(X)), so the blocks
    are consecutive pieces of one sorted order: O(n log n) evaluations of G. The base maximises
    :math:`\sum_y t(y)\,\phi(d(y)/t(y))` for every concave :math:`\phi` (Fujishige 1980), in
    particular :math:`\sum_y \min\{t(y), d(y)\}`: it lies on the optimal face of :func:`mixture_rule`.

    Parameters
    ----------
    t : sequence of Fraction, length n
        Nonnegative weights (the target).
    q : sequence of Fraction, length n
        Draft law at the node.
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    tuple of Fraction, length n
        The base (sums to 1 on the support of q).

    References
    ----------
    Fujishige, "Lexicographically optimal base of a polymatroid with respect to a weight
    vector", Math. Oper. Res. 5 (1980).
    """
    d = [Fraction(0)] * len(q)
    order = sorted((y for y in range(len(q)) if q[y] > 0 and t[y] > 0), key=lambda y: (-(t[y] / q[y]), y))
    mass, g_done, start = Fraction(0), Fraction(0), 0
    while start < len(order):
        best: tuple[Fraction, int, Fraction] | None = None
        m, tsum = mass, Fraction(0)
        for i in range(start, len(order)):
            m += q[order[i]]
            tsum += t[order[i]]
            lam = (coverage(m, counts) - g_done) / tsum
            if best is None or lam <= best[0]:
                best = (lam, i + 1, m)
        lam, end, mass = best  # type: ignore[misc]
        for y in order[start:end]:
            d[y] = lam * t[y]
        g_done, start = coverage(mass, counts), end
    for y in range(len(q)):
        if q[y] > 0 and t[y] == 0:
            mass += q[y]
            g_now = coverage(mass, counts)
            d[y] = g_now - g_done
            g_done = g_now
    return tuple(d)


def water_fill(
    d: list[Fraction], tokens: list[int], t: Sequence[Fraction], q: Sequence[Fraction], *, cap: bool
) -> None:
    """Re-split d(tokens) in place as min{t, lam q} (``cap``) or max{t, lam q}, the same total.

    ``tokens`` come sorted so that those held at t come first: t/q ascending for a cap, t/q
    descending for a floor. The total is kept exactly; lam is the level of the tokens not held
    (water-filling, as :func:`hedged_base` uses it).

    Parameters
    ----------
    d : list of Fraction, length n
        The law, modified in place on ``tokens`` only.
    tokens : list of int
        Tokens of the support of q, sorted as above.
    t : sequence of Fraction, length n
        Nonnegative target (the caps or floors).
    q : sequence of Fraction, length n
        Draft law at the node.
    cap : bool
        Cap at t (True) or floor at t (False).
    """
    rest = sum((d[y] for y in tokens), Fraction(0))  # the total, less what the held tokens took
    rest_q = sum((q[y] for y in tokens), Fraction(0))
    for i, y in enumerate(tokens):
        lam = rest / rest_q
        if (t[y] >= lam * q[y]) if cap else (t[y] <= lam * q[y]):
            for z in tokens[i:]:
                d[z] = lam * q[z]
            return
        d[y] = t[y]
        rest, rest_q = rest - t[y], rest_q - q[y]


def hedged_base(t: Sequence[Fraction], q: Sequence[Fraction], counts: Coverage) -> tuple[Fraction, ...]:
    r"""The lexicographically optimal base w.r.t. t, its under-drafted tokens re-split in proportion to q.

    Let d be :func:`lexicographic_base` and T the tokens with 0 < d < t (under-drafted: every
    optimal base gives T its whole coverage, d(T) = G(q(T))). On T the split does not change
    :math:`\sum_y \min\{t(y), d(y)\}`; ``lex`` spreads d(T) in proportion to t, this rule in
    proportion to q, capped at t (water-filling):

    .. math::
        h(y) = \min\{t(y), \lambda q(y)\} \ (y \in T), \qquad \sum_{y \in T} h(y) = d(T),
        \qquad h = d \text{ outside } T.

    It is the split a uniformly random draft through T would make, as far as the targets allow:
    the node cannot see which of its under-drafted children continues better, and this hedges
    over that. h is a base on the same optimal face (docs/near_opt_bv.md, "The hedged split":
    the polymatroid rows on T hold because d's tail sums are at most t's, the rows across T and
    its complement by submodularity).

    Parameters
    ----------
    t : sequence of Fraction, length n
        Nonnegative weights (the target).
    q : sequence of Fraction, length n
        Draft law at the node.
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.

    Returns
    -------
    tuple of Fraction, length n
        The base (sums to 1 on the support of q).

    References
    ----------
    This project (docs/near_opt_bv.md, "The hedged split"); Fujishige, Math. Oper.
    Res. 5 (1980), for the base it starts from.
    """
    d = list(lexicographic_base(t, q, counts))
    under = sorted((y for y in range(len(q)) if q[y] > 0 and 0 < d[y] < t[y]), key=lambda y: (t[y] / q[y], y))
    if len(under) < 2:
        return tuple(d)
    water_fill(d, under, t, q, cap=True)
    return tuple(d)


def visit_order(t: Sequence[Fraction], q: Sequence[Fraction], priority: str, allowed: Sequence[str]) -> list[int]:
    """The support of q in steps 1-2's visit order: token id (``"id"``), or t/q descending, ties by id (``"ratio"``).

    Parameters
    ----------
    t : sequence of Fraction, length n
        Nonnegative target.
    q : sequence of Fraction, length n
        Draft law at the node.
    priority : str
        The visit order's name.
    allowed : sequence of str
        The names the caller accepts (listed in the error).

    Returns
    -------
    list of int
        The tokens with q > 0 in that order.

    Raises
    ------
    ValueError
        ``priority`` not in ``allowed``, or a whole-base priority (:data:`BASE_PRIORITIES`).
    """
    if priority not in allowed or priority in BASE_PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(allowed)}, got {priority!r}")
    support = [y for y in range(len(q)) if q[y] > 0]
    if priority == "ratio":
        support.sort(key=lambda y: (-(t[y] / q[y]), y))
    return support


@lru_cache(maxsize=8192)
def mixture_rule(
    t: tuple[Fraction, ...], q: tuple[Fraction, ...], counts: Coverage, priority: str | BaseRule = "id"
) -> tuple[tuple[Fraction, ...], Decomposition]:
    r"""A selection law d maximising :math:`\sum_y \min\{t(y), d(y)\}`, and its priority-order mixture.

    Parameters
    ----------
    t : tuple of Fraction, length n
        Nonnegative target (total at most 1): p for the single-step optimum, a BV-weighted p
        for :class:`~spectr_gbv.reference.near_opt_bv.NearOptBlockVerifier`.
    q : tuple of Fraction, length n
        Draft law at the node (sums to 1).
    counts : Coverage
        Law of the number of drafts through the node, or a coverage function.
    priority : str
        Which of the optimal bases: the order in which steps 1-2 visit the tokens, ``"id"``
        (token id) or ``"ratio"`` (t/q descending, ties by id: the optimal base that gives the
        under-drafted tokens their selection mass first); or ``"lex"``, the lexicographically
        optimal base with respect to t (:func:`lexicographic_base`), which spreads the mass
        above the target in proportion to t; or ``"hedge"`` (:func:`hedged_base`), that base
        with its under-drafted tokens re-split in proportion to q; or any :data:`BaseRule`, whose
        base is then decomposed.

    Returns
    -------
    d : tuple of Fraction, length n
        A base of the polymatroid (sums to 1) with :math:`\sum \min\{t, d\}` equal to the min-cut
        :math:`\min_A [t(A) + G(q(T \setminus A))]`.
    orders : Decomposition
        :func:`decompose_base` of d.

    Raises
    ------
    ValueError
        ``priority`` not in :data:`PRIORITIES`.
    """
    if callable(priority):
        d = priority(t, q, counts)
        return d, decompose_base(d, q, counts)
    if priority in BASE_PRIORITIES:
        d = {"lex": lexicographic_base, "hedge": hedged_base}[priority](t, q, counts)
        return d, decompose_base(d, q, counts)
    support = visit_order(t, q, priority, PRIORITIES)
    a = acceptance_vector(t, q, support, counts)
    d = raise_to_base(a, q, support, counts)
    return tuple(d), decompose_base(d, q, counts)


def selection_probabilities(orders: Decomposition, tokens: Sequence[int]) -> dict[int, Fraction]:
    """P(select y | the drafted tokens): the weight of the orders whose first drafted token is y.

    Parameters
    ----------
    orders : Decomposition
    tokens : sequence of int
        The drafted tokens at the node (repeats allowed; every one in the support of q).

    Returns
    -------
    dict of int to Fraction
        Selection probability of each drafted token that some order ranks first.
    """
    present = set(tokens)
    out: dict[int, Fraction] = {}
    for w, order in orders:
        top = next(y for y in order if y in present)
        out[top] = out.get(top, Fraction(0)) + w
    return out


__all__ = [
    "BASE_PRIORITIES",
    "PRIORITIES",
    "BaseRule",
    "Counts",
    "Coverage",
    "Decomposition",
    "acceptance_vector",
    "coverage",
    "decompose_base",
    "hedged_base",
    "lexicographic_base",
    "min_threshold",
    "mixture_rule",
    "order_vertex",
    "peel_step",
    "point_mass",
    "raise_to_base",
    "selection_probabilities",
    "visit_order",
    "water_fill",
]
