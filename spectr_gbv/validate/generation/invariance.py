r"""Invariance checks of the generation referee: the law must not depend on the draft or the batch.

* :func:`draft_invariance`: the same target with two different drafts must give the same law:
  the second draft's samples against the exact law, and a two-sample G-test of homogeneity
  (:func:`scipy.stats.chi2_contingency`) against the first draft's; this catches a q that is not
  the proposal law.
* :func:`batch_invariance`: row 0's law in batches with other prompts against the exact law and
  against the same prompt alone.
* :func:`determinism`: the same seed twice gives the same ids (advisory).

Each returns a :class:`~spectr_gbv.validate.report.results.CheckResult`; the cell-level helpers
are those of :mod:`spectr_gbv.validate.generation.checks`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from spectr_gbv.simulate.monte_carlo import g_test_power, pooled_g_test
from spectr_gbv.validate.generation.checks import Law, counts_of, worst_cell_phrase, zero_probability, zero_result
from spectr_gbv.validate.report.results import CheckResult


def homogeneity(a: np.ndarray, b: np.ndarray, law: Law) -> tuple[float, int, float, str]:
    """Two-sample G-test of homogeneity of the sequences in ``a`` and ``b`` (each ``[N, m]``).

    Cells whose expected count under the exact ``law`` is below 5 in the smaller sample are
    pooled into one (sequences outside ``law`` included).

    Returns
    -------
    (float, int, float, str)
        G statistic, degrees of freedom, p-value, the most different cell in words.
    """
    ca, cb = counts_of(a), counts_of(b)
    small = min(len(a), len(b))
    keep = [k for k, p in law.items() if p * small >= 5]
    rest = object()
    cells: list[Any] = [*keep, rest]
    kept = set(keep)

    def row(c: dict[tuple[int, ...], int]) -> list[int]:
        return [c.get(k, 0) for k in keep] + [sum(v for k, v in c.items() if k not in kept)]

    table = np.array([row(ca), row(cb)], dtype=np.float64)
    nonempty = table.sum(axis=0) > 0
    table = table[:, nonempty]
    cells = [c for c, keep_it in zip(cells, nonempty, strict=True) if keep_it]
    if table.shape[1] < 2:
        return 0.0, 0, 1.0, "one cell"
    g, p, df, expected = stats.chi2_contingency(table, correction=False, lambda_="log-likelihood")
    resid = np.abs(table[0] - expected[0]) / np.sqrt(expected[0])
    k = int(np.argmax(resid))
    what = "the pooled rare sequences" if cells[k] is rest else str(cells[k])
    cell = (
        f"{what}: {int(table[0, k])} of {len(a)} with the first draft vs {int(table[1, k])} of {len(b)} with the second"
    )
    return float(g), int(df), float(p), cell


def draft_invariance(
    pair: str,
    spec: dict[str, Any],
    first: np.ndarray,
    second: np.ndarray,
    law: Law,
    alpha_test: float,
    tv: float,
    note: str = "",
) -> CheckResult:
    """``draft_invariance[pair]``: the same target with ``draft`` and with ``alt_draft`` gives the same law.

    Two tests at ``alpha_test`` each (the check counts twice in the family): the second draft's
    samples against the exact law (G-test, the stated power), and a two-sample G-test of
    homogeneity of the two drafts' samples (:func:`homogeneity`).

    Parameters
    ----------
    pair : str
        Reference pair name.
    spec : dict
        The scenario's spec.
    first, second : numpy.ndarray, shape [N, m], int64
        First m tokens with the pair's ``draft`` and with its ``alt_draft``.
    law : dict
        Exact joint law (pools rare cells; a sequence of probability 0 among ``second`` fails at once).
    alpha_test : float
        Level of each test.
    tv : float
        TV error of the stated power (of the test of the second draft's law).
    note : str
        Appended to ``detail``.

    Returns
    -------
    CheckResult
        p-value: the smaller of the two, Bonferroni-adjusted (times 2); failed
        (``not_lossless``) when either rejects.
    """
    name = f"draft_invariance[{pair}]"
    zero = zero_probability(second, law)  # the first draft's samples are the sequence_law check's
    if zero is not None:
        return zero_result(name, spec, zero[0], zero[1], len(second), f"{pair} with its second draft")
    obs = counts_of(second)
    keys = list(law)
    t = pooled_g_test(np.array([obs.get(k, 0) for k in keys]), np.array([law[k] for k in keys]))
    g, df, p2, cell = homogeneity(first, second, law)
    n1, n2 = len(first), len(second)
    power = g_test_power(n2, max(t.df, 1), alpha_test, tv) if n2 else None
    ok = t.p_value >= alpha_test and p2 >= alpha_test
    detail = (
        f"{spec.get('name', pair)}: the first m tokens with the pair's second draft (N = {n2}) vs the exact "
        f"law (G = {t.g:.4g}, df {t.df}, p = {t.p_value:.3g}; power {power or 0.0:.4f} against TV {tv:g}) and vs those "
        f"with its first draft (N = {n1}; two-sample G = {g:.4g}, df {df}, p = {p2:.3g}); level {alpha_test:.3g} each"
    )
    if not ok:
        worst = worst_cell_phrase(obs, law, n2) if t.p_value < alpha_test else cell
        detail += (
            f"; the output law depends on the draft, so the loop's q is not the law its drafts are drawn from. "
            f"Worst cell {worst}"
        )
    return CheckResult(
        name,
        "statistical",
        ok,
        statistic=t.g,
        p_value=min(1.0, 2 * min(t.p_value, p2)),
        sample_size=n1 + n2,
        power=power,
        instance=spec,
        detail=detail + note,
        diagnosis="ok" if ok else "not_lossless",
    )


def batch_invariance(
    label: str,
    spec: dict[str, Any],
    batched: np.ndarray,
    alone: np.ndarray,
    law: Law,
    alpha_test: float,
    tv: float,
) -> CheckResult:
    """``batch_invariance[label]``: row 0 in batches with other prompts vs the exact law and vs alone.

    Parameters
    ----------
    label : str
        Scenario label.
    spec : dict
        Scenario spec (with ``"neighbours"``: the other rows' prompts).
    batched : numpy.ndarray, shape [N, m], int64
        Row 0's first m tokens in batches with neighbours.
    alone : numpy.ndarray, shape [N', m], int64
        The same prompt as a batch of one.
    law : dict
        Exact joint law.
    alpha_test : float
        Level of each of the two tests (the check counts twice in the family).
    tv : float
        TV error of the stated power.

    Returns
    -------
    CheckResult
        p-value: the smaller of the two, Bonferroni-adjusted (times 2).
    """
    name = f"batch_invariance[{label}]"
    zero = zero_probability(batched, law)
    if zero is not None:
        return zero_result(name, spec, zero[0], zero[1], len(batched), f"{label} in a batch")
    obs = counts_of(batched)
    keys = list(law)
    t = pooled_g_test(np.array([obs.get(k, 0) for k in keys]), np.array([law[k] for k in keys]))
    g2, df2, p2, cell2 = homogeneity(batched, alone, law) if len(alone) else (0.0, 0, 1.0, "")
    p = min(1.0, 2 * min(t.p_value, p2))
    ok = t.p_value >= alpha_test and p2 >= alpha_test
    N = len(batched)
    power = g_test_power(N, max(t.df, 1), alpha_test, tv) if N else None
    detail = (
        f"{label}: row 0 of {N} batches with other prompts (other lengths) vs the exact law (G = {t.g:.4g}, "
        f"p = {t.p_value:.3g}) and vs the prompt alone (G = {g2:.4g}, df {df2}, p = {p2:.3g}); level {alpha_test:.3g} "
        "each"
    )
    if not ok:
        where = (
            worst_cell_phrase(obs, law, N)
            if t.p_value < alpha_test
            else cell2.replace("with the first draft", "in a batch").replace("with the second", "alone")
        )
        detail += f"; a row's law depends on its neighbours. Worst cell {where}"
    return CheckResult(
        name,
        "statistical",
        ok,
        statistic=t.g,
        p_value=p,
        sample_size=N + len(alone),
        power=power,
        instance=spec,
        detail=detail,
        diagnosis="ok" if ok else "not_lossless",
    )


def determinism(
    spec: dict[str, Any], first: np.ndarray, second: np.ndarray, seed: int, num_seeds: int = 1
) -> CheckResult:
    """``determinism`` (advisory): two calls with the same ``seed`` returned the same ids?

    Parameters
    ----------
    spec : dict
        The scenario's spec.
    first, second : numpy.ndarray, shape [max_new_tokens], int64
        The two outputs.
    seed : int
        The seed both calls got (the first that gave different ids, when some did).
    num_seeds : int
        Seeds that were each called twice (the detail of a pass says how many).

    Returns
    -------
    CheckResult
        Advisory, category ``"structural"``; failed (``not_deterministic``) when they differ.
    """
    same = bool(np.array_equal(first, second))
    return CheckResult(
        "determinism",
        "structural",
        same,
        sample_size=2,
        instance=spec,
        detail=(
            (
                f"two calls with seed {seed}"
                if not same or num_seeds == 1
                else f"two calls with each of {num_seeds} seeds"
            )
            + f" on {spec.get('name')} "
            + ("returned the same ids" if same else f"returned {first.tolist()} and {second.tolist()}")
            + " (a loop that draws all its randomness from the seed is reproducible)"
        ),
        diagnosis="ok" if same else "not_deterministic",
        advisory=True,
    )


__all__ = ["batch_invariance", "determinism", "draft_invariance", "homogeneity"]
