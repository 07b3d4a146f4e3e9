r"""Monte Carlo simulator: sampled iterations, E[tau] with a confidence interval, and a G-test
of the output law against the exact target law, with the test's power stated.

For instances too large to enumerate (:mod:`spectr_gbv.simulate.exact` refuses them), each
iteration samples K i.i.d. drafts from q, runs the verifier's sampler once, then completes the
emitted tokens by fresh sampling from p ("O, then fresh sampling from p", THEORY.md section 2).
A lossless verifier makes the first ``m`` completed tokens follow p exactly on V^m; the G-test
(:func:`scipy.stats.power_divergence` with ``lambda_="log-likelihood"``) compares the observed
counts with p's exact joint law. Cells with expected count below 5 are pooled into one cell.

Power. Against any alternative at total-variation distance ``d`` from p on the tested cells,
the G statistic is asymptotically non-central chi-square with non-centrality
``lambda = N sum_i (p'_i - p_i)^2 / p_i >= 4 N d^2`` (the minimum, over alternatives with TV
``d``, of the chi-square divergence is ``4 d^2``, reached by moving mass between two halves of
equal p-mass), so ``power >= P(ncx2(df, 4 N d^2) > chi2_{1-alpha}(df))``: a guaranteed
(worst-direction) power, reported for ``d = 0.01``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.methods import is_registered, method_spec
from spectr_gbv.core.numbers import check_seed
from spectr_gbv.core.progress import progress
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.greedy_bv import GreedyCoupling, sample_outcome
from spectr_gbv.reference.lp_oracle import LPOracleVerifier
from spectr_gbv.reference.registry import check_method, get_verifier
from spectr_gbv.reference.user_rules import resolve_rule, rule_label

#: Largest number of cells of the tested law V^m (m is reduced until n^m fits).
MAX_TEST_CELLS = 4096
#: Total-variation error whose detection power is reported.
POWER_TV = 0.01


@dataclass(frozen=True)
class MonteCarloResult:
    """Sampled estimate of one verifier on one instance.

    Attributes
    ----------
    method : str
    K, L, num_iterations : int
    expected_accepted : float
        Sample mean of tau.
    ci_low, ci_high : float
        Two-sided ``confidence`` interval for E[tau] (Student t on the sample mean).
    confidence : float
    tested_length : int
        m: the test compares the law of the first m completed tokens with p on V^m.
    g_statistic, p_value : float
        G-test of the completed tokens against p (pooled cells, ``df = cells - 1``).
    df : int
    alpha : float
        Significance level used for ``lossless_rejected`` and the power.
    lossless_rejected : bool
        ``p_value < alpha``.
    power_tv : float
        Guaranteed power to detect a total-variation error of :data:`POWER_TV` at ``alpha``.
    iterations_for_power : int
        Iterations that would give power 0.99 against that error (same df and alpha). A test
        that does not reject is inconclusive when ``power_tv`` is low.
    """

    method: str
    K: int
    L: int
    num_iterations: int
    expected_accepted: float
    ci_low: float
    ci_high: float
    confidence: float
    tested_length: int
    g_statistic: float
    p_value: float
    df: int
    alpha: float
    lossless_rejected: bool
    power_tv: float
    iterations_for_power: int


@dataclass(frozen=True)
class GTest:
    """A G-test outcome: statistic, degrees of freedom, p-value, cells after pooling."""

    g: float
    df: int
    p_value: float
    cells: int


def combine_g_tests(tests: list[GTest]) -> GTest:
    """Sum of independent G statistics (and dfs) of several conditional multinomials.

    Parameters
    ----------
    tests : list of GTest
        Independent tests (e.g. one per conditioning prefix).

    Returns
    -------
    GTest
        G and df summed, the p-value of chi2(df) at G (1.0 when df = 0; 0.0 when some G is infinite).
    """
    if any(t.g == math.inf for t in tests):
        return GTest(math.inf, sum(t.df for t in tests), 0.0, sum(t.cells for t in tests))
    g = sum(t.g for t in tests)
    df = sum(t.df for t in tests)
    if df == 0:
        return GTest(0.0, 0, 1.0, sum(t.cells for t in tests))
    return GTest(g, df, float(stats.chi2.sf(g, df)), sum(t.cells for t in tests))


def pooled_g_test(observed: np.ndarray, expected_prob: np.ndarray) -> GTest:
    """G-test of counts against probabilities (cells with expected count < 5 pooled).

    Cells of expected count below 5 are pooled into one; if that cell is still below 5 it is
    merged into the smallest other cell, so every tested cell expects at least 5 (the
    chi-square approximation of G is anti-conservative for tiny expected counts).

    Parameters
    ----------
    observed : ndarray, shape [c], int
    expected_prob : ndarray, shape [c], float
        Probabilities (renormalised to sum to 1).

    Returns
    -------
    GTest
        ``p_value = 0`` and ``g = inf`` when a cell of probability 0 is observed; ``df = 0``,
        ``p_value = 1`` when fewer than two cells remain.

    References
    ----------
    :func:`scipy.stats.power_divergence` (``lambda_="log-likelihood"``); McDonald, Handbook of
    Biological Statistics (G-test; pooling of small expected counts).
    """
    obs = np.asarray(observed, dtype=np.float64)
    prob = np.asarray(expected_prob, dtype=np.float64)
    total = obs.sum()
    if total <= 0:
        return GTest(0.0, 0, 1.0, 0)
    prob = prob / prob.sum()
    if np.any(obs[prob <= 0] > 0):
        return GTest(math.inf, max(int((prob > 0).sum()) - 1, 1), 0.0, int((prob > 0).sum()))
    keep = prob > 0
    obs, exp = obs[keep], prob[keep] * total
    small = exp < 5
    if small.any():
        obs = np.append(obs[~small], obs[small].sum())
        exp = np.append(exp[~small], exp[small].sum())
        if exp[-1] < 5 and len(exp) > 1:  # a pooled cell still below 5 joins the smallest other cell
            k = int(np.argmin(exp[:-1]))
            obs[k] += obs[-1]
            exp[k] += exp[-1]
            obs, exp = obs[:-1], exp[:-1]
    if len(obs) < 2:
        return GTest(0.0, 0, 1.0, len(obs))
    g, p = stats.power_divergence(obs, exp, lambda_="log-likelihood")
    return GTest(float(g), len(obs) - 1, float(p), len(obs))


#: Largest K * L * N (draft tokens sampled) :func:`monte_carlo` accepts (minutes of pure Python).
MAX_DRAFT_TOKENS = 50_000_000
#: Draft tokens (iterations x K x L) from which :func:`monte_carlo` shows a progress bar with
#: an ETA (on a terminal, unless quiet).
PROGRESS_MIN_DRAFT_TOKENS = 200_000


def g_test_power(num_samples: int, df: int, alpha: float, tv: float = POWER_TV) -> float:
    """Worst-direction power of a G/chi-square goodness-of-fit test against a TV error ``tv``.

    Parameters
    ----------
    num_samples : int
        N, the number of sampled iterations the test sees (>= 0).
    df : int
        Degrees of freedom (cells - 1), >= 1.
    alpha : float
        Significance level in (0, 1).
    tv : float
        Total-variation distance of the alternative.

    Returns
    -------
    float
        ``P(ncx2(df, 4 N tv^2) > chi2.isf(alpha, df))``.

    Raises
    ------
    ValueError
        ``num_samples`` < 0, ``df`` < 1, ``alpha`` outside (0, 1), ``tv`` outside [0, 1] (NaN included).
    """
    if df < 1 or not 0 < alpha < 1:
        raise ValueError(f"df must be >= 1 and alpha in (0, 1), got df={df}, alpha={alpha}")
    if not num_samples >= 0:
        raise ValueError(f"num_samples must be >= 0, got {num_samples}")
    if not 0 <= tv <= 1:
        raise ValueError(f"tv (total-variation distance) must lie in [0, 1], got {tv}")
    crit = stats.chi2.isf(alpha, df)
    return float(stats.ncx2.sf(crit, df, 4 * num_samples * tv**2))


def iterations_for_power(df: int, alpha: float, tv: float = POWER_TV, power: float = 0.99) -> int:
    """Smallest N whose :func:`g_test_power` reaches ``power`` (bisection on N).

    Raises
    ------
    ValueError
        ``tv`` outside (0, 1] or ``power`` outside (alpha, 1) (no N reaches it), or bad
        ``df``/``alpha`` as :func:`g_test_power`.
    """
    if not 0 < tv <= 1:
        raise ValueError(f"tv (total-variation distance) must lie in (0, 1], got {tv}")
    if not alpha < power < 1:
        raise ValueError(f"power must lie in (alpha, 1) = ({alpha}, 1), got {power}")
    lo, hi = 1, 2
    while g_test_power(hi, df, alpha, tv) < power:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if g_test_power(mid, df, alpha, tv) < power else (lo, mid)
    return hi


def _sample_token(row: np.ndarray, rng: np.random.Generator) -> int:
    cdf = np.cumsum(np.asarray(row, dtype=np.float64))
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(cdf) - 1))


def _tested_length(n: int, L: int) -> int:
    m = L + 1
    while m > 1 and n**m > MAX_TEST_CELLS:
        m -= 1
    return m


Sampler = Callable[[np.random.Generator], tuple[tuple[int, ...], dict[tuple[int, ...], Any] | None]]


def _sample_drafts(q: TabularAR, K: int, L: int, rng: np.random.Generator) -> np.ndarray:
    drafts = np.empty((K, L), dtype=np.int64)
    for k in range(K):
        for t in range(L):
            drafts[k, t] = _sample_token(q.cond(drafts[k, :t], extend=True), rng)
    return drafts


def _iteration_sampler(inst: Instance, method: Any, K: int) -> Sampler:
    """``sample(rng) -> (emitted tokens, carried rows or None)`` for one iteration of ``method``.

    Registered names dispatch on the method table (a ``stateful`` method samples its coupling,
    one that ``needs_instance`` solves its LP); anything else is resolved by
    :func:`~spectr_gbv.reference.user_rules.resolve_rule` (a user's function is called with the
    real ``rng``, so any use of it works here).
    """
    p, q, L = inst.target, inst.draft, inst.L
    spec = method_spec(method) if is_registered(method) else None
    if spec is not None and spec.stateful:
        coupling = GreedyCoupling(p, q, L)
        laws: dict[tuple[int, ...], Any] = {}

        def greedy(rng: np.random.Generator) -> tuple[tuple[int, ...], dict[tuple[int, ...], Any] | None]:
            x = tuple(int(t) for t in _sample_drafts(q, 1, L, rng)[0])
            if x not in laws:
                laws[x] = coupling.outcome_law(x)
            emitted, carried = sample_outcome(laws[x], rng)
            return emitted, carried.as_dict() if carried is not None else None

        return greedy
    if spec is not None and spec.needs_instance:
        verifier: Verifier = LPOracleVerifier(inst, K)
    elif isinstance(method, Verifier):
        verifier = method
    else:
        if isinstance(method, str) and ":" not in method:
            check_method(method)  # the registry's one line for an unknown name
        _, user = resolve_rule(method)
        verifier = user if user is not None else get_verifier(method)

    def stateless(rng: np.random.Generator) -> tuple[tuple[int, ...], dict[tuple[int, ...], Any] | None]:
        drafts = _sample_drafts(q, K, L, rng)
        draft_rows = np.array([[q.cond(drafts[k, :t], extend=True) for t in range(L)] for k in range(K)])
        target_rows = np.array([[p.cond(drafts[k, :t], extend=True) for t in range(L + 1)] for k in range(K)])
        return verifier.sample_checked(VerifyInput(drafts, draft_rows, target_rows, False), rng), None

    return stateless


def monte_carlo(
    instance: Instance,
    method: Any,
    num_drafts: int,
    num_iterations: int,
    *,
    seed: int | None = 0,
    alpha: float = 1e-3,
    confidence: float = 0.99,
) -> MonteCarloResult:
    """Sample ``num_iterations`` iterations; estimate E[tau] and G-test the output law.

    Parameters
    ----------
    instance : Instance
        Any size (float64 arithmetic is used for sampling; exact instances are converted).
    method : str, Verifier, Verifier subclass or callable
        What :func:`~spectr_gbv.simulate.methods.simulate_method` accepts: a registered name
        (``greedy_bv`` samples its coupling and completes with the carried law; ``lp_oracle``
        first solves the OPT(K) LP, which must fit), ``"module:attribute"`` naming a user's
        rule, or the rule itself (a :class:`~spectr_gbv.reference.Verifier` subclass or
        instance, or a plain function with the generic interface, called with the sampler's
        :class:`numpy.random.Generator`: a function whose draws cannot be enumerated exactly
        is sampled here all the same).
    num_drafts : int
        K >= 1.
    num_iterations : int
        N >= 100.
    seed : int, optional
        Seed of the :class:`numpy.random.Generator` (reproducible).
    alpha : float
        Significance level of the G-test (default 1e-3).
    confidence : float
        Level of the E[tau] interval (default 0.99).

    Returns
    -------
    MonteCarloResult

    Raises
    ------
    ValueError
        Bad K, N, alpha, confidence, a negative or non-int ``seed``, more than
        :data:`MAX_DRAFT_TOKENS` draft tokens in all,
        or an unknown method, a failed import of ``"module:attribute"``, an object that is
        not a rule (one line each, :func:`~spectr_gbv.reference.user_rules.resolve_rule`), or
        a user's function returning something that is not ``tau + 1`` drafted tokens.
    TypeError
        ``method`` is neither a str nor a rule object.

    References
    ----------
    THEORY.md section 2 (validity); McDonald, Handbook of Biological Statistics (G-test);
    power via the non-central chi-square approximation (Cohen 1988, chapter 7).
    """
    if not isinstance(num_drafts, int) or num_drafts < 1:
        raise ValueError(f"num_drafts (K) must be an int >= 1, got {num_drafts!r}")
    if not isinstance(num_iterations, int) or num_iterations < 100:
        raise ValueError(f"num_iterations must be an int >= 100, got {num_iterations!r}")
    if not isinstance(instance, Instance):
        raise TypeError(f"instance: expected an Instance, got {type(instance).__name__}")
    if num_drafts * instance.L * num_iterations > MAX_DRAFT_TOKENS:
        raise ValueError(
            f"num_drafts (K) = {num_drafts} x L = {instance.L} x num_iterations = {num_iterations} draft tokens "
            f"exceed MAX_DRAFT_TOKENS = {MAX_DRAFT_TOKENS}"
        )
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    seed = check_seed(seed, "seed")
    inst = instance.to_float()
    p, L, n, K = inst.target, inst.L, inst.n, num_drafts
    one_iteration = _iteration_sampler(inst, method, K)
    label = method if isinstance(method, str) else method.name if isinstance(method, Verifier) else rule_label(method)
    rng = np.random.default_rng(seed)
    m = _tested_length(n, L)
    taus = np.empty(num_iterations, dtype=np.int64)
    counts = np.zeros(n**m, dtype=np.int64)
    quiet = True if num_iterations * K * L < PROGRESS_MIN_DRAFT_TOKENS else None
    bar = progress(num_iterations, f"{label} K={K}", quiet=quiet)
    for it in range(num_iterations):
        if it % 1000 == 999:
            bar.update(1000)
        out, carried = one_iteration(rng)
        taus[it] = len(out) - 1
        seq = list(out)
        while len(seq) < m:  # complete: the carried law first (stateful), then fresh p
            rest = tuple(seq[len(out) :])
            row = carried[rest] if carried is not None and rest in carried else p.cond(seq, extend=True)
            seq.append(_sample_token(row, rng))
        counts[int(np.ravel_multi_index(tuple(seq[:m]), (n,) * m))] += 1
    bar.close()
    expected = np.array([float(p.prob(y, extend=True)) for y in itertools.product(range(n), repeat=m)])
    test = pooled_g_test(counts, expected)  # an output p gives probability 0: g = inf, p = 0
    g, pval, df = test.g, test.p_value, max(test.df, 1)
    mean = float(taus.mean())
    half = float(stats.t.isf((1 - confidence) / 2, num_iterations - 1) * taus.std(ddof=1) / math.sqrt(num_iterations))
    return MonteCarloResult(
        method=label,
        K=K,
        L=L,
        num_iterations=num_iterations,
        expected_accepted=mean,
        ci_low=mean - half,
        ci_high=mean + half,
        confidence=confidence,
        tested_length=m,
        g_statistic=float(g),
        p_value=float(pval),
        df=df,
        alpha=alpha,
        lossless_rejected=bool(pval < alpha),
        power_tv=g_test_power(num_iterations, df, alpha),
        iterations_for_power=iterations_for_power(df, alpha),
    )
