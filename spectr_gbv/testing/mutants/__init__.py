r"""Planted bugs: mutants of the reference verifiers, each a public bug class, plus correct verifiers.

The conformance harness (:func:`spectr_gbv.validate.validate`) is proven on these functions:
it must flag every mutant with the diagnosis named by the mutant's ``bug`` attribute and pass
every correct verifier. Each mutant reproduces one bug class of ECOSYSTEM.md part B (the
public issue is cited in its docstring) on top of token-level speculative sampling (SD,
:class:`~spectr_gbv.reference.SpeculativeDecodingVerifier`), the algorithm those bug reports
are about. They are also fixtures for a project's own suite: a checker (or a test written with
:func:`spectr_gbv.testing.assert_lossless`) should fail each mutant, with the diagnosis ``bug``
among its failures, and pass each correct verifier.

Interfaces (ECOSYSTEM.md A.0; the harness's contract):

* generic: ``verify(draft_tokens int64[K, L], draft_probs float[K, L, V],
  target_probs float[K, L+1, V], rng: numpy.random.Generator) -> list[int]``, the accepted
  prefix of one draft plus one token (the SD mutants read draft 0, as the reference ``sd``);
* chain: ``verify(draft_ids int64[B, L], draft_probs [B, L, V], target_probs [B, L+1, V],
  uniforms float[B, L+1] or None) -> int64[B, L+1]``, padded with ``-1`` after the first
  emitted non-draft token (K = 1). Uniform layout: ``uniforms[b, t]`` is the acceptance coin
  of position t (t < L); the token drawn after a rejection at t uses ``uniforms[b, t+1]``,
  the bonus token (all L accepted) ``uniforms[b, L]``; ``None`` draws fresh uniforms.

Every function carries ``bug`` (the expected diagnosis tag of the harness's vocabulary,
``"ok"`` for the correct ones), ``interface`` (``"generic"`` or ``"chain"``) and
``reference`` (the stable method name it claims to implement). Mutants whose sampler is an
exact kernel also expose ``outcome_law(drafts, draft_probs, target_probs)`` (the true law of
the buggy sampler, so ``level="exact"`` can catch them); the correct verifiers expose the
reference law. Registries: :data:`MUTANTS`, :data:`CHAIN_MUTANTS`, :data:`CORRECT`,
:data:`CHAIN_CORRECT`, and :data:`COVERAGE_MUTANTS` (bugs that are lossless on part of the
input space: K <= 2, K <= 3, V <= 5, no ratio ties; and crashes on token id 0 and on an all-zero
residual).

Placeholders: a negative draft id is a placeholder (ECOSYSTEM.md B7/B8). The correct
verifiers treat the first one as the end of the draft (immediate rejection: the next token is
drawn from the target row at that position); for K > 1 every draft is cut to the shortest.
Arrays may be numpy arrays, nested sequences or torch tensors (converted on the CPU; torch is
never imported here); float16/bfloat16/float32 rows are renormalised in float64 when their
sum is within 1e-2 / 1e-2 / 1e-4 of 1.

Modules: :mod:`~spectr_gbv.testing.mutants.acceptance_bugs` (mutants 1, 2, 9, 10: SD's
accept/correct step rewritten) and :mod:`~spectr_gbv.testing.mutants.law_bugs` (mutants 3-5:
correct SD fed the wrong laws), each with an exact ``outcome_law``;
:mod:`~spectr_gbv.testing.mutants.uniform_bugs` (mutants 6, 7, 8, 11 and every chain
mutant: uniforms, ids and degenerate residuals);
:mod:`~spectr_gbv.testing.mutants.coverage_bugs` (the multi-draft coverage mutants: many
drafts, ratio ties) and :mod:`~spectr_gbv.testing.mutants.draw_bugs` (the single-draft
coverage mutants: the emitted token's draw); :mod:`~spectr_gbv.testing.mutants.correct`
(the correct verifiers) and :mod:`~spectr_gbv.testing.mutants.inputs` (conversions,
reference-layer calls, uniform sources, inverse-CDF draws).

Examples
--------
>>> import numpy as np
>>> from fractions import Fraction as F
>>> drafts, q, p = np.array([[0]]), np.array([[[F(1), F(0)]]]), np.array([[[F(1, 2), F(1, 2)]] * 2])
>>> greedy_draft_softmax_q.bug, greedy_draft_softmax_q.outcome_law(drafts, q, p)[(1,)]
('not_lossless', Fraction(1, 6))
"""

