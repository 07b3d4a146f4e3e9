r"""Closed-form expected accepted tokens: SD, BV, greedy, the CIC bound and its analogues.

Every function takes ``(target, draft, ..., draft_length)`` with :class:`TabularAR` models
and returns an exact :class:`~fractions.Fraction` when both models hold Fractions, a Python
``float`` (float64 arithmetic) otherwise. Internally the sums are vectorised over all
prefixes of one length at a time (numpy arrays of shape ``(n,)*i``). Values are expected
*accepted* tokens E[tau]; add 1 for the per-iteration block efficiency.

Notation (THEORY.md sections 3-4): ``p(x^i)``, ``q(x^i)`` joint prefix probabilities,
``r(x^i) = min{1, q(x^i)/p(x^i)}`` and ``beta(x^i) = min_{j<=i} r(x^j)``; both are taken as 1
where ``p(x^i) = 0`` (those prefixes carry no weight).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from numbers import Rational

import numpy as np

from spectr_gbv.core.numbers import Scalar, check_distribution, safe_divide, scalar_one, sum_exact
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory.checks import check_models


def _prefix_levels(
    target: TabularAR, draft: TabularAR, draft_length: int
) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(i, p(x^i), q(x^i), r(x^i))`` for i = 1..L, arrays of shape ``(n,)*i``."""
    one = scalar_one(target.exact)
    for i in range(1, draft_length + 1):
        p_joint = target.joint(i)
        q_joint = draft.joint(i)
        ratio = np.minimum(safe_divide(q_joint, p_joint, fill=one), one)
        yield i, p_joint, q_joint, ratio


def prefix_ratio(target: TabularAR, draft: TabularAR, length: int) -> np.ndarray:
    r"""Prefix acceptance ratio :math:`r(x^i) = \min\{1, q(x^i)/p(x^i)\}` for all x^i, i = ``length``.

    Parameters
    ----------
    target, draft : TabularAR
        p and q on the same vocabulary, tables of depth >= ``length - 1``.
    length : int
        Prefix length i >= 1.

    Returns
    -------
    ndarray, shape ``(n,)*i``, object (Fractions) or float64
        1 where ``p(x^i) = 0``.

    Raises
    ------
    ValueError
        Bad length or mismatched models.

    References
    ----------
    THEORY.md section 4 (the ``r`` of the CIC bound).
    """
    target, draft = check_models(target, draft, length)
    one = scalar_one(target.exact)
    return np.minimum(safe_divide(draft.joint(length), target.joint(length), fill=one), one)


def beta(target: TabularAR, draft: TabularAR, length: int) -> np.ndarray:
    r"""Block-verification acceptance weight :math:`\beta(x^i) = \min_{j\le i}\min\{1, q(x^j)/p(x^j)\}`.

    Parameters
    ----------
    target, draft : TabularAR
        p and q, tables of depth >= ``length - 1``.
    length : int
        Prefix length i >= 1.

    Returns
    -------
    ndarray, shape ``(n,)*i``, object or float64
        ``beta[x_1, .., x_i]``; the running minimum of :func:`prefix_ratio` along the prefix
        (ratios at zero-probability prefixes count as 1).

    References
    ----------
    Sun et al. 2024, "Block verification accelerates speculative decoding", arXiv 2403.10444,
    Algorithm 2 and Theorem 2 (the weights w_i); THEORY.md section 3.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> beta(*default_instance(), length=1)[0]
    Fraction(1, 1)
    """
    target, draft = check_models(target, draft, length)
    out: np.ndarray | None = None
    for _, _, _, ratio in _prefix_levels(target, draft, length):
        out = ratio if out is None else np.minimum(out[..., None], ratio)
    assert out is not None
    return out


def sd_expected_accepted(target: TabularAR, draft: TabularAR, draft_length: int) -> Scalar:
    r"""Expected accepted tokens of token-level speculative decoding (SD), one draft.

    .. math::
        E[\tau] = \sum_{i=1}^{L}\sum_{x^i}\prod_{t\le i}\min\{p(x_t|x^{t-1}), q(x_t|x^{t-1})\}

    Parameters
    ----------
    target, draft : TabularAR
        p and q on the same vocabulary, depth >= L - 1.
    draft_length : int
        L >= 1.

    Returns
    -------
    Fraction or float

    Raises
    ------
    ValueError
        L < 1 or mismatched models.

    References
    ----------
    Leviathan et al. 2023 (arXiv 2211.17192), Chen et al. 2023 (arXiv 2302.01318);
    THEORY.md section 3.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> sd_expected_accepted(*default_instance(), draft_length=2)
    Fraction(107, 72)
    """
    target, draft = check_models(target, draft, draft_length)
    total: Scalar = scalar_one(target.exact) * 0
    mins = np.array(scalar_one(target.exact), dtype=target.level(0).dtype)
    for t in range(draft_length):
        mins = mins[..., None] * np.minimum(target.level(t), draft.level(t))
        total += sum_exact(mins)
    return total


