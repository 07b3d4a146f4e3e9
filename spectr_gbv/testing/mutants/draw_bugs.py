r"""Planted bugs of SD's final categorical draw that hide on small or generic instances.

Each mutant is token-level speculative sampling on draft 0 whose draw of the emitted token (the
correction after a rejection, or the bonus) is wrong on part of the input space only, so a
harness that samples small, dense instances passes it:

============================  =====================================================  ===================
mutant                        lossless exactly when                                  diagnosis
============================  =====================================================  ===================
``tiled_cdf_drops_carry``     V <= :data:`TILE_WIDTH` + 1 = 5                        ``wrong_residual``
``crashes_on_token_zero``     never samples id 0 (raises ``KeyError`` when it does)  ``raises``
``crashes_on_zero_residual``  no rejection meets an all-zero residual (p <= q)       ``raises``
============================  =====================================================  ===================

Interface: the generic one of :mod:`spectr_gbv.testing.mutants`. ``tiled_cdf_drops_carry``
runs a :class:`~spectr_gbv.reference.Verifier` subclass, so its ``outcome_law`` is the exact
law of its sampler; the two crashing ones return SD's law whenever they return. The multi-draft
coverage mutants are in :mod:`spectr_gbv.testing.mutants.coverage_bugs`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.base import VerifyInput, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.testing.mutants.correct import correct_sd
from spectr_gbv.testing.mutants.inputs import law_of, sample_validated, tag_verifier

#: Entries per tile of the tiled cumulative sum of ``tiled_cdf_drops_carry`` (lossy from V = TILE_WIDTH + 2).
TILE_WIDTH = 4


# ============================================================================ tiled inverse CDF
def tiled_scan_law(weights: np.ndarray, tile: int = TILE_WIDTH) -> np.ndarray:
    r"""Law of an inverse-CDF scan whose cumulative sum restarts at every tile (carry dropped).

    The correct scan returns the first i with :math:`s < c_i`, :math:`c_i = \sum_{j \le i} w_j`,
    for :math:`s = u \sum_j w_j`. The buggy one uses :math:`c'_i`, the sum over the entries
    of i's tile up to i only, and falls back to the last positive entry when no
    :math:`c'_i` exceeds s. Since "first i with :math:`s < c'_i`" means
    :math:`s \in [M_{i-1}, c'_i)` with :math:`M_{i-1} = \max_{j<i} c'_j`, token i gets mass
    :math:`\max\{0, c'_i - M_{i-1}\}` and the fallback token the rest. One tile (V <= tile)
    gives back ``weights``, and so do two tiles whose second holds a single entry (its mass
    comes back through the fallback): the law is right for V <= tile + 1.

    Parameters
    ----------
    weights : ndarray, shape (n,), Fractions (object) or float64
        Non-negative, positive sum.
    tile : int
        Entries per tile.

    Returns
    -------
    ndarray, shape (n,)
        Unnormalised law of the buggy scan (same total as ``weights``, same number kind).
    """
    exact = weights.dtype == object
    zero: Any = Fraction(0) if exact else 0.0
    w = [Fraction(v) if exact else float(v) for v in weights]
    out = [zero] * len(w)
    best = zero  # M: the largest partial sum seen so far
    part = zero
    for i, wi in enumerate(w):
        part = wi if i % tile == 0 else part + wi
        if part > best:
            out[i] = part - best
            best = part
    total = sum(w, zero) if exact else math.fsum(w)
    positive = [i for i, wi in enumerate(w) if wi > 0]
    if positive and total > best:
        out[positive[-1]] = out[positive[-1]] + (total - best)
    return np.asarray(out, dtype=weights.dtype)


class _TiledSD(SpeculativeDecodingVerifier):
    """SD whose every categorical draw (correction and bonus) is :func:`tiled_scan_law`'s scan."""

    name = "mutant_tiled_cdf"
    lossless = False

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """SD on draft 0; the final token follows the tiled scan of its weights."""
        x = batch.draft(0)
        p_rows, q_rows = batch.target_probs[0], batch.draft_probs[0]
        for t in range(batch.L):
            if not chooser.bernoulli(min(batch.one, p_rows[t, x[t]] / q_rows[t, x[t]])):
                weights = np.maximum(p_rows[t] - q_rows[t], 0)
                weights = residual_or_fallback(weights, p_rows[t], batch.exact, chooser.diagnostics, ("sd", t))
                return Emission(x[:t], tiled_scan_law(weights))
        return Emission(x, tiled_scan_law(p_rows[batch.L]))


_TILED = _TiledSD()


