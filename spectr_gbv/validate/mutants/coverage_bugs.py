r"""Planted bugs that hide where a small battery does not look: many drafts, large vocabularies, ties.

Each mutant is lossless on part of the input space and lossy outside it, so a harness that
only samples small instances passes it:

============================  =====================================================  ===================
mutant                        lossless exactly when                                  diagnosis
============================  =====================================================  ===================
``rrs_two_residual_slots``    K <= 2 (at most two sibling rejections at a node)      ``wrong_residual``
``rrs_lagged_target``         K <= 3 (at most three sibling trials at a node)        ``not_lossless``
``tiled_cdf_drops_carry``     V <= :data:`TILE_WIDTH` + 1 = 5                        ``wrong_residual``
``multipath_tie_mismatch``    no drafted children tie in ``min(1, p/q)``, or K = 1   ``not_lossless``
``crashes_on_token_zero``     never samples id 0 (raises ``KeyError`` when it does)  ``raises``
``crashes_on_zero_residual``  no rejection meets an all-zero residual (p <= q)       ``raises``
============================  =====================================================  ===================

Interface: the generic one of :mod:`spectr_gbv.validate.mutants`. The first four run a
:class:`~spectr_gbv.reference.Verifier` subclass written against the reference layer's
chooser, so ``outcome_law`` is the exact law of their sampler.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.reference.base import VerifyInput, normalize, residual_or_fallback, validate_inputs
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.gbv_multipath import MultiPathGreedyVerifier, _Prepared, select_path, skewed_rows, token_ranks
from spectr_gbv.reference.kernels import block_weights
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.validate.mutants._inputs import Law, _check_rng, _generic_arrays, _tag
from spectr_gbv.validate.mutants.correct import correct_sd

#: Residual updates kept by ``rrs_two_residual_slots`` (lossy from K = RESIDUAL_SLOTS + 1).
RESIDUAL_SLOTS = 2
#: Target write-backs kept by ``rrs_lagged_target`` (lossy from K = LAGGED_WRITE_BACKS + 2).
LAGGED_WRITE_BACKS = 2
#: Entries per tile of the tiled cumulative sum of ``tiled_cdf_drops_carry`` (lossy from V = TILE_WIDTH + 2).
TILE_WIDTH = 4


# ============================================================================ RRS node variants
def capped_rrs_node(
    p: np.ndarray, q: np.ndarray, tokens: list[int], exact: bool, updates: int, lag_target: bool
) -> tuple[list[Any], np.ndarray]:
    r"""Recursive rejection sampling at a node with a bounded number of residual updates.

    As :func:`spectr_gbv.reference.rrs.rrs_node` (trial i accepts with
    :math:`\min\{1, R(x_i)/q(x_i)\}`, :math:`R \leftarrow \mathrm{normalize}(\max\{R - q, 0\})`
    after a rejection), except that R is updated at the first ``updates`` rejections only.

    * ``lag_target=False`` (a residual buffer of ``updates`` slots): later trials test against
      the last stored residual and, after more than ``updates`` rejections, the correction is
      drawn from it, :math:`R_{updates}` instead of :math:`R_{k}`. Trials are right up to
      trial ``updates + 1``; only the correction after ``updates + 1`` or more rejections is
      wrong, so the bug needs K >= ``updates + 1``.
    * ``lag_target=True`` (the target row written back ``updates`` times): later trials test
      against the stale target, but the correction is always computed afresh from the target
      the last trial used, :math:`\mathrm{normalize}(\max\{R_{stale} - q, 0\})`. Trial
      ``updates + 2`` is the first wrong one, so the bug needs K >= ``updates + 2``.

    Parameters
    ----------
    p, q : ndarray, shape (n,)
        Target and draft laws at the node.
    tokens : list of int
        The children tried, in draft order.
    exact : bool
    updates : int
        Residual updates kept (>= 0).
    lag_target : bool
        Which of the two bugs.

    Returns
    -------
    accept : list of scalars, length m <= len(tokens)
        Acceptance probability of each trial (trials after a sure acceptance are dropped).
    final : ndarray, shape (n,)
        The law the correction is drawn from when all m trials reject.
    """
    one: Any = Fraction(1) if exact else 1.0
    target = p
    accept: list[Any] = []
    final = p
    for i, x in enumerate(tokens):
        a = min(one, target[x] / q[x])
        nxt = np.maximum(target - q, 0)
        if not np.any(nxt > 0):  # R = q: this trial accepts surely
            accept.append(one)
            break
        accept.append(a)
        fresh = normalize(nxt, exact)
        if i < updates:
            target = fresh
            final = fresh
        else:
            final = fresh if lag_target else target
    return accept, final


class _CappedRRS(RecursiveRejectionVerifier):
    """RRS on the draft tree with :func:`capped_rrs_node` at every node."""

    lossless = False

    def __init__(self, name: str, updates: int, lag_target: bool) -> None:
        super().__init__()
        self.name = name  # type: ignore[misc]
        self.updates, self.lag_target = updates, lag_target

    def node_step(
        self, p: np.ndarray, q: np.ndarray, tokens: list[int], prefix: tuple[int, ...], exact: bool, chooser: Chooser
    ) -> tuple[int | None, np.ndarray | None]:
        """The reference RRS walk's node, with the capped node rule."""
        accept, final = capped_rrs_node(p, q, tokens, exact, self.updates, self.lag_target)
        first = chooser.first_success(accept)
        return (first, None) if first is not None else (None, final)


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


