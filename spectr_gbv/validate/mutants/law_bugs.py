"""Planted bugs of the acceptance rule and of the laws fed to it (mutants 1-5, 9, 10).

Each mutant is SD (:class:`~spectr_gbv.reference.SpeculativeDecodingVerifier`) written against
the reference layer's chooser, or correct SD fed the inputs a buggy serving pipeline produces,
so its ``outcome_law`` is the exact law of its sampler. See :mod:`spectr_gbv.validate.mutants`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.base import VerifyInput, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.validate.mutants._inputs import Law, _check_rng, _float_inputs, _generic_arrays, _tag

#: Mixing weight of the uniform law in the softmax reported for a greedy draft (mutant 3).
GREEDY_REPORT_EPS = Fraction(4, 5)
#: Raw draft mass kept by top-k (mutant 4): the reported q is this times the true law on it.
TOPK_KEPT_MASS = Fraction(1, 2)
#: Request temperature of mutant 5; the target is left at temperature 1 (p -> p^T / Z).
REQUEST_TEMPERATURE = 2


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


_SD = SpeculativeDecodingVerifier()


def _sample(verifier: Any, inputs: tuple[np.ndarray, ...], rng: np.random.Generator) -> list[int]:
    return [int(v) for v in verifier.sample(*inputs, _check_rng(rng))]


# ---------------------------------------------------------------------------- input transforms (3-5)
def _greedy_reported_q(q: np.ndarray) -> np.ndarray:
    r"""Reported law of a greedy draft: :math:`(1-\epsilon) q + \epsilon / V`, same argmax as q."""
    V = q.shape[-1]
    eps = GREEDY_REPORT_EPS if q.dtype == object else float(GREEDY_REPORT_EPS)
    return (1 - eps) * q + eps / V


def _topk_raw_q(q: np.ndarray) -> np.ndarray:
    """Raw law before top-k: kept mass Z on q's support, 1 - Z spread over the tokens top-k cut."""
    exact = q.dtype == object
    z = TOPK_KEPT_MASS if exact else float(TOPK_KEPT_MASS)
    out = q.copy()
    for idx in np.ndindex(*q.shape[:-1]):
        row = q[idx]
        cut = np.asarray([v == 0 for v in row.tolist()])
        if cut.any() and not cut.all():
            out[idx] = np.where(cut, (1 - z) / int(cut.sum()), row * z)
    return out


def _temperature_one_p(p: np.ndarray) -> np.ndarray:
    r"""Target at temperature 1 when the request asked for T: :math:`p^T / \sum p^T`."""
    powered = p**REQUEST_TEMPERATURE
    if p.dtype == object:
        out = np.empty(p.shape, dtype=object)
        for idx in np.ndindex(*p.shape[:-1]):
            out[idx] = powered[idx] / sum(powered[idx].tolist(), Fraction(0))
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        return powered / powered.sum(axis=-1, keepdims=True)


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
    return _sample(_ALWAYS_ACCEPT, _generic_arrays(draft_tokens, draft_probs, target_probs), rng)


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
    inputs = _float_inputs(*_generic_arrays(draft_tokens, draft_probs, target_probs))
    return _sample(_SOFTMAX_RESIDUAL, inputs, rng)


