r"""Variants of reference verifiers: the same algorithm under another open convention.

A published algorithm often leaves a convention open that changes the law of the output
*given the drafts* without changing losslessness: the order in which SpecInfer tries the
children of a node, the draft that single-draft SD or BV verifies when K drafts are given,
how multi-path greedy BV ranks tokens of equal ratio. The registered verifiers fix one
convention each (draft index order, the first draft, ties by larger token id); the classes
here implement the others, with an exact :meth:`~spectr_gbv.reference.Verifier.outcome_law`
like every verifier of this layer.

They are **not registered**: method names are a public contract
(:data:`~spectr_gbv.reference.registry.STABLE_METHOD_NAMES`). The validation harness names
them ``"NAME:VARIANT"`` (:mod:`spectr_gbv.validate.reference_variants`).

* :class:`RandomOrderVerifier` (``rrs``, ``spectr``, ``mdbv``; ``sd``, ``bv`` as
  ``random_draft``): draw a uniformly random permutation :math:`\sigma` of the K drafts,
  then run the registered verifier on :math:`X^{(\sigma(1))}, \dots, X^{(\sigma(K))}`:

  .. math::
      P_{\mathrm{var}}(O = o \mid X) = \frac{1}{K!}\sum_{\sigma \in S_K} P(O = o \mid X_\sigma)

  Lossless when the base is: the permutation is independent of i.i.d. drafts, so each term
  is the base kernel on i.i.d. drafts, and a mixture of lossless kernels is lossless. The
  law depends only on the multiset of drafts (``symmetric = True``).
* :class:`LowIdTiesMultiPathVerifier` (``gbv_multipath``): among tokens of equal ratio
  :math:`\min\{1, p/q\}` the *smaller* token id ranks higher. Implemented as the registered
  verifier on the inputs relabelled :math:`v \mapsto n - 1 - v`, relabelled back; lossless
  for the same reason as the registered one (any fixed total order per node works).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.bv import BlockVerifier
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.gbv_multipath import MultiPathGreedyVerifier
from spectr_gbv.reference.mdbv import MultiDraftBlockVerifier
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.reference.spectr import SpecTrVerifier


def permuted(batch: VerifyInput, order: tuple[int, ...]) -> VerifyInput:
    """``batch`` with its drafts (and their rows) in the order ``order`` (a permutation of 0..K-1)."""
    idx = list(order)
    return VerifyInput(batch.drafts[idx], batch.draft_probs[idx], batch.target_probs[idx], batch.exact)


def distinct_orders(batch: VerifyInput) -> tuple[list[tuple[int, ...]], list[int]]:
    """One permutation per distinct reordered draft tuple, and how many of the K! permutations give it.

    Returns
    -------
    orders : list of tuple of int
        Lexicographically first permutation of each class, in first-seen order.
    counts : list of int
        Class sizes; they sum to K!.
    """
    seen: dict[tuple[tuple[int, ...], ...], int] = {}
    orders: list[tuple[int, ...]] = []
    counts: list[int] = []
    rows = [batch.draft(k) for k in range(batch.K)]
    for order in itertools.permutations(range(batch.K)):
        key = tuple(rows[k] for k in order)
        pos = seen.get(key)
        if pos is None:
            seen[key] = len(orders)
            orders.append(order)
            counts.append(1)
        else:
            counts[pos] += 1
    return orders, counts


class RandomOrderVerifier(Verifier):
    r"""A registered verifier run on a uniformly random permutation of the drafts.

    Subclasses set ``base`` (the registered class) and ``variant``. The permutation is one
    categorical decision over the distinct reordered draft tuples, weighted by how many of the
    K! permutations give each (so identical drafts cost one branch), then the base verifier's
    ``prepare`` and ``run`` on the reordered inputs.

    References
    ----------
    Miao et al. 2024 (SpecInfer, arXiv 2305.09781): the children of a node are tried in a
    uniformly random order; the same convention for the other order-dependent verifiers.
    """

    base: ClassVar[type[Verifier]]
    variant: ClassVar[str]
    symmetric = True

    def __init__(self) -> None:
        super().__init__()
        self._base = self.base()

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Choose the order, then run the base verifier on the reordered drafts."""
        orders, counts = distinct_orders(batch)
        i = chooser.categorical([Fraction(c) if batch.exact else float(c) for c in counts]) if len(orders) > 1 else 0
        b = permuted(batch, orders[i])
        return self._base.run(b, self._base.prepare(b), chooser)


