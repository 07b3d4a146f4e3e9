r"""Correct speculative generation loops for the generation referee: one prompt, or a batch of ragged prompts.

:func:`speculative_generate` is the generation interface of
:mod:`spectr_gbv.validate.generation.interface` around :class:`SpeculativeLoop`, token-level
speculative sampling with one draft of ``gamma`` tokens per iteration:

1. the draft proposes ``d_1 .. d_gamma``, each drawn from its processed law
   :math:`q_i = \mathrm{softmax}(w(\ell^{draft}_i))` (``w``: transformers'
   ``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``, in that order) by
   the Gumbel-max trick :math:`d_i = \arg\max_x \log q_i(x) + G_{i,x}`;
2. the target scores the prefix and the drafts in one forward: :math:`p_0 .. p_\gamma`, its
   processed laws at the ``gamma + 1`` positions;
3. :math:`d_i` is accepted when :math:`u_i\,q_i(d_i) < p_i(d_i)`; at the first rejection ``n``
   the loop emits a draw from the residual :math:`\max(p_n - q_n, 0)`, and after ``gamma``
   acceptances the bonus token from :math:`p_\gamma`;
4. both models' ``DynamicCache`` are cropped to the accepted prefix (the rejected drafts leave
   the caches), and the next iteration feeds what the cache lacks.

All randomness comes from one ``torch.Generator`` seeded with ``seed``, in three separate draws
per iteration (:class:`LoopNoise`): the draft's Gumbel noise ``[gamma, V]``, the acceptance
uniforms ``[gamma]`` and the noise of the recovery or bonus draw ``[V]``.

:func:`speculative_generate_batched` (interface ``"generation_batched"``) runs the same rule on
B ragged prompts at once, :class:`BatchedSpeculativeLoop`: each forward recomputes a
left-padded batch without a cache, with a 2-D attention mask and position ids counted from each
row's first real token, and every row accepts independently. :func:`untempered_draft_generate`
is a correct variant whose draft ignores the temperature: lossless, because the verifier divides
by the law the draft really sampled from (a control the referee must pass).

The classes and helpers live in :mod:`spectr_gbv.testing.mutants.generation_core` and are
re-exported here; the planted-bug variants are in
:mod:`spectr_gbv.testing.mutants.generation_bugs`. Each
function here carries ``interface``, ``bug`` (``"ok"``), ``description``, ``caught_by`` (``""``)
and ``source``. Registry: :data:`GENERATION_LOOPS`.

References
----------
Leviathan, Kalman & Matias, Fast Inference from Transformers via Speculative Decoding, ICML 2023
(the acceptance and residual rule); Chen et al., Accelerating Large Language Model Decoding with
Speculative Sampling, arXiv 2302.01318 (the same rule); Gumbel, Statistical Theory of Extreme
Values, 1954, and Maddison et al., A* Sampling, NeurIPS 2014 (the Gumbel-max draw).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from spectr_gbv.gpu.models.sequence_law import SamplingSettings
from spectr_gbv.testing.mutants.generation_core import (
    DEFAULT_GAMMA,
    BatchedSpeculativeLoop,
    LoopNoise,
    SpeculativeLoop,
    generation_function,
    gumbel_argmax,
    processed_law,
    run_loop,
    tag,
)

_LEVIATHAN = "Leviathan et al., ICML 2023"


@tag(
    interface="generation",
    bug="ok",
    description="speculative sampling, gamma draft tokens, caches cropped after rejections",
    caught_by="",
    source=_LEVIATHAN,
)
def speculative_generate(
    target: Any,
    draft: Any,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    gamma: int = DEFAULT_GAMMA,
) -> list[int]:
    """Correct speculative sampling of ``max_new_tokens`` tokens after one prompt (:class:`SpeculativeLoop`).

    Parameters
    ----------
    target, draft : transformers causal LMs
        Same vocabulary size V.
    prompt_ids : sequence of int
        One prompt, at least one id in [0, V).
    max_new_tokens : int
        >= 0 tokens to return.
    temperature, top_k, top_p : float, int, float
        transformers' warpers, applied to both models in that order (:class:`SamplingSettings`).
    seed : int
        >= 0; every random number of the call comes from it.
    gamma : int
        >= 1 draft tokens per iteration.

    Returns
    -------
    list of int
        The new ids, exactly ``max_new_tokens`` of them; their law is the target's sequence law.

    Raises
    ------
    ValueError
        Out-of-range arguments, named (see :func:`run_loop`).

    References
    ----------
    Leviathan et al., ICML 2023 (Algorithm 1).

    Examples
    --------
    >>> from spectr_gbv.gpu.models.reference_pairs import reference_pair
    >>> pair = reference_pair("close")
    >>> prompt = list(pair.prompts[0])
    >>> out = speculative_generate(pair.target, pair.draft, prompt, 4, temperature=0.8, seed=3)
    >>> len(out), out == speculative_generate(pair.target, pair.draft, prompt, 4, temperature=0.8, seed=3)
    (4, True)
    """
    return run_loop(
        SpeculativeLoop,
        target,
        draft,
        prompt_ids,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        gamma=gamma,
    )


@tag(
    interface="generation_batched",
    bug="ok",
    description="batched speculative sampling: left padding, per-row masks and positions, rows accept independently",
    caught_by="",
    source=_LEVIATHAN,
)
def speculative_generate_batched(
    target: Any,
    draft: Any,
    prompt_ids: Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    gamma: int = DEFAULT_GAMMA,
) -> list[list[int]]:
    """Correct batched speculative sampling (:class:`BatchedSpeculativeLoop`): one list of new ids per prompt.

    Parameters
    ----------
    prompt_ids : sequence of sequences of int
        B >= 1 prompts of any lengths.
    target, draft, max_new_tokens, temperature, top_k, top_p, seed, gamma
        As :func:`speculative_generate`; ``seed`` is one per call.

    Returns
    -------
    list of B lists of int
        ``max_new_tokens`` new ids per prompt; each row's law is the target's sequence law after
        its own prompt, whatever the other rows are.

    Raises
    ------
    ValueError
        As :func:`speculative_generate`; an empty batch.
    """
    return run_loop(
        BatchedSpeculativeLoop,
        target,
        draft,
        prompt_ids,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        gamma=gamma,
        batched=True,
    )


class UntemperedDraftLoop(SpeculativeLoop):
    """The draft samples at temperature 1 and reports that same law as ``q``: lossless."""

    def draft_laws(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both laws at temperature 1 (top-k and top-p kept): the proposal and its true law."""
        q = processed_law(logits, SamplingSettings(1.0, self.settings.top_k, self.settings.top_p))
        return q, q


