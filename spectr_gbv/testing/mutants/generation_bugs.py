r"""Planted bugs of whole speculative generation loops: the negative controls of the generation referee.

Each mutant is :class:`~spectr_gbv.testing.mutants.generation_loops.SpeculativeLoop` (or its
batched form) with one step replaced, modelled on a bug that shipped in a speculative decoder:

==============================  ==================================================  =====================
mutant                          what changed                                        lossy when
==============================  ==================================================  =====================
``shared_noise``                draft noise = acceptance coin = recovery noise      always
``q_untempered``                drafts at T, q at T = 1                             T != 1
``q_bf16``                      drafts from bfloat16 logits, q from float32 ones    always (large logits)
``no_cache_rollback``           the target's cache keeps rejected drafts            after a rejection
``bonus_wrong_position``        emitted token read from p's row n - 1, not n        always
``target_only_temperature``     drafts at T = 1, q recorded at T                    T != 1
``batch_row_leak``              every row stops at the batch's first rejection      B > 1
``batch_padding_leak``          target fed a padded batch with no mask/positions    ragged batches
==============================  ==================================================  =====================

Every function carries ``interface``, ``bug`` (the class tag), ``description``, ``caught_by``
(the prefix of the referee's check expected to flag it: ``sequence_law`` for the joint and
conditional law checks, ``batch_invariance`` for a row that depends on its neighbours) and
``source`` (the public report of the class). Registry: :data:`GENERATION_MUTANTS`. The loops'
parameters, returns and errors are those of
:func:`~spectr_gbv.testing.mutants.generation_loops.speculative_generate`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from spectr_gbv.gpu.models.sequence_law import SamplingSettings
from spectr_gbv.testing.mutants.generation_loops import (
    BatchedSpeculativeLoop,
    LoopNoise,
    SpeculativeLoop,
    generation_function,
    gumbel_argmax,
    processed_law,
    speculative_generate,
    speculative_generate_batched,
    tag,
)


# ============================================================================ shared_noise
class SharedPhiloxNoise(LoopNoise):
    """One uniform tensor ``U`` [gamma + 1, V] serves the draft's noise, the acceptance coins and the final draw.

    The draft's Gumbel noise at position i is ``U[i]``; the acceptance coin of the drafted token
    ``d`` is ``U[i, d]``, the very uniform that made ``d`` win the draft's Gumbel-max; the
    recovery (or bonus) token at position j is drawn with the noise ``U[j]``.
    """

    def __init__(self, generator: torch.Generator, gamma: int, vocab_size: int) -> None:  # one draw, not three
        self.shared = torch.rand(gamma + 1, vocab_size, generator=generator, dtype=torch.float64)
        self.draft = self.shared[:gamma]

    def coin(self, i: int, token: int) -> float:
        """``U[i, token]``: the drafted token's own Gumbel uniform (biased high: it won the argmax)."""
        return float(self.shared[i, token])

    def final_row(self, position: int) -> torch.Tensor:
        """``U[position]``: the draft's noise of that position again."""
        return self.shared[position]


class SharedNoiseLoop(SpeculativeLoop):
    """:class:`SpeculativeLoop` with :class:`SharedPhiloxNoise`."""

    noise_class = SharedPhiloxNoise


@tag(
    interface="generation",
    bug="shared_noise",
    description="the draft's Gumbel noise reused as the acceptance coin and the recovery draw's noise",
    caught_by="sequence_law",
    source="vLLM PR #54282 (Philox offset of the draft noise reused)",
)
def shared_noise(*args: Any, **kwargs: Any) -> list[int]:
    r"""Speculative sampling whose draft noise, acceptance coin and recovery noise are the same numbers.

    Given that ``d`` won the draft's Gumbel-max, its uniform has density
    :math:`u^{(1-q(d))/q(d)} / \int` on [0, 1], not 1, so the coin ``U[i, d]`` is biased towards 1
    and drafts are rejected too often (most for the tokens q ranks low); the recovery draw then
    reuses the noise under which ``d`` won, so it favours the tokens that noise lifted. The output
    law is not the target's.

    References
    ----------
    vLLM PR #54282 (merged 2026-08-28): with probabilistic drafting the draft's Gumbel noise
    reused the Philox offset of the acceptance uniform and of the recovery draw.
    """
    return generation_function(SharedNoiseLoop)(*args, **kwargs)


