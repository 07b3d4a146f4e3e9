"""Probes of the inputs themselves: determinism, and drafts padded with -1 placeholder ids.

* ``determinism`` (advisory): the same seed (generic, hf) or the same uniforms (chain) twice;
* ``placeholder_ids`` (B7, B8; ECOSYSTEM.md, shipped as docs/project/ECOSYSTEM.md): drafts padded
  with -1 ids, their draft rows zero or copied; a -1 must never be accepted (raising is a
  refusal: not applicable). Advisory unless the convention is declared (``declared=True``);
  informational under the hf interface.

:func:`generator_with_first_uniform` builds the numpy generator whose first uniform is a given
extreme coin. The probes that force a coin are :mod:`spectr_gbv.validate.probes.coin_probes`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import spectr_gbv.validate.coins as coins
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks.structural import failure_result
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.probes.runner import (
    failed_result,
    probe_spec,
    run_probe,
    takes_uniforms,
    tile_row,
    token_problem,
)
from spectr_gbv.validate.report.results import CheckResult

_PLACEHOLDER_NOTE = (
    " (a convention the interface does not promise, outside the verdict: declare it with --conventions vllm "
    "to make -1 placeholder ids part of the verdict)"
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
    uniforms = rng.random((num, bi.instance.L + 1)) if takes_uniforms(adapter) else None
    a = adapter.emit(drafts, q, p, np.random.default_rng([seed, 8]), uniforms)
    b = adapter.emit(drafts, q, p, np.random.default_rng([seed, 8]), uniforms)
    same = np.array_equal(a.tokens, b.tokens) and np.array_equal(a.lengths, b.lengths)
    what = "the same uniforms" if takes_uniforms(adapter) else "a generator with the same seed"
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
        q = tile_row(qrow, B, K, L)
        if variant == "zero_rows":
            q[:, :, 1:] = 0.0
        p = tile_row(prow, B, K, L + 1)
        spec = probe_spec(name, drafts[0], q[0], p[0])
        res = None
        try:
            em, _ = run_probe(adapter, drafts, q, p, None, seed)
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
                    bad = token_problem(em, b, V, 2)
                if bad is not None:
                    res = failed_result(name, b, bad, "drafts padded with -1 ids", drafts, q, p, B, None, seed, None)
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


__all__ = ["check_determinism", "check_placeholders", "generator_with_first_uniform"]
