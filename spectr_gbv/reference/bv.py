"""Block verification (BV) on the first draft."""

from __future__ import annotations

from spectr_gbv.core.methods import class_facts
from spectr_gbv.core.numbers import Scalar
from spectr_gbv.reference.base import DraftTuple, Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.kernels import BlockWeights, block_verify, block_weights
from spectr_gbv.reference.structure import draft_probability


class BlockVerifier(Verifier):
    r"""Block verification of the first draft (drafts 2..K are ignored).

    :math:`w_0 = 1`, :math:`w_i = \min\{1, w_{i-1} p(x_i|x^{i-1}) / q(x_i|x^{i-1})\}`,
    :math:`r_i = \sum_v \max\{w_i p(v|x^i) - q(v|x^i), 0\}`,
    :math:`h_i = r_i / (r_i + 1 - w_i)` for i < L (0 when the denominator is 0),
    :math:`h_L = w_L`; with independent uniforms :math:`\eta_i`,
    :math:`\tau = \max\{i : \eta_i \le h_i\}` (0 if none; the scan does not stop at a failure);
    :math:`Z \sim p(.|x^L)` if :math:`\tau = L`, else
    :math:`Z \sim \mathrm{normalize}(\max\{w_\tau p(.|x^\tau) - q(.|x^\tau), 0\})`.
    Its value is :math:`E[\tau] = \sum_i\sum_{x^i} p(x^i)\beta(x^i)`, the optimum over
    stateless lossless single-draft verifiers.

    References
    ----------
    Sun et al. 2024, "Block verification accelerates speculative decoding", arXiv 2403.10444,
    Algorithm 2 and Theorem 2; THEORY.md section 3.
    """

    name = "bv"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def law_key(self, drafts: DraftTuple) -> tuple[int, ...]:
        """Only the first draft matters."""
        return drafts[0]

    def selected_draft_probability(self, batch: VerifyInput) -> Scalar:
        """P(first draft = x) = q(x), for ``batch`` = K copies of x (the ``selected_draft`` shape)."""
        return draft_probability(batch, 0)

    def prepare(self, batch: VerifyInput) -> BlockWeights:
        """Weights ``w_i``, ``h_i`` of the first draft."""
        return block_weights(batch.draft(0), batch.target_probs[0, : batch.L], batch.draft_probs[0], batch.exact)

    def run(self, batch: VerifyInput, prep: BlockWeights, chooser: Chooser) -> Emission:
        """Draw tau, then the residual or bonus token."""
        x = batch.draft(0)
        tau, law = block_verify(
            chooser,
            x,
            batch.target_probs[0, : batch.L],
            batch.draft_probs[0],
            batch.target_probs[0, batch.L],
            batch.exact,
            weights=prep,
        )
        return Emission(x[:tau], law)