def bv_expected_accepted(target: TabularAR, draft: TabularAR, draft_length: int) -> Scalar:
    r"""Expected accepted tokens of block verification (BV), one draft.

    .. math::
        E[\tau] = \sum_{i=1}^{L}\sum_{x^i} p(x^i)\,\beta(x^i)

    the optimum over stateless lossless single-draft verifiers (= OPT(1), checked by LP).

    Parameters
    ----------
    target, draft : TabularAR
    draft_length : int
        L >= 1.

    Returns
    -------
    Fraction or float

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, Theorem 2; THEORY.md section 3.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> bv_expected_accepted(*default_instance(), draft_length=2)
    Fraction(113, 72)
    """
    return cic_bound_lossless(target, draft, 1, draft_length)


def greedy_expected_accepted(target: TabularAR, draft: TabularAR, draft_length: int) -> Scalar:
    r"""Per-iteration value of greedy block verification: :math:`\sum_i\sum_{x^i}\min\{p(x^i), q(x^i)\}`.

    Equals B(1) and OT(1). Reached by greedy BV only with a carried target-law correction
    (stateful); without it the output is biased (THEORY.md section 3).

    Returns
    -------
    Fraction or float

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, appendix (greedy BV); THEORY.md section 3.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> greedy_expected_accepted(*default_instance(), draft_length=2)
    Fraction(13, 8)
    """
    target, draft = check_models(target, draft, draft_length)
    total: Scalar = scalar_one(target.exact) * 0
    for _, p_joint, q_joint, _ in _prefix_levels(target, draft, draft_length):
        total += sum_exact(np.minimum(p_joint, q_joint))
    return total


#: The closed forms :func:`closed_form_bounds` computes, by name.
CLOSED_FORMS: tuple[str, ...] = ("cic_bound", "cic_bound_lossless", "prefix_relaxation")


def closed_form_bounds(
    target: TabularAR,
    draft: TabularAR,
    num_drafts: Sequence[int],
    draft_length: int,
    forms: Sequence[str] = CLOSED_FORMS,
) -> dict[str, dict[int, Scalar]]:
    r"""B(K), B_BV(K) and PR(K) for several K at once, one pass over the prefix levels.

    The per-level joints, the ratio r, the running minimum beta and ``1 - r``, ``1 - beta``,
    ``1 - q`` are computed once per prefix length and shared by every K and every form
    (:func:`cic_bound`, :func:`cic_bound_lossless` and :func:`prefix_relaxation` are this
    function at one K and one form).

    Parameters
    ----------
    target, draft : TabularAR
        p and q on the same vocabulary, depth >= L - 1.
    num_drafts : sequence of int
        The K values, each >= 1.
    draft_length : int
        L >= 1.
    forms : sequence of str
        Names among :data:`CLOSED_FORMS`.

    Returns
    -------
    dict of str to (dict of int to Fraction or float)
        ``result[form][K]``; exact when both models hold Fractions.

    Raises
    ------
    ValueError
        Bad L, a bad K (every K is checked before any work), mismatched models, or an unknown
        form.

    References
    ----------
    THEORY.md sections 4-5 (B, B_BV, PR).
    """
    unknown = [f for f in forms if f not in CLOSED_FORMS]
    if unknown:
        raise ValueError(f"forms: unknown {unknown}; valid: {', '.join(CLOSED_FORMS)}")
    ks = list(num_drafts)
    target, draft = check_models(target, draft, draft_length)
    for k in ks:
        check_models(target, draft, draft_length, k)
    one = scalar_one(target.exact)
    totals: dict[str, dict[int, Scalar]] = {f: dict.fromkeys(ks, one * 0) for f in forms}
    beta: np.ndarray | None = None
    for _, p_joint, q_joint, ratio in _prefix_levels(target, draft, draft_length):
        beta = ratio if beta is None else np.minimum(beta[..., None], ratio)
        miss = {"cic_bound": one - ratio, "cic_bound_lossless": one - beta, "prefix_relaxation": one - q_joint}
        for form, per_k in totals.items():
            for k in ks:
                if form == "prefix_relaxation":
                    per_k[k] += sum_exact(np.minimum(p_joint, one - miss[form] ** k))
                else:
                    per_k[k] += sum_exact(p_joint * (one - miss[form] ** k))
    return totals


