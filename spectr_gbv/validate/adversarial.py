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
from dataclasses import dataclass
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.validate.battery import BatteryInstance
from spectr_gbv.validate.checks_statistical import (
    collect,
    diagnose,
    end_to_end,
    positional,
    sample_size,
)
from spectr_gbv.validate.checks_structural import StructuralTally
from spectr_gbv.validate.interfaces import Adapter
from spectr_gbv.validate.report import CheckResult

#: Sizes (n, L, K) searched at every budget, smallest first (multi-draft interfaces).
SIZES_MULTI: tuple[tuple[int, int, int], ...] = (
    (2, 1, 1),
    (2, 1, 2),
    (3, 1, 2),
    (2, 2, 2),
    (4, 1, 3),
    (6, 1, 2),
)
#: Sizes searched at every budget for single-draft interfaces (chain, hf).
SIZES_SINGLE: tuple[tuple[int, int, int], ...] = ((2, 1, 1), (3, 1, 1), (2, 2, 1), (3, 2, 1), (4, 2, 1), (6, 1, 1))
#: Sizes added at each budget above quick (cumulative: thorough also searches standard's). Wide
#: vocabularies, many drafts and long blocks one at a time: the end-to-end test of a size has
#: n^(L+1) cells, so each stays at or below 81.
EXTRA_SIZES_MULTI: dict[str, tuple[tuple[int, int, int], ...]] = {
    "quick": (),
    "standard": ((3, 2, 2), (4, 1, 4), (2, 1, 6), (2, 3, 3), (2, 4, 2), (6, 1, 3), (8, 1, 2)),
    "thorough": ((3, 1, 6), (3, 3, 2), (5, 1, 5), (4, 2, 3)),
}
#: Sizes added to :data:`SIZES_SINGLE` per budget (single-draft interfaces), each at or below 81 cells.
EXTRA_SIZES_SINGLE: dict[str, tuple[tuple[int, int, int], ...]] = {
    "quick": (),
    "standard": ((2, 3, 1), (2, 4, 1), (5, 1, 1), (8, 1, 1)),
    "thorough": ((3, 3, 1), (2, 5, 1), (7, 1, 1)),
}
#: (restarts per size, improvement rounds, samples per scored instance) per budget.
SEARCH: dict[str, tuple[int, int, int]] = {"quick": (1, 1, 1000), "standard": (1, 1, 1000), "thorough": (3, 2, 4000)}
#: The best candidate that did not look suggestive is re-tested at this TV error (or the budget's,
#: if larger): the search's scores only see large deviations, and the battery holds the power
#: against small ones. A suggestive candidate is re-tested at the budget's TV.
CONFIRM_TV = 0.05
#: Local moves tried per improvement round (sharpen x 2, disagree x 2).
MOVES = 4
#: A search score above this is "suggestive" (z units; exact: any defect above the tolerance).
SUGGESTIVE_Z = 4.0

Scorer = Callable[[BatteryInstance], float]

_BUDGET_ORDER = ("quick", "standard", "thorough")


def sizes(budget: str, single_draft: bool) -> tuple[tuple[int, int, int], ...]:
    """Sizes (n, L, K) the search walks at ``budget``, in walk order.

    Parameters
    ----------
    budget : str
        ``"quick"``, ``"standard"`` or ``"thorough"``.
    single_draft : bool
        True for the chain and hf interfaces (K = 1 everywhere).

    Returns
    -------
    tuple of (n, L, K)
        :data:`SIZES_MULTI` (or :data:`SIZES_SINGLE`), then the extra sizes of every budget up
        to ``budget`` (:data:`EXTRA_SIZES_MULTI`, :data:`EXTRA_SIZES_SINGLE`); each group
        smallest first, so the quick walk is a prefix of the standard one.

    Raises
    ------
    ValueError
        An unknown budget.

    Examples
    --------
    >>> sizes("quick", True)
    ((2, 1, 1), (3, 1, 1), (2, 2, 1), (3, 2, 1), (4, 2, 1), (6, 1, 1))
    >>> sizes("standard", False)[-3:]
    ((2, 4, 2), (6, 1, 3), (8, 1, 2))
    """
    if budget not in _BUDGET_ORDER:
        raise ValueError(f"budget: expected one of {', '.join(_BUDGET_ORDER)}, got {budget!r}")
    base, extra = (SIZES_SINGLE, EXTRA_SIZES_SINGLE) if single_draft else (SIZES_MULTI, EXTRA_SIZES_MULTI)
    out = list(base)
    for b in _BUDGET_ORDER[: _BUDGET_ORDER.index(budget) + 1]:
        out.extend(s for s in extra[b] if s not in out)
    return tuple(out)