@tag(
    interface="generation",
    bug="ok",
    description="draft sampled at temperature 1 with q its true law; the target at the requested temperature",
    caught_by="",
    source=_LEVIATHAN + " (any proposal law q is exact when the verifier divides by it)",
)
def untempered_draft_generate(
    target: Any,
    draft: Any,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    gamma: int = DEFAULT_GAMMA,
) -> list[int]:
    r"""Correct loop whose draft ignores the temperature: a control that looks like a bug and is not.

    The temperature reaches the target only, but the verifier divides by the law the draft
    sampled from (its temperature-1 law after top-k and top-p), so for every proposal law the
    emitted token has law :math:`q\min(1, p/q) + (1 - \sum\min(p, q))\,(p - q)^+ / \sum (p-q)^+ = p`:
    the loop is exact, only its acceptance rate changes. Parameters, returns and errors as
    :func:`speculative_generate`.

    References
    ----------
    Leviathan et al., ICML 2023 (Theorem 3.5 holds for any proposal q).
    """
    return run_loop(
        UntemperedDraftLoop,
        target,
        draft,
        prompt_ids,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        gamma=gamma,
    )


#: The correct loops by name: the referee must pass each (its false-alarm controls).
GENERATION_LOOPS: dict[str, Callable[..., Any]] = {
    "speculative": speculative_generate,
    "speculative_batched": speculative_generate_batched,
    "untempered_draft": untempered_draft_generate,
}

__all__ = [
    "DEFAULT_GAMMA",
    "GENERATION_LOOPS",
    "BatchedSpeculativeLoop",
    "LoopNoise",
    "SpeculativeLoop",
    "UntemperedDraftLoop",
    "generation_function",
    "gumbel_argmax",
    "processed_law",
    "run_loop",
    "speculative_generate",
    "speculative_generate_batched",
    "tag",
    "untempered_draft_generate",
]
