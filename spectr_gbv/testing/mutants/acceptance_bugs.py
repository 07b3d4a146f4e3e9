"""Planted bugs of SD's accept/correct step itself (mutants 1, 2, 9, 10).

Each mutant is token-level speculative sampling
(:class:`~spectr_gbv.reference.SpeculativeDecodingVerifier`) with one step of the rule
rewritten against the reference layer's chooser: the acceptance test always passes (1), the
correction is a softmax of the residual (2), acceptance is "the target's own sample equals the
draft OR the ratio test" (9), the coin is hard-coded to 0 in a log-space test (10). Since the
sampler is an exact kernel, each mutant's ``outcome_law`` is the exact law of its sampler. The
chain versions of mutants 1 and 10 live in :mod:`spectr_gbv.testing.mutants.uniform_bugs`;
see :mod:`spectr_gbv.testing.mutants` for the interfaces.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.reference.base import VerifyInput, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.testing.mutants.inputs import float_inputs, generic_arrays, law_of, sample_inputs, tag_verifier


# ============================================================================ chooser-based SD mutants
class _AlwaysAcceptSD(SpeculativeDecodingVerifier):
    """SD whose acceptance test always passes (ECOSYSTEM.md B1, B12)."""

    name = "mutant_always_accept"
    lossless = False

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Accept all L tokens, then the bonus from ``p(.|x^L)``."""
        return Emission(batch.draft(0), batch.target_probs[0, batch.L])


class _SoftmaxResidualSD(SpeculativeDecodingVerifier):
    """SD whose correction is ``softmax(max(p - q, 0))`` (ECOSYSTEM.md B1)."""

    name = "mutant_softmax_residual"
    lossless = False

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """SD, except the correction weights are ``exp`` of the residual (never zero)."""
        x, p_rows, q_rows = batch.draft(0), batch.target_probs[0], batch.draft_probs[0]
        for t in range(batch.L):
            if not chooser.bernoulli(min(batch.one, p_rows[t, x[t]] / q_rows[t, x[t]])):
                residual = np.maximum(np.asarray(p_rows[t] - q_rows[t], dtype=np.float64), 0.0)
                return Emission(x[:t], np.exp(residual))
        return Emission(x, p_rows[batch.L])


class _TargetSampleOrRatioSD(SpeculativeDecodingVerifier):
    """SD accepting when the target's own sample equals the draft OR the ratio test passes (B11)."""

    name = "mutant_target_sample_or_ratio"
    lossless = False

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Per position: ``y ~ p``; accept if ``y == x`` else if ``u < p(x)/q(x)``; residual as SD."""
        x, p_rows, q_rows = batch.draft(0), batch.target_probs[0], batch.draft_probs[0]
        for t in range(batch.L):
            if chooser.categorical(p_rows[t]) == x[t]:
                continue
            if not chooser.bernoulli(min(batch.one, p_rows[t, x[t]] / q_rows[t, x[t]])):
                weights = np.maximum(p_rows[t] - q_rows[t], 0)
                weights = residual_or_fallback(weights, p_rows[t], batch.exact, chooser.diagnostics, ("sd", t))
                return Emission(x[:t], weights)
        return Emission(x, p_rows[batch.L])


class _ZeroUniformSD(SpeculativeDecodingVerifier):
    """SD in log space with the coin hard-coded to 0: ``log p > log 0 + log q`` (B12)."""

    name = "mutant_zero_uniform"
    lossless = False

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Accept every token with ``p(x) > 0`` (no coin is drawn); residual as SD."""
        x, p_rows, q_rows = batch.draft(0), batch.target_probs[0], batch.draft_probs[0]
        with np.errstate(divide="ignore"):
            log_u = np.log(np.float64(0.0))
            for t in range(batch.L):
                if np.log(np.float64(p_rows[t, x[t]])) > log_u + np.log(np.float64(q_rows[t, x[t]])):
                    continue
                weights = np.maximum(p_rows[t] - q_rows[t], 0)
                weights = residual_or_fallback(weights, p_rows[t], batch.exact, chooser.diagnostics, ("sd", t))
                return Emission(x[:t], weights)
        return Emission(x, p_rows[batch.L])