# ============================================================================ multipath tie mismatch
def skewed_rows_reversed_ties(batch: VerifyInput, k: int) -> list[np.ndarray]:
    r""":func:`~spectr_gbv.reference.gbv_multipath.skewed_rows` with ties among equal ratios reversed.

    The same formula, :math:`q_{skew}(v|u) = ((A+y+z)^K - (A+y)^K) / ((A+x)^K - A^K)`, with
    the node ranks ordering tied tokens by *descending* id, while
    :func:`~spectr_gbv.reference.gbv_multipath.select_path` orders them ascending. The rows
    are then the law of a different selection rule than the one applied: a draft law that is
    not the law of the selected path. Identical to the reference when no two tokens with
    q > 0 tie at a node on the path (or K = 1, where :math:`q_{skew} = q`).

    Returns
    -------
    list of L arrays, shape (n,)
    """
    return skewed_rows(batch, k, ranks=functools.partial(token_ranks, reverse_ties=True))


class _TieMismatchMultipath(MultiPathGreedyVerifier):
    """Multi-path greedy BV whose skewed draft law breaks ratio ties the other way."""

    name = "mutant_multipath_tie_mismatch"
    lossless = False

    def prepare(self, batch: VerifyInput) -> _Prepared:
        """Path by ascending-id ties, skewed rows by descending-id ties."""
        k = select_path(batch)
        rows = skewed_rows_reversed_ties(batch, k)
        weights = block_weights(batch.draft(k), batch.target_probs[k, : batch.L], rows, batch.exact)
        return _Prepared(k, rows, weights)


_TWO_SLOTS = _CappedRRS("mutant_rrs_two_residual_slots", RESIDUAL_SLOTS, lag_target=False)
_LAGGED = _CappedRRS("mutant_rrs_lagged_target", LAGGED_WRITE_BACKS, lag_target=True)
_TILED = _TiledSD()
_TIES = _TieMismatchMultipath()


#: Validated float64 inputs kept for reuse (a harness calls a verifier many times on few inputs).
_CACHE_SIZE = 4096
_VALIDATED: dict[tuple[Any, ...], VerifyInput] = {}


def _validated(d: np.ndarray, q: np.ndarray, p: np.ndarray) -> VerifyInput:
    """:func:`~spectr_gbv.reference.validate_inputs`, memoised on the bytes of float64 inputs."""
    if q.dtype != np.float64 or p.dtype != np.float64:
        return validate_inputs(d, q, p)
    key = (d.shape, q.shape, d.tobytes(), q.tobytes(), p.tobytes())
    hit = _VALIDATED.get(key)
    if hit is None:
        if len(_VALIDATED) >= _CACHE_SIZE:
            _VALIDATED.clear()
        hit = _VALIDATED[key] = validate_inputs(d, q, p)
    return hit


