"""Probes: inputs that trigger public verification bugs (ECOSYSTEM.md B5-B12, shipped as docs/project/ECOSYSTEM.md).

* ``determinism`` (advisory): the same seed (generic, hf) or the same uniforms (chain) twice;
* ``placeholder_ids`` (B7, B8): drafts padded with -1 ids, their draft rows zero or copied;
  a -1 must never be accepted (raising is a refusal: not applicable). Advisory unless the
  convention is declared (``declared=True``); informational under the hf interface;
* ``zero_coin`` (B10, B12): a coin of exactly 0 on a draft token of target probability 0;
* ``degenerate_residual`` (B5, B6): a rejection whose residual ``max(p - q, 0)`` is exactly 0;
  a valid input (it arises when p and q nearly agree): the verifier must emit a valid token,
  and raising fails (``raises``);
* ``nan_target_row`` (B5): a NaN target row, not a valid input: raising or a valid token pass,
  a NaN or out-of-vocabulary id is an advisory note;
* ``uniform_reuse`` (B9, chain): whether the correction token depends on the uniform that
  decided the rejection.

**Forcing a coin, and proving it was forced.** ``zero_coin`` and ``degenerate_residual`` need
the acceptance coin of position 0 to be exactly 0, or the largest uniform below 1; how the
harness forces it, per interface, and confirms it on a control is described, and done, in
:mod:`spectr_gbv.validate.probe_runner`. When no forcing is confirmed the probe is
inconclusive (``passed=None``), never a pass; the detail names the confirmed draw index, the
coin value and its dtype.

The coin machinery's public names (:class:`~spectr_gbv.validate.probe_runner.Forcing`,
``FORCE_INDICES``, ``CONTROL_RATIO``, ``DEGENERATE_RATIO``) stay importable from here.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spectr_gbv.validate import coins
from spectr_gbv.validate.battery import BatteryInstance, Tables
from spectr_gbv.validate.calls import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.checks_structural import failure_result
from spectr_gbv.validate.interfaces import Adapter
from spectr_gbv.validate.probe_runner import (  # noqa: F401 - re-exported: the coin machinery's public names
    CONTROL_RATIO,
    DEGENERATE_RATIO,
    FORCE_INDICES,
    Forcing,
    _candidates,
    _emit,
    _failed,
    _first_problem,
    _inconclusive,
    _raised,
    _spec,
    _takes_uniforms,
    _tile,
    _valid_tokens,
)
from spectr_gbv.validate.report import CheckResult

_PLACEHOLDER_NOTE = (
    " (advisory: the interface does not promise -1 placeholder ids; declare the vLLM convention with "
    "--conventions vllm to make this part of the verdict)"
)


def generator_with_first_uniform(which: str, seed: int = 0) -> np.random.Generator:
    """A :class:`numpy.random.Generator` whose first ``random()`` is exactly 0.0 or 1 - 2**-53.

    :func:`spectr_gbv.validate.coins.numpy_coin_generator` at draw index 0: the first 64-bit
    output is 0 (``"zero"``) or ``2**64 - 1`` (``"max"``); later draws are ordinary.

    Parameters
    ----------
    which : str
        ``"zero"`` or ``"max"``.
    seed : int
        Picks the stream (and so the later draws).

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ValueError
        ``which`` not ``"zero"`` or ``"max"``.
    """
    return coins.numpy_coin_generator(which, 0, seed)


# ------------------------------------------------------------------------------ the probes
def check_determinism(adapter: Adapter, tables: Tables, bi: BatteryInstance, seed: int, num: int = 64) -> CheckResult:
    """Same seed (generic, hf) or same uniforms (chain) twice -> same outputs (advisory).

    Non-determinism under the harness's randomness is a contract note (the exact level and the
    replay of a failure need it), not a failure of losslessness: the result is advisory.

    Parameters
    ----------
    adapter : Adapter
    tables : Tables
        Rows of ``bi``'s instance.
    bi : BatteryInstance
    seed : int
    num : int
        Calls per repetition.

    Returns
    -------
    CheckResult
        ``advisory=True``; ``diagnosis="not_deterministic"`` when the repetitions differ.
    """
    rng = np.random.default_rng([seed, 7])
    drafts = tables.sample_drafts(num, bi.K, rng)
    q, p = tables.rows(drafts)
    uniforms = rng.random((num, bi.instance.L + 1)) if _takes_uniforms(adapter) else None
    a = adapter.emit(drafts, q, p, np.random.default_rng([seed, 8]), uniforms)
    b = adapter.emit(drafts, q, p, np.random.default_rng([seed, 8]), uniforms)
    same = np.array_equal(a.tokens, b.tokens) and np.array_equal(a.lengths, b.lengths)
    what = "the same uniforms" if _takes_uniforms(adapter) else "a generator with the same seed"
    if same:
        return CheckResult(
            "determinism",
            "structural",
            True,
            sample_size=2 * num,
            detail=f"{num} calls repeated with {what}: equal",
            advisory=True,
        )
    diff = int(np.argmax((a.tokens != b.tokens).any(axis=1) | (a.lengths != b.lengths)))
    return CheckResult(
        "determinism",
        "structural",
        False,
        sample_size=2 * num,
        instance=bi.spec(drafts=drafts[diff].tolist()),
        detail=(
            f"{num} calls repeated with {what} differ (first at call {diff}: "
            f"{a.tokens[diff, : a.lengths[diff]].tolist()} vs {b.tokens[diff, : b.lengths[diff]].tolist()}); "
            "the verifier draws randomness that the harness does not control"
        ),
        diagnosis="not_deterministic",
        advisory=True,
    )


def check_placeholders(adapter: Adapter, K: int, seed: int, declared: bool = False) -> list[CheckResult]:
    """B7/B8: drafts [x, -1, -1] (K copies); the -1 slots must be rejected, never emitted.

    Two variants: draft rows at the placeholder slots all zero (so ``p / q`` is inf or NaN
    there) and copied from a valid row (garbage that can pass the ratio test). Pass: every
    output is ``x`` (accepted) or not, then one valid token: at most 2 tokens, all in range.
    Raising is a refusal (not applicable).

    Parameters
    ----------
    adapter : Adapter
    K : int
        Drafts per row.
    seed : int
    declared : bool
        Whether the verifier declares the -1 placeholder convention (vLLM's): False makes
        every result advisory (outside the verdict). Under the hf interface a failure is
        informational (``passed=None``) in any case: transformers never passes -1 ids.

    Returns
    -------
    list of CheckResult
        ``placeholder_ids[zero_rows]`` and ``placeholder_ids[copied_rows]``.
    """
    V, L, B = 4, 3, 24
    qrow = np.array([0.4, 0.3, 0.2, 0.1])
    prow = np.array([0.1, 0.2, 0.3, 0.4])
    out = []
    for variant in ("zero_rows", "copied_rows"):
        name = f"placeholder_ids[{variant}]"
        drafts = np.full((B, K, L), -1, dtype=np.int64)
        drafts[:, :, 0] = np.arange(B)[:, None] % 3
        q = _tile(qrow, B, K, L)
        if variant == "zero_rows":
            q[:, :, 1:] = 0.0
        p = _tile(prow, B, K, L + 1)
        spec = _spec(name, drafts[0], q[0], p[0])
        res = None
        try:
            em, _ = _emit(adapter, drafts, q, p, None, seed)
        except VerifierTimedOut as err:
            res = failure_result(name, "robustness", err, spec)
        except VerifierFailure as err:
            res = CheckResult(name, "robustness", None, sample_size=B, instance=spec, detail=f"refused: {err}")
        if res is None:
            for b in range(B):
                toks = em.tokens[b, : em.lengths[b]].tolist()
                bad: tuple[str, str] | None
                if b in em.problems:
                    diag, msg = em.problems[b]
                    bad = ("accepts_placeholder", msg) if diag == "bad_output" else (diag, msg)
                elif -1 in toks or em.lengths[b] > 2:
                    bad = (
                        "accepts_placeholder",
                        (
                            f"drafts {drafts[b, 0].tolist()} gave {toks}: a -1 placeholder accepted (docs/validate.md, "
                            "'Placeholder ids': stop at the first -1 and draw from the target row there, or raise)"
                        ),
                    )
                else:
                    bad = _valid_tokens(em, b, V, 2)
                if bad is not None:
                    res = _failed(name, b, bad, "drafts padded with -1 ids", drafts, q, p, B, None, seed, None)
                    break
            else:
                res = CheckResult(
                    name,
                    "robustness",
                    True,
                    sample_size=B,
                    instance=spec,
                    detail="drafts padded with -1 ids: all valid",
                )
        if adapter.interface == "hf" and res.passed is False:
            # transformers' candidates come from the assistant's generate(): never -1
            res = dataclasses.replace(
                res,
                passed=None,
                diagnosis="ok",
                detail=res.detail + " (informational: the hf interface has no placeholder ids; "
                "transformers never passes -1 candidates)",
            )
        if not declared:
            res = dataclasses.replace(
                res, advisory=True, detail=res.detail + (_PLACEHOLDER_NOTE if res.passed is not True else "")
            )
        out.append(res)
    return out


def check_zero_coin(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B10/B12: a coin of exactly 0 must not accept a draft token of target probability 0.

    Vocabulary 4, L = 2, every draft ``[3, 3]``; ``q = (0, 1/4, 1/4, 1/2)`` at every position.
    Control: ``p = (0, 1/2 - 2**-32, 1/2 - 2**-32, 2**-31)``, so token 3 has ``p/q = 2**-30``
    and its residual is 0: position 0 emits 3 only when the coin is below ``2**-30``. Each
    forcing of ``probe_runner._candidates`` (draw indices 0-3; chain: column 0, then every column) runs
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


__all__ = [
    "check_degenerate_residual",
    "check_determinism",
    "check_nan_row",
    "check_placeholders",
    "check_uniform_reuse",
    "check_zero_coin",
    "generator_with_first_uniform",
]
