"""Planted bugs of uniforms, ids and degenerate laws (mutants 6, 7, 8, 11), generic and chain.

Written as explicit one-row SD loops over a uniform source (fresh draws from the generic
interface's ``rng``, or the chain interface's supplied uniforms, see
:mod:`spectr_gbv.testing.mutants`), since these bugs live in how uniforms and ids are used.
The chain versions of mutants 1 and 10 are here too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.testing.mutants.acceptance_bugs import always_accept, hardcoded_zero_uniform
from spectr_gbv.testing.mutants.inputs import (
    Uniforms,
    check_rng,
    generic_arrays,
    inverse_cdf,
    ratio,
    residual_token,
    run_chain,
    tag_verifier,
)


def _zero_residual_row(x: np.ndarray, q: np.ndarray, p: np.ndarray, u: Uniforms) -> list[int]:
    """SD with an unguarded residual: ``r / sum(r)`` then a scan that defaults to id V."""
    L, V = len(x), p.shape[-1]
    q, p = np.asarray(q, dtype=np.float64), np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for t in range(L):
            if x[t] >= 0 and u.coin(t) < ratio(p[t, x[t]], q[t, x[t]]):
                continue
            q_row = q[t] if x[t] >= 0 else np.zeros(V)
            r = np.maximum(p[t] - q_row, 0.0)  # NaN propagates
            return [int(v) for v in x[:t]] + [inverse_cdf(r / r.sum(), u.final(t), default=V)]
        return [int(v) for v in x] + [inverse_cdf(p[L] / p[L].sum(), u.final(L), default=V)]


def zero_residual_oov(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Mutant 6: an all-zero (or NaN) residual gives NaN weights and an out-of-vocabulary id V.

    SD whose correction divides ``max(p - q, 0)`` by its sum without a zero guard and scans
    the cumulative sum for the first entry above the uniform, defaulting to id V (one past the
    vocabulary) when the scan finds none. A NaN target row (ECOSYSTEM.md B5's trigger) makes
    the acceptance ratio NaN (reject) and the residual NaN, so id V is emitted; so does any
    all-zero residual (B6) or a NaN bonus row. No value checks are made (shapes only).
    Placeholders (negative ids) are rejected correctly.

    Public bugs: ECOSYSTEM.md B5, vllm-project/vllm #20531 / PR #21876 / PR #45060 / #53029;
    B6, GHSA-8wr5-jm2h-8r4f -> PR #44744.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`always_accept`.

    Returns
    -------
    list of int
        May end with the id V.

    Raises
    ------
    ValueError
        Bad shapes or ``rng``.

    Attributes
    ----------
    bug = "nan_or_out_of_vocab".
    """
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return _zero_residual_row(d[0], q[0], p[0], Uniforms(rng=check_rng(rng)))


def _placeholder_row(x: np.ndarray, q: np.ndarray, p: np.ndarray, u: Uniforms) -> list[int]:
    """SD gathering ``p[x]``, ``q[x]`` without masking negative ids (index -1 wraps to V - 1)."""
    q, p = np.asarray(q, dtype=np.float64), np.asarray(p, dtype=np.float64)
    for t in range(len(x)):
        if u.coin(t) * q[t, x[t]] < p[t, x[t]]:  # FlashInfer's strict test; q = 0, p > 0 accepts
            continue
        return [int(v) for v in x[:t]] + [residual_token(p[t], q[t], u.final(t))]
    return [int(v) for v in x] + [inverse_cdf(p[len(x)], u.final(len(x)))]


