"""MDBV: this project's stateless multi-draft block verification (lossless SpecTr-GBV reading)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.kernels import block_verify
from spectr_gbv.reference.structure import scan_drafts

#: A block kernel: ``(chooser, tokens, target_rows, draft_rows, bonus_row, exact) -> (tau, law)``.
BlockKernel = Callable[
    [Chooser, Sequence[int], Sequence[np.ndarray], Sequence[np.ndarray], np.ndarray, bool], tuple[int, np.ndarray]
]


def continue_prefix(
    kernel: BlockKernel, batch: VerifyInput, k: int, prefix: tuple[int, ...], law: np.ndarray, chooser: Chooser
) -> tuple[tuple[int, ...], np.ndarray]:
    """One ``draft_scan`` step: run a block kernel on draft ``k``'s tokens after ``prefix``.

    The kernel's first target row is the current law ``law``, the later ones p along draft k;
    its draft rows are q along draft k (MDBV with ``block_verify``; ``hsd_multidraft`` with
    HSD's kernel).

    Parameters
    ----------
    kernel : callable
        ``kernel(chooser, tokens, target_rows, draft_rows, bonus_row, exact) -> (tau, law)``,
        e.g. :func:`~spectr_gbv.reference.kernels.block_verify`.
    batch, k, prefix, law, chooser
        As :meth:`MultiDraftBlockVerifier.scan_step`.

    Returns
    -------
    prefix : tuple of int
        ``prefix`` extended by the kernel's accepted tokens of draft k.
    law : ndarray, shape (n,)
        The kernel's law at the stop, or ``p(. | x^L)`` when it accepted to L.
    """
    L = batch.L
    x = batch.draft(k)
    start = len(prefix)
    target_rows = [law] + [batch.target_probs[k, t] for t in range(start + 1, L)]
    draft_rows = [batch.draft_probs[k, t] for t in range(start, L)]
    tau, law = kernel(chooser, x[start:], target_rows, draft_rows, batch.target_probs[k, L], batch.exact)
    return x[: start + tau], law


class MultiDraftBlockVerifier(Verifier):
    r"""Multi-draft block verification: BV draft after draft, each continuing the last.

    Keep an accepted prefix P (empty) and the law R of the target token at position :math:`|P| + 1`
    (:math:`p(.|\emptyset)`). For k = 1..K in order: skip draft k unless it starts with P;
    else run block verification (Sun et al. 2024, Algorithm 2) on its remaining tokens
    :math:`x_{|P|+1..L}` against the target whose first conditional is R and later ones p;
    extend P by the accepted tokens; set R to BV's residual at the stop (:math:`p(.|P)` if
    accepted to L; scanning then ends). Finally :math:`Z \sim R`, output P + Z.

    Lossless (each BV run is lossless towards its current target law given the drafts that
    reach it); K = 1 is BV, L = 1 is recursive rejection sampling. Order-dependent
    (``symmetric = False``).

    References
    ----------
    Lin et al. 2026, SpecTr-GBV, arXiv 2604.25925, Steps 1-3 (lossless reading by this
    project); Sun et al. 2024, arXiv 2403.10444, Algorithm 2; THEORY.md section 6.
    Exact values on THEORY.md section 7: E[tau] = 61/36 (K = 2), 577/324 (K = 3).
    """

    name = "mdbv"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def scan_step(
        self, batch: VerifyInput, k: int, prefix: tuple[int, ...], law: np.ndarray, chooser: Chooser
    ) -> tuple[tuple[int, ...], np.ndarray]:
        """Block verification of draft ``k`` (which starts with ``prefix``) continuing ``prefix``.

        Parameters
        ----------
        batch : VerifyInput
        k : int
            The draft read; ``batch.draft(k)`` starts with ``prefix`` and ``len(prefix) < L``.
        prefix : tuple of int
            Accepted prefix P so far.
        law : ndarray, shape (n,)
            Law R of the target token at position ``len(prefix) + 1``.
        chooser : Chooser

        Returns
        -------
        prefix : tuple of int
            P extended by BV's accepted tokens of draft k.
        law : ndarray, shape (n,)
            BV's residual at the stop, or the bonus row ``p(. | x^L)`` when it accepted to L.
        """
        return continue_prefix(block_verify, batch, k, prefix, law, chooser)

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Scan the drafts in order, extending the accepted prefix with BV."""
        return scan_drafts(batch, self.scan_step, chooser)
