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
that the end-to-end test detects a total-variation error ``tv`` (0.02 at budget
``standard``) with guaranteed power 0.99 at the Bonferroni level ``alpha / family`` (alpha =
1e-3 over every statistical test of the run); each law test runs in the group-sequential
looks of :data:`LOOKS` (:func:`collect_sequential`). The samples come from
:mod:`spectr_gbv.validate.checks.sampling`; a failed law test is diagnosed by
:mod:`spectr_gbv.validate.checks.diagnosis` (``not_lossless``, ``wrong_residual``, ``reuses_uniform``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from spectr_gbv.simulate.monte_carlo import GTest, g_test_power, iterations_for_power
from spectr_gbv.simulate.monte_carlo import combine_g_tests as combine
from spectr_gbv.simulate.monte_carlo import pooled_g_test as g_test
from spectr_gbv.theory import bounds, lp
from spectr_gbv.validate.battery import WIDE_VOCAB_TV, WIDE_VOCAB_TV_FACTOR
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.checks.diagnosis import diagnose, instance_key, locus_of
from spectr_gbv.validate.checks.sampling import Samples, collect
from spectr_gbv.validate.checks.structural import StructuralTally
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.report.results import CheckResult

#: Family-wise significance level of the statistical tests of one run.
ALPHA = 1e-3
#: Power target against the budget's total-variation error.
POWER_TARGET = 0.99
#: Total-variation error detected with power 0.99, per budget.
TV_BY_BUDGET: dict[str, float] = {"quick": 0.1, "standard": 0.02, "thorough": 0.01}


# ---------------------------------------------------------------------------- tests
def planned_tv(bi: BatteryInstance, tv: float) -> float:
    """The TV error ``bi``'s law tests are planned against: ``tv``, or for an instance seen through a
    wide vocabulary (every iteration carries rows of V floats) the larger of
    :data:`~spectr_gbv.validate.battery.WIDE_VOCAB_TV` and
    :data:`~spectr_gbv.validate.battery.WIDE_VOCAB_TV_FACTOR` times ``tv`` (0.3 at budget quick,
    0.1 at standard and thorough)."""
    return max(tv, WIDE_VOCAB_TV, round(WIDE_VOCAB_TV_FACTOR * tv, 12)) if bi.vocab is not None else tv


def sample_size(bi: BatteryInstance, alpha_test: float, tv: float) -> int:
    """Iterations for power :data:`POWER_TARGET` against TV ``tv`` on V^{L+1} at ``alpha_test``.

    The degrees of freedom are those of the test as run: cells of expected count below 5 at
    that sample size are pooled into one (iterated until stable). The guarantee is against a
    TV error on the pooled partition; the pooled cells hold at most ``5 * cells / N`` of mass.
    An instance seen through a wide vocabulary is planned at :func:`planned_tv`.
    """
    tv = planned_tv(bi, tv)
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


#: Group-sequential looks of the law tests: (fraction of the planned N, share of the test's alpha).
#: Bonferroni over the looks keeps each test's level (1/16 + 1/16 + 1/8 + 3/4 = 1), so a clearly
#: wrong verifier stops at an early look; the planned N gives the power target at the last look.
LOOKS: tuple[tuple[float, float], ...] = ((0.125, 0.0625), (0.25, 0.0625), (0.5, 0.125), (1.0, 0.75))


def diagnosis_size(bi: BatteryInstance, alpha_test: float, tv: float) -> int:
    """Iterations for the accepted-length test (L + 1 cells) to have power :data:`POWER_TARGET` against ``tv``."""
    return iterations_for_power(max(bi.instance.L, 1), alpha_test, tv, POWER_TARGET)


def final_alpha(alpha_test: float) -> float:
    """The level of the last look of :data:`LOOKS` (what the planned sample size is powered at)."""
    return alpha_test * LOOKS[-1][1]


def collect_sequential(
    adapter: Adapter,
    bi: BatteryInstance,
    num: int,
    rng: np.random.Generator,
    alpha_test: float,
    tally: StructuralTally | None = None,
    *,
    reference: str | None = None,
    tv: float | None = None,
) -> tuple[Samples, int, float]:
    """Collect up to ``num`` iterations in the looks of :data:`LOOKS`, stopping at the first rejection.

    At look k the end-to-end and positional tests run on all samples so far at level
    ``alpha_test * share_k``; a rejection stops the collection. When ``tv`` is given and the
    diagnosis of that rejection is inconclusive on the stopped samples (too few to say whether
    the accepted-length law matches a lossless algorithm's), more iterations are drawn, up to
    :func:`diagnosis_size` and at most ``num`` in all, into ``Samples.diagnosis_samples``: the
    diagnosis uses them, the law tests keep to the stopped samples.

    Parameters
    ----------
    reference : str, optional
        The named reference (the diagnosis's candidate).
    tv : float, optional
        The budget's TV error (the diagnosis's power is stated against it).

    Returns
    -------
    (Samples, int, float)
        The samples, the 1-based look that decided, and its level (what :func:`law_checks`
        must use for these samples).

    Raises
    ------
    VerifierTimedOut
    """
    s: Samples | None = None
    have = 0
    for k, (frac, share) in enumerate(LOOKS, start=1):
        want = num if k == len(LOOKS) else max(1, int(math.ceil(num * frac)))
        s = collect(adapter, bi, want - have, rng, tally, into=s)
        have = want
        level = alpha_test * share
        if len(s.lengths) == 0 or (s.raised and len(s.lengths) < 0.5 * s.calls):
            return s, k, level
        if k < len(LOOKS) and min(end_to_end(s).p_value, positional(s)[0].p_value) < level:
            s.stopped_at = (k, len(LOOKS), num)
            if tv is not None:
                planned = planned_tv(bi, tv)
                more = min(num, diagnosis_size(bi, level, planned)) - len(s.lengths)
                if more > 0 and locus_of(*diagnose(s, reference, level, False, planned)) == "inconclusive":
                    s.diagnosis_samples = collect(adapter, bi, more, rng, tally, into=s)
            return s, k, level
    assert s is not None
    return s, len(LOOKS), alpha_test * LOOKS[-1][1]


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


def optima(bi: BatteryInstance) -> tuple[float, float | None, float | None, str]:
    """B_BV(K), OPT(K), OT(K) of a battery instance, cached per instance.

    Returns
    -------
    tuple
        ``(bbv, opt, ot, note)``: B_BV(K) (:func:`spectr_gbv.theory.bounds.cic_bound_lossless`),
        OPT(K) and OT(K) (the LP optima of :mod:`spectr_gbv.theory.lp`, None when the LP fails or
        is too large, ``note`` then saying why; otherwise ``note`` is ``""``).
    """
    key = instance_key(bi)
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
    bbv, opt, ot, note = optima(bi)
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


def law_checks(
    s: Samples, alpha_test: float, tv: float, reference: str | None, reuse_seen: bool = False
) -> list[CheckResult]:
    """The end-to-end and positional checks on one instance's samples (diagnosed when failing)."""
    bi = s.bi
    N = len(s.lengths)
    e2e = end_to_end(s)
    pos, worst, per_pos = positional(s)
    failed = e2e.p_value < alpha_test or pos.p_value < alpha_test
    tv = planned_tv(bi, tv)
    ds = s.diagnosis_samples or s
    diag, why = diagnose(ds, reference, alpha_test, reuse_seen, tv) if failed else ("ok", "")
    if failed and ds is not s:
        extra = len(ds.all_lengths) - len(s.all_lengths)
        why += f" (diagnosed on {len(ds.all_lengths):,} outputs: {extra:,} more drawn after the stop)"
    power: float | None = g_test_power(N, max(e2e.df, 1), alpha_test, tv) if N else 0.0
    pos_power = g_test_power(N, max(pos.df, 1), alpha_test / (bi.instance.L + 1), tv) if N and pos.df else None
    inv = f"; {s.invalid} invalid outputs excluded (see the structural checks)" if s.invalid else ""
    early = ""
    if s.stopped_at is not None:  # a rejection at an early look is conclusive; the power belongs to the planned N
        look, looks, planned = s.stopped_at
        early = (
            f"; stopped at look {look} of {looks} after {N:,} of the {planned:,} planned iterations on a rejection "
            f"(p = {min(e2e.p_value, pos.p_value):.3g} < {alpha_test:.3g}): conclusive, the power "
            "is that of the planned N"
        )
        power = pos_power = None
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
                f"pooling, df {e2e.df}) at level {alpha_test:.3g}"
                + (early or f"; power {power:.4f} against TV {tv:g}")
                + inv
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
            power=pos_power,
            instance=bi.spec(),
            detail=(
                f"token at position j+1 given the output reaches it with prefix x^j vs p(.|x^j), per position "
                f"({pos_detail}); worst j = {worst}, p-value Bonferroni-adjusted over {bi.instance.L + 1} positions"
                + early
                + (f". {why[0].upper()}{why[1:]}" if failed and pos.p_value < alpha_test else "")
            ),
            diagnosis=diag if pos.p_value < alpha_test else "ok",
        )
    )
    return out


__all__ = [
    "ALPHA",
    "LOOKS",
    "POWER_TARGET",
    "TV_BY_BUDGET",
    "collect_sequential",
    "diagnosis_size",
    "efficiency",
    "end_to_end",
    "final_alpha",
    "law_checks",
    "optima",
    "planned_tv",
    "positional",
    "sample_size",
]
