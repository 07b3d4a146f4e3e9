"""Correct verifiers in the generic and chain interfaces, built on :mod:`spectr_gbv.reference`."""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.reference import get_verifier
from spectr_gbv.reference.base import Verifier, VerifyInput, validate_inputs
from spectr_gbv.testing.mutants.inputs import (
    Law,
    QueueRng,
    chain_arrays,
    check_rng,
    correct_inputs,
    tag_verifier,
)

#: Validated float64 inputs kept for reuse (a harness calls a verifier many times on few inputs).
_CACHE_SIZE = 4096
_VALIDATED: dict[tuple[Any, ...], tuple[Verifier, VerifyInput]] = {}


def _prepared(method: str, draft_tokens: Any, draft_probs: Any, target_probs: Any) -> tuple[Verifier, VerifyInput]:
    """The reference verifier and its validated inputs (placeholders cut), memoised for float64 inputs.

    The memo key is the method and the raw bytes, shapes and dtypes of the three converted
    arrays, so a hit is an identical input; object (Fraction) arrays are not memoised.
    """
    override, inputs = correct_inputs(draft_tokens, draft_probs, target_probs)
    d, q, p = inputs
    key = None
    if q.dtype == np.float64 and p.dtype == np.float64:
        key = (override or method, d.shape, q.shape, d.tobytes(), q.tobytes(), p.tobytes())
        hit = _VALIDATED.get(key)
        if hit is not None:
            return hit
    prepared = (get_verifier(override or method), validate_inputs(d, q, p))
    if key is not None:
        if len(_VALIDATED) >= _CACHE_SIZE:
            _VALIDATED.clear()
        _VALIDATED[key] = prepared
    return prepared


# ============================================================================ correct verifiers
def _correct_sample(method: str, draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    rng = check_rng(rng)
    verifier, batch = _prepared(method, draft_tokens, draft_probs, target_probs)
    return [int(v) for v in verifier.sample_checked(batch, rng)]


def _correct_law(method: str, draft_tokens: Any, draft_probs: Any, target_probs: Any) -> Law:
    override, inputs = correct_inputs(draft_tokens, draft_probs, target_probs)
    return get_verifier(override or method).outcome_law(*inputs)


def correct_sd(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Correct token-level speculative sampling (the reference ``sd``) in the generic interface.

    Verifies draft 0 with :class:`~spectr_gbv.reference.SpeculativeDecodingVerifier`; a
    placeholder (negative id) ends the draft (module docstring); float16/float32 rows are
    renormalised in float64; every other input is checked by the reference
    (:func:`~spectr_gbv.reference.validate_inputs`).

    Parameters
    ----------
    draft_tokens : array-like, int64 [K, L]
    draft_probs : array-like, float or Fraction [K, L, V]
    target_probs : array-like, float or Fraction [K, L+1, V]
    rng : numpy.random.Generator

    Returns
    -------
    list of int
        Accepted prefix plus one token.

    Raises
    ------
    ValueError
        Naming the argument: wrong shapes, ids outside ``[0, V)`` (other than placeholders),
        NaN/inf/negative entries, rows not summing to 1, a drafted token of draft probability
        0, or ``rng`` not a Generator.

    References
    ----------
    Leviathan et al. 2023 (arXiv 2211.17192), Algorithm 1.

    Attributes
    ----------
    bug = "ok"; outcome_law: the reference's exact law.
    """
    return _correct_sample("sd", draft_tokens, draft_probs, target_probs, rng)


def correct_bv(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Correct block verification (the reference ``bv``) in the generic interface.

    As :func:`correct_sd` with :class:`~spectr_gbv.reference.BlockVerifier` (draft 0).

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`correct_sd`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`correct_sd`.

    References
    ----------
    Sun et al. 2024 (arXiv 2403.10444), Algorithm 2.
    """
    return _correct_sample("bv", draft_tokens, draft_probs, target_probs, rng)


def correct_mdbv(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Correct multi-draft block verification (the reference ``mdbv``) in the generic interface.

    As :func:`correct_sd` with :class:`~spectr_gbv.reference.MultiDraftBlockVerifier` (all K
    drafts; placeholders cut every draft to the shortest).

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`correct_sd`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`correct_sd`.

    References
    ----------
    THEORY.md section 6 (this project's lossless reading of SpecTr-GBV steps 1-3).
    """
    return _correct_sample("mdbv", draft_tokens, draft_probs, target_probs, rng)


def _correct_chain(method: str, draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> np.ndarray:
    d, q, p, u = chain_arrays(draft_ids, draft_probs, target_probs, uniforms)
    B, L = d.shape
    rng = np.random.default_rng() if u is None else None
    out = np.full((B, L + 1), -1, dtype=np.int64)
    for b in range(B):
        verifier, batch = _prepared(method, d[b : b + 1], q[b : b + 1], p[b : b + 1])
        emitted = verifier.sample_checked(batch, rng if u is None else QueueRng(u[b]))
        out[b, : len(emitted)] = emitted
    return out


def correct_sd_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None) -> np.ndarray:
    """Correct SD in the chain interface: one coin per position, then one uniform for the last token.

    The reference sampler consumes the row's uniforms in order: coins ``uniforms[b, 0..t]`` up
    to the first rejection at t, then ``uniforms[b, t+1]`` for the correction (or
    ``uniforms[b, L]`` for the bonus), drawn by inverse CDF.

    Parameters
    ----------
    draft_ids : array-like, int64 [B, L]
    draft_probs : array-like, float [B, L, V]
    target_probs : array-like, float [B, L+1, V]
    uniforms : array-like, float [B, L+1] in [0, 1), optional
        None draws fresh uniforms.

    Returns
    -------
    ndarray, int64 [B, L+1]
        Prefix, one token, then -1.

    Raises
    ------
    ValueError
        As :func:`correct_sd`, and for ``uniforms`` of the wrong shape or outside [0, 1).
    """
    return _correct_chain("sd", draft_ids, draft_probs, target_probs, uniforms)


def correct_bv_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None) -> np.ndarray:
    """Correct block verification in the chain interface (K = 1, so also ``mdbv``).

    The L trials ``eta_i`` use ``uniforms[b, 0..L-1]``; the final token ``uniforms[b, L]``.

    Parameters
    ----------
    draft_ids, draft_probs, target_probs, uniforms
        As :func:`correct_sd_chain`.

    Returns
    -------
    ndarray, int64 [B, L+1]

    Raises
    ------
    ValueError
        As :func:`correct_sd_chain`.
    """
    return _correct_chain("bv", draft_ids, draft_probs, target_probs, uniforms)


for _method, _fn in (("sd", correct_sd), ("bv", correct_bv), ("mdbv", correct_mdbv)):

    def _law(drafts: Any, draft_probs: Any, target_probs: Any, _m: str = _method) -> Law:
        return _correct_law(_m, drafts, draft_probs, target_probs)

    tag_verifier(_fn, "ok", "generic", _method, _law)
tag_verifier(correct_sd_chain, "ok", "chain", "sd")
tag_verifier(correct_bv_chain, "ok", "chain", "bv")