# ============================================================================ q_untempered
class UntemperedQLoop(SpeculativeLoop):
    """Drafts sampled from the tempered law; ``q`` computed from the untempered logits."""

    def draft_laws(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(law at T, law at T = 1)``: the verifier divides by a law the draft did not sample from."""
        q_one = processed_law(logits, SamplingSettings(1.0, self.settings.top_k, self.settings.top_p))
        return processed_law(logits, self.settings), q_one


@tag(
    interface="generation",
    bug="q_untempered",
    description="drafts sampled at the requested temperature, q taken from the untempered logits",
    caught_by="sequence_law",
    source="deepseek-ai/DeepSpec #31; z-lab/dflash #74",
)
def q_untempered(*args: Any, **kwargs: Any) -> list[int]:
    r"""Speculative sampling whose verifier divides by the draft's temperature-1 law.

    The drafted token has law :math:`q_T`, the acceptance test uses :math:`\min(1, p/q_1)` and the
    residual :math:`(p - q_1)^+`: the emitted law is
    :math:`q_T \min(1, p/q_1) + (1 - \sum_x q_T \min(1, p/q_1))\,(p - q_1)^+/Z \ne p` unless
    :math:`q_T = q_1` (temperature 1). Lossless at T = 1.

    References
    ----------
    deepseek-ai/DeepSpec issue #31 and z-lab/dflash issue #74: drafts sampled at one
    temperature while q is taken from other logits.
    """
    return generation_function(UntemperedQLoop)(*args, **kwargs)


# ============================================================================ q_bf16
class Bf16DraftLoop(SpeculativeLoop):
    """Drafts sampled from the draft's logits rounded to bfloat16; ``q`` from the float32 logits."""

    def draft_laws(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(law of bf16-rounded logits, law of float32 logits)``."""
        rounded = logits.to(torch.bfloat16).to(torch.float32)
        return processed_law(rounded, self.settings), processed_law(logits, self.settings)


@tag(
    interface="generation",
    bug="q_bf16",
    description="drafts sampled from bfloat16 logits while q is computed from the float32 logits",
    caught_by="sequence_law",
    source="deepseek-ai/DeepSpec #31; z-lab/dflash #74 (precision class)",
)
def q_bf16(*args: Any, **kwargs: Any) -> list[int]:
    r"""Speculative sampling whose draft samples in bfloat16 and reports its float32 law.

    Logits of real models' magnitude (tens; the reference models add a constant offset) are
    rounded in bfloat16 to a spacing of 0.125 in [16, 32), 0.25 in [32, 64), 0.5 in [64, 128),
    so each probability of the sampled law differs from q's by a factor up to
    :math:`e^{\pm \mathrm{spacing} / (2T)}`;
    the verifier divides by the wrong law, so the output law is off by a few percent of total
    variation (lossless only where the rounding happens to be exact).

    References
    ----------
    deepseek-ai/DeepSpec issue #31 and z-lab/dflash issue #74 (drafts sampled from other
    logits than q's); the reference models' logit offset (:mod:`~spectr_gbv.gpu.models.reference_lm`).
    """
    return generation_function(Bf16DraftLoop)(*args, **kwargs)


# ============================================================================ no_cache_rollback
class NoRollbackLoop(SpeculativeLoop):
    """The loop forgets to crop the target's cache; it still tracks the context length correctly."""

    def rollback(self, kept: int) -> None:
        """Crop the draft's cache only; the target's keeps the rejected drafts' slots."""
        extra = self._caches["draft"].get_seq_length() - kept
        if extra > 0:
            self._caches["draft"].crop(-extra)
        self._fed = {name: min(fed, kept) for name, fed in self._fed.items()}


@tag(
    interface="generation",
    bug="no_cache_rollback",
    description="the target's KV cache not cropped after a rejection (rejected drafts stay in its context)",
    caught_by="sequence_law",
    source="Leviathan et al., ICML 2023 (rollback of the rejected suffix); transformers' candidate generator crop",
)
def no_cache_rollback(*args: Any, **kwargs: Any) -> list[int]:
    """Speculative sampling that leaves the rejected drafts in the target's cache.

    After a rejection at position n the target's cache still holds ``d_{n+1} .. d_gamma``; the
    next iteration feeds the new tokens at the right position ids, but the model attends to the
    stale slots too, so every later token is drawn from the target's law after a context that
    contains rejected drafts. Tokens before the first rejection are right; later ones are not.

    References
    ----------
    Leviathan et al., ICML 2023, section 3 (the rejected suffix is discarded); transformers'
    ``_crop_past_key_values`` / ``DynamicCache.crop`` in assisted generation.
    """
    return generation_function(NoRollbackLoop)(*args, **kwargs)


# ============================================================================ bonus_wrong_position
class BonusRowLoop(SpeculativeLoop):
    """The emitted token's row of ``p`` is indexed ``n - 1`` (last accepted) instead of ``n`` (count accepted)."""

    def final_row(self, accepted: int) -> int:
        """``accepted - 1``: the bonus reads p's row gamma - 1; a rejection at 0 reads row -1 (= gamma)."""
        return accepted - 1


@tag(
    interface="generation",
    bug="bonus_wrong_position",
    description="bonus / recovery token read from the target's row n - 1 instead of n (row -1 wraps to gamma)",
    caught_by="sequence_law",
    source="Leviathan et al., ICML 2023, Algorithm 1 (the bonus from p at position gamma)",
)
def bonus_wrong_position(*args: Any, **kwargs: Any) -> list[int]:
    """Speculative sampling with an off-by-one in the row of the emitted non-draft token.

    After ``n`` acceptances the token must come from ``p_n`` (the bonus, ``n = gamma``) or from
    the residual ``(p_n - q_n)^+``; this loop uses ``p_{n-1}``: the bonus is drawn from the law
    before the last draft, a recovery at n >= 1 from ``(p_{n-1} - q_n)^+``, and a rejection at 0
    from ``p[-1]``, which Python reads as the bonus row ``p_gamma``.

    References
    ----------
    Leviathan et al., ICML 2023, Algorithm 1 (the token after n accepted drafts is drawn from
    p at position n).
    """
    return generation_function(BonusRowLoop)(*args, **kwargs)


# ============================================================================ target_only_temperature
class TargetOnlyTemperatureLoop(SpeculativeLoop):
    """The draft samples at temperature 1, but the verifier's ``q`` is the draft's tempered law."""

    def draft_laws(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(law at T = 1, law at T)``."""
        q_one = processed_law(logits, SamplingSettings(1.0, self.settings.top_k, self.settings.top_p))
        return q_one, processed_law(logits, self.settings)


@tag(
    interface="generation",
    bug="target_only_temperature",
    description="temperature reaches the target only: drafts sampled at T = 1 while q is recorded at T",
    caught_by="sequence_law",
    source="deepseek-ai/DeepSpec #31 (temperature applied on one side of the ratio)",
)
def target_only_temperature(*args: Any, **kwargs: Any) -> list[int]:
    r"""Speculative sampling whose drafter ignores the temperature while the verifier assumes it.

    A drafter that samples at temperature 1 is harmless when the verifier divides by that same
    law (:func:`~spectr_gbv.testing.mutants.generation_loops.untempered_draft_generate` is
    exact). This loop is lossy because ``q`` is recomputed from the draft's logits with the
    request's temperature, the way an engine applies a request's sampling parameters to both
    sides of the ratio: the drafted token has law :math:`q_1`, the test uses
    :math:`\min(1, p/q_T)` and the residual :math:`(p - q_T)^+`, so the emitted law is
    :math:`q_1\min(1, p/q_T) + (1 - \sum q_1 \min(1, p/q_T))(p - q_T)^+/Z \ne p` unless T = 1.

    References
    ----------
    deepseek-ai/DeepSpec issue #31 (the drafted law and q disagree on the temperature);
    Leviathan et al., ICML 2023, Theorem 3.5 (exact only when q is the proposal's law).
    """
    return generation_function(TargetOnlyTemperatureLoop)(*args, **kwargs)


# ============================================================================ batch rows
class BatchStopLoop(BatchedSpeculativeLoop):
    """Rows are kept aligned: every row stops at the batch's first rejection and draws its correction there."""

    def verify_rows(
        self, drafts: list[list[int]], qs: list[torch.Tensor], ps: list[torch.Tensor], noises: list[LoopNoise]
    ) -> list[tuple[int, int]]:
        """Each row keeps ``n = min_b n_b`` drafts; a row that accepted more draws from its residual at n anyway."""
        own = super().verify_rows(drafts, qs, ps, noises)
        n = min(count for count, _ in own)
        out = []
        for (count, token), q, p, noise in zip(own, qs, ps, noises, strict=True):
            if count > n:  # this row accepted d_{n+1}, but the batch stops at n
                residual = torch.clamp(p[n] - q[n], min=0.0)
                token = gumbel_argmax(residual if float(residual.sum()) > 0.0 else p[n], noise.final_row(n))
            out.append((n, token))
        return out


@tag(
    interface="generation_batched",
    bug="batch_row_leak",
    description="rows aligned to the batch's first rejection: a row's law depends on its neighbours' acceptances",
    caught_by="batch_invariance",
    source="arXiv 2510.22876 (Batch SD done right); 1Cat-vLLM #656 (ragged batches)",
)
def batch_row_leak(*args: Any, **kwargs: Any) -> list[list[int]]:
    r"""Batched speculative sampling that keeps its rows aligned by cutting every row at the batch's first rejection.

    With ``n = min_b n_b``, a row that accepted :math:`d_{n+1}` still draws its correction from its
    residual :math:`(p_n - q_n)^+` at n, where a correct row would have kept :math:`d_{n+1}`
    (accepted with probability :math:`\min(1, p_n/q_n)`): the row emits residual mass for a token
    it accepted, so its law depends on how often its neighbours reject. A batch of one is exact.

    References
    ----------
    Li et al., Batch Speculative Decoding Done Right, arXiv 2510.22876 (ragged acceptance across
    rows: synchronised rows break output equivalence); 1Cat-vLLM issue #656.
    """
    return generation_function(BatchStopLoop, batched=True)(*args, **kwargs)


class PaddingLeakLoop(BatchedSpeculativeLoop):
    """The target is fed the left-padded batch without its attention mask and position ids."""

    def _last_logits(self, model: Any, rows: list[list[int]], k: int) -> torch.Tensor:
        """Drops the mask and positions for the target: padding is attended, positions count it."""
        inputs = self.batch_inputs(rows)
        if model is self.target:
            inputs = {"input_ids": inputs["input_ids"]}
        return model(**inputs, use_cache=False, logits_to_keep=k).logits[:, -k:].to(torch.float32)


@tag(
    interface="generation_batched",
    bug="batch_padding_leak",
    description="target fed the left-padded batch with no attention mask or position ids: neighbours' lengths leak",
    caught_by="batch_invariance",
    source="arXiv 2510.22876 (Batch SD done right); 1Cat-vLLM #656 (ragged KV caches, positions and masks)",
)
def batch_padding_leak(*args: Any, **kwargs: Any) -> list[list[int]]:
    """Batched speculative sampling whose target reads the left padding as context.

    A row shorter than the longest is left-padded; without the attention mask the target
    attends to the pad tokens, and without position ids their count shifts the row's positions,
    so the row's law depends on how long its neighbours are (right for the longest row and for
    a batch of one). The draft is fed correctly, so only the target's law leaks. On the
    reference models the leak shows where the pad ids change the context's state (an odd
    number of pads flips the position's parity; pads change the context's sum).

    References
    ----------
    Li et al., Batch Speculative Decoding Done Right, arXiv 2510.22876 (ragged tensors,
    positions and masks in batched SD); 1Cat-vLLM issue #656.
    """
    return generation_function(PaddingLeakLoop, batched=True)(*args, **kwargs)


#: The planted-bug loops by name, in the order of the table above.
GENERATION_MUTANTS: dict[str, Callable[..., Any]] = {
    "shared_noise": shared_noise,
    "q_untempered": q_untempered,
    "q_bf16": q_bf16,
    "no_cache_rollback": no_cache_rollback,
    "bonus_wrong_position": bonus_wrong_position,
    "target_only_temperature": target_only_temperature,
    "batch_row_leak": batch_row_leak,
    "batch_padding_leak": batch_padding_leak,
}

# the single-prompt mutants take ``*args, **kwargs`` through; show (and check) the interface's signature
for _fn in (shared_noise, q_untempered, q_bf16, no_cache_rollback, bonus_wrong_position, target_only_temperature):
    _fn.__signature__ = inspect.signature(speculative_generate)  # type: ignore[attr-defined]
for _fn in (batch_row_leak, batch_padding_leak):
    _fn.__signature__ = inspect.signature(speculative_generate_batched)  # type: ignore[attr-defined]
del _fn
