"""Forcing-free probes: degenerate rows run many times with the verifier's ordinary randomness.

A forced coin (:mod:`spectr_gbv.validate.probes.coin_probes`) finds a bug only where the search
reaches the verifier's coin. These probes need no forcing: their rows make the failing event
likely (or certain) under any coin, so a verifier's own randomness meets it within a few calls.

* ``zero_target_draft``: every draft token has target probability 0 (``p(x) = 0 < q(x)``), and
  ``p <= q`` everywhere else, as when a draft and a target model nearly agree: every correct
  verifier rejects (a coin below 0 does not exist), and the residual ``max(p - q, 0)`` is all
  zero;
* ``near_identical_rows``: the same rows with draft 0's token at ``p/q = 1/2``: it is rejected in
  about half of the calls, again onto an all-zero residual.

Both inputs are valid (rows sum to 1 within 1e-9), and stay exactly degenerate after rounding to
float32 or bfloat16 and after a float32 softmax of their logarithms (the normalisers round to 1),
as verifiers that take logits compute them. Each runs :data:`CALLS` verifier calls (one
batch; one call at a time once a call raised, to count them). A raise fails (``raises``), a
token of target probability 0 fails (``zero_probability_token``), any other invalid output
fails with its diagnosis; the detail gives the count ``k/N`` and the severity is the observed
rate ``k/N`` with its two-sided 95% Clopper-Pearson interval (``scipy.stats.binomtest``).

Reference: LitGPT's speculative ``verify`` divides an all-zero residual by its zero sum and
``torch.multinomial`` raises; vLLM V1 and gpt-fast draw an argmax over it and emit token 0.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierRaised
from spectr_gbv.validate.probes.runner import probe_spec, row_problem, tile_row, with_observed_rate
from spectr_gbv.validate.report.results import CheckResult

#: Verifier calls per forcing-free probe.
CALLS = 20
#: Confidence level of the Clopper-Pearson interval of an observed failure rate.
CONFIDENCE = 0.95


def degenerate_rows(name: str, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The rows of a forcing-free probe (one row; the probe repeats it :data:`CALLS` times).

    Parameters
    ----------
    name : str
        ``"zero_target_draft"`` or ``"near_identical_rows"``.
    K : int
        Drafts.

    Returns
    -------
    drafts : ndarray, shape [K, 1], int64
    q : ndarray, shape [K, 1, 3], float64
    p : ndarray, shape [K, 2, 3], float64
    what : str
        A phrase describing the input.

    Raises
    ------
    ValueError
        Unknown ``name``.
    """
    if name == "zero_target_draft":
        h = 0.5 - 2.0**-34
        qrow, prow, x = [2.0**-34, 0.5, h], [0.0, 0.5, h - 2.0**-31], 0
        what = "every draft token has target probability 0 < q and p <= q elsewhere (an all-zero residual)"
    elif name == "near_identical_rows":
        g = 1.0 - 2.0**-31 - 2.0**-34
        qrow, prow, x = [2.0**-34, 2.0**-31, g], [0.0, 2.0**-32, g], 1
        what = "draft token 1 with p/q = 1/2, p <= q everywhere (each rejection meets an all-zero residual)"
    else:
        raise ValueError(f"name: expected 'zero_target_draft' or 'near_identical_rows', got {name!r}")
    drafts = np.zeros((K, 1), dtype=np.int64)
    drafts[0] = x
    return drafts, tile_row(qrow, 1, K, 1)[0], tile_row(prow, 1, K, 2)[0], what


def check_degenerate_rows(adapter: Adapter, K: int, seed: int, calls: int = CALLS) -> list[CheckResult]:
    """Run both forcing-free probes (module docstring) with the verifier's ordinary randomness.

    Parameters
    ----------
    adapter : Adapter
    K : int
        Drafts per row.
    seed : int
    calls : int
        Verifier calls per probe.

    Returns
    -------
    list of CheckResult
        ``zero_target_draft`` and ``near_identical_rows``: pass, or fail with the observed
        count in the detail and the observed rate as the severity.

    Raises
    ------
    VerifierTimedOut, VerifierExited
        The verifier hung or ended its process (the caller's guard reports it).
    """
    names = ("zero_target_draft", "near_identical_rows")
    return [_probe(adapter, name, K, seed + i, calls) for i, name in enumerate(names)]


def _probe(adapter: Adapter, name: str, K: int, seed: int, N: int) -> CheckResult:
    d1, q1, p1, what = degenerate_rows(name, K)
    drafts, q, p = np.tile(d1, (N, 1, 1)), np.tile(q1, (N, 1, 1, 1)), np.tile(p1, (N, 1, 1, 1))
    outcomes = _run(adapter, drafts, q, p, seed)
    spec = probe_spec(name, d1, q1, p1, random=f"ordinary randomness, {N} calls, seed {seed}")
    kinds: Counter[str] = Counter()
    first: dict[str, str] = {}
    rejected = 0
    for b, out in enumerate(outcomes):
        if isinstance(out, VerifierFailure):
            bad: tuple[str, str] | None = ("raises", str(out))
        else:
            bad = row_problem(out, 0, drafts[b : b + 1], p[b : b + 1])
            rejected += int(bad is None and out.lengths[0] == 1)
        if bad is not None:
            kinds[bad[0]] += 1
            first.setdefault(bad[0], bad[1])
    if not kinds:
        return CheckResult(
            name,
            "robustness",
            True,
            sample_size=N,
            instance=spec,
            detail=f"{what}: all {N} calls with ordinary randomness emitted a valid token ({rejected} rejected)",
        )
    k = sum(kinds.values())
    diag = kinds.most_common(1)[0][0]
    counts = ", ".join(f"{tag} in {n}/{N}" for tag, n in kinds.most_common())
    res = CheckResult(
        name,
        "robustness",
        False,
        sample_size=N,
        instance=spec,
        detail=f"{what}: failed in {k}/{N} calls with ordinary randomness ({counts}); first: {first[diag]}",
        diagnosis=diag,
    )
    return with_observed_rate(res, k, N, CONFIDENCE)


def _run(adapter: Adapter, drafts: np.ndarray, q: np.ndarray, p: np.ndarray, seed: int) -> list[Any]:
    """Per call: an :class:`Emitted` of one row, or the :class:`VerifierRaised` of that call.

    One batch first; when it raises, one call per row, so that every raise is counted.
    """
    try:
        em = adapter.emit(drafts, q, p, np.random.default_rng([seed, 17]))
    except VerifierRaised:
        pass
    else:
        return [
            Emitted(em.tokens[b : b + 1], em.lengths[b : b + 1], {0: em.problems[b]} if b in em.problems else {})
            for b in range(len(drafts))
        ]
    out: list[Any] = []
    for b in range(len(drafts)):
        try:
            rng = np.random.default_rng([seed, 17, b])
            out.append(adapter.emit(drafts[b : b + 1], q[b : b + 1], p[b : b + 1], rng))
        except VerifierRaised as err:
            out.append(err)
    return out


__all__ = ["CALLS", "CONFIDENCE", "check_degenerate_rows", "degenerate_rows"]
