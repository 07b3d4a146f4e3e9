"""Planted bugs of the laws fed to the acceptance rule (mutants 3, 4, 5): correct SD on the wrong q or p.

Serving code that drafts greedily but reports the draft softmax (3), applies top-k to drafting
but reports the raw draft law (4), or applies the request temperature to the draft but not to
the target (5) runs a correct acceptance rule on laws that are not the ones the tokens were
drawn from. Each mutant is modelled on the harness's inputs: it transforms ``draft_probs`` or
``target_probs`` the way the buggy pipeline does and runs reference SD
(:class:`~spectr_gbv.reference.SpeculativeDecodingVerifier`) on the result, so its
``outcome_law`` is the exact law of reference SD on the transformed inputs. See
:mod:`spectr_gbv.testing.mutants`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.testing.mutants.inputs import Law, generic_arrays, sample_inputs, tag_verifier

#: Mixing weight of the uniform law in the softmax reported for a greedy draft (mutant 3).
GREEDY_REPORT_EPS = Fraction(4, 5)
#: Raw draft mass kept by top-k (mutant 4): the reported q is this times the true law on it.
TOPK_KEPT_MASS = Fraction(1, 2)
#: Request temperature of mutant 5; the target is left at temperature 1 (p -> p^T / Z).
REQUEST_TEMPERATURE = 2


_SD = SpeculativeDecodingVerifier()


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
        As :func:`~spectr_gbv.testing.mutants.always_accept`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`~spectr_gbv.testing.mutants.always_accept`.

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact (reference SD on the transformed inputs).
    """
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return sample_inputs(_SD, (d, _greedy_reported_q(q), p), rng)


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
        As :func:`~spectr_gbv.testing.mutants.always_accept`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`~spectr_gbv.testing.mutants.always_accept`.

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact (reference SD on the transformed inputs).
    """
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return sample_inputs(_SD, (d, _topk_raw_q(q), p), rng)


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
        As :func:`~spectr_gbv.testing.mutants.always_accept`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`~spectr_gbv.testing.mutants.always_accept`.

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact (reference SD on the transformed inputs).
    """
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return sample_inputs(_SD, (d, q, _temperature_one_p(p)), rng)


# ---------------------------------------------------------------------------- exact laws of the mutants
def _law_greedy(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    d, q, p = generic_arrays(drafts, draft_probs, target_probs)
    return _SD.outcome_law(d, _greedy_reported_q(q), p)


def _law_topk(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    d, q, p = generic_arrays(drafts, draft_probs, target_probs)
    return _SD.outcome_law(d, _topk_raw_q(q), p)


def _law_temperature(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
    d, q, p = generic_arrays(drafts, draft_probs, target_probs)
    return _SD.outcome_law(d, q, _temperature_one_p(p))


tag_verifier(greedy_draft_softmax_q, "not_lossless", "generic", "sd", _law_greedy)
tag_verifier(topk_draft_raw_q, "not_lossless", "generic", "sd", _law_topk)
tag_verifier(temperature_draft_only, "not_lossless", "generic", "sd", _law_temperature)
