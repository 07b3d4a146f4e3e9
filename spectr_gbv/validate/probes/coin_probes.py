"""Probes that force a coin: zero coins, all-zero residuals, NaN target rows, reused uniforms.

* ``zero_coin`` (B10, B12): a coin of exactly 0 on a draft token of target probability 0;
* ``degenerate_residual`` (B5, B6): a rejection whose residual ``max(p - q, 0)`` is exactly 0;
  a valid input: the verifier must emit a valid token, and raising fails (``raises``);
* ``covering_drafts`` (B5, B6): the same after drafts that cover the target's support (the
  degenerate case of target-only tree verification, SGLang's);
* ``nan_target_row`` (B5): a NaN target row, not a valid input: raising or a valid token pass,
  a NaN or out-of-vocabulary id is an advisory note;
* ``uniform_reuse`` (B9, chain): whether the correction token depends on the uniform that
  decided the rejection.

The coins are forced by :mod:`spectr_gbv.validate.probes.runner` and searched for and confirmed
by :mod:`spectr_gbv.validate.probes.search`; when no forcing is confirmed the probe is
inconclusive (``passed=None``), never a pass. A failure under a forced coin carries the
probability of that coin as its severity.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.outputs import Emitted
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.probes.runner import (
    CONTROL_RATIO,
    DEGENERATE_RATIO,
    Forcing,
    failed_result,
    first_problem,
    inconclusive_result,
    probe_spec,
    raised_result,
    run_probe,
    tile_row,
    token_problem,
    with_observed_rate,
)
from spectr_gbv.validate.probes.search import find_forcing, forced_rejection, unavailable
from spectr_gbv.validate.report.results import CheckResult

#: A target row whose float32 cumulative sum is ``1 - 2**-23`` (float64 sum exactly 1), token 4 of
#: probability 0: drafts of tokens 0-3 cover its support, and the largest float32 coin exceeds it.
COVER_ROW: tuple[float, ...] = (0.5227033098782227, 0.04948726460709252, 0.04687085517956508, 0.38093857033511963, 0.0)


def check_zero_coin(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B10/B12: a coin of exactly 0 must not accept a draft token of target probability 0.

    Vocabulary 4, L = 2, every draft ``[2, 2]``; ``q = (0, 1/4, 1/2, 1/4)`` at every position.
    Control: ``p = (0, 1/2 - 2**-32, 2**-31, 1/2 - 2**-32)``, so token 2 has ``p/q = 2**-30`` and
    its residual is 0: position 0 emits 2 only when the coin is below ``2**-30``. Token 2 sits
    between tokens of positive mass, so no sampler reading an extreme uniform (an inverse CDF
    from either end, an argmax over exponentials) picks it: a verifier that samples the target
    and matches the draft never accepts it. The control runs first under ordinary coins on 4
    rows (none may accept), then under the forcings of
    :func:`~spectr_gbv.validate.probes.search.find_forcing` (2 rows each); the first under which
    every row emits 2 first, with a dtype whose coin values explain which word patterns fired
    (torch), is confirmed. Probe: ``p = (0, 1/2, 0, 1/2)`` with that forcing on 4 rows; a
    correct verifier rejects (every ``u < 0`` is false) and draws 1 or 3. Both inputs are valid,
    so raising fails. A failure's severity is the probability of the forced coin.

    Parameters
    ----------
    adapter : Adapter
    K : int
        Drafts per row.
    seed : int

    Returns
    -------
    CheckResult
        Pass, fail (``zero_probability_token``, ``raises``, ...; the instance holds the row
        and its coin), or inconclusive (``passed=None``) when no forcing is confirmed.
    """
    name, L, x = "zero_coin", 2, 2
    NC, B = 2, 4
    q = tile_row([0.0, 0.25, 0.5, 0.25], B, K, L)
    pc = tile_row([0.0, 0.5 - 2.0**-32, 2.0**-31, 0.5 - 2.0**-32], B, K, L + 1)
    p = tile_row([0.0, 0.5, 0.0, 0.5], B, K, L + 1)
    drafts = np.full((B, K, L), x, dtype=np.int64)
    seed_c, seed_p = seed, seed + 1000
    what_c = f"control (a valid input: draft token {x} with p/q = 2**-30, coin forced to 0)"
    why = unavailable(adapter)
    if why:
        return inconclusive_result(name, probe_spec(name, drafts[0], q[0], p[0]), 0, why)
    try:
        em0, _ = run_probe(adapter, drafts, q, pc, None, seed + 3000)
    except VerifierFailure as err:
        return raised_result(name, err, probe_spec(name, drafts[0], q[0], pc[0]), "control with ordinary coins")
    bad = first_problem(em0, drafts, pc)
    if bad is not None:
        res = failed_result(name, *bad, "control with ordinary coins", drafts, q, pc, B, None, seed + 3000, None)
        k = sum(first_problem(em0, drafts, pc, range(b, b + 1)) is not None for b in range(B))
        return with_observed_rate(res, k, B)
    runs: dict[Forcing, tuple[Emitted, np.ndarray | None] | VerifierFailure] = {}

    def fires(f: Forcing) -> bool:
        try:
            runs[f] = run_probe(adapter, drafts[:NC], q[:NC], pc[:NC], f, seed_c)
        except VerifierTimedOut:
            raise
        except VerifierFailure as err:
            runs[f] = err
            raise
        em = runs[f][0]
        return all(b not in em.problems and em.lengths[b] >= 1 and em.tokens[b, 0] == x for b in range(NC))

    found = find_forcing(
        adapter,
        ("zero",),
        fires,
        any(em0.lengths[b] >= 1 and em0.tokens[b, 0] == x for b in range(B)),
        {
            "accept when u < p/q": lambda v: v < CONTROL_RATIO,
            "reject when u <= 1 - p/q": lambda v: v > 1 - CONTROL_RATIO,
        },
    )
    calls = B + NC * found.runs
    f = found.forcing
    if f is None:
        return inconclusive_result(name, probe_spec(name, drafts[0], q[0], p[0]), calls, found.why)
    out = runs.get(dataclasses.replace(f, seen=None))
    if isinstance(out, VerifierFailure):
        return raised_result(name, out, probe_spec(name, drafts[0], q[0], pc[0], coin=f.spec(seed_c)), what_c, f)
    if out is not None:
        bad = first_problem(out[0], drafts, pc, range(NC))
        if bad is not None:
            return failed_result(name, *bad, what_c, drafts, q, pc, calls, f, seed_c, out[1])
    what = f"draft token {x} of target probability 0 under a coin of 0"
    try:
        em, u = run_probe(adapter, drafts, q, p, f, seed_p)
    except VerifierFailure as err:
        return raised_result(name, err, probe_spec(name, drafts[0], q[0], p[0], coin=f.spec(seed_p)), what, f)
    calls += B
    bad = first_problem(em, drafts, p)
    if bad is not None:
        return failed_result(name, *bad, what, drafts, q, p, calls, f, seed_p, u)
    return CheckResult(
        name,
        "robustness",
        True,
        sample_size=calls,
        instance=probe_spec(name, drafts[0], q[0], p[0], coin=f.spec(seed_p)),
        detail=(
            f"{what}: all {B} outputs valid; coin confirmed: {f.describe()}, under which the control accepted its "
            f"draft token of p/q = 2**-30, which ordinary coins rejected ({found.runs} control run(s))"
        ),
    )


