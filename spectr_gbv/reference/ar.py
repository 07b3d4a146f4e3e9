"""Plain autoregressive decoding: ignore the drafts, emit one token from the target."""

from __future__ import annotations

from typing import Any

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import DraftTuple, Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.structure import draft_probability


class AutoregressiveVerifier(Verifier):
    """Autoregressive baseline: ``O = (Z,)`` with ``Z ~ p(. | empty prefix)``; tau = 0.

    Lossless trivially; its law does not depend on the drafts at all.

    References
    ----------
    THEORY.md sections 2 and 6 (AR).
    """

    name = "ar"
    lossless, structure, citation = class_facts(name)
    symmetric = True

    def law_key(self, drafts: DraftTuple) -> tuple[()]:
        """One key for every draft tuple: the law never reads the drafts."""
        return ()

    def selected_draft_probability(self, batch: VerifyInput) -> Scalar:
        """q(x), for ``batch`` = K copies of x: the law reads no draft (the ``selected_draft`` shape)."""
        return draft_probability(batch, 0)

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Emit ``Z ~ target_probs[0, 0]``."""
        return Emission((), batch.target_probs[0, 0])
