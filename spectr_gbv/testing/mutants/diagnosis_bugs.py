r"""Planted bugs in *which* tokens are accepted, for the harness's diagnoses to tell apart.

A failed law test is diagnosed by the part of the verifier it points at (the acceptance rule,
the order the drafts are tried in, the token drawn at the stop: docs/validate.md, "Diagnoses").
These mutants are wrong in the acceptance or the order only, their residuals and bonus draws
are right, so a diagnosis that says ``wrong_residual`` for them points at the wrong code:

``rrs_unnormalised_acceptance``
    reference: ``rrs``; bug: trial i > 1 accepts with ``max(R - q, 0)(x) / q(x)``, the residual
    before normalising (too rarely); lossless exactly when: K = 1 (one trial per node)
``rrs_ratio_order``
    reference: ``rrs``; bug: the children are tried in increasing q/p (likeliest first), not draft
    order; lossless exactly when: K = 1, or siblings of equal ratio
``coarse_coin``
    reference: ``sd``; bug: the coin is rounded down to a grid of :data:`COIN_GRID` = 16 steps (a
    4-bit coin; a bfloat16 coin: 1/256 near 1); lossless exactly when: every ratio min(1, p/q) a
    multiple of 1/16

Each carries ``bug = "not_lossless"`` (the tag the harness gives a wrong acceptance rule) and
``locus`` (the part of the verifier the diagnosis must name: ``"acceptance"`` or
``"draft_order"``). Each runs a :class:`~spectr_gbv.reference.Verifier` subclass written against
the reference layer's chooser, so its ``outcome_law`` is the exact law of its sampler.
Interface: the generic one of :mod:`spectr_gbv.testing.mutants`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.base import VerifyInput, normalize, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier, rrs_node
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.testing.mutants.inputs import law_of, sample_validated, tag_verifier

#: Steps of the coarse coin of ``coarse_coin``: u is rounded down to a multiple of 1 / COIN_GRID.
COIN_GRID = 16


# ============================================================================ RRS node variants
class _UnnormalisedAcceptanceRRS(RecursiveRejectionVerifier):
    """RRS whose trials after the first test against the residual before it is normalised."""

    name = "mutant_rrs_unnormalised_acceptance"
    lossless = False

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """Trial i accepts with ``min(1, max(R_{i-1} - q, 0)(x) / q(x))``; the residual chain R is RRS's."""
        one: Any = Fraction(1) if exact else 1.0
        residual, unnormalised, accept = p, p, []
        for x in tokens:
            accept.append(min(one, unnormalised[x] / q[x]))  # the bug: RRS tests against `residual`
            nxt = np.maximum(residual - q, 0)
            if not np.any(nxt > 0):  # R = q: no residual after this trial (RRS accepts it surely)
                break
            residual, unnormalised = normalize(nxt, exact), nxt
        first = chooser.first_success(accept)
        return (first, None) if first is not None else (None, residual)


class _RatioOrderRRS(RecursiveRejectionVerifier):
    """RRS that tries the children of a node in increasing q/p instead of draft order."""

    name = "mutant_rrs_ratio_order"
    lossless = False

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """RRS on the children sorted by decreasing p/q (stable); returns the index in draft order."""
        order = sorted(range(len(tokens)), key=lambda i: -(p[tokens[i]] / q[tokens[i]]))
        accept, residuals = rrs_node(p, q, [tokens[i] for i in order], exact)
        first = chooser.first_success(accept)
        return (order[first], None) if first is not None else (None, residuals[-1])


class _CoarseCoinSD(SpeculativeDecodingVerifier):
    """SD whose coin is rounded down to a multiple of 1 / :data:`COIN_GRID`."""

    name = "mutant_coarse_coin"
    lossless = False

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Accept x with ``P(floor(G u) / G < r) = ceil(G r) / G``, r = min(1, p/q); residual as SD."""
        x, p_rows, q_rows = batch.draft(0), batch.target_probs[0], batch.draft_probs[0]
        for t in range(batch.L):
            r = min(batch.one, p_rows[t, x[t]] / q_rows[t, x[t]])
            steps = math.ceil(r * COIN_GRID)
            prob = Fraction(steps, COIN_GRID) if batch.exact else steps / COIN_GRID
            if not chooser.bernoulli(prob):
                weights = np.maximum(p_rows[t] - q_rows[t], 0)
                weights = residual_or_fallback(weights, p_rows[t], batch.exact, chooser.diagnostics, ("sd", t))
                return Emission(x[:t], weights)
        return Emission(x, p_rows[batch.L])


_UNNORMALISED = _UnnormalisedAcceptanceRRS()
_RATIO_ORDER = _RatioOrderRRS()
_COARSE_COIN = _CoarseCoinSD()


# ============================================================================ generic mutants
def rrs_unnormalised_acceptance(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    """RRS whose second and later trials test against the unnormalised residual (planted acceptance bug).

    Trial i > 1 at a node accepts its token with ``min(1, max(R_{i-1} - q, 0)(x) / q(x))``
    instead of ``min(1, R_i(x) / q(x))`` with ``R_i = normalize(max(R_{i-1} - q, 0))``: the
    same residual before its division by its mass (< 1), so later drafts are accepted too
    rarely. The corrections are drawn from the right residuals.

    Parameters
    ----------
    draft_tokens : array-like, int64 [K, L]
    draft_probs : array-like, float [K, L, V]
    target_probs : array-like, float [K, L+1, V]
    rng : numpy.random.Generator

    Returns
    -------
    list of int
        The accepted prefix of one draft, then one token.

    Raises
    ------
    ValueError
        Malformed arrays, or ``rng`` not a numpy Generator.
    """
    return sample_validated(_UNNORMALISED, draft_tokens, draft_probs, target_probs, rng)


def rrs_ratio_order(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    """RRS that visits the children of a node in increasing q/p (planted ordering bug).

    The drafts are i.i.d., so any order fixed *before* looking at them keeps RRS lossless; an
    order chosen from their ratios (the likeliest to pass first) does not: the first trial is no
    longer a draw from q.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`rrs_unnormalised_acceptance`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`rrs_unnormalised_acceptance`.
    """
    return sample_validated(_RATIO_ORDER, draft_tokens, draft_probs, target_probs, rng)


def coarse_coin(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    """SD whose acceptance coin has :data:`COIN_GRID` steps (planted acceptance bug).

    A coin ``u`` rounded down to a multiple of 1/16 accepts with ``ceil(16 r) / 16 >= r``:
    up to 1/16 too often, and a token of tiny ratio (p = 1e-6) with probability 1/16. A
    ``bfloat16`` coin is the same bug on a grid of 1/256 near 1.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`rrs_unnormalised_acceptance`; only draft 0 is read.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`rrs_unnormalised_acceptance`.
    """
    return sample_validated(_COARSE_COIN, draft_tokens, draft_probs, target_probs, rng)


tag_verifier(rrs_unnormalised_acceptance, "not_lossless", "generic", "rrs", law_of(_UNNORMALISED))
tag_verifier(rrs_ratio_order, "not_lossless", "generic", "rrs", law_of(_RATIO_ORDER))
tag_verifier(coarse_coin, "not_lossless", "generic", "sd", law_of(_COARSE_COIN))
rrs_unnormalised_acceptance.locus = "acceptance"  # type: ignore[attr-defined]
rrs_ratio_order.locus = "draft_order"  # type: ignore[attr-defined]
coarse_coin.locus = "acceptance"  # type: ignore[attr-defined]

__all__ = ["COIN_GRID", "coarse_coin", "rrs_ratio_order", "rrs_unnormalised_acceptance"]
