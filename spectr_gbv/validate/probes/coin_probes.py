"""Probes that force a coin: zero coins, all-zero residuals, NaN target rows, reused uniforms.

* ``zero_coin`` (B10, B12): a coin of exactly 0 on a draft token of target probability 0;
* ``degenerate_residual`` (B5, B6): a rejection whose residual ``max(p - q, 0)`` is exactly 0;
  a valid input: the verifier must emit a valid token, and raising fails (``raises``);
* ``nan_target_row`` (B5): a NaN target row, not a valid input: raising or a valid token pass,
  a NaN or out-of-vocabulary id is an advisory note;
* ``uniform_reuse`` (B9, chain): whether the correction token depends on the uniform that
  decided the rejection.

The coins are forced and confirmed by :mod:`spectr_gbv.validate.probes.runner`; when no forcing
is confirmed the probe is inconclusive (``passed=None``), never a pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.probes.runner import (
    _candidates,
    _emit,
    _failed,
    _first_problem,
    _inconclusive,
    _raised,
    _spec,
    _tile,
    _valid_tokens,
)
from spectr_gbv.validate.report.results import CheckResult


def check_zero_coin(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B10/B12: a coin of exactly 0 must not accept a draft token of target probability 0.

    Vocabulary 4, L = 2, every draft ``[3, 3]``; ``q = (0, 1/4, 1/4, 1/2)`` at every position.
    Control: ``p = (0, 1/2 - 2**-32, 1/2 - 2**-32, 2**-31)``, so token 3 has ``p/q = 2**-30``
    and its residual is 0: position 0 emits 3 only when the coin is below ``2**-30``. Each
    forcing of ``runner._candidates`` (draw indices 0-3; chain: column 0, then every column) runs
    the control on 2 rows; the first under which every row emits 3 first is confirmed. Probe:
    ``p = (0, 1/2, 1/2, 0)`` with that forcing on 4 rows; a correct verifier rejects (every
    ``u < 0`` is false) and draws 1 or 2 (a coin of 0 must not pick token 0, whose p and q are
    0, at the inverse-CDF boundary). Both inputs are valid, so raising fails.

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
    name, L, x = "zero_coin", 2, 3
    NC, B = 2, 4
    q = _tile([0.0, 0.25, 0.25, 0.5], B, K, L)
    pc = _tile([0.0, 0.5 - 2.0**-32, 0.5 - 2.0**-32, 2.0**-31], B, K, L + 1)
    p = _tile([0.0, 0.5, 0.5, 0.0], B, K, L + 1)
    drafts = np.full((B, K, L), x, dtype=np.int64)
    cands, why = _candidates(adapter, "zero")
    tried: list[str] = []
    calls = 0
    seed_c, seed_p = seed, seed + 1000
    for f in cands:
        what_c = f"control (a valid input: draft token {x} with p/q = 2**-30, coin forced to 0)"
        try:
            em, u = _emit(adapter, drafts[:NC], q[:NC], pc[:NC], f, seed_c)
        except VerifierFailure as err:
            return _raised(name, err, _spec(name, drafts[0], q[0], pc[0], coin=f.spec(seed_c)), what_c)
        calls += NC
        bad = _first_problem(em, drafts, pc, range(NC))
        if bad is not None:
            return _failed(name, *bad, what_c, drafts, q, pc, calls, f, seed_c, u)
        if not all(em.tokens[b, 0] == x for b in range(NC)):
            tried.append(f.describe())
            continue
        what = f"draft token {x} of target probability 0 under a coin of 0"
        try:
            em, u = _emit(adapter, drafts, q, p, f, seed_p)
        except VerifierFailure as err:
            return _raised(name, err, _spec(name, drafts[0], q[0], p[0], coin=f.spec(seed_p)), what)
        calls += B
        bad = _first_problem(em, drafts, p)
        if bad is not None:
            return _failed(name, *bad, what, drafts, q, p, calls, f, seed_p, u)
        return CheckResult(
            name,
            "robustness",
            True,
            sample_size=calls,
            instance=_spec(name, drafts[0], q[0], p[0], coin=f.spec(seed_p)),
            detail=(
                f"{what}: all {B} outputs valid; coin confirmed: {f.describe()}, under which the control "
                f"accepted its draft token of p/q = 2**-30 (tried {len(tried) + 1} forcing(s))"
            ),
        )
    why = why or (
        "the control's draft token of p/q = 2**-30 was rejected under every forcing tried: "
        + "; ".join(tried)
        + ". The forced draw was not confirmed as position 0's acceptance coin: the verifier draws that coin "
        "elsewhere (its own generator), or draws other randomness first (a random draft order, for example)"
    )
    return _inconclusive(name, _spec(name, drafts[0], q[0], p[0]), calls, why)


def check_degenerate_residual(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B5/B6: a rejection whose residual max(p - q, 0) is all zero must still emit a valid token.

    Vocabulary 3, L = 1. ``q = (2**-34, 2**-10, g)`` with ``g = 1 - 2**-10 - 2**-34`` (sum 1)
    and ``p = (0, 2**-10 - 2**-31, g)`` (sum ``1 - 2**-31 - 2**-34``, within the input
    tolerance 1e-9): a valid input, as arises when p and q nearly agree. Draft 0 is ``[1]``,
    with ``p/q = 1 - 2**-21``: the largest coin (float64 ``1 - 2**-53``, float32 ``1 - 2**-24``)
    rejects it, an ordinary coin accepts it with probability ``1 - 2**-21``. Drafts 1..K-1 are
    ``[0]``, of target probability 0, which no correct verifier accepts (so a multi-draft
    verifier cannot fall back on another draft). ``p <= q`` everywhere, so after the rejection
    the residual is exactly 0 (in float64, and in float32 after rounding). Each forcing (draw
    indices 0-3; chain: column 0, then every column) runs on 4 rows; the first under which every
    row rejects is confirmed. Valid outputs: one token, 1 or 2 (target probability > 0).
    Raising fails (``raises``); the detail says whether it needed the forced rejection.

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
    g = 1.0 - 2.0**-10 - 2.0**-34
    q = _tile([2.0**-34, 2.0**-10, g], B, K, L)
    p = _tile([0.0, 2.0**-10 - 2.0**-31, g], B, K, L + 1)
    drafts = np.zeros((B, K, L), dtype=np.int64)
    drafts[:, 0] = x
    cands, why = _candidates(adapter, "max")
    tried: list[str] = []
    calls = 0
    what = (
        f"a rejection with an all-zero residual (draft token {x} with p/q = 1 - 2**-21 under the largest coin, "
        "other drafts of target probability 0; p <= q everywhere)"
    )
    for f in cands:
        spec = _spec(name, drafts[0], q[0], p[0], coin=f.spec(seed))
        try:
            em, u = _emit(adapter, drafts, q, p, f, seed)
        except VerifierTimedOut as err:
            return _raised(name, err, spec, what)
        except VerifierFailure as err:
            try:
                _emit(adapter, drafts[:2], q[:2], p[:2], None, seed + 2000)
            except VerifierFailure as err0:
                return _raised(
                    name,
                    err0,
                    spec,
                    "raises on this valid input (rows summing to 1 - 5.2e-10) even with ordinary coins",
                )
            return _raised(
                name,
                err,
                spec,
                "crashes on an all-zero residual (a valid input: it arises when p and q nearly agree and the coin "
                f"rejects; with ordinary coins, which accept, it runs; {f.describe()})",
            )
        calls += B
        bad = _first_problem(em, drafts, p)
        if bad is not None:
            return _failed(name, *bad, what, drafts, q, p, calls, f, seed, u)
        if any(em.lengths[b] == L + 1 for b in range(B)):  # accepted: the coin was not forced
            tried.append(f.describe())
            continue
        return CheckResult(
            name,
            "robustness",
            True,
            sample_size=calls,
            instance=spec,
            detail=(
                f"{what}: all {B} rows rejected and emitted a valid token; coin confirmed: {f.describe()} "
                f"(tried {len(tried) + 1} forcing(s))"
            ),
        )
    why = why or (
        f"draft token {x} of p/q = 1 - 2**-21 was accepted under every forcing tried: "
        + "; ".join(tried)
        + ". The forced draw was not confirmed as position 0's acceptance coin: the verifier draws that coin "
        "elsewhere (its own generator), or draws other randomness first (a random draft order, for example)"
    )
    return _inconclusive(name, _spec(name, drafts[0], q[0], p[0]), calls, why)


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
    q = _tile([0.5, 0.25, 0.25], B, K, L)
    p = _tile([0.2, 0.3, 0.5], B, K, L + 1)
    p[:, :, 0] = np.nan
    drafts = np.zeros((B, K, L), dtype=np.int64)
    spec = _spec(name, drafts[0], q[0], p[0])
    what = "a NaN target row (not a valid input: advisory)"
    try:
        em, u = _emit(adapter, drafts, q, p, None, seed)
    except VerifierTimedOut as err:
        return dataclasses.replace(_raised(name, err, spec, what), advisory=True)
    except VerifierFailure as err:
        return CheckResult(name, "robustness", True, sample_size=B, instance=spec, detail=f"surfaced the fault: {err}")
    for b in range(B):
        bad = _valid_tokens(em, b, V, L + 1)
        if bad is not None:
            return _failed(name, b, bad, what, drafts, q, p, B, None, seed, u, advisory=True)
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
    spec = _spec("uniform_reuse", drafts[0], q[0], p[0], uniforms="u0 swept over [0.3, 0.999], u1, u2 fixed")
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


__all__ = ["check_degenerate_residual", "check_nan_row", "check_uniform_reuse", "check_zero_coin"]