def greedy_draft_softmax_q(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    r"""Mutant 3: q is not the law the draft was drawn from (greedy draft reported with its softmax).

    Serving code drafts by arg-max (the true draft law is one-hot) but passes the draft model's
    softmax as q. Modelled on the harness's inputs: ``draft_probs`` is the law the harness
    drew the drafts from (the true law); this verifier replaces it by the law the buggy
    drafter would report, :math:`\tilde q = (1 - \epsilon) q + \epsilon / V` with
    :data:`GREEDY_REPORT_EPS` = 4/5 (same arg-max as q; for a one-hot q it is a softmax whose
    arg-max is the greedy token), then runs correct SD with :math:`\tilde q`. With V = 2 and a
    one-hot q this is the report's trigger: reported q = [0.6, 0.4], p = [0.5, 0.5], output
    P(0) = 0.833 instead of 0.5.

    Public bug: ECOSYSTEM.md B2, huggingface/transformers #32867 -> PR #33534.

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
    bug = "not_lossless"; outcome_law: exact (reference SD on the transformed inputs).
    """
    d, q, p = _generic_arrays(draft_tokens, draft_probs, target_probs)
    return _sample(_SD, (d, _greedy_reported_q(q), p), rng)


def topk_draft_raw_q(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    r"""Mutant 4: top-k applied to drafting but not to q (raw draft probabilities reported).

    The drafter samples from the top-k-truncated law but reports the raw softmax, whose mass
    on the kept tokens is Z < 1: the ratio p/q is inflated by 1/Z. Modelled on the harness's
    inputs: ``draft_probs`` is the true (truncated) law; where a row has zeros (the tokens
    top-k cut) the reported raw law is :math:`Z q` on the support plus :math:`1 - Z` spread
    evenly over the cut tokens, Z = :data:`TOPK_KEPT_MASS` = 1/2; rows without zeros are
    reported as they are (top-k cut nothing). Correct SD then runs on the reported law, so the
    bug shows only on instances whose draft rows have zeros.

    Public bug: ECOSYSTEM.md B3, huggingface/transformers #47932 (+ PR #47961).

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
    bug = "not_lossless"; outcome_law: exact (reference SD on the transformed inputs).
    """
    d, q, p = _generic_arrays(draft_tokens, draft_probs, target_probs)
    return _sample(_SD, (d, _topk_raw_q(q), p), rng)


def temperature_draft_only(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    r"""Mutant 5: temperature applied to q but not to p (target probabilities at temperature 1).

    The request asks for temperature T = :data:`REQUEST_TEMPERATURE` = 2; the draft side
    applies it, the scorer computes the target at T = 1. Modelled on the harness's inputs:
    ``target_probs`` is the requested law :math:`p_T`; the verifier uses
    :math:`p_1 = p_T^{T} / \sum p_T^{T}` (softmax of the same logits at T = 1) for every row,
    bonus included, and runs correct SD, so the output follows :math:`p_1`.

    Public bug: ECOSYSTEM.md B4, vllm-project/vllm #9834 -> PR #10198.

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
    bug = "not_lossless"; outcome_law: exact (reference SD on the transformed inputs).
    """
    d, q, p = _generic_arrays(draft_tokens, draft_probs, target_probs)
    return _sample(_SD, (d, q, _temperature_one_p(p)), rng)


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
    return _sample(_TARGET_SAMPLE_OR_RATIO, _generic_arrays(draft_tokens, draft_probs, target_probs), rng)


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
    return _sample(_ZERO_UNIFORM, _generic_arrays(draft_tokens, draft_probs, target_probs), rng)


# ---------------------------------------------------------------------------- exact laws of the mutants
def _law_always_accept(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    return _ALWAYS_ACCEPT.outcome_law(*_generic_arrays(drafts, draft_probs, target_probs))


def _law_softmax_residual(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    return _SOFTMAX_RESIDUAL.outcome_law(*_float_inputs(*_generic_arrays(drafts, draft_probs, target_probs)))


def _law_greedy(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    d, q, p = _generic_arrays(drafts, draft_probs, target_probs)
    return _SD.outcome_law(d, _greedy_reported_q(q), p)


def _law_topk(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    d, q, p = _generic_arrays(drafts, draft_probs, target_probs)
    return _SD.outcome_law(d, _topk_raw_q(q), p)


def _law_temperature(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    d, q, p = _generic_arrays(drafts, draft_probs, target_probs)
    return _SD.outcome_law(d, q, _temperature_one_p(p))


def _law_union(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    return _TARGET_SAMPLE_OR_RATIO.outcome_law(*_generic_arrays(drafts, draft_probs, target_probs))


def _law_zero_uniform(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    return _ZERO_UNIFORM.outcome_law(*_generic_arrays(drafts, draft_probs, target_probs))


_ALWAYS_ACCEPT = _AlwaysAcceptSD()
_SOFTMAX_RESIDUAL = _SoftmaxResidualSD()
_TARGET_SAMPLE_OR_RATIO = _TargetSampleOrRatioSD()
_ZERO_UNIFORM = _ZeroUniformSD()

_tag(always_accept, "not_lossless", "generic", "sd", _law_always_accept)
_tag(softmax_residual, "wrong_residual", "generic", "sd", _law_softmax_residual)
_tag(greedy_draft_softmax_q, "not_lossless", "generic", "sd", _law_greedy)
_tag(topk_draft_raw_q, "not_lossless", "generic", "sd", _law_topk)
_tag(temperature_draft_only, "not_lossless", "generic", "sd", _law_temperature)
_tag(target_sample_or_ratio, "not_lossless", "generic", "sd", _law_union)
_tag(hardcoded_zero_uniform, "efficiency_above_optimum", "generic", "sd", _law_zero_uniform)