def check_degenerate_residual(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B5/B6: a rejection whose residual max(p - q, 0) is all zero must still emit a valid token.

    Vocabulary 3, L = 1. ``q = (2**-34, 2**-25, g)`` with ``g = 1 - 2**-25 - 2**-34`` (sum 1)
    and ``p = (0, 2**-25 - 2**-32, g)`` (sum ``1 - 2**-32 - 2**-34``, within the input
    tolerance 1e-9): a valid input, as arises when p and q nearly agree. (``2**-25`` keeps the
    residual all zero also after a float32 softmax of the log-probabilities, as the hf
    interface computes it: both rows' normalisers round to 1.) Draft 0 is ``[1]``,
    with ``p/q = 1 - 2**-7`` (:data:`~spectr_gbv.validate.probes.runner.DEGENERATE_RATIO`, exact in
    every dtype): the largest coin of any dtype rejects it (bfloat16's is ``1 - 2**-8``), so does
    a coin of 0 under ``reject when u <= 1 - p/q`` (LitGPT's orientation), and an ordinary coin
    accepts it with probability ``1 - 2**-7``. Drafts 1..K-1 are ``[0]``, of target
    probability 0, which no correct verifier accepts. ``p <= q`` everywhere (also after rounding
    to float32 or bfloat16), so after the rejection the residual is exactly 0. The input runs
    first with ordinary coins (4 rows: most must accept, or no forcing can be confirmed); then
    :func:`~spectr_gbv.validate.probes.search.find_forcing` tries the largest coin, the largest
    bfloat16 coin and the coin 0, each at the draws it searches, on 4 rows; a forcing under
    which every row rejects (or the verifier raises) is narrowed to one draw and its dtype
    confirmed. Valid outputs: one token, 1 or 2 (target probability > 0). Raising fails
    (``raises``); the severity is the probability of the forced coin in the confirmed dtype.

    Parameters
    ----------
    adapter : Adapter
    K : int
        Drafts per row.
    seed : int

    Returns
    -------
    CheckResult
        Pass, fail, or inconclusive (``passed=None``) when no forcing made the verifier reject.
    """
    name, L, x, B = "degenerate_residual", 1, 1, 4
    r = DEGENERATE_RATIO
    g = 1.0 - 2.0**-25 - 2.0**-34
    q = tile_row([2.0**-34, 2.0**-25, g], B, K, L)
    p = tile_row([0.0, 2.0**-25 * r, g], B, K, L + 1)
    drafts = np.zeros((B, K, L), dtype=np.int64)
    drafts[:, 0] = x
    what = (
        f"a rejection with an all-zero residual (draft token {x} with p/q = 1 - 2**-7 under a forced coin, "
        "other drafts of target probability 0; p <= q everywhere)"
    )
    predicates = {"accept when u < p/q": lambda v: v >= r, "reject when u <= 1 - p/q": lambda v: v <= 1.0 - r}
    return forced_rejection(adapter, name, (drafts, q, p), what, ("max", "high", "zero"), predicates, seed)


def check_covering_drafts(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B5/B6: drafts that cover the target's support, rejected by the largest coin.

    Vocabulary 3, L = 1; draft 0 is ``[0]``, drafts 1..K-1 ``[1]``; ``q = (1 - 2**-34, 2**-34, 0)``,
    ``p = (1 - 2**-31, 0, 0)`` (a valid input: it sums to 1 within 1e-9, as a target that puts
    all its mass on the drafted token up to rounding). Draft 0's token has ``p/q`` just below
    ``1 - 2**-31 + 2**-34`` and ``p(0) = 1 - 2**-31``: a verifier comparing its coin with ``p/q``
    or, as SGLang's target-only tree verification does, with the cumulative target probability
    of the drafted tokens, rejects only a coin above them (the largest float64 or float32 coin),
    and then every token of positive target probability has been drafted: the residual is all
    zero. The only valid output is ``[0]`` (tokens 1 and 2 have target probability 0). Forced
    as in :func:`check_degenerate_residual` (the largest coin, then 0 for the orientation
    ``reject when u <= 1 - p/q``); inconclusive when no forcing rejects (bfloat16 rounds the
    ratio to 1, so such a verifier never meets this residual). Multi-draft interfaces then also
    run 4 drafts ``[0]..[3]`` (``q`` uniform on 5 tokens) covering the support of
    :data:`COVER_ROW`, whose float32 cumulative sum ``1 - 2**-23`` is below the largest float32
    coin: SGLang's float32 kernel rejects every sibling there and emits token 4. No correct
    verifier rejects that input, so it can only add a failure (under a single forced draw).

    Parameters
    ----------
    adapter : Adapter
    K : int
        Drafts per row.
    seed : int

    Returns
    -------
    CheckResult
        Pass, fail (severity: the forced coin's probability), or inconclusive.
    """
    name, L, B = "covering_drafts", 1, 4
    r = 1.0 - 2.0**-31
    q = tile_row([1.0 - 2.0**-34, 2.0**-34, 0.0], B, K, L)
    p = tile_row([r, 0.0, 0.0], B, K, L + 1)
    drafts = np.ones((B, K, L), dtype=np.int64)
    drafts[:, 0] = 0
    what = "a rejection after drafts covering the target's support (p(0) = 1 - 2**-31, an all-zero residual)"
    predicates = {"accept when u < p/q": lambda v: v >= r, "reject when u <= 1 - p/q": lambda v: v <= 1.0 - r}
    res = forced_rejection(adapter, name, (drafts, q, p), what, ("max", "zero"), predicates, seed + 500)
    if res.passed is False or adapter.single_draft:
        return res
    # float32 sums: 4 drafts covering a support whose float32 cumulative sum is 1 - 2**-23
    d4 = np.tile(np.arange(4, dtype=np.int64).reshape(1, 4, 1), (B, 1, 1))
    q4 = tile_row([0.2] * 5, B, 4, L)
    p4 = np.concatenate([tile_row(COVER_ROW, B, 4, L), tile_row([0.2] * 5, B, 4, 1)], axis=2)
    what4 = (
        "4 drafts covering the target's support (p sums to 1 in float64, to 1 - 2**-23 in float32) and a coin "
        "above the float32 sum: an all-zero residual"
    )
    above = {"accept when u <= the float32 cumulative p": lambda v: v > 1.0 - 2.0**-23}
    res4 = forced_rejection(adapter, name, (d4, q4, p4), what4, ("max",), above, seed + 700, rejects=False)
    return res4 if res4.passed is False else res


def check_nan_row(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B5: a NaN target row: raising (surfacing the fault) or a valid token pass.

    The input is not valid, so nothing is promised: a NaN or out-of-vocabulary output is an
    advisory note (``advisory=True``, its diagnosis kept), not a failure of the verdict.

    Parameters
    ----------
    adapter : Adapter
    K : int
        Drafts per row.
    seed : int

    Returns
    -------
    CheckResult
    """
    name, V, L, B = "nan_target_row", 3, 1, 4
    q = tile_row([0.5, 0.25, 0.25], B, K, L)
    p = tile_row([0.2, 0.3, 0.5], B, K, L + 1)
    p[:, :, 0] = np.nan
    drafts = np.zeros((B, K, L), dtype=np.int64)
    spec = probe_spec(name, drafts[0], q[0], p[0])
    what = "a NaN target row (not a valid input: advisory)"
    try:
        em, u = run_probe(adapter, drafts, q, p, None, seed)
    except VerifierTimedOut as err:
        return dataclasses.replace(raised_result(name, err, spec, what), advisory=True)
    except VerifierFailure as err:
        return CheckResult(name, "robustness", True, sample_size=B, instance=spec, detail=f"surfaced the fault: {err}")
    for b in range(B):
        bad = token_problem(em, b, V, L + 1)
        if bad is not None:
            return failed_result(name, b, bad, what, drafts, q, p, B, None, seed, u, advisory=True)
    return CheckResult(
        name, "robustness", True, sample_size=B, instance=spec, detail="a NaN target row: all outputs valid"
    )


def check_uniform_reuse(adapter: Adapter, seed: int) -> tuple[CheckResult, bool]:
    """Chain only (B9): does the correction token depend on the uniform that decided the rejection?

    One draft [0, 0], q = (0.8, 0.1, 0.1), p = (0.2, 0.4, 0.4) at every position: token 0 is
    rejected iff ``u_0 >= 1/4``. With ``u_1, u_2`` fixed, ``u_0`` is swept over the rejection
    region [0.3, 1); a verifier that draws the correction from a fresh uniform emits the
    same token for the whole sweep. Dependence is not by itself a bug (``(u - r)/(1 - r)`` is a
    fresh uniform), so when it is seen the result is informational (``passed=None``) and it
    turns the diagnosis of failed law checks into ``reuses_uniform``; no dependence passes.

    Returns
    -------
    (CheckResult, bool)
        The check (passed, or informational, or not applicable when the verifier does not
        reject there) and whether the dependence was seen.
    """
    L, B = 2, 64
    qrow = np.array([0.8, 0.1, 0.1])
    prow = np.array([0.2, 0.4, 0.4])
    drafts = np.zeros((B, 1, L), dtype=np.int64)
    q = np.tile(qrow, (B, 1, L, 1))
    p = np.tile(prow, (B, 1, L + 1, 1))
    uniforms = np.empty((B, L + 1))
    uniforms[:, 0] = np.linspace(0.3, 0.999, B)
    uniforms[:, 1:] = np.random.default_rng([seed, 11]).random(L)[None, :]
    spec = probe_spec("uniform_reuse", drafts[0], q[0], p[0], uniforms="u0 swept over [0.3, 0.999], u1, u2 fixed")
    try:
        em = adapter.emit(drafts, q, p, np.random.default_rng(seed), uniforms)
    except VerifierFailure as err:
        return CheckResult("uniform_reuse", "structural", None, instance=spec, detail=f"not run: {err}"), False
    ok = (em.lengths == 1) & np.array([b not in em.problems for b in range(B)])
    if ok.sum() < B // 2:
        return (
            CheckResult(
                "uniform_reuse",
                "structural",
                None,
                sample_size=B,
                instance=spec,
                detail="the verifier does not reject where u0 >= p/q (or ignores the supplied uniforms)",
            ),
            False,
        )
    tokens = set(em.tokens[ok, 0].tolist())
    reused = len(tokens) > 1
    if not reused:
        detail = "the correction token does not depend on the uniform u0 that decided the rejection"
        return CheckResult("uniform_reuse", "structural", True, sample_size=B, instance=spec, detail=detail), False
    detail = (
        f"informational: the correction token varies with the uniform u0 that decided the rejection (tokens "
        f"{sorted(tokens)} as u0 sweeps the rejection region). Reusing that uniform is lossless only when it is "
        "rescaled to the rejection region; the law checks decide, and diagnose a failure as reuses_uniform"
    )
    return CheckResult("uniform_reuse", "structural", None, sample_size=B, instance=spec, detail=detail), True


__all__ = [
    "COVER_ROW",
    "check_covering_drafts",
    "check_degenerate_residual", "check_nan_row", "check_uniform_reuse", "check_zero_coin"]
