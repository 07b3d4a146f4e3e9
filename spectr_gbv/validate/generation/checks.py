r"""The law checks of the generation referee, on the first m tokens of N seeded generate calls.

Every check returns a :class:`~spectr_gbv.validate.report.results.CheckResult` (category
``"statistical"``):

* :func:`sequence_law`: G-test of the empirical joint law of the first m tokens against the
  exact law (cells of expected count below 5 pooled). A sequence of exact probability 0 fails at
  once, with no statistics (diagnosis ``zero_probability_token``).
* :func:`positional_law`: for every position j and observed prefix x^j, the token at j
  against the exact conditional law p(. | x^j) (combined over prefixes, Bonferroni over the m
  positions): it localises the failing position. By the chain rule it tests the same null:

  .. math::
      P(Y^m = x^m)\ =\ p(x^m)\ \forall x^m \iff P(Y_{j+1} = z \mid Y^j = x^j) = p(z \mid x^j)\ \forall j, x^j.

* the invariance checks (draft, batch) and determinism are in
  :mod:`spectr_gbv.validate.generation.invariance`; they reuse the cell helpers here.

On a failure ``detail`` names the scenario, the worst cell (observed vs expected count, exact
probability) and, for the positional check, the position.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spectr_gbv.simulate.monte_carlo import GTest, combine_g_tests, g_test_power, pooled_g_test
from spectr_gbv.validate.report.results import CheckResult

Law = dict[tuple[int, ...], float]


def counts_of(tokens: np.ndarray) -> dict[tuple[int, ...], int]:
    """Observed sequences of ``tokens`` ``[N, m]`` (int) and their counts."""
    if len(tokens) == 0:
        return {}
    uniq, counts = np.unique(np.asarray(tokens, dtype=np.int64), axis=0, return_counts=True)
    return {tuple(int(t) for t in u): int(c) for u, c in zip(uniq, counts, strict=True)}


def zero_probability(tokens: np.ndarray, law: Law) -> tuple[tuple[int, ...], int] | None:
    """The most frequent observed sequence of exact probability 0, with its count; None when there is none."""
    bad = [(c, s) for s, c in counts_of(tokens).items() if law.get(s, 0.0) <= 0.0]
    if not bad:
        return None
    c, s = max(bad)
    return s, c


def worst_cell_phrase(obs: dict[Any, int], law: dict[Any, float], total: int) -> str:
    """``"(3, 7): observed 80, expected 41.2 (p = 0.0412)"`` for the cell of largest Pearson residual.

    ``obs``: observed counts per cell, ``law``: exact probabilities per cell, ``total``: the sample
    size; ``"no cell"`` when ``law`` is empty.
    """
    best, key = -1.0, None
    for k, p in law.items():
        exp = p * total
        r = abs(obs.get(k, 0) - exp) / math.sqrt(exp) if exp > 0 else 0.0
        if r > best:
            best, key = r, k
    if key is None:
        return "no cell"
    return f"{key}: observed {obs.get(key, 0)}, expected {law[key] * total:.1f} (exact probability {law[key]:.4g})"


def zero_result(
    name: str, spec: dict[str, Any], seq: tuple[int, ...], count: int, total: int, what: str
) -> CheckResult:
    """A failed check: the sequence ``seq`` of exact probability 0 was generated ``count`` of ``total`` times."""
    return CheckResult(
        name,
        "statistical",
        False,
        statistic=math.inf,
        p_value=0.0,
        sample_size=total,
        instance=spec,
        detail=(
            f"{what}: the sequence {seq} of exact probability 0 under the target's law after its sampling "
            f"settings was generated {count} of {total} times (deterministic: no statistics needed)"
        ),
        diagnosis="zero_probability_token",
    )


def sequence_law(
    label: str, spec: dict[str, Any], tokens: np.ndarray, law: Law, alpha_test: float, tv: float, note: str = ""
) -> CheckResult:
    """``sequence_law[label]``: G-test of the first m tokens' joint law against the exact ``law``.

    Parameters
    ----------
    label : str
        Scenario label (the check's name is ``sequence_law[label]``).
    spec : dict
        The scenario's JSON spec (the result's ``instance``).
    tokens : numpy.ndarray, shape [N, m], int64
        The first m generated tokens of N calls.
    law : dict of tuple of int to float
        Exact joint law of the first m tokens (nonzero entries).
    alpha_test : float
        Level of the test (its Bonferroni share).
    tv : float
        TV error the sample size was planned against (the power is stated against it).
    note : str
        Appended to ``detail``: how the collection went (non-empty after an early stop, when the
        power at the stopped N is not stated).

    Returns
    -------
    CheckResult
        Failed with ``zero_probability_token`` when a sequence of probability 0 was generated,
        ``not_lossless`` when the G-test rejects.
    """
    name = f"sequence_law[{label}]"
    N = len(tokens)
    zero = zero_probability(tokens, law)
    if zero is not None:
        return zero_result(name, spec, zero[0], zero[1], N, label)
    obs = counts_of(tokens)
    keys = list(law)
    test = pooled_g_test(np.array([obs.get(k, 0) for k in keys]), np.array([law[k] for k in keys]))
    ok = test.p_value >= alpha_test
    power = g_test_power(N, max(test.df, 1), alpha_test, tv) if N else 0.0
    detail = (
        f"{label}: G-test of the first {len(next(iter(law)))} generated tokens against the exact sequence law "
        f"({len(law)} sequences, {test.cells} cells after pooling, df {test.df}) at level {alpha_test:.3g}"
        + ("" if note else f"; power {power:.4f} against TV {tv:g}")  # a note: stopped early, power of the planned N
    )
    if not ok:
        detail += f"; the output law differs from the target's. Worst cell {worst_cell_phrase(obs, law, N)}"
    return CheckResult(
        name,
        "statistical",
        ok,
        statistic=test.g,
        p_value=test.p_value,
        sample_size=N,
        power=power,
        instance=spec,
        detail=detail + note,
        diagnosis="ok" if ok else "not_lossless",
    )


def conditional_laws(law: Law) -> list[dict[tuple[int, ...], dict[int, float]]]:
    """Per position j, the exact conditional laws ``p(. | x^j)`` of the joint ``law``, by prefix ``x^j``."""
    m = len(next(iter(law)))
    out: list[dict[tuple[int, ...], dict[int, float]]] = []
    for j in range(m):
        cond: dict[tuple[int, ...], dict[int, float]] = {}
        for seq, p in law.items():
            row = cond.setdefault(seq[:j], {})
            row[seq[j]] = row.get(seq[j], 0.0) + p
        for row in cond.values():
            total = sum(row.values())
            for z in row:
                row[z] /= total
        out.append(cond)
    return out


def positional(tokens: np.ndarray, law: Law) -> tuple[GTest, int, list[GTest], str]:
    """Per-position conditional tests: (worst test, Bonferroni-adjusted, its position, all, its worst cell)."""
    m = tokens.shape[1]
    conds = conditional_laws(law)
    per_pos: list[GTest] = []
    worst_cells: list[str] = []
    for j in range(m):
        by_prefix: dict[tuple[int, ...], dict[int, int]] = {}
        for row in tokens:
            pre = tuple(int(t) for t in row[:j])
            d = by_prefix.setdefault(pre, {})
            d[int(row[j])] = d.get(int(row[j]), 0) + 1
        tests, worst_p, worst_cell = [], 2.0, ""
        for pre, obs in by_prefix.items():
            cond = conds[j].get(pre, {})
            zs = sorted(set(cond) | set(obs))
            t = pooled_g_test(np.array([obs.get(z, 0) for z in zs]), np.array([cond.get(z, 0.0) for z in zs]))
            tests.append(t)
            if t.p_value < worst_p and cond:
                worst_p = t.p_value
                total = sum(obs.values())
                worst_cell = f"after prefix {pre}, token {worst_cell_phrase(obs, cond, total)}"
        per_pos.append(combine_g_tests(tests) if tests else GTest(0.0, 0, 1.0, 0))
        worst_cells.append(worst_cell)
    worst = int(np.argmin([t.p_value for t in per_pos]))
    t = per_pos[worst]
    return GTest(t.g, t.df, min(1.0, t.p_value * m), t.cells), worst, per_pos, worst_cells[worst]


def positional_law(
    label: str, spec: dict[str, Any], tokens: np.ndarray, law: Law, alpha_test: float, tv: float, note: str = ""
) -> CheckResult:
    """``positional_law[label]``: each position's conditional law given the observed prefix.

    Parameters
    ----------
    label, spec, tokens, law, alpha_test, tv, note
        As :func:`sequence_law`.

    Returns
    -------
    CheckResult
        The worst position's combined G-test over its prefixes, p-value Bonferroni-adjusted over
        the m positions; failed (``not_lossless``) when it rejects, naming the position and the
        worst cell, or (``zero_probability_token``) when a prefix or token of probability 0 was
        generated.
    """
    name = f"positional_law[{label}]"
    N, m = tokens.shape
    zero = zero_probability(tokens, law)
    if zero is not None:
        return zero_result(name, spec, zero[0], zero[1], N, label)
    pos, worst, per_pos, cell = positional(tokens, law)
    ok = pos.p_value >= alpha_test
    power = g_test_power(N, max(pos.df, 1), alpha_test / m, tv) if N and pos.df else None
    per = ", ".join(f"j={j}: p={t.p_value:.3g}" for j, t in enumerate(per_pos))
    detail = (
        f"{label}: token j given the generated prefix x^j vs the exact p(.|x^j), per position ({per}); worst "
        f"j = {worst}, p-value Bonferroni-adjusted over {m} positions, level {alpha_test:.3g}"
        + ("" if note or power is None else f"; power {power:.4f} against TV {tv:g}")
    )
    if not ok:
        detail += f"; the law first goes wrong at position {worst}: worst cell {cell}"
    return CheckResult(
        name,
        "statistical",
        ok,
        statistic=pos.g,
        p_value=pos.p_value,
        sample_size=N,
        power=power,
        instance=spec,
        detail=detail + note,
        diagnosis="ok" if ok else "not_lossless",
    )


__all__ = [
    "conditional_laws",
    "counts_of",
    "positional",
    "positional_law",
    "sequence_law",
    "worst_cell_phrase",
    "zero_probability",
    "zero_result",
]
