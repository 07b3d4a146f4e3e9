"""Probes: inputs that trigger public verification bugs (ECOSYSTEM.md B5-B12, shipped as docs/project/ECOSYSTEM.md).

* ``determinism``: the same seed (generic, hf) or the same uniforms (chain) twice;
* ``placeholder_ids`` (B7, B8): drafts padded with -1 ids, their draft rows zero or copied;
  a -1 must never be accepted (a verifier may refuse such input by raising: not applicable);
* ``zero_coin`` (B10, B12): a coin of exactly 0 (chain: supplied uniforms 0; generic/hf: a
  generator whose first uniform is exactly 0.0, :func:`generator_with_first_uniform`) on a
  draft token of target probability 0;
* ``degenerate_residual`` (B5, B6): rows with p <= q everywhere (row sums 1 - 1e-12, within
  the input tolerance) and a coin that rejects, so the residual max(p - q, 0) is all zero;
  the verifier must still emit a valid token (raising is reported as not applicable);
* ``nan_target_row`` (B5): a NaN target row; raising or a valid token pass, NaN or an id
  outside the vocabulary fails;
* ``uniform_reuse`` (B9, chain): whether the correction token depends on the uniform that
  decided the rejection.

On a probe, raising is a refusal (the check is not applicable); emitting a wrong token fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.validate.battery import BatteryInstance, Tables
from spectr_gbv.validate.calls import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.checks_structural import failure_result
from spectr_gbv.validate.interfaces import Adapter
from spectr_gbv.validate.outputs import Emitted
from spectr_gbv.validate.report import CheckResult

#: PCG64 multiplier (numpy's ``PCG_DEFAULT_MULTIPLIER_128``).
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_MASK128 = (1 << 128) - 1


def generator_with_first_uniform(which: str, seed: int = 0) -> np.random.Generator:
    """A :class:`numpy.random.Generator` whose first ``random()`` is exactly 0.0 or 1 - 2**-53.

    numpy's PCG64 advances its 128-bit state ``s -> s * M + inc`` and outputs
    ``rotr64(hi(s) ^ lo(s), s >> 122)``: a state with ``hi == lo`` outputs 0 (``random() =
    0.0``), one with ``lo == ~hi`` outputs ``2**64 - 1`` (``random() = 1 - 2**-53``). The
    state is set to the preimage of such a state; later draws are ordinary.

    Parameters
    ----------
    which : str
        ``"zero"`` or ``"max"``.
    seed : int
        Picks the stream increment (and so the later draws).

    Raises
    ------
    ValueError
        ``which`` not ``"zero"`` or ``"max"``.
    """
    if which not in ("zero", "max"):
        raise ValueError(f"which: expected 'zero' or 'max', got {which!r}")
    bg = np.random.PCG64(seed)
    state = bg.state
    inc = int(state["state"]["inc"])
    target = 0 if which == "zero" else (1 << 64) - 1
    prev = ((target - inc) * pow(_PCG_MULT, -1, 1 << 128)) & _MASK128
    state["state"]["state"] = prev
    state["has_uint32"] = 0
    bg.state = state
    return np.random.Generator(bg)


def check_determinism(adapter: Adapter, tables: Tables, bi: BatteryInstance, seed: int, num: int = 64) -> CheckResult:
    """Same seed (generic, hf) or same uniforms (chain) twice -> same outputs."""
    rng = np.random.default_rng([seed, 7])
    drafts = tables.sample_drafts(num, bi.K, rng)
    q, p = tables.rows(drafts)
    uniforms = rng.random((num, bi.instance.L + 1)) if adapter.interface == "chain" else None
    a = adapter.emit(drafts, q, p, np.random.default_rng([seed, 8]), uniforms)
    b = adapter.emit(drafts, q, p, np.random.default_rng([seed, 8]), uniforms)
    same = np.array_equal(a.tokens, b.tokens) and np.array_equal(a.lengths, b.lengths)
    what = "the same uniforms" if adapter.interface == "chain" else "a generator with the same seed"
    if same:
        return CheckResult(
            "determinism", "structural", True, sample_size=2 * num, detail=f"{num} calls repeated with {what}: equal"
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
    )


def _probe_inputs(V: int, L: int, K: int, B: int, rows: Callable[[int], tuple[np.ndarray, np.ndarray]]) -> Any:
    q = np.empty((B, K, L, V))
    p = np.empty((B, K, L + 1, V))
    for b in range(B):
        qb, pb = rows(b)
        q[b], p[b] = qb, pb
    return q, p


def _probe_result(
    name: str,
    category: str,
    adapter: Adapter,
    drafts: np.ndarray,
    q: np.ndarray,
    p: np.ndarray,
    rngs: list[np.random.Generator],
    uniforms: np.ndarray | None,
    judge: Callable[[Emitted, int], tuple[str, str] | None],
    spec: dict[str, Any],
    what: str,
    refused_ok: bool = True,
    refusal_note: str = "",
) -> CheckResult:
    """Run a probe (one call per rng, or one batch for chain) and judge each output row."""
    try:
        if adapter.interface == "chain":
            em = adapter.emit(drafts, q, p, rngs[0], uniforms)
        else:
            parts = [adapter.emit(drafts[b : b + 1], q[b : b + 1], p[b : b + 1], rngs[b]) for b in range(len(drafts))]
            em = Emitted(
                np.concatenate([e.tokens for e in parts]),
                np.concatenate([e.lengths for e in parts]),
                {b: e.problems[0] for b, e in enumerate(parts) if 0 in e.problems},
            )
    except VerifierTimedOut as err:
        return failure_result(name, category, err, spec)
    except VerifierFailure as err:
        if refused_ok:
            detail = f"refused: {err}" + (f". {refusal_note}" if refusal_note else "")
            return CheckResult(name, category, None, sample_size=len(drafts), instance=spec, detail=detail)
        return failure_result(name, category, err, spec)
    for b in range(len(drafts)):
        verdict = judge(em, b)
        if verdict is not None:
            diag, msg = verdict
            return CheckResult(
                name,
                category,
                False,
                sample_size=len(drafts),
                instance={**spec, "drafts": drafts[b].tolist()},
                detail=f"{what}: {msg}",
                diagnosis=diag,
            )
    return CheckResult(
        name, category, True, sample_size=len(drafts), instance=spec, detail=f"{what}: all outputs valid"
    )


def _spec(name: str, drafts: np.ndarray, q: np.ndarray, p: np.ndarray, **extra: Any) -> dict[str, Any]:
    B, K, L = drafts.shape
    return {
        "kind": "probe",
        "name": name,
        "n": int(q.shape[-1]),
        "L": int(L),
        "K": int(K),
        "draft_probs": q[0].tolist(),
        "target_probs": p[0].tolist(),
        **extra,
    }


def _rngs(kind: str | None, B: int, seed: int) -> list[np.random.Generator]:
    if kind is None:
        return [np.random.default_rng([seed, b]) for b in range(B)]
    return [generator_with_first_uniform(kind, seed + b) for b in range(B)]


def _valid_tokens(em: Emitted, b: int, V: int, max_len: int) -> tuple[str, str] | None:
    if b in em.problems:
        return em.problems[b]
    toks = em.tokens[b, : em.lengths[b]]
    if np.any((toks < 0) | (toks >= V)):
        return "nan_or_out_of_vocab", f"emitted {toks.tolist()} (an id outside 0..{V - 1})"
    if em.lengths[b] > max_len:
        return "bad_output", f"emitted {toks.tolist()}, more than {max_len} tokens"
    return None


def check_placeholders(adapter: Adapter, K: int, seed: int) -> list[CheckResult]:
    """B7/B8: drafts [x, -1, -1] (K copies); the -1 slots must be rejected, never emitted.

    Two variants: draft rows at the placeholder slots all zero (so ``p / q`` is inf or NaN
    there) and copied from a valid row (garbage that can pass the ratio test). Pass: every
    output is ``x`` (accepted) or not, then one valid token: at most 2 tokens, all in range.
    """
    V, L, B = 4, 3, 24
    qrow = np.array([0.4, 0.3, 0.2, 0.1])
    prow = np.array([0.1, 0.2, 0.3, 0.4])
    out = []
    for variant in ("zero_rows", "copied_rows"):
        drafts = np.full((B, K, L), -1, dtype=np.int64)
        drafts[:, :, 0] = np.arange(B)[:, None] % 3

        def rows(_: int, variant: str = variant) -> tuple[np.ndarray, np.ndarray]:
            q = np.tile(qrow, (K, L, 1))
            if variant == "zero_rows":
                q[:, 1:] = 0.0
            return q, np.tile(prow, (K, L + 1, 1))

        q, p = _probe_inputs(V, L, K, B, rows)
        uniforms = np.random.default_rng([seed, 3]).random((B, L + 1)) if adapter.interface == "chain" else None

        def judge(em: Emitted, b: int, drafts: np.ndarray = drafts) -> tuple[str, str] | None:
            toks = em.tokens[b, : em.lengths[b]].tolist()
            if b in em.problems:
                diag, msg = em.problems[b]
                return ("accepts_placeholder", msg) if diag == "bad_output" else (diag, msg)
            if -1 in toks or em.lengths[b] > 2:
                return "accepts_placeholder", (
                    f"drafts {drafts[b, 0].tolist()} gave {toks}: a -1 placeholder accepted (docs/validate.md, "
                    "'Placeholder ids': stop at the first -1 and draw from the target row there, or raise)"
                )
            return _valid_tokens(em, b, V, 2)

        spec = _spec(f"placeholder_ids[{variant}]", drafts, q, p)
        res = _probe_result(
            f"placeholder_ids[{variant}]",
            "robustness",
            adapter,
            drafts,
            q,
            p,
            _rngs(None, B, seed),
            uniforms,
            judge,
            spec,
            "drafts padded with -1 ids",
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
        out.append(res)
    return out


def check_zero_coin(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B10/B12: a coin of exactly 0 must not accept a draft token of target probability 0.

    Drafts are token 0 (all K) with ``q(0) = 1/2`` and ``p(0) = 0``; the uniforms are exactly 0
    (chain: all of them; generic and hf: the generator's first draw). A correct verifier
    rejects and emits 1 or 2; also probes the inverse-CDF boundary of a residual whose first
    entry is 0 (a coin of 0 must not pick it).
    """
    V, L, B = 3, 2, 8
    qrow = np.array([0.5, 0.25, 0.25])
    prow = np.array([0.0, 0.5, 0.5])
    drafts = np.zeros((B, K, L), dtype=np.int64)
    drafts[:, :, 1] = np.arange(B)[:, None] % 3
    q, p = _probe_inputs(V, L, K, B, lambda _: (np.tile(qrow, (K, L, 1)), np.tile(prow, (K, L + 1, 1))))
    uniforms = np.zeros((B, L + 1)) if adapter.interface == "chain" else None
    if adapter.interface == "hf":
        rngs = _rngs(None, B, seed)  # torch draws its own coins: an ordinary seed
    else:
        rngs = _rngs("zero", B, seed)

    def judge(em: Emitted, b: int) -> tuple[str, str] | None:
        bad = _valid_tokens(em, b, V, L + 1)
        if bad:
            return bad
        if em.tokens[b, 0] == 0:
            return (
                "zero_probability_token",
                f"emitted {em.tokens[b, : em.lengths[b]].tolist()}: token 0 has target probability 0 "
                "(accepted or drawn with a coin of exactly 0)",
            )
        return None

    spec = _spec("zero_coin", drafts, q, p, uniforms="all 0.0" if uniforms is not None else "first draw 0.0")
    return _probe_result(
        "zero_coin",
        "robustness",
        adapter,
        drafts,
        q,
        p,
        rngs,
        uniforms,
        judge,
        spec,
        "coins of exactly 0 (chain: uniforms 0; generic: rng = spectr_gbv.validate.checks_probes."
        "generator_with_first_uniform('zero', seed + row), whose first random() is 0.0)",
    )


