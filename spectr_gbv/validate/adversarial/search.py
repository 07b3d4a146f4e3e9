"""Adversarial search: the instance that maximises the verifier's observed deviation from p.

Subtle bugs move the end-to-end law by 0.001-0.03 in total variation on typical instances;
on some instances they move it much more. The search walks sizes (n, L, K) from the smallest
up (:func:`sizes`: more and larger sizes at higher budgets, up to n = 8, L = 4 or K = 6, one
at a time); at each size it draws random instances (Dirichlet rows at several
concentrations, some entries zeroed: **random restarts**) and improves each by local moves:
**sharpening** (rows raised to 1/T, T in {0.5, 2}: lower or higher temperature),
and **perturbing q toward disagreement with p** (``q' ~ q (q/p)^lambda``, lambda in
{0.5, 1}). Every second restart (standard and thorough run two and four per size) starts from
a **tied** instance (:func:`tie`: p >= q on all children but one, so their ratios tie at 1,
and p = q on the first row of each depth). The score of an instance
is its exact validity defect when the exact level is available, else the excess of the G
statistics of a short sampled run, ``z = (G - df) / sqrt(2 df)`` (the larger of the
end-to-end and positional tests).

Because the search looks at many instances, its scores are not p-values. The best instance,
and the smallest one whose score looked significant, are **confirmed on fresh samples** with
a new seed (held out: the search's samples are not reused), at the battery's sample size;
only a confirmed failure fails the check. The check reports the smallest confirmed failing
case (smallest n, then L, then K).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from spectr_gbv.validate.adversarial.candidates import Candidate, disagree, random_candidate, sharpen, tie
from spectr_gbv.validate.adversarial.sizes import sizes
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.checks.statistical import collect, diagnose, end_to_end, positional, sample_size
from spectr_gbv.validate.checks.structural import StructuralTally
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.report.results import CheckResult

#: (restarts per size, improvement rounds, samples per scored instance) per budget.
SEARCH: dict[str, tuple[int, int, int]] = {"quick": (1, 1, 500), "standard": (1, 1, 1000), "thorough": (3, 2, 4000)}
#: The best candidate that did not look suggestive is re-tested at this TV error (or the budget's,
#: if larger): the search's scores only see large deviations, and the battery holds the power
#: against small ones. A suggestive candidate is re-tested at the budget's TV.
CONFIRM_TV = 0.05
#: Local moves tried per improvement round (sharpen x 2, disagree x 2).
MOVES = 4
#: A search score above this is "suggestive" (z units; exact: any defect above the tolerance).
SUGGESTIVE_Z = 4.0

Scorer = Callable[[BatteryInstance], float]


def statistical_scorer(adapter: Adapter, num: int, rng: np.random.Generator, tally: StructuralTally) -> Scorer:
    """Score = max over the end-to-end and positional tests of ``(G - df) / sqrt(2 df)``."""

    def score(bi: BatteryInstance) -> float:
        s = collect(adapter, bi, num, rng, tally)
        best = -math.inf
        for t in (end_to_end(s), positional(s)[0]):
            if t.g == math.inf:
                return math.inf
            if t.df:
                best = max(best, (t.g - t.df) / math.sqrt(2 * t.df))
        return best

    return score


def search(
    score: Scorer, sizes: tuple[tuple[int, int, int], ...], budget: str, rng: np.random.Generator
) -> list[Candidate]:
    """Best candidate per size (restarts, every second one tied, then sharpening / disagreement moves)."""
    restarts, rounds, _ = SEARCH[budget]
    best_per_size = []
    for n, L, K in sizes:
        best: Candidate | None = None
        for r in range(restarts):
            start = random_candidate(n, L, rng)
            cur = Candidate(BatteryInstance("adversarial", tie(start) if r % 2 else start, K), -math.inf)
            cur.score = score(cur.bi)
            for _ in range(rounds):
                moves = [
                    sharpen(cur.bi.instance, 0.5),
                    sharpen(cur.bi.instance, 2.0),
                    disagree(cur.bi.instance, 0.5),
                    disagree(cur.bi.instance, 1.0),
                ]
                for inst in moves:
                    cand = Candidate(BatteryInstance("adversarial", inst, K), -math.inf)
                    cand.score = score(cand.bi)
                    if cand.score > cur.score:
                        cur = cand
            if best is None or cur.score > best.score:
                best = cur
        assert best is not None
        best_per_size.append(best)
    return best_per_size


def adversarial_check(
    adapter: Adapter,
    budget: str,
    seed: int,
    alpha_test: float,
    tv: float,
    reference: str | None,
    tally: StructuralTally,
    exact_score: Scorer | None = None,
    exact_tol: float = 0.0,
    reuse_seen: bool = False,
    exact_confirm: Scorer | None = None,
) -> CheckResult:
    """Search, then confirm the best (and the smallest suggestive) candidate on fresh samples.

    Parameters
    ----------
    exact_score : callable, optional
        ``BatteryInstance -> validity defect`` when the exact level is available and cheap;
        the search then uses exact defects.
    exact_tol : float
        Defects above this fail (exact route).
    exact_confirm : callable, optional
        Exact defect used to confirm (default ``exact_score``); with ``exact_score`` None the
        search is statistical and the confirmation exact (chain verifiers: bisection is too
        costly for every candidate).

    Raises
    ------
    VerifierRaised, VerifierTimedOut
    """
    walk = sizes(budget, adapter.single_draft)
    rng = np.random.default_rng([seed, 31])
    _, _, num = SEARCH[budget]
    scorer = exact_score or statistical_scorer(adapter, num, rng, tally)
    exact_confirm = exact_confirm or exact_score
    found = search(scorer, walk, budget, rng)
    scored = len(found) * SEARCH[budget][0] * (1 + MOVES * SEARCH[budget][1])
    best = max(found, key=lambda c: c.score)
    threshold = exact_tol if exact_score else SUGGESTIVE_Z
    suggestive = [c for c in found if c.score > threshold]
    to_confirm = [suggestive[0]] if suggestive else []
    if best not in to_confirm:
        to_confirm.append(best)
    summary = ", ".join(f"{c.size}: {c.score:.3g}" for c in found)
    what = "exact defect" if exact_score else "z score"
    confirm_rng = np.random.default_rng([seed, 32])
    for cand in to_confirm:
        bi = cand.bi
        if exact_confirm:
            defect = exact_confirm(bi)
            if defect > exact_tol:
                return CheckResult(
                    "adversarial_search",
                    "adversarial",
                    False,
                    statistic=defect,
                    instance=bi.spec(),
                    detail=(
                        f"smallest failing case (n, L, K) = {cand.size}: exact validity defect {defect:.6g} > "
                        f"{exact_tol:g}; best {what} per size: {summary}"
                    ),
                    diagnosis="not_lossless",
                )
            continue
        N = sample_size(bi, alpha_test, tv if cand in suggestive else max(tv, CONFIRM_TV))
        s = collect(adapter, bi, N, confirm_rng, tally)
        e2e, (pos, _, _) = end_to_end(s), positional(s)
        pval = min(1.0, 2 * min(e2e.p_value, pos.p_value))
        if pval < alpha_test:
            tv_cand = tv if cand in suggestive else max(tv, CONFIRM_TV)
            diag, why = diagnose(s, reference, alpha_test, reuse_seen, tv_cand)
            return CheckResult(
                "adversarial_search",
                "adversarial",
                False,
                statistic=max(e2e.g, pos.g),
                p_value=pval,
                sample_size=N,
                instance=bi.spec(),
                detail=(
                    f"smallest failing case (n, L, K) = {cand.size}, confirmed on {N} fresh samples "
                    f"(end-to-end p = {e2e.p_value:.3g}, positional p = {pos.p_value:.3g}). {why[0].upper()}{why[1:]}. "
                    f"Search: {scored} instances scored, best {what} per size: {summary}"
                ),
                diagnosis=diag,
            )
    confirmed_n = (
        0
        if exact_confirm
        else sum(sample_size(c.bi, alpha_test, tv if c in suggestive else max(tv, CONFIRM_TV)) for c in to_confirm)
    )
    return CheckResult(
        "adversarial_search",
        "adversarial",
        True,
        statistic=best.score,
        sample_size=confirmed_n or None,
        instance=best.bi.spec(),
        detail=(
            f"{scored} instances scored by {what}; best per size: {summary}; the worst "
            f"({best.size}) {'checked exactly' if exact_confirm else 'confirmed on fresh samples'}: no failure"
        ),
    )


__all__ = ["CONFIRM_TV", "SEARCH", "adversarial_check", "search", "statistical_scorer"]