class RandomOrderRRS(RandomOrderVerifier):
    """``rrs:random_order``: SpecInfer's uniformly random order of the drafts (children)."""

    base = RecursiveRejectionVerifier
    variant = "random_order"
    name = "rrs:random_order"
    lossless = True
    citation = "Miao et al. 2024 (SpecInfer, arXiv 2305.09781), children tried in uniformly random order"


class RandomOrderSpecTr(RandomOrderVerifier):
    """``spectr:random_order``: K-SEQ trying the drafts in a uniformly random order."""

    base = SpecTrVerifier
    variant = "random_order"
    name = "spectr:random_order"
    lossless = True
    citation = "Sun et al. 2023 (arXiv 2310.15141), K-SEQ with the drafts in uniformly random order"


class RandomOrderMDBV(RandomOrderVerifier):
    """``mdbv:random_order``: MDBV scanning the drafts in a uniformly random order."""

    base = MultiDraftBlockVerifier
    variant = "random_order"
    name = "mdbv:random_order"
    lossless = True
    citation = "mdbv (THEORY.md section 6) with the drafts scanned in uniformly random order"


class RandomDraftSD(RandomOrderVerifier):
    """``sd:random_draft``: token-level SD on a uniformly random one of the K drafts."""

    base = SpeculativeDecodingVerifier
    variant = "random_draft"
    name = "sd:random_draft"
    lossless = True
    citation = "Leviathan et al. 2023 (arXiv 2211.17192), Algorithm 1, on a uniformly random draft"


class RandomDraftBV(RandomOrderVerifier):
    """``bv:random_draft``: block verification of a uniformly random one of the K drafts."""

    base = BlockVerifier
    variant = "random_draft"
    name = "bv:random_draft"
    lossless = True
    citation = "Sun et al. 2024 (arXiv 2403.10444), Algorithm 2, on a uniformly random draft"


def reversed_labels(batch: VerifyInput) -> VerifyInput:
    """``batch`` with every token id ``v`` renamed ``n - 1 - v`` (drafts and the rows' last axis)."""
    n = batch.n
    return VerifyInput(
        (n - 1) - batch.drafts,
        np.ascontiguousarray(batch.draft_probs[..., ::-1]),
        np.ascontiguousarray(batch.target_probs[..., ::-1]),
        batch.exact,
    )


@dataclass(frozen=True)
class _Relabelled:
    batch: VerifyInput
    prep: Any


class LowIdTiesMultiPathVerifier(MultiPathGreedyVerifier):
    r"""``gbv_multipath:tie_low_id``: multi-path greedy BV, ties in the node ranks to the smaller id.

    The registered ``gbv_multipath`` ranks the tokens of a node by
    :math:`(\min\{1, p(v)/q(v)\}, v)` ascending, so among drafted tokens of equal ratio the
    larger id is the selected path's. Here the smaller id wins: the registered algorithm on
    the inputs relabelled :math:`v \mapsto n - 1 - v` (its ranks are then
    :math:`(\min\{1, p/q\}, n - 1 - v)`), with the output relabelled back.
    """

    variant: ClassVar[str] = "tie_low_id"
    name = "gbv_multipath:tie_low_id"
    citation = (
        "Thomas & Pal 2026 (arXiv 2602.16961), multi-path greedy BV, equal ratios ranked by the smaller "
        "token id; Sun et al. 2024 (arXiv 2403.10444), Algorithm 2"
    )

    def prepare(self, batch: VerifyInput) -> _Relabelled:  # type: ignore[override]
        """The registered preparation on the relabelled inputs."""
        rb = reversed_labels(batch)
        return _Relabelled(rb, super().prepare(rb))

    def run(self, batch: VerifyInput, prep: _Relabelled, chooser: Chooser) -> Emission:  # type: ignore[override]
        """The registered run on the relabelled inputs, relabelled back."""
        em = super().run(prep.batch, prep.prep, chooser)
        n = batch.n
        return Emission(tuple(n - 1 - t for t in em.prefix), np.asarray(em.weights)[::-1].copy())


#: Every variant class of this module by its ``"NAME:VARIANT"`` name.
VARIANT_CLASSES: dict[str, type[Verifier]] = {
    cls.name: cls
    for cls in (
        RandomOrderRRS,
        RandomOrderSpecTr,
        RandomOrderMDBV,
        RandomDraftSD,
        RandomDraftBV,
        LowIdTiesMultiPathVerifier,
    )
}

__all__ = [
    "VARIANT_CLASSES",
    "LowIdTiesMultiPathVerifier",
    "RandomDraftBV",
    "RandomDraftSD",
    "RandomOrderMDBV",
    "RandomOrderRRS",
    "RandomOrderSpecTr",
    "RandomOrderVerifier",
    "distinct_orders",
    "permuted",
    "reversed_labels",
]