def accepts_placeholder(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Mutant 7: placeholder ids (-1) can be accepted and emitted as tokens.

    The probabilities of a drafted id are gathered without masking negative ids (numpy's
    index -1 reads the last vocabulary entry, as the kernels read out of bounds), and the
    acceptance test is FlashInfer's ``u * q < p``: a placeholder whose draft row is all zero
    (the report's layout) is accepted whenever ``p[V-1] > 0``, and -1 is emitted as a token.

    Public bugs: ECOSYSTEM.md B7, vllm-project/vllm PR #46533; B8, flashinfer-ai/flashinfer
    #879 -> PR #3551.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`always_accept`; ``draft_tokens`` may hold -1.

    Returns
    -------
    list of int
        May contain -1 in the accepted prefix.

    Raises
    ------
    ValueError
        Bad shapes or ``rng``.

    Attributes
    ----------
    bug = "accepts_placeholder".
    """
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return _placeholder_row(d[0], q[0], p[0], Uniforms(rng=check_rng(rng)))


def _zero_coin_row(x: np.ndarray, q: np.ndarray, p: np.ndarray, u: Uniforms) -> list[int]:
    """SD accepting when ``coin <= p/q`` (closed interval): a coin of 0 accepts ``p(x) = 0``."""
    q, p = np.asarray(q, dtype=np.float64), np.asarray(p, dtype=np.float64)
    for t in range(len(x)):
        if x[t] >= 0 and u.coin(t) <= ratio(p[t, x[t]], q[t, x[t]]):
            continue
        q_row = q[t] if x[t] >= 0 else np.zeros_like(q[t])
        return [int(v) for v in x[:t]] + [residual_token(p[t], q_row, u.final(t))]
    return [int(v) for v in x] + [inverse_cdf(p[len(x)], u.final(len(x)))]


def zero_coin_accepts(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Mutant 8: a coin of exactly 0 accepts a drafted token of target probability 0.

    The acceptance test is ``u <= p(x)/q(x)`` on the closed interval, so a coin ``u = 0``
    (``torch.rand`` can return 0.0; float32 uniforms do so with probability 2^-24) accepts a
    token with ``p(x) = 0`` (cut by top-k/top-p). Otherwise the law is exactly SD's, so only a
    coin of exactly 0 shows the bug: the harness's zero-coin probe (a generator whose first
    draw is 0.0, or supplied uniforms of 0 in the chain interface).

    Public bug: ECOSYSTEM.md B10, sgl-project/sglang #35771 -> PR #35798.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`always_accept`.

    Returns
    -------
    list of int
        May contain a token of target probability 0.

    Raises
    ------
    ValueError
        Bad shapes or ``rng``.

    Attributes
    ----------
    bug = "zero_probability_token".
    """
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return _zero_coin_row(d[0], q[0], p[0], Uniforms(rng=check_rng(rng)))


def _reused_row(x: np.ndarray, q: np.ndarray, p: np.ndarray, u: Uniforms) -> list[int]:
    """SD whose correction is an inverse-CDF draw with the coin that decided the rejection."""
    q, p = np.asarray(q, dtype=np.float64), np.asarray(p, dtype=np.float64)
    for t in range(len(x)):
        if x[t] < 0:
            return [int(v) for v in x[:t]] + [inverse_cdf(p[t], u.final(t))]
        coin = u.coin(t)
        if coin < ratio(p[t, x[t]], q[t, x[t]]):
            continue
        return [int(v) for v in x[:t]] + [residual_token(p[t], q[t], coin)]
    return [int(v) for v in x] + [inverse_cdf(p[len(x)], u.final(len(x)))]


def reused_uniform(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Mutant 11: the residual is drawn with the same uniform that decided the rejection.

    Given a rejection the coin is conditioned to lie in ``[p(x)/q(x), 1)``, so the inverse-CDF
    draw from the residual is skewed toward high token ids (tokens whose cumulative residual
    mass lies below ``p(x)/q(x)`` are never drawn). With a vocabulary of 2 the residual has one
    token and the bug is invisible; it needs V >= 3. Through this generic interface the
    harness sees it statistically: the corrections follow "inverse CDF of the residual at a
    uniform conditioned to [p(x)/q(x), 1)"; the chain version (:func:`reused_uniform_chain`)
    shows the reuse itself (the correction moves with the deciding uniform).

    Public bug: ECOSYSTEM.md B9, flashinfer-ai/flashinfer PR #424 / PR #425 ("use unique
    uniform samples").

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`always_accept`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        Bad shapes or ``rng``.

    Attributes
    ----------
    bug = "reuses_uniform".
    """
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return _reused_row(d[0], q[0], p[0], Uniforms(rng=check_rng(rng)))


tag_verifier(zero_residual_oov, "nan_or_out_of_vocab", "generic", "sd")
tag_verifier(accepts_placeholder, "accepts_placeholder", "generic", "sd")
tag_verifier(zero_coin_accepts, "zero_probability_token", "generic", "sd")
tag_verifier(reused_uniform, "reuses_uniform", "generic", "sd")


def _always_accept_row(x: np.ndarray, q: np.ndarray, p: np.ndarray, u: Uniforms) -> list[int]:
    return [int(v) for v in x] + [inverse_cdf(np.asarray(p[len(x)], dtype=np.float64), u.final(len(x)))]


def _zero_uniform_row(x: np.ndarray, q: np.ndarray, p: np.ndarray, u: Uniforms) -> list[int]:
    q, p = np.asarray(q, dtype=np.float64), np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore"):
        for t in range(len(x)):
            if x[t] >= 0 and np.log(p[t, x[t]]) > np.log(0.0) + np.log(q[t, x[t]]):
                continue
            q_row = q[t] if x[t] >= 0 else np.zeros_like(q[t])
            return [int(v) for v in x[:t]] + [residual_token(p[t], q_row, u.final(t))]
    return [int(v) for v in x] + [inverse_cdf(p[len(x)], u.final(len(x)))]


_CHAIN_DOC = """

    Chain interface (K = 1), for the harness's supplied-uniform checks.

    Parameters
    ----------
    draft_ids : array-like, int64 [B, L]
        One draft per batch row.
    draft_probs : array-like, float [B, L, V]
        ``q(. | x_{{1:t}})`` per row.
    target_probs : array-like, float [B, L+1, V]
        ``p(. | x_{{1:t}})`` per row, row L is the bonus position.
    uniforms : array-like, float [B, L+1] in [0, 1), optional
        ``uniforms[b, t]`` is the coin of position t; the token after a stop at t uses
        ``uniforms[b, min(t + 1, L)]``{reuse}. None draws fresh uniforms.

    Returns
    -------
    ndarray, int64 [B, L+1]
        Emitted tokens per row, -1 after the first emitted non-draft token.

    Raises
    ------
    ValueError
        Bad shapes or dtypes (naming the argument), uniforms outside [0, 1).

    Attributes
    ----------
    bug = "{bug}"; see :func:`{generic}` for the bug and its public report.
    """


def always_accept_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None) -> np.ndarray:
    """Mutant 1 in the chain interface: every draft token accepted (ECOSYSTEM.md B1, B12)."""
    return run_chain(_always_accept_row, draft_ids, draft_probs, target_probs, uniforms)


def zero_residual_oov_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None) -> np.ndarray:
    """Mutant 6 in the chain interface: zero/NaN residual -> id V (ECOSYSTEM.md B5, B6)."""
    return run_chain(_zero_residual_row, draft_ids, draft_probs, target_probs, uniforms)


def accepts_placeholder_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None) -> np.ndarray:
    """Mutant 7 in the chain interface: -1 placeholders accepted (ECOSYSTEM.md B7, B8)."""
    return run_chain(_placeholder_row, draft_ids, draft_probs, target_probs, uniforms)


def zero_coin_accepts_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None) -> np.ndarray:
    """Mutant 8 in the chain interface: ``u <= p/q``, a supplied coin of 0 accepts p = 0 (ECOSYSTEM.md B10)."""

    return run_chain(_zero_coin_row, draft_ids, draft_probs, target_probs, uniforms)


def hardcoded_zero_uniform_chain(
    draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None
) -> np.ndarray:
    """Mutant 10 in the chain interface: the coin hard-coded to 0 (ECOSYSTEM.md B12)."""
    return run_chain(_zero_uniform_row, draft_ids, draft_probs, target_probs, uniforms)


def reused_uniform_chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any = None) -> np.ndarray:
    """Mutant 11 in the chain interface: the correction reuses the rejecting coin (ECOSYSTEM.md B9)."""
    return run_chain(_reused_row, draft_ids, draft_probs, target_probs, uniforms)


for _fn, _generic, _reuse in (
    (always_accept_chain, always_accept, ""),
    (zero_residual_oov_chain, zero_residual_oov, ""),
    (accepts_placeholder_chain, accepts_placeholder, ""),
    (zero_coin_accepts_chain, zero_coin_accepts, ""),
    (hardcoded_zero_uniform_chain, hardcoded_zero_uniform, ""),
    (reused_uniform_chain, reused_uniform, "; this mutant instead reuses ``uniforms[b, t]``"),
):
    # the numpydoc sections shared by every chain mutant are appended to its one-line summary
    _fn.__doc__ = (_fn.__doc__ or "") + _CHAIN_DOC.format(bug=_generic.bug, generic=_generic.__name__, reuse=_reuse)
    tag_verifier(_fn, _generic.bug, "chain", "sd")
del _fn, _generic, _reuse