from __future__ import annotations

from spectr_gbv.testing.mutants.acceptance_bugs import (
    always_accept,
    hardcoded_zero_uniform,
    softmax_residual,
    target_sample_or_ratio,
)
from spectr_gbv.testing.mutants.correct import (
    correct_bv,
    correct_bv_chain,
    correct_mdbv,
    correct_sd,
    correct_sd_chain,
)
from spectr_gbv.testing.mutants.coverage_bugs import multipath_tie_mismatch, rrs_lagged_target, rrs_two_residual_slots
from spectr_gbv.testing.mutants.diagnosis_bugs import (
    COIN_GRID,
    coarse_coin,
    rrs_ratio_order,
    rrs_unnormalised_acceptance,
)
from spectr_gbv.testing.mutants.draw_bugs import crashes_on_token_zero, crashes_on_zero_residual, tiled_cdf_drops_carry
from spectr_gbv.testing.mutants.inputs import ChainVerifier, GenericVerifier
from spectr_gbv.testing.mutants.law_bugs import (
    GREEDY_REPORT_EPS,
    REQUEST_TEMPERATURE,
    TOPK_KEPT_MASS,
    greedy_draft_softmax_q,
    temperature_draft_only,
    topk_draft_raw_q,
)
from spectr_gbv.testing.mutants.robustness_bugs import ROBUSTNESS_MUTANTS
from spectr_gbv.testing.mutants.uniform_bugs import (
    accepts_placeholder,
    accepts_placeholder_chain,
    always_accept_chain,
    hardcoded_zero_uniform_chain,
    reused_uniform,
    reused_uniform_chain,
    zero_coin_accepts,
    zero_coin_accepts_chain,
    zero_residual_oov,
    zero_residual_oov_chain,
)
from spectr_gbv.testing.mutants.vocab_bugs import int16_id_buffer, uint8_id_lookup

#: Generic-interface mutants by name (ECOSYSTEM.md B1-B12), in the order of the bug-class table of docs/validate.md.
MUTANTS: dict[str, GenericVerifier] = {
    "always_accept": always_accept,
    "softmax_residual": softmax_residual,
    "greedy_draft_softmax_q": greedy_draft_softmax_q,
    "topk_draft_raw_q": topk_draft_raw_q,
    "temperature_draft_only": temperature_draft_only,
    "zero_residual_oov": zero_residual_oov,
    "accepts_placeholder": accepts_placeholder,
    "zero_coin_accepts": zero_coin_accepts,
    "target_sample_or_ratio": target_sample_or_ratio,
    "hardcoded_zero_uniform": hardcoded_zero_uniform,
    "reused_uniform": reused_uniform,
}

#: Chain-interface mutants (the bugs that live in the uniforms or the id layout).
CHAIN_MUTANTS: dict[str, ChainVerifier] = {
    "always_accept": always_accept_chain,
    "zero_residual_oov": zero_residual_oov_chain,
    "accepts_placeholder": accepts_placeholder_chain,
    "zero_coin_accepts": zero_coin_accepts_chain,
    "hardcoded_zero_uniform": hardcoded_zero_uniform_chain,
    "reused_uniform": reused_uniform_chain,
}

