r"""Statistical checks: sample iterations from the battery and test the verifier's law.

Each iteration draws K i.i.d. drafts from q (vectorised), runs the verifier once and
completes its output O by fresh sampling from p up to L+1 tokens. Three checks per instance,
all G-tests (:func:`scipy.stats.power_divergence`, log-likelihood) with cells of expected
count below 5 pooled:

1. ``end_to_end_law``: the completed sequence against p on V^{L+1} (THEORY.md section 2: a
   stateless verifier is lossless iff this law is p).
2. ``positional_law``: for every position j = 0..L and prefix x^j, among outputs that reach
   position j+1 with prefix x^j, the token at j+1 against p(. | x^j). By the chain rule this
   is equivalent to 1 and localises a failure (the p-value is Bonferroni-adjusted over the
   L+1 positions):

   .. math::
       P(Y^{j+1} = x^j z) = p(x^j z)\ \forall j \iff
       P(O_{j+1} = z \mid |O| > j, O^j = x^j) = p(z \mid x^j).

3. ``efficiency``: the accepted-length law and E[tau] with a 99% interval, beside B_BV(K),
   OPT(K) and OT(K); an E[tau] significantly above OPT(K) (one-sided z test) proves the
   verifier lossy (diagnosis ``efficiency_above_optimum``).

Sample sizes come from :func:`~spectr_gbv.simulate.monte_carlo.iterations_for_power` so
that the end-to-end test detects a total-variation error ``tv`` (0.01 at budget
``standard``) with guaranteed power 0.99 at the Bonferroni level ``alpha / family`` (alpha =
1e-3 over every statistical test of the run). A failed law test is diagnosed
``wrong_residual`` when the accepted-length law is consistent with the exact law of the named
reference (or, without one, of a known lossless algorithm) but the emitted tokens are not,
``reuses_uniform`` when moreover the corrections follow the law of a residual drawn with the
uniform that decided the rejection, and ``not_lossless`` otherwise.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from spectr_gbv.simulate.exact import EnumerationTooLargeError, simulate_exact
from spectr_gbv.simulate.monte_carlo import GTest, g_test_power, iterations_for_power
from spectr_gbv.simulate.monte_carlo import pooled_g_test as g_test
from spectr_gbv.theory import bounds, lp
from spectr_gbv.validate.battery import BatteryInstance, Tables
from spectr_gbv.validate.checks_structural import StructuralTally, run_batch
from spectr_gbv.validate.interfaces import Adapter
from spectr_gbv.validate.report import CheckResult

#: Family-wise significance level of the statistical tests of one run.
ALPHA = 1e-3
#: Power target against the budget's total-variation error.
POWER_TARGET = 0.99
#: Total-variation error detected with power 0.99, per budget.
TV_BY_BUDGET: dict[str, float] = {"quick": 0.05, "standard": 0.01, "thorough": 0.005}
#: Iterations per verifier batch.
BATCH = 8192
#: Lossless algorithms tried when a failure is diagnosed without a named reference.
CANDIDATES_SINGLE: tuple[str, ...] = ("sd", "bv")
CANDIDATES_MULTI: tuple[str, ...] = ("sd", "bv", "mdbv", "spectr", "rrs", "gbv_multipath")


# ---------------------------------------------------------------------------- tests
def combine(tests: list[GTest]) -> GTest:
    """Sum of independent G statistics (and dfs) of several conditional multinomials."""
    if any(t.g == math.inf for t in tests):
        return GTest(math.inf, sum(t.df for t in tests), 0.0, sum(t.cells for t in tests))
    g = sum(t.g for t in tests)
    df = sum(t.df for t in tests)
    if df == 0:
        return GTest(0.0, 0, 1.0, sum(t.cells for t in tests))
    return GTest(g, df, float(stats.chi2.sf(g, df)), sum(t.cells for t in tests))


def sample_size(bi: BatteryInstance, alpha_test: float, tv: float) -> int:
    """Iterations for power :data:`POWER_TARGET` against TV ``tv`` on V^{L+1} at ``alpha_test``.

    The degrees of freedom are those of the test as run: cells of expected count below 5 at
    that sample size are pooled into one (iterated until stable). The guarantee is against a
    TV error on the pooled partition; the pooled cells hold at most ``5 * cells / N`` of mass.
    """
    p = np.asarray(bi.float_instance.target.joint(bi.instance.L + 1), dtype=np.float64).reshape(-1)
    p = p[p > 0]
    df = max(len(p) - 1, 1)
    num = iterations_for_power(df, alpha_test, tv, POWER_TARGET)
    for _ in range(8):  # the test pools cells of expected count < 5: size for the pooled df
        small = p * num < 5
        pooled = max(int((~small).sum()) + int(small.any()) - 1, 1)
        if pooled == df:
            break
        df = pooled
        num = iterations_for_power(df, alpha_test, tv, POWER_TARGET)
    return num


# ---------------------------------------------------------------------------- sampling
@dataclass
class Samples:
    """Valid outputs of the verifier on one battery instance.

    Attributes
    ----------
    bi : BatteryInstance
    tables : Tables
    drafts : ndarray, shape [N, K, L], int64
    tokens : ndarray, shape [N, L+1], int64
        Emitted tokens left-aligned, -1 after.
    lengths : ndarray, shape [N], int64
    completed : ndarray, shape [N], int64
        Base-n index of "output, then fresh p" in V^{L+1}.
    calls : int
        Verifier calls made (invalid outputs included).
    invalid : int
        Outputs that broke a structural rule (excluded from the arrays).
    """

    bi: BatteryInstance
    tables: Tables
    drafts: np.ndarray
    tokens: np.ndarray
    lengths: np.ndarray
    completed: np.ndarray
    calls: int
    invalid: int


def collect(
    adapter: Adapter,
    bi: BatteryInstance,
    num: int,
    rng: np.random.Generator,
    tally: StructuralTally | None = None,
    tables: Tables | None = None,
) -> Samples:
    """Run ``num`` iterations of the verifier on ``bi`` (drafts from q, batched).

    Raises
    ------
    VerifierRaised, VerifierTimedOut
    """
    tables = tables or Tables(bi.float_instance)
    L, K = bi.instance.L, bi.K
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    invalid = 0
    done = 0
    while done < num:
        c = min(BATCH, num - done)
        drafts = tables.sample_drafts(c, K, rng)
        em, problems = run_batch(adapter, tables, bi, drafts, rng, tally)
        ok = np.ones(c, dtype=bool)
        if problems:
            ok[list(problems)] = False
            invalid += len(problems)
        parts.append((drafts[ok], em.tokens[ok], em.lengths[ok]))
        done += c
    drafts = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, K, L), dtype=np.int64)
    tokens = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, L + 1), dtype=np.int64)
    lengths = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    completed = tables.complete(np.maximum(tokens, 0), lengths, rng)
    return Samples(bi, tables, drafts, tokens, lengths, completed, num, invalid)


# ---------------------------------------------------------------------------- the checks
def end_to_end(s: Samples) -> GTest:
    """G-test of the completed sequences against p on V^{L+1}."""
    counts = np.bincount(s.completed, minlength=len(s.tables.p_joint))
    return g_test(counts, s.tables.p_joint)


def positional(s: Samples) -> tuple[GTest, int, list[GTest]]:
    """Per-position conditional tests; returns (worst test with Bonferroni p, its position, all)."""
    n, L = s.tables.n, s.tables.L
    per_pos = []
    for j in range(L + 1):
        reach = s.lengths > j
        pre = s.tables.prefix_index(s.tokens[reach, :j]) if j else np.zeros(int(reach.sum()), dtype=np.int64)
        tok = s.tokens[reach, j]
        counts = np.zeros((n**j, n), dtype=np.int64)
        np.add.at(counts, (pre, tok), 1)
        tests = [g_test(counts[x], s.tables.p_levels[j][x]) for x in np.flatnonzero(counts.sum(axis=1))]
        per_pos.append(combine(tests) if tests else GTest(0.0, 0, 1.0, 0))
    worst = int(np.argmin([t.p_value for t in per_pos]))
    t = per_pos[worst]
    adj = min(1.0, t.p_value * (L + 1))
    return GTest(t.g, t.df, adj, t.cells), worst, per_pos


_OPTIMA: dict[str, tuple[float, float | None, float | None, str]] = {}
_LAWS: dict[tuple[str, str], np.ndarray | None] = {}


def _key(bi: BatteryInstance) -> str:
    return json.dumps(bi.spec(), sort_keys=True)


def _optima(bi: BatteryInstance) -> tuple[float, float | None, float | None, str]:
    """B_BV(K), OPT(K), OT(K) of a battery instance (LP optima None when too large; cached)."""
    key = _key(bi)
    if key not in _OPTIMA:
        _OPTIMA[key] = _compute_optima(bi)
    return _OPTIMA[key]


def _compute_optima(bi: BatteryInstance) -> tuple[float, float | None, float | None, str]:
    inst, K, L = bi.instance, bi.K, bi.instance.L
    bbv = float(bounds.cic_bound_lossless(inst.target, inst.draft, K, L))
    note = ""
    try:
        opt: float | None = lp.optimal_lossless(inst.target, inst.draft, K, L, time_limit=30).value
        ot: float | None = lp.optimal_coupling(inst.target, inst.draft, K, L, time_limit=30).value
    except (ValueError, RuntimeError) as exc:
        opt = ot = None
        note = f" (LP optima not computed: {exc})"
    return bbv, opt, ot, note


def efficiency(s: Samples, alpha_test: float) -> CheckResult:
    """E[tau] with a 99% interval vs B_BV(K), OPT(K), OT(K); fails when significantly above OPT."""
    bi = s.bi
    tau = s.lengths - 1
    N = len(tau)
    if N < 2:
        return CheckResult(f"efficiency[{bi.label}]", "efficiency", None, sample_size=N, detail="too few samples")
    mean = float(tau.mean())
    sd = float(tau.std(ddof=1))
    se = sd / math.sqrt(N)
    half = float(stats.t.isf(0.005, N - 1)) * se
    bbv, opt, ot, note = _optima(bi)
    hist = np.bincount(tau, minlength=bi.instance.L + 1) / N
    law = ", ".join(f"{k}: {v:.4f}" for k, v in enumerate(hist))
    detail = (
        f"E[tau] = {mean:.4f} (99% CI [{mean - half:.4f}, {mean + half:.4f}], N = {N}); B_BV({bi.K}) = {bbv:.4f}, "
        f"OPT({bi.K}) = {_f(opt)}, OT({bi.K}) = {_f(ot)}{note}; accepted-length law {{{law}}}"
    )
    if opt is None:
        return CheckResult(
            f"efficiency[{bi.label}]",
            "efficiency",
            None,
            statistic=mean,
            sample_size=N,
            instance=bi.spec(),
            detail=detail,
        )
    if se > 0:
        z = (mean - opt) / se
        pval = float(stats.norm.sf(z))
    else:  # every iteration accepted the same number of tokens
        z = 0.0 if abs(mean - opt) <= 1e-9 else math.copysign(math.inf, mean - opt)
        pval = 0.0 if mean > opt + 1e-9 else (0.5 if z == 0.0 else 1.0)
    above = pval < alpha_test
    return CheckResult(
        f"efficiency[{bi.label}]",
        "efficiency",
        not above,
        statistic=float(z),
        p_value=pval,
        sample_size=N,
        instance=bi.spec(),
        detail=(
            "E[tau] is significantly above OPT(K), the best any stateless lossless verifier can do: "
            "proof of a lossy verifier. "
            if above
            else ""
        )
        + detail
        + "; z = (E[tau] - OPT)/se",
        diagnosis="efficiency_above_optimum" if above else "ok",
    )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


# ---------------------------------------------------------------------------- diagnosis
def accepted_length_law(bi: BatteryInstance, method: str) -> np.ndarray | None:
    """Exact law of tau for ``method`` on ``bi`` (float), or None when it cannot be enumerated."""
    key = (_key(bi), method)
    if key not in _LAWS:
        _LAWS[key] = _accepted_law(bi, method)
    return _LAWS[key]


def _accepted_law(bi: BatteryInstance, method: str) -> np.ndarray | None:
    try:
        res = simulate_exact(bi.float_instance, method, bi.K, max_tuples=20_000)
    except (EnumerationTooLargeError, ValueError):
        return None
    law = np.zeros(bi.instance.L + 1)
    for o, prob in res.output_law.items():
        law[len(o) - 1] += float(prob)
    return law


def matching_algorithm(s: Samples, reference: str | None, alpha_test: float) -> str | None:
    """The named reference (or a known lossless algorithm) whose accepted-length law fits the samples."""
    tau = s.lengths - 1
    counts = np.bincount(tau, minlength=s.bi.instance.L + 1)
    candidates = (reference,) if reference else (CANDIDATES_SINGLE if s.bi.K == 1 else CANDIDATES_MULTI)
    for method in candidates:
        law = accepted_length_law(s.bi, method)
        if law is not None and g_test(counts, law).p_value >= alpha_test:
            return method
    return None


def reuse_signature(s: Samples, alpha_test: float) -> bool:
    """True when SD-type corrections follow "residual drawn with the rejecting uniform".

    For every output that stopped at j < L (a rejection of draft 0's token x at j, ratio
    ``r = p(x)/q(x)``), the correction drawn by inverse CDF of the normalised residual ``c``
    with the same uniform, conditioned to [r, 1), has law ``|[C_{i-1}, C_i) cap [r, 1)| / (1 - r)``.
    The signature holds when that law fits (p >= 0.01) and the correct residual does not.
    """
    L, n = s.tables.L, s.tables.n
    stop = s.lengths <= L
    if stop.sum() < 50:
        return False
    idx = np.flatnonzero(stop)
    j = s.lengths[idx] - 1
    drafts0 = s.drafts[idx, 0]
    q_rows, p_rows = s.tables.rows(drafts0)
    rows = np.arange(len(idx))
    q = q_rows[rows, j]
    p = p_rows[rows, j]
    x = drafts0[rows, j]
    r = np.clip(p[rows, x] / np.maximum(q[rows, x], 1e-300), 0.0, 1.0)
    res = np.maximum(p - q, 0.0)
    tot = res.sum(axis=1, keepdims=True)
    ok = (tot[:, 0] > 0) & (r < 1 - 1e-9)
    res = res[ok] / tot[ok]
    r = r[ok]
    z = s.tokens[idx[ok], j[ok]]
    cdf_hi = np.cumsum(res, axis=1)
    cdf_lo = cdf_hi - res
    reuse = np.clip(np.minimum(cdf_hi, 1.0) - np.maximum(cdf_lo, r[:, None]), 0.0, None) / (1 - r[:, None])
    # cells: (position, prefix, token) through a hashed key; expected = sum of per-sample laws
    key = j[ok] * (n ** (L + 1)) + s.tables.prefix_index(
        np.where(np.arange(L)[None, :] < j[ok][:, None], drafts0[ok], 0)
    )
    uniq, inv = np.unique(key, return_inverse=True)
    obs = np.zeros((len(uniq), n))
    np.add.at(obs, (inv, z), 1)
    exp_ok = np.zeros((len(uniq), n))
    exp_reuse = np.zeros((len(uniq), n))
    np.add.at(exp_ok, inv, res)
    np.add.at(exp_reuse, inv, reuse)
    t_ok = combine([g_test(obs[c], exp_ok[c]) for c in range(len(uniq))])
    t_reuse = combine([g_test(obs[c], exp_reuse[c]) for c in range(len(uniq)) if exp_reuse[c].sum() > 0])
    return t_ok.p_value < alpha_test and t_reuse.p_value >= 0.01


def diagnose(s: Samples, reference: str | None, alpha_test: float, reuse_seen: bool) -> tuple[str, str]:
    """Diagnosis tag and explanation for a failed law test on ``s``."""
    if reuse_seen:
        return "reuses_uniform", "the correction depends on the uniform that decided the rejection"
    method = matching_algorithm(s, reference, alpha_test)
    if method is None:
        who = f"that of the reference {reference!r}" if reference else "that of any known lossless algorithm"
        why = f"the accepted-length law does not match {who}: the acceptance rule is wrong"
        if s.invalid:
            why += (
                f" (or the {s.invalid} invalid outputs excluded from this test bias it: fix the structural "
                "failures first)"
            )
        return "not_lossless", why
    if method == "sd" and reuse_signature(s, alpha_test):
        return "reuses_uniform", (
            "the acceptance matches 'sd' and the corrections follow a residual drawn with the uniform that "
            "decided the rejection"
        )
    return "wrong_residual", (
        f"the accepted-length law matches {method!r} but the emitted tokens do not: the token drawn at the "
        "stop position (residual or bonus) has the wrong law"
    )


def law_checks(
    s: Samples, alpha_test: float, tv: float, reference: str | None, reuse_seen: bool = False
) -> list[CheckResult]:
    """The end-to-end and positional checks on one instance's samples (diagnosed when failing)."""
    bi = s.bi
    N = len(s.lengths)
    e2e = end_to_end(s)
    pos, worst, per_pos = positional(s)
    failed = e2e.p_value < alpha_test or pos.p_value < alpha_test
    diag, why = diagnose(s, reference, alpha_test, reuse_seen) if failed else ("ok", "")
    power = g_test_power(N, max(e2e.df, 1), alpha_test, tv) if N else 0.0
    inv = f"; {s.invalid} invalid outputs excluded (see the structural checks)" if s.invalid else ""
    out = [
        CheckResult(
            f"end_to_end_law[{bi.label}]",
            "statistical",
            e2e.p_value >= alpha_test,
            statistic=e2e.g,
            p_value=e2e.p_value,
            sample_size=N,
            power=power,
            instance=bi.spec(),
            detail=(
                f"G-test of 'output, then fresh p' against p on V^{bi.instance.L + 1} ({e2e.cells} cells after "
                f"pooling, df {e2e.df}) at level {alpha_test:.3g}; power {power:.4f} against TV {tv:g}{inv}"
                + (f". {why[0].upper()}{why[1:]}" if failed and e2e.p_value < alpha_test else "")
            ),
            diagnosis=diag if e2e.p_value < alpha_test else "ok",
        )
    ]
    pos_detail = ", ".join(f"j={j}: p={t.p_value:.3g}" for j, t in enumerate(per_pos))
    out.append(
        CheckResult(
            f"positional_law[{bi.label}]",
            "statistical",
            pos.p_value >= alpha_test,
            statistic=pos.g,
            p_value=pos.p_value,
            sample_size=N,
            power=g_test_power(N, max(pos.df, 1), alpha_test / (bi.instance.L + 1), tv) if N and pos.df else None,
            instance=bi.spec(),
            detail=(
                f"token at position j+1 given the output reaches it with prefix x^j vs p(.|x^j), per position "
                f"({pos_detail}); worst j = {worst}, p-value Bonferroni-adjusted over {bi.instance.L + 1} positions"
                + (f". {why[0].upper()}{why[1:]}" if failed and pos.p_value < alpha_test else "")
            ),
            diagnosis=diag if pos.p_value < alpha_test else "ok",
        )
    )
    return out


__all__ = [
    "ALPHA",
    "BATCH",
    "POWER_TARGET",
    "TV_BY_BUDGET",
    "GTest",
    "Samples",
    "accepted_length_law",
    "collect",
    "combine",
    "diagnose",
    "efficiency",
    "end_to_end",
    "g_test",
    "law_checks",
    "matching_algorithm",
    "positional",
    "reuse_signature",
    "sample_size",
]