def cic_bound(target: TabularAR, draft: TabularAR, num_drafts: int, draft_length: int) -> Scalar:
    r"""Expected accepted tokens under conditionally independent coupling (CIC bound).

    .. math::
        B(K) = \sum_{i=1}^{L} \sum_{x^i} p(x^i)\,[1 - (1 - \min\{1, q(x^i)/p(x^i)\})^K]

    Parameters
    ----------
    target : TabularAR
        Target model p, next-token laws for every prefix of length 0..L-1 (at least).
    draft : TabularAR
        Draft model q on the same vocabulary.
    num_drafts : int
        K >= 1, number of i.i.d. drafts.
    draft_length : int
        L >= 1, tokens per draft.

    Returns
    -------
    Fraction or float
        Exact when both models hold Fractions, float64 otherwise. Add 1 for the
        per-iteration block efficiency bound.

    Raises
    ------
    ValueError
        If the models' vocabularies differ, tables are too shallow, or K, L < 1.

    References
    ----------
    Lin et al., SpecTr-GBV, arXiv 2604.25925 (Theorem 5.3, as reported);
    THEORY.md section 4.

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> cic_bound(*default_instance(), num_drafts=2, draft_length=2)
    Fraction(401, 216)
    """
    return closed_form_bounds(target, draft, [num_drafts], draft_length, ("cic_bound",))["cic_bound"][num_drafts]


def cic_bound_lossless(target: TabularAR, draft: TabularAR, num_drafts: int, draft_length: int) -> Scalar:
    r"""Lossless stateless analogue of the CIC bound: r replaced by the BV weight beta.

    .. math::
        B_{BV}(K) = \sum_{i=1}^{L}\sum_{x^i} p(x^i)\,[1 - (1 - \beta(x^i))^K],\qquad
        B_{BV}(1) = \text{BV value}

    Parameters
    ----------
    target, draft : TabularAR
    num_drafts : int
        K >= 1.
    draft_length : int
        L >= 1.

    Returns
    -------
    Fraction or float

    Raises
    ------
    ValueError
        As :func:`cic_bound`.

    References
    ----------
    THEORY.md section 4 (this project's analogue of Lin et al. 2026, Theorem 5.3).

    Examples
    --------
    >>> from spectr_gbv.core import default_instance
    >>> cic_bound_lossless(*default_instance(), num_drafts=2, draft_length=2)
    Fraction(397, 216)
    """
    forms = ("cic_bound_lossless",)
    return closed_form_bounds(target, draft, [num_drafts], draft_length, forms)[forms[0]][num_drafts]


def cic_bound_increment(target: TabularAR, draft: TabularAR, num_drafts: int, draft_length: int) -> Scalar:
    r"""The right-hand side of the monotonicity identity :math:`\sum_i\sum_{x^i} p\,r\,(1-r)^K`.

    Equals ``cic_bound(K+1) - cic_bound(K)`` (proved symbolically by
    :func:`spectr_gbv.theory.symbolic.prove_monotonicity_identity`).

    Returns
    -------
    Fraction or float

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925 (monotonicity, as reported); THEORY.md section 4.
    """
    target, draft = check_models(target, draft, draft_length, num_drafts)
    one = scalar_one(target.exact)
    total: Scalar = one * 0
    for _, p_joint, _, ratio in _prefix_levels(target, draft, draft_length):
        total += sum_exact(p_joint * ratio * (one - ratio) ** num_drafts)
    return total


