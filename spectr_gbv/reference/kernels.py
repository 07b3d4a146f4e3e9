"""Building blocks shared by several verifiers: block verification and SpecTr's K-SEQ rho.

All functions take rows as 1-d numpy arrays (object arrays of Fractions, or float64) and work
in the rows' number kind.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import normalize, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser

#: Exact K-SEQ rho is a rational within this distance above the true (algebraic) root.
RHO_EXACT_TOL = Fraction(1, 2**40)


@dataclass(frozen=True)
class BlockWeights:
    r"""Block-verification weights along one draft (Sun et al. 2024, Algorithm 2).

    Attributes
    ----------
    w : list, length m + 1
        ``w_0 = 1``, :math:`w_i = \min\{1, w_{i-1} p(x_i|x^{i-1}) / q(x_i|x^{i-1})\}`.
    h : list, length m
        ``h[i-1]`` = :math:`h_i = r_i / (r_i + 1 - w_i)` for ``i < m`` (0 when the
        denominator is 0), ``h_m = w_m``, with
        :math:`r_i = \sum_v \max\{w_i p(v|x^i) - q(v|x^i), 0\}`.
    """

    w: list[Scalar]
    h: list[Scalar]


def block_weights(
    tokens: Sequence[int],
    target_rows: Sequence[np.ndarray],
    draft_rows: Sequence[np.ndarray],
    exact: bool,
) -> BlockWeights:
    r"""Weights ``w_i`` and acceptance weights ``h_i`` of block verification.

    Parameters
    ----------
    tokens : sequence of int, length m >= 1
        The drafted block ``x_1..x_m``.
    target_rows : sequence of m arrays, shape (n,)
        ``target_rows[i]`` = target law at position ``i + 1`` given ``x^i`` (the first one may
        be any law R, as in MDBV).
    draft_rows : sequence of m arrays, shape (n,)
        ``draft_rows[i]`` = ``q(. | x^i)`` (or the law the block was drafted from).
    exact : bool

    Returns
    -------
    BlockWeights

    References
    ----------
    Sun et al. 2024, "Block verification accelerates speculative decoding", arXiv 2403.10444,
    Algorithm 2; THEORY.md section 3.
    """
    one: Scalar = Fraction(1) if exact else 1.0
    zero = one * 0
    m = len(tokens)
    w = [one]
    h: list[Scalar] = []
    for i in range(1, m + 1):
        x = tokens[i - 1]
        p_x, q_x = target_rows[i - 1][x], draft_rows[i - 1][x]
        if q_x > 0:
            w_i = min(one, w[-1] * p_x / q_x)
        else:  # only in float64, for a draft law that underflowed: the ratio is +inf (or 0/0)
            w_i = one if w[-1] * p_x > 0 else zero
        w.append(w_i)
        if i < m:
            diff = w_i * target_rows[i] - draft_rows[i]
            r_i = sum((v for v in diff.tolist() if v > 0), zero)
            den = r_i + one - w_i
            h.append(r_i / den if den > 0 else zero)
        else:
            h.append(w_i)
    return BlockWeights(w, h)


def block_residual(
    weights: BlockWeights,
    tau: int,
    target_rows: Sequence[np.ndarray],
    draft_rows: Sequence[np.ndarray],
    exact: bool,
    chooser: Chooser,
) -> np.ndarray:
    r"""Normalised residual :math:`\propto \max\{w_\tau p(.|x^\tau) - q(.|x^\tau), 0\}`, tau < m."""
    weights_tau = np.maximum(weights.w[tau] * target_rows[tau] - draft_rows[tau], 0)
    weights_tau = residual_or_fallback(weights_tau, target_rows[tau], exact, chooser.diagnostics, ("bv_residual", tau))
    return normalize(weights_tau, exact)


def block_verify(
    chooser: Chooser,
    tokens: Sequence[int],
    target_rows: Sequence[np.ndarray],
    draft_rows: Sequence[np.ndarray],
    bonus_row: np.ndarray,
    exact: bool,
    weights: BlockWeights | None = None,
) -> tuple[int, np.ndarray]:
    r"""One run of block verification: ``tau = max{i : eta_i <= h_i}`` and the next-token law.

    Parameters
    ----------
    chooser : Chooser
    tokens, target_rows, draft_rows, exact
        As :func:`block_weights`.
    bonus_row : ndarray, shape (n,)
        Target law after the whole block (used when ``tau = m``).
    weights : BlockWeights, optional
        Precomputed :func:`block_weights` of the same arguments.

    Returns
    -------
    tau : int
        Accepted tokens, ``0..m``.
    law : ndarray, shape (n,)
        Normalised law of the token after ``x^tau``: ``bonus_row`` if ``tau = m``, else the
        residual :math:`\propto \max\{w_\tau p(.|x^\tau) - q(.|x^\tau), 0\}`.

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, Algorithm 2; THEORY.md section 3.
    """
    bw = weights if weights is not None else block_weights(tokens, target_rows, draft_rows, exact)
    tau = chooser.last_success(bw.h)
    if tau == len(tokens):
        return tau, bonus_row
    return tau, block_residual(bw, tau, target_rows, draft_rows, exact, chooser)


# ---------------------------------------------------------------------------- K-SEQ rho
def _kseq_beta(p: Sequence[Scalar], q: Sequence[Scalar], rho: Scalar, zero: Scalar) -> Scalar:
    return sum((min(pv / rho, qv) for pv, qv in zip(p, q, strict=True)), zero)


def _kseq_gap(p: Sequence[Scalar], q: Sequence[Scalar], k: int, rho: Scalar, one: Scalar) -> Scalar:
    """``rho beta - (1 - (1 - beta)^k)``: feasible (residual >= 0) iff >= 0; nondecreasing."""
    beta = _kseq_beta(p, q, rho, one * 0)
    return rho * beta - (one - (one - beta) ** k)


#: Float64 K-SEQ: a feasibility gap above -FLOAT_RHO_GAP_TOL counts as feasible (rounding).
FLOAT_RHO_GAP_TOL = 1e-12


@functools.lru_cache(maxsize=65536)
def _kseq_rho_cached(p: tuple[Scalar, ...], q: tuple[Scalar, ...], k: int, exact: bool) -> Scalar:
    one: Scalar = Fraction(1) if exact else 1.0
    # float64: a gap within rounding of 0 counts as feasible, else p = q up to 1e-16 would push
    # rho above 1 (beta = 1 - 1e-16 makes 1 - (1 - beta)^k exceed beta by rounding)
    slack: Scalar = one * 0 if exact else -FLOAT_RHO_GAP_TOL
    if k == 1 or _kseq_gap(p, q, k, one, one) >= slack:
        return one
    lo, hi = one, one * k  # gap(lo) < 0 <= gap(hi) (Bernoulli's inequality at rho = k)
    if not exact:
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if not lo < mid < hi:
                break
            if _kseq_gap(p, q, k, mid, one) >= slack:
                hi = mid
            else:
                lo = mid
        return hi
    tol = RHO_EXACT_TOL
    while hi - lo > tol / 2:
        mid = (lo + hi) / 2
        if _kseq_gap(p, q, k, mid, one) >= 0:
            hi = mid
        else:
            lo = mid
    # a feasible rational with a small denominator in [rho*, lo + tol] keeps the law readable
    for bits in range(4, 41, 4):
        cand = hi.limit_denominator(2**bits)
        if cand <= lo + tol and cand >= 1 and _kseq_gap(p, q, k, cand, one) >= 0:
            return cand
    return hi


def clear_caches() -> None:
    """Empty the memo of :func:`kseq_rho` (for benchmarks; results do not depend on it)."""
    _kseq_rho_cached.cache_clear()


def kseq_rho(p: np.ndarray, q: np.ndarray, k: int, exact: bool) -> Scalar:
    r"""SpecTr's K-SEQ parameter: the smallest :math:`\rho\in[1, k]` with a valid residual.

    .. math::
        \beta(\rho) = \sum_v \min\{p(v)/\rho, q(v)\},\qquad
        \rho^* = \min\{\rho\in[1, k] : 1 - (1 - \beta(\rho))^k \le \rho\,\beta(\rho)\}

    The left side minus the right is nonincreasing in rho and feasible at rho = k, so rho* is
    found by bisection. In float64 the result is the bisection's upper end (within rounding of
    rho*). With Fractions rho* is in general algebraic (a root of a degree-(k+1) polynomial),
    so the exact result is a *feasible rational* ``rho`` with
    ``rho* <= rho <= rho* + RHO_EXACT_TOL`` (2^-40): the residual is then exactly
    non-negative, so K-SEQ stays exactly lossless, and the acceptance probability is below the
    ideal one by O(2^-40).

    Parameters
    ----------
    p, q : ndarray, shape (n,)
        Target and draft laws at the node.
    k : int
        Number of i.i.d. draft tokens at the node, ``k >= 1``.
    exact : bool

    Returns
    -------
    Fraction or float
        rho (1 when ``k = 1``).

    References
    ----------
    Sun et al. 2023, "SpecTr: fast speculative decoding via optimal transport",
    arXiv 2310.15141, K-SEQ and its choice of rho; THEORY.md section 6.
    """
    return _kseq_rho_cached(tuple(p.tolist()), tuple(q.tolist()), int(k), bool(exact))


def kseq_residual(p: np.ndarray, q: np.ndarray, k: int, rho: Scalar, exact: bool) -> np.ndarray:
    r"""K-SEQ residual weights :math:`\max\{p - \min\{p/\rho, q\}\,(1 - (1-\beta)^k)/\beta, 0\}`.

    The factor :math:`(1 - (1 - \beta)^k)/\beta = \sum_{j<k} (1 - \beta)^j` is evaluated as
    that sum (no division; equal to k when beta = 0). Unnormalised.
    """
    one: Scalar = Fraction(1) if exact else 1.0
    capped = np.minimum(p / rho, q)
    beta = sum(capped.tolist(), one * 0)
    factor = sum(((one - beta) ** j for j in range(k)), one * 0)
    return np.maximum(p - capped * factor, 0)


def power_increment(a: Scalar, z: Scalar, k: int, exact: bool) -> Scalar:
    r"""``(a + z)^k - a^k`` for ``a, z >= 0``, without cancellation in float64.

    Exact for Fractions. In float64 it is the sum of the non-negative binomial terms
    :math:`\binom{k}{j} a^{k-j} z^j`, ``j = 1..k``, each formed in log space (no overflow of the
    binomial coefficient, no underflow of the dominant term) and added with :func:`math.fsum`;
    the relative error is a few ulps times ``log`` magnitudes even for large k.
    """
    if exact:
        return (a + z) ** k - a**k
    a, z = float(a), float(z)
    if z <= 0.0:
        return 0.0
    if a <= 0.0:
        return z**k
    log_a, log_z = math.log(a), math.log(z)
    lg_k = math.lgamma(k + 1)
    terms = [
        math.exp(lg_k - math.lgamma(j + 1) - math.lgamma(k - j + 1) + (k - j) * log_a + j * log_z)
        for j in range(1, k + 1)
    ]
    return math.fsum(terms)