# ============================================================================ generic mutants
def always_accept(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Mutant 1: SD whose acceptance test always passes; the output follows the draft law.

    Public bug: ECOSYSTEM.md B1, huggingface/transformers PR #28508 (the first
    ``_speculative_sampling`` accepted every draft token through a faulty ``n_matches``
    test); the same symptom as B12 (acceptance rate 1.0).

    Parameters
    ----------
    draft_tokens : array-like, int64 [K, L]
        Drafted ids; only draft 0 is read.
    draft_probs : array-like, float [K, L, V]
        ``q(. | X^(k)_{1:t})``, the law each drafted token was drawn from (ignored here).
    target_probs : array-like, float [K, L+1, V]
        ``p(. | X^(k)_{1:t})``, row L is the bonus position.
    rng : numpy.random.Generator
        Source of the uniforms.

    Returns
    -------
    list of int
        ``x_1..x_L`` then a bonus token from ``p(. | x^L)``: always L + 1 tokens.

    Raises
    ------
    ValueError
        Bad shapes or values (the reference input checks), or ``rng`` not a Generator.

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact law of this sampler.
    """
    return sample_inputs(_ALWAYS_ACCEPT, generic_arrays(draft_tokens, draft_probs, target_probs), rng)


def softmax_residual(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """Mutant 2: SD drawing the correction from ``softmax(max(p - q, 0))`` instead of normalising it.

    Every token gets correction mass, including tokens whose residual (even whose target
    probability) is 0. Trigger of the report: V = 2, q = [0.9, 0.1], p = [0.1, 0.9], draft 0:
    the residual [0, 0.8] must give token 1, the softmax gives token 0 about 31 % of the time.

    Public bug: ECOSYSTEM.md B1, huggingface/transformers PR #28508.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`always_accept` (draft 0 is verified).

    Returns
    -------
    list of int
        Accepted prefix plus one token.

    Raises
    ------
    ValueError
        As :func:`always_accept`.

    Attributes
    ----------
    bug = "wrong_residual"; outcome_law: exact law of this sampler (float64 values).
    """
    inputs = float_inputs(*generic_arrays(draft_tokens, draft_probs, target_probs))
    return sample_inputs(_SOFTMAX_RESIDUAL, inputs, rng)


def target_sample_or_ratio(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    """Mutant 9: acceptance = "equals the target's own sample" OR the ratio test.

    At each position the target samples ``y ~ p``; the draft token is accepted when ``y == x``
    or ``u < p(x)/q(x)``; on rejection the correction is the SD residual. Acceptance is
    inflated (``1 - (1 - p(x))(1 - min(1, p(x)/q(x)))`` instead of ``min(1, p(x)/q(x))``), so
    draft tokens are over-represented.

    Public bug: ECOSYSTEM.md B11, alibaba/rtp-llm PR #1295.

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
        As :func:`always_accept`.

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact law of this sampler.
    """
    return sample_inputs(_TARGET_SAMPLE_OR_RATIO, generic_arrays(draft_tokens, draft_probs, target_probs), rng)


def hardcoded_zero_uniform(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    """Mutant 10: the acceptance uniform hard-coded to 0 (log-space test ``log p > log u + log q``).

    With ``u = 0`` the right side is ``-inf``: every drafted token of positive target
    probability is accepted, so the acceptance rate is 1 on dense instances, E[tau] = L, above
    the best lossless value OPT(K). A token with ``p(x) = 0`` is still rejected (its
    correction is the SD residual, drawn with a real uniform).

    Public bug: ECOSYSTEM.md B12, vllm-project/vllm-ascend #13730 -> PR #13766 / PR #13470.

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
        As :func:`always_accept`.

    Attributes
    ----------
    bug = "efficiency_above_optimum"; outcome_law: exact law of this sampler.
    """
    return sample_inputs(_ZERO_UNIFORM, generic_arrays(draft_tokens, draft_probs, target_probs), rng)


_ALWAYS_ACCEPT = _AlwaysAcceptSD()
_SOFTMAX_RESIDUAL = _SoftmaxResidualSD()
_TARGET_SAMPLE_OR_RATIO = _TargetSampleOrRatioSD()
_ZERO_UNIFORM = _ZeroUniformSD()


def _law_softmax_residual(drafts: Any, draft_probs: Any, target_probs: Any) -> Any:
    return _SOFTMAX_RESIDUAL.outcome_law(*float_inputs(*generic_arrays(drafts, draft_probs, target_probs)))


tag_verifier(always_accept, "not_lossless", "generic", "sd", law_of(_ALWAYS_ACCEPT))
tag_verifier(softmax_residual, "wrong_residual", "generic", "sd", _law_softmax_residual)
tag_verifier(target_sample_or_ratio, "not_lossless", "generic", "sd", law_of(_TARGET_SAMPLE_OR_RATIO))
tag_verifier(hardcoded_zero_uniform, "efficiency_above_optimum", "generic", "sd", law_of(_ZERO_UNIFORM))