def prefix_relaxation(target: TabularAR, draft: TabularAR, num_drafts: int, draft_length: int) -> Scalar:
    r"""Prefix relaxation of the block coupling: each prefix length coupled on its own.

    .. math::
        PR(K) = \sum_{i=1}^{L}\sum_{x^i}\min\{p(x^i),\ 1 - (1 - q(x^i))^K\}

    ``E[max_k LCP(X^(k), Y)] = sum_i P(some draft agrees with Y on i tokens)`` and each term is
    at most the sum over x^i of min{P(Y^i = x^i), P(some X^(k)_{1:i} = x^i)}, so
    ``OT(K) <= PR(K)`` for every coupling; ``B(K) <= PR(K)`` as well, and ``PR(1) = B(1)``.

    Returns
    -------
    Fraction or float

    References
    ----------
    This project (THEORY.md section 5, OT(K)); the K = 1 case is the greedy value of
    Sun et al. 2024.
    """
    forms = ("prefix_relaxation",)
    return closed_form_bounds(target, draft, [num_drafts], draft_length, forms)[forms[0]][num_drafts]


def cic_limit(target: TabularAR, draft: TabularAR, draft_length: int) -> Scalar:
    r"""The K -> infinity limit of B(K), B_BV(K) and PR(K): :math:`\sum_i P_{Y\sim p}(q(Y^i) > 0)`.

    Equals L exactly when q covers the support of p on V^L (see :func:`draft_covers_target`).

    Returns
    -------
    Fraction or float

    References
    ----------
    Lin et al. 2026, arXiv 2604.25925 (convergence, as reported); THEORY.md section 4.
    """
    target, draft = check_models(target, draft, draft_length)
    total: Scalar = scalar_one(target.exact) * 0
    for _, p_joint, q_joint, _ in _prefix_levels(target, draft, draft_length):
        total += sum_exact(np.where(q_joint > 0, p_joint, p_joint * 0))
    return total


def draft_covers_target(target: TabularAR, draft: TabularAR, draft_length: int) -> bool:
    """True when ``q(x^L) > 0`` for every ``x^L`` with ``p(x^L) > 0`` (support cover on V^L)."""
    target, draft = check_models(target, draft, draft_length)
    p_joint = target.joint(draft_length)
    q_joint = draft.joint(draft_length)
    return bool(np.all((p_joint > 0) <= (q_joint > 0)))


def l1_optimum(target_row: np.ndarray, draft_row: np.ndarray, num_drafts: int) -> tuple[Scalar, tuple[int, ...]]:
    r"""Closed-form optimum at L = 1: :math:`OPT(K) = OT(K) = \min_{A\subseteq V}[p(A) + 1 - q(A)^K]`.

    The minimising set is a prefix of the tokens sorted by p/q ascending (tokens with q = 0
    last), so the minimum is found in O(n log n) over n + 1 candidate sets.

    Parameters
    ----------
    target_row, draft_row : array-like, shape (n,), Fractions or floats
        p(.) and q(.) at the verified position.
    num_drafts : int
        K >= 1.

    Returns
    -------
    value : Fraction or float
        Optimal acceptance probability = expected accepted tokens at L = 1.
    minimiser : tuple of int
        Tokens of a minimising set A (sorted order).

    Raises
    ------
    ValueError
        A row that is not a distribution (NaN/inf, negative, not summing to 1), rows of
        different lengths, or K < 1.

    References
    ----------
    THEORY.md section 5 (L = 1 closed form; max-flow/min-cut on the bipartite coupling).

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> l1_optimum([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 1)[0]
    Fraction(2, 3)
    """
    check_distribution(target_row, "target_row")
    check_distribution(draft_row, "draft_row")
    exact = all(isinstance(v, Rational) for v in [*target_row, *draft_row])
    p = np.asarray(list(target_row), dtype=object if exact else np.float64)
    q = np.asarray(list(draft_row), dtype=p.dtype)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"target_row and draft_row must be 1-d of equal length, got {p.shape}, {q.shape}")
    if not isinstance(num_drafts, int) or num_drafts < 1:
        raise ValueError(f"num_drafts (K) must be an int >= 1, got {num_drafts!r}")

    def key(v: int) -> tuple[int, Scalar]:
        # ascending p/q; q = 0 tokens (ratio +inf) last
        return (1, 0) if q[v] <= 0 else (0, p[v] / q[v])

    order = sorted(range(len(p)), key=key)
    one = scalar_one(exact)
    best: Scalar = one  # A = {} gives 0 + 1 - 0
    best_k = 0
    p_acc = one * 0
    q_acc = one * 0
    for k, v in enumerate(order, start=1):
        p_acc = p_acc + p[v]
        q_acc = q_acc + q[v]
        val = p_acc + one - q_acc**num_drafts
        if val < best:
            best, best_k = val, k
    return best, tuple(order[:best_k])