def _sample(verifier: Any, draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    rng = _check_rng(rng)
    batch = _validated(*_generic_arrays(draft_tokens, draft_probs, target_probs))
    return [int(v) for v in verifier.sample_checked(batch, rng)]


# ============================================================================ generic mutants
def rrs_two_residual_slots(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    r"""Tree RRS with a residual buffer of two slots: lossless for K <= 2, lossy from K = 3.

    SpecInfer's recursive rejection sampling (:class:`~spectr_gbv.reference.rrs.RecursiveRejectionVerifier`)
    keeps one residual per sibling rejection at a node, :math:`R_{i+1} =
    \mathrm{normalize}(\max\{R_i - q, 0\})`. This kernel stores :data:`RESIDUAL_SLOTS` = 2
    of them (sized for the K = 2 trees it was tested on): after the third and later
    rejections it does not update R, so the correction after k >= 3 rejections is drawn from
    :math:`R_2` instead of :math:`R_k` (:func:`capped_rrs_node`, ``lag_target=False``). The
    acceptance probabilities are right, so the accepted-length law is RRS's and only the
    emitted correction is wrong. With K <= 2 no node sees a third rejection: exactly
    lossless.

    Bug class: a fixed-size per-node buffer sized for the tree shapes it was tested on (a
    planted bug of this project, not a cited public report).

    Parameters
    ----------
    draft_tokens : array-like, int64 [K, L]
        K drafts; drafts with a common prefix share the tree node.
    draft_probs : array-like, float [K, L, V]
    target_probs : array-like, float [K, L+1, V]
    rng : numpy.random.Generator

    Returns
    -------
    list of int
        Accepted path plus one token.

    Raises
    ------
    ValueError
        Bad shapes or values (the reference input checks), or ``rng`` not a Generator.

    References
    ----------
    Miao et al. 2024 (SpecInfer, arXiv 2305.09781), multi-step speculative sampling.

    Attributes
    ----------
    bug = "wrong_residual"; outcome_law: exact law of this sampler.
    """
    return _sample(_TWO_SLOTS, draft_tokens, draft_probs, target_probs, rng)


def rrs_lagged_target(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    r"""Tree RRS whose acceptance target is written back twice only: lossless for K <= 3, lossy from K = 4.

    As :func:`rrs_two_residual_slots`, but the kernel keeps the acceptance target in a row
    that is written back for the first :data:`LAGGED_WRITE_BACKS` = 2 rejections only, while
    the correction is always computed afresh from the row the last trial used
    (:func:`capped_rrs_node`, ``lag_target=True``). Trials 1-3 and the correction after three
    rejections are right; trial 4 tests against :math:`R_2` instead of :math:`R_3`, so the
    acceptance rule itself is wrong from K = 4 on.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`rrs_two_residual_slots`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`rrs_two_residual_slots`.

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact law of this sampler.
    """
    return _sample(_LAGGED, draft_tokens, draft_probs, target_probs, rng)


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
        As :func:`rrs_two_residual_slots` (draft 0 is verified).

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`rrs_two_residual_slots`.

    References
    ----------
    Leviathan et al. 2023 (arXiv 2211.17192), Algorithm 1 (the algorithm); Harris, Sengupta
    & Owens, GPU Gems 3 ch. 39 (block scans and their carries).

    Attributes
    ----------
    bug = "wrong_residual"; outcome_law: exact law of this sampler.
    """
    return _sample(_TILED, draft_tokens, draft_probs, target_probs, rng)


def multipath_tie_mismatch(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator
) -> list[int]:
    r"""Multi-path greedy BV whose path choice and skewed draft law break ratio ties differently.

    :class:`~spectr_gbv.reference.gbv_multipath.MultiPathGreedyVerifier` ranks the children of
    a node by :math:`\min\{1, p/q\}` and needs one ranking for two things: selecting the
    lexicographically best draft and computing that draft's law :math:`q_{skew}`, the draft
    law block verification runs against. Here the selection breaks ties by ascending token id
    and :math:`q_{skew}` by descending id (:func:`skewed_rows_reversed_ties`): two copies of
    the ranking code that disagree only on ties. Lossless exactly when no two children with
    q > 0 tie; ties are common in practice, since every child with p >= q has ratio 1
    (and p = q rows tie everywhere). K = 1 is BV, always lossless.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, rng
        As :func:`rrs_two_residual_slots`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`rrs_two_residual_slots`.

    References
    ----------
    Thomas & Pal 2026, arXiv 2602.16961 (multi-path greedy block verification).

    Attributes
    ----------
    bug = "not_lossless"; outcome_law: exact law of this sampler.
    """
    return _sample(_TIES, draft_tokens, draft_probs, target_probs, rng)


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
        As :func:`rrs_two_residual_slots` (draft 0 is verified).

    Returns
    -------
    list of int

    Raises
    ------
    KeyError
        When the sampled token is 0.
    ValueError
        As :func:`~spectr_gbv.validate.mutants.correct_sd`.

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
        As :func:`rrs_two_residual_slots` (draft 0 is verified).

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


# ---------------------------------------------------------------------------- exact laws
def _law_of(verifier: Any) -> Any:
    def law(drafts: Any, draft_probs: Any, target_probs: Any) -> Law:
        return verifier.outcome_law(*_generic_arrays(drafts, draft_probs, target_probs))

    return law


_tag(rrs_two_residual_slots, "wrong_residual", "generic", "rrs", _law_of(_TWO_SLOTS))
_tag(rrs_lagged_target, "not_lossless", "generic", "rrs", _law_of(_LAGGED))
_tag(tiled_cdf_drops_carry, "wrong_residual", "generic", "sd", _law_of(_TILED))
_tag(multipath_tie_mismatch, "not_lossless", "generic", "gbv_multipath", _law_of(_TIES))
_tag(crashes_on_token_zero, "raises", "generic", "sd")
_tag(crashes_on_zero_residual, "raises", "generic", "sd")

__all__ = [
    "LAGGED_WRITE_BACKS",
    "RESIDUAL_SLOTS",
    "TILE_WIDTH",
    "capped_rrs_node",
    "crashes_on_token_zero",
    "crashes_on_zero_residual",
    "multipath_tie_mismatch",
    "rrs_lagged_target",
    "rrs_two_residual_slots",
    "skewed_rows_reversed_ties",
    "tiled_cdf_drops_carry",
    "tiled_scan_law",
]