# ============================================================================ generic mutants
def tiled_cdf_drops_carry(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    r"""SD whose inverse-CDF draws drop the carry between tiles: lossless for V <= 5, lossy from V = 6.

    A GPU sampling kernel computes the cumulative sum of the weights in tiles of
    :data:`TILE_WIDTH` = 4 entries and forgets to add the previous tiles' total to each tile
    (a block scan without its carry), falling back to the last positive entry when the scan
    finds nothing. Every categorical draw (the correction after a rejection and the bonus
    token) then follows :func:`tiled_scan_law`: exact for V <= 5 (one tile, or a second tile
    of one entry, which the fallback picks), mass moved to the last token from V = 6 on. Acceptance is SD's
    (draft 0), so only the emitted token's law is wrong.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`~spectr_gbv.testing.mutants.rrs_two_residual_slots` (draft 0 is verified).

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`~spectr_gbv.testing.mutants.rrs_two_residual_slots`.

    References
    ----------
    Leviathan et al. 2023 (arXiv 2211.17192), Algorithm 1 (the algorithm); Harris, Sengupta
    & Owens, GPU Gems 3 ch. 39 (block scans and their carries).

    Attributes
    ----------
    bug = "wrong_residual"; outcome_law: exact law of this sampler.
    """
    return sample_validated(_TILED, draft_tokens, draft_probs, target_probs, rng)


#: Vocabulary sizes whose id tables were built, id -> id for ids 1..V-1 (id 0 left out, see below).
_ID_TABLES: dict[int, dict[int, int]] = {}


def crashes_on_token_zero(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    """Correct SD that raises ``KeyError`` whenever it samples token id 0 (a valid input).

    The token the verifier samples itself (the correction after a rejection, or the bonus) is
    mapped through an id table built for ids 1..V-1, as if id 0 were a padding id that can
    never be produced; sampling id 0, which has positive probability on most instances,
    raises. A drafted 0 that is accepted passes (it is not looked up). The law of every
    output it does return is SD's, so only the ``raises`` check can see the bug.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`~spectr_gbv.testing.mutants.rrs_two_residual_slots` (draft 0 is verified).

    Returns
    -------
    list of int

    Raises
    ------
    KeyError
        When the sampled token is 0.
    ValueError
        As :func:`~spectr_gbv.testing.mutants.correct_sd`.

    Attributes
    ----------
    bug = "raises".
    """
    out = correct_sd(draft_tokens, draft_probs, target_probs, rng)
    V = int(np.shape(draft_probs)[-1])
    table = _ID_TABLES.setdefault(V, {i: i for i in range(1, V)})
    return out[:-1] + [table[out[-1]]]


def crashes_on_zero_residual(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    """Textbook SD that normalises the residual without a fallback: it raises when the residual is all zero.

    Token-level speculative sampling on draft 0 (accept ``x`` when ``u < p(x)/q(x)``; after a
    rejection draw from ``max(p - q, 0) / sum``; the bonus from the last target row). When a
    rejected row has ``p <= q`` everywhere (p and q agree up to rounding, a valid input: rows
    sum to 1 within 1e-9), the residual sums to 0, the division gives NaN, and
    ``Generator.choice`` raises ``ValueError`` ("probabilities contain NaN"): the public bug of
    samplers that divide by the residual's mass (ECOSYSTEM.md B5). On every other row it is SD,
    so only the degenerate-residual probe sees it.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`~spectr_gbv.testing.mutants.rrs_two_residual_slots` (draft 0 is verified).

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        After a rejection whose residual is all zero.

    Attributes
    ----------
    bug = "raises".
    """
    d, q, p = (np.asarray(a) for a in (draft_tokens, draft_probs, target_probs))
    d0, q0, p0 = d[0], np.asarray(q[0], dtype=np.float64), np.asarray(p[0], dtype=np.float64)
    out: list[int] = []
    for t in range(len(d0)):
        x = int(d0[t])
        if rng.random() * q0[t, x] < p0[t, x]:
            out.append(x)
            continue
        res = np.maximum(p0[t] - q0[t], 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            res = res / res.sum()
        out.append(int(rng.choice(len(res), p=res)))
        return out
    bonus = p0[len(d0)] / p0[len(d0)].sum()
    out.append(int(rng.choice(len(bonus), p=bonus)))
    return out


tag_verifier(tiled_cdf_drops_carry, "wrong_residual", "generic", "sd", law_of(_TILED))
tag_verifier(crashes_on_token_zero, "raises", "generic", "sd")
tag_verifier(crashes_on_zero_residual, "raises", "generic", "sd")

__all__ = [
    "TILE_WIDTH",
    "crashes_on_token_zero",
    "crashes_on_zero_residual",
    "tiled_cdf_drops_carry",
    "tiled_scan_law",
]
