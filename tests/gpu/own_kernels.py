"""Users' rules for the tests of the decoder, ``verify``, the bench and the law test (not a test module).

``copy_sd`` is the body of :func:`spectr_gbv.gpu.kernels.sd.verify_sd` behind a user's name, so
with the same generator it emits token for token what ``method="sd"`` emits.
"""

from __future__ import annotations

from spectr_gbv.examples.own_rules import first_draft_sd
from spectr_gbv.gpu.kernels.common import KernelInputs, UniformSource, VerifyOutput
from spectr_gbv.gpu.kernels.sd import verify_sd
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier


def copy_sd(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    """Speculative sampling of draft 0 (a copy of verify_sd), no lossless claim."""
    return verify_sd(inputs, uniforms)


def claimed_sd(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    """Speculative sampling of draft 0, claiming losslessness."""
    return verify_sd(inputs, uniforms)


claimed_sd.lossless = True  # type: ignore[attr-defined]


def lossy_rule(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    """Declared lossy."""
    return verify_sd(inputs, uniforms)


lossy_rule.lossless = False  # type: ignore[attr-defined]


def wrong_output(inputs: KernelInputs, uniforms: UniformSource) -> VerifyOutput:
    """Emits a token outside the vocabulary: the decoder must raise, not emit it."""
    out = verify_sd(inputs, uniforms)
    out.tokens[:, 0] = inputs.V + 3
    out.num_accepted[:] = 0
    return out


def three_args(inputs, uniforms, extra):  # noqa: ANN001, ANN201 - a bad signature on purpose
    """Neither the kernel nor the generic signature."""
    return None


class NotARule:
    """A class that is not a Verifier subclass."""


NOT_CALLABLE = 3


class OwnSD(SpeculativeDecodingVerifier):
    """A user's Verifier subclass (speculative sampling of draft 0 under another name)."""

    name = "own_sd"


def sd_fn(drafts, q, p, rng):  # noqa: ANN001, ANN201 - the generic interface
    """Speculative sampling of draft 0 as a plain generic function."""
    return first_draft_sd(drafts, q, p, rng)
