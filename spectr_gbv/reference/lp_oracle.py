"""LP-oracle verifier: the optimal stateless lossless kernel OPT(K) of one instance, as a verifier.

The kernel solves the OPT(K) linear program of :func:`spectr_gbv.theory.lp.optimal_lossless`
for the given instance (float64, HiGHS). For exact instances its conditional laws are
rationalised (each entry snapped to the nearest fraction with denominator <= a stated bound,
each row then renormalised to sum to exactly 1) so the exact simulator can re-check the
validity defect in rationals: the defect it reports is that of the kernel actually used,
0 when the snapping recovered the exact optimum, tiny otherwise (e.g. 1/20485704000000 on an
n = 3, L = 2, K = 3 instance), never hidden. Such a defect is LP rounding, not a lossy rule:
the class states :data:`LP_KERNEL_TOLERANCE` as its ``kernel_tolerance``, and the exact
simulator judges ``lossless`` against it and says so.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.theory.lp import LPResult, kernel_for, optimal_lossless

#: Largest denominator used when snapping LP kernel entries to fractions (exact instances).
SNAP_MAX_DENOMINATOR = 10**6
#: Validity defect the snapped kernel may keep from HiGHS' float64 rounding (primal
#: feasibility tolerance 1e-10, times the rows a defect sums over); the exact simulator reports
#: the exact defect and judges ``lossless`` against this bound.
LP_KERNEL_TOLERANCE = 1e-9


def _snap_row(row: dict[tuple[int, ...], float]) -> dict[tuple[int, ...], Fraction]:
    snapped = {o: Fraction(v).limit_denominator(SNAP_MAX_DENOMINATOR) for o, v in row.items()}
    snapped = {o: v for o, v in snapped.items() if v > 0}
    top = max(snapped, key=lambda o: snapped[o])
    snapped[top] += 1 - sum(snapped.values(), Fraction(0))
    return snapped


class LPOracleVerifier(Verifier):
    """The optimal stateless lossless verifier of one instance (OPT(K) LP kernel).

    Parameters
    ----------
    instance : Instance
        p, q and L; the kernel is valid for this instance only (drafts must come from it).
    num_drafts : int
        K >= 1.

    Raises
    ------
    ValueError
        Bad K or an LP too large (:class:`~spectr_gbv.theory.lp.LPTooLargeError`); at run time,
        drafts of the wrong shape or not in the kernel (draft probability 0 in the instance).

    References
    ----------
    Hu et al. 2025, arXiv 2502.18779 (optimal multi-draft acceptance as a linear program);
    THEORY.md section 5 (OPT(K)) and section 6 (LP oracle).
    """

    name = "lp_oracle"
    lossless, structure, citation = class_facts(name)
    symmetric = True
    kernel_tolerance = LP_KERNEL_TOLERANCE

    def __init__(self, instance: Instance, num_drafts: int) -> None:
        super().__init__()
        self.instance = instance
        self.result: LPResult = optimal_lossless(instance.target, instance.draft, num_drafts, instance.L)
        self._cache: dict[tuple[tuple[int, ...], ...], dict[tuple[int, ...], Any]] = {}

    def prepare(self, batch: VerifyInput) -> dict[tuple[int, ...], Any]:
        """The kernel row for these drafts (snapped to fractions when the batch is exact)."""
        if batch.K != self.result.num_drafts or batch.L != self.result.draft_length:
            raise ValueError(
                f"drafts: lp_oracle was solved for K={self.result.num_drafts}, "
                f"L={self.result.draft_length}; got K={batch.K}, L={batch.L}"
            )
        key = tuple(sorted(batch.draft(k) for k in range(batch.K)))
        if key not in self._cache:
            row = kernel_for(self.result, key)
            self._cache[key] = _snap_row(row) if batch.exact else row
        return self._cache[key]

    def run(self, batch: VerifyInput, prep: dict[tuple[int, ...], Any], chooser: Chooser) -> Emission:
        """Pick an output o of the kernel row, emit its prefix and then its last token."""
        outputs = list(prep)
        o = outputs[chooser.categorical([prep[x] for x in outputs])]
        weights = np.array(
            [batch.one * (v == o[-1]) for v in range(batch.n)], dtype=object if batch.exact else np.float64
        )
        return Emission(o[:-1], weights)