def covered_sizes(battery: list[BatteryInstance], budget: str, single_draft: bool) -> dict[str, Any]:
    """The sizes a run checks: the battery's instances and the search's sizes at ``budget``.

    A passing report reads as "lossless on these sizes" (the battery's instances, and the
    sizes the adversarial search drew instances of), each up to the TV error its test detects.

    Parameters
    ----------
    battery : list of BatteryInstance
        The instances the run samples (:func:`~spectr_gbv.validate.battery.default_battery`).
    budget : str
    single_draft : bool

    Returns
    -------
    dict
        ``{"n": (min, max), "L": (min, max), "K": (min, max), "battery": [(n, L, K), ...],
        "search": [(n, L, K), ...]}`` (ranges over both lists; each list in run order).

    Raises
    ------
    ValueError
        An unknown budget.
    """
    bat = [(bi.instance.n, bi.instance.L, bi.K) for bi in battery]
    found = list(sizes(budget, single_draft))
    every = bat + found
    return {
        "n": (min(s[0] for s in every), max(s[0] for s in every)),
        "L": (min(s[1] for s in every), max(s[1] for s in every)),
        "K": (min(s[2] for s in every), max(s[2] for s in every)),
        "battery": bat,
        "search": found,
    }


@dataclass
class Candidate:
    """A scored instance of the search."""

    bi: BatteryInstance
    score: float

    @property
    def size(self) -> tuple[int, int, int]:
        """(n, L, K)."""
        return (self.bi.instance.n, self.bi.instance.L, self.bi.K)


def _levels(model: TabularAR, depth: int) -> list[np.ndarray]:
    return [np.asarray(model.level(t), dtype=np.float64) for t in range(depth + 1)]


def _build(p: list[np.ndarray], q: list[np.ndarray], L: int, name: str) -> Instance:
    def norm(levels: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for lv in levels:
            lv = np.where(lv > 1e-12, lv, 0.0)
            out.append(lv / lv.sum(axis=-1, keepdims=True))
        return out

    return Instance(
        TabularAR.from_levels(norm(p), name="target"), TabularAR.from_levels(norm(q), name="draft"), L, name=name
    )


def random_candidate(n: int, L: int, rng: np.random.Generator) -> Instance:
    """A random float instance (Dirichlet rows, concentration 0.3, 1 or 3, some zeros)."""
    conc = float(rng.choice([0.3, 1.0, 3.0]))
    zero = float(rng.choice([0.0, 0.0, 0.3]))

    def level(t: int) -> np.ndarray:
        w = rng.dirichlet(np.full(n, conc), size=n**t)
        mask = rng.random(w.shape) < zero
        mask[mask.all(axis=1), 0] = False
        w = np.where(mask, 0.0, w) + 1e-12 * ~mask
        return (w / w.sum(axis=1, keepdims=True)).reshape((n,) * t + (n,))

    return _build([level(t) for t in range(L + 1)], [level(t) for t in range(L)], L, f"adversarial(n={n}, L={L})")


def sharpen(inst: Instance, temperature: float) -> Instance:
    """Both models' rows raised to ``1/temperature`` and renormalised."""
    L = inst.L
    p = [lv ** (1 / temperature) for lv in _levels(inst.target, L)]
    q = [lv ** (1 / temperature) for lv in _levels(inst.draft, L - 1)]
    return _build(p, q, L, f"{inst.name}, T={temperature:g}")


def disagree(inst: Instance, lam: float) -> Instance:
    """q tilted away from p: ``q' ~ q (q / max(p, 1e-3))^lam``."""
    L = inst.L
    p = _levels(inst.target, L)
    q = [lv * (lv / np.maximum(p[t], 1e-3)) ** lam for t, lv in enumerate(_levels(inst.draft, L - 1))]
    return _build(p, q, L, f"{inst.name}, tilt={lam:g}")


def tie(inst: Instance) -> Instance:
    """p rebuilt from q so that ratios tie: p = q with half the mass of q's worst token moved to the others.

    At every draft depth t < L, the token of smallest ``p/q`` (ties: lowest id) keeps half its
    q mass and the other half is spread over the other tokens in proportion to q, so all of
    them have the same ratio > 1 (clamped: a tie at 1); the first row of each depth t >= 1
    (prefix 0...0) gets p = q. The bonus depth L keeps p.
    """
    L = inst.L
    p = [lv.copy() for lv in _levels(inst.target, L)]
    q = _levels(inst.draft, L - 1)
    for t in range(L):
        rows_p, rows_q = p[t].reshape(-1, p[t].shape[-1]), q[t].reshape(-1, q[t].shape[-1])
        for i, (pr, qr) in enumerate(zip(rows_p, rows_q, strict=True)):
            if t > 0 and i == 0:
                pr[:] = qr
                continue
            ratio = np.where(qr > 0, pr / np.maximum(qr, 1e-300), np.inf)
            loser = int(np.argmin(ratio))
            moved, rest = qr[loser] / 2, 1.0 - qr[loser]
            if rest <= 0:
                pr[:] = qr
                continue
            pr[:] = qr * (1 + moved / rest)
            pr[loser] = qr[loser] - moved
    return _build(p, q, L, f"{inst.name}, tied")


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
            diag, why = diagnose(s, reference, alpha_test, reuse_seen)
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


__all__ = [
    "EXTRA_SIZES_MULTI",
    "EXTRA_SIZES_SINGLE",
    "CONFIRM_TV",
    "SEARCH",
    "SIZES_MULTI",
    "SIZES_SINGLE",
    "Candidate",
    "adversarial_check",
    "covered_sizes",
    "disagree",
    "random_candidate",
    "search",
    "sharpen",
    "sizes",
    "tie",
    "statistical_scorer",
]
