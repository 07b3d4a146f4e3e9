"""Token-level speculative decoding (SD) on the first draft."""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import DraftTuple, Verifier, VerifyInput, residual_or_fallback
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.structure import draft_probability


class SpeculativeDecodingVerifier(Verifier):
    r"""Token-level speculative sampling of the first draft (drafts 2..K are ignored).

    For t = 1..L accept :math:`x_t` with probability
    :math:`\min\{1, p(x_t|x^{t-1}) / q(x_t|x^{t-1})\}`; at the first rejection emit
    :math:`Z \sim \mathrm{normalize}(\max\{p(.|x^{t-1}) - q(.|x^{t-1}), 0\})`; if all L are
    accepted emit the bonus :math:`Z \sim p(.|x^L)`.

    .. math::
        E[\tau] = \sum_{i\le L}\sum_{x^i}\prod_{t\le i}\min\{p(x_t|x^{t-1}), q(x_t|x^{t-1})\}

    References
    ----------
    Leviathan et al. 2023, "Fast inference from transformers via speculative decoding",
    arXiv 2211.17192, Algorithm 1; Chen et al. 2023, arXiv 2302.01318, Algorithm 2;
    THEORY.md section 3.
    """

    name = "sd"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def law_key(self, drafts: DraftTuple) -> tuple[int, ...]:
        """Only the first draft matters."""
        return drafts[0]

    def selected_draft_probability(self, batch: VerifyInput) -> Scalar:
        """P(first draft = x) = q(x), for ``batch`` = K copies of x (the ``selected_draft`` shape)."""
        return draft_probability(batch, 0)

    def run(self, batch: VerifyInput, prep: Any, chooser: Chooser) -> Emission:
        """Accept token by token until the first rejection."""
        x = batch.draft(0)
        p_rows, q_rows = batch.target_probs[0], batch.draft_probs[0]
        one = batch.one
        for t in range(batch.L):
            accept = min(one, p_rows[t, x[t]] / q_rows[t, x[t]])
            if not chooser.bernoulli(accept):
                weights = np.maximum(p_rows[t] - q_rows[t], 0)
                weights = residual_or_fallback(weights, p_rows[t], batch.exact, chooser.diagnostics, ("sd_residual", t))
                return Emission(x[:t], weights)
        return Emission(x, p_rows[batch.L])