def check_degenerate_residual(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B5/B6: a rejection whose residual max(p - q, 0) is all zero must still emit a valid token.

    ``q = (1/2, 1/2, 0)`` and ``p = (1/2 - 1e-12, 1/2, 0)`` (sum 1 - 1e-12, within the input
    tolerance 1e-9): token 0 is accepted with probability ``1 - 2e-12``; the coin is forced
    into the rejection (chain: uniform 1 - 1e-13; generic: a first draw of 1 - 2**-53), where
    the residual is exactly zero. Valid outputs: tokens 0 or 1 (target probability > 0).
    """
    V, L, B = 3, 1, 8
    qrow = np.array([0.5, 0.5, 0.0])
    prow = np.array([0.5 - 1e-12, 0.5, 0.0])
    drafts = np.zeros((B, K, L), dtype=np.int64)
    q, p = _probe_inputs(V, L, K, B, lambda _: (np.tile(qrow, (K, L, 1)), np.tile(prow, (K, L + 1, 1))))
    uniforms = np.full((B, L + 1), 1 - 1e-13) if adapter.interface == "chain" else None
    if uniforms is not None:
        uniforms[:, 1:] = np.linspace(0.0, 1 - 1e-13, B)[:, None]
    rngs = _rngs(None if adapter.interface == "hf" else "max", B, seed)

    def judge(em: Emitted, b: int) -> tuple[str, str] | None:
        bad = _valid_tokens(em, b, V, L + 1)
        if bad:
            return bad
        toks = em.tokens[b, : em.lengths[b]]
        if toks[-1] == 2:
            return "zero_probability_token", f"emitted {toks.tolist()}: token 2 has p = q = 0 (a default id?)"
        return None

    spec = _spec("degenerate_residual", drafts, q, p)
    return _probe_result(
        "degenerate_residual",
        "robustness",
        adapter,
        drafts,
        q,
        p,
        rngs,
        uniforms,
        judge,
        spec,
        "a rejection with an all-zero residual (q = (1/2, 1/2, 0), p = (1/2 - 1e-12, 1/2, 0); the coin is forced "
        "to reject: chain uniforms 1 - 1e-13, generic rng = spectr_gbv.validate.checks_probes."
        "generator_with_first_uniform('max', seed + row), whose first random() is 1 - 2**-53)",
        refusal_note=(
            "Acceptable for a degenerate input, but in serving it arises whenever p and q nearly agree on a row "
            "and the coin rejects; a verifier that must never crash emits a token from p there"
        ),
    )


def check_nan_row(adapter: Adapter, K: int, seed: int) -> CheckResult:
    """B5: a NaN target row must raise (surface the fault) or give a valid token, never NaN/OOV."""
    V, L, B = 3, 1, 4
    qrow = np.array([0.5, 0.25, 0.25])
    prow = np.array([0.2, 0.3, 0.5])
    drafts = np.zeros((B, K, L), dtype=np.int64)

    def rows(_: int) -> tuple[np.ndarray, np.ndarray]:
        p = np.tile(prow, (K, L + 1, 1))
        p[:, 0] = np.nan
        return np.tile(qrow, (K, L, 1)), p

    q, p = _probe_inputs(V, L, K, B, rows)
    uniforms = np.random.default_rng([seed, 5]).random((B, L + 1)) if adapter.interface == "chain" else None

    def judge(em: Emitted, b: int) -> tuple[str, str] | None:
        return _valid_tokens(em, b, V, L + 1)

    spec = _spec("nan_target_row", drafts, q, p)
    res = _probe_result(
        "nan_target_row",
        "robustness",
        adapter,
        drafts,
        q,
        p,
        _rngs(None, B, seed),
        uniforms,
        judge,
        spec,
        "a NaN target row",
    )
    if res.passed is None:  # raising is the right answer here
        return CheckResult(
            res.name, res.category, True, sample_size=B, instance=spec, detail=f"surfaced the fault: {res.detail}"
        )
    return res


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
    spec = _spec("uniform_reuse", drafts, q, p, uniforms="u0 swept over [0.3, 0.999], u1, u2 fixed")
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
