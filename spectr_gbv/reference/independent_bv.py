"""LOSSY on purpose: block verification of each draft independently, keep the longest."""

from __future__ import annotations

from spectr_gbv.core.methods import class_facts
from spectr_gbv.reference.base import Verifier, VerifyInput
from spectr_gbv.reference.choosers import Chooser, Emission
from spectr_gbv.reference.kernels import BlockWeights, block_residual, block_weights


class IndependentBlockVerifier(Verifier):
    r"""Independent BV per draft, longest accepted prefix wins. NOT lossless.

    .. warning::
        Lossy, kept on purpose to exercise the validity checker (THEORY.md section 6 (b)).
        Taking the maximum of K independent acceptance lengths biases the output towards
        prefixes that several drafts share; do not use it to generate text.

    Each draft k runs block verification (Sun et al. 2024, Algorithm 2) against p with its
    own independent uniforms, giving :math:`\tau_k`. The output uses the *first* draft (lowest
    index) achieving :math:`\max_k \tau_k` (tie rule), and that draft's own next-token law:
    the BV residual :math:`\propto \max\{w_\tau p(.|x^\tau) - q(.|x^\tau), 0\}` at its stop,
    or the bonus :math:`p(.|x^L)` if it accepted all L tokens. Only that draft's residual is
    sampled. With K = 1 this is BV (lossless).

    References
    ----------
    Sun et al. 2024, arXiv 2403.10444, Algorithm 2 (per draft); THEORY.md section 6 (b).
    """

    name = "independent_bv"
    lossless, structure, citation = class_facts(name)
    symmetric = False

    def prepare(self, batch: VerifyInput) -> list[BlockWeights]:
        """BV weights of every draft."""
        return [
            block_weights(batch.draft(k), batch.target_probs[k, : batch.L], batch.draft_probs[k], batch.exact)
            for k in range(batch.K)
        ]

    def run(self, batch: VerifyInput, prep: list[BlockWeights], chooser: Chooser) -> Emission:
        """Independent tau per draft; the first draft with the largest tau emits."""
        taus = [chooser.last_success(bw.h) for bw in prep]
        best = max(taus)
        k = taus.index(best)
        x = batch.draft(k)
        if best == batch.L:
            return Emission(x, batch.target_probs[k, batch.L])
        law = block_residual(
            prep[k],
            best,
            batch.target_probs[k, : batch.L],
            batch.draft_probs[k],
            batch.exact,
            chooser,
        )
        return Emission(x[:best], law)