#: Generic-interface mutants lossless on part of the input space (docs/validate.md, "Coverage and
#: detectable defects"): where a battery of small instances does not look.
COVERAGE_MUTANTS: dict[str, GenericVerifier] = {
    "rrs_two_residual_slots": rrs_two_residual_slots,
    "rrs_lagged_target": rrs_lagged_target,
    "tiled_cdf_drops_carry": tiled_cdf_drops_carry,
    "multipath_tie_mismatch": multipath_tie_mismatch,
    "crashes_on_token_zero": crashes_on_token_zero,
    "crashes_on_zero_residual": crashes_on_zero_residual,
}

#: Generic-interface mutants wrong in *which* tokens are accepted (the acceptance rule, the draft
#: order), each with a ``locus`` attribute: the part of the verifier the diagnosis must name
#: (:mod:`~spectr_gbv.testing.mutants.diagnosis_bugs`).
DIAGNOSIS_MUTANTS: dict[str, GenericVerifier] = {
    "rrs_unnormalised_acceptance": rrs_unnormalised_acceptance,
    "rrs_ratio_order": rrs_ratio_order,
    "coarse_coin": coarse_coin,
}

#: Generic-interface mutants that keep token ids in a narrow integer type: lossless for small ids,
#: wrong from id 256 (uint8) or 32,768 (int16) (:mod:`~spectr_gbv.testing.mutants.vocab_bugs`).
VOCAB_MUTANTS: dict[str, GenericVerifier] = {
    "uint8_id_lookup": uint8_id_lookup,
    "int16_id_buffer": int16_id_buffer,
}

#: Correct generic-interface verifiers built on :mod:`spectr_gbv.reference`.
CORRECT: dict[str, GenericVerifier] = {"sd": correct_sd, "bv": correct_bv, "mdbv": correct_mdbv}

#: Correct chain-interface verifiers.
CHAIN_CORRECT: dict[str, ChainVerifier] = {"sd": correct_sd_chain, "bv": correct_bv_chain}

# report the public import path (``spectr_gbv.testing.mutants:<name>``, what load_verifier takes)
for _fn in (
    *MUTANTS.values(),
    *CHAIN_MUTANTS.values(),
    *COVERAGE_MUTANTS.values(),
    *DIAGNOSIS_MUTANTS.values(),
    *VOCAB_MUTANTS.values(),
    *CORRECT.values(),
    *CHAIN_CORRECT.values(),
):
    _fn.__module__ = __name__
del _fn

__all__ = [
    "CHAIN_CORRECT",
    "CHAIN_MUTANTS",
    "COIN_GRID",
    "CORRECT",
    "COVERAGE_MUTANTS",
    "DIAGNOSIS_MUTANTS",
    "GREEDY_REPORT_EPS",
    "MUTANTS",
    "REQUEST_TEMPERATURE",
    "ROBUSTNESS_MUTANTS",
    "TOPK_KEPT_MASS",
    "VOCAB_MUTANTS",
    "accepts_placeholder",
    "accepts_placeholder_chain",
    "always_accept",
    "always_accept_chain",
    "coarse_coin",
    "correct_bv",
    "correct_bv_chain",
    "correct_mdbv",
    "correct_sd",
    "correct_sd_chain",
    "crashes_on_token_zero",
    "crashes_on_zero_residual",
    "greedy_draft_softmax_q",
    "hardcoded_zero_uniform",
    "hardcoded_zero_uniform_chain",
    "int16_id_buffer",
    "multipath_tie_mismatch",
    "reused_uniform",
    "reused_uniform_chain",
    "rrs_ratio_order",
    "rrs_lagged_target",
    "rrs_two_residual_slots",
    "rrs_unnormalised_acceptance",
    "softmax_residual",
    "target_sample_or_ratio",
    "temperature_draft_only",
    "tiled_cdf_drops_carry",
    "topk_draft_raw_q",
    "uint8_id_lookup",
    "zero_coin_accepts",
    "zero_coin_accepts_chain",
    "zero_residual_oov",
    "zero_residual_oov_chain",
]
