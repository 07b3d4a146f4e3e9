r"""Exact first-token laws of transformers' assisted generation loops, as transformers runs them.

For a loop that drafts its first token from ``q_s`` and verifies it with ``_speculative_sampling``
reading ``q_v`` as q, with ``p`` the target's processed law, the first emitted token has the law

.. math::
    P(x) = q_s(x)\,a(x) + \Bigl(1 - \sum_y q_s(y)\,a(y)\Bigr)\,\frac{(p - q_v)_+(x)}{\sum_y (p - q_v)_+(y)},
    \qquad a(x) = \min\{1, p(x) / q_v(x)\},

which is ``p`` when ``q_s = q_v`` (Leviathan et al. 2023, Theorem 1) and not otherwise; with
``assistant_ensemble_weight`` w the acceptance ratio is ``1 - w + w p / q`` and the law works out
to ``w p + (1 - w) q``. :func:`first_token_law` is that formula (vectorised over cases);
:func:`usd_laws` and :func:`ensemble_laws` read q_s, q_v and p from the objects transformers
actually uses in this process (the translator cached for ``hf-assisted:usd``'s tokenizers, the
scores the assistant samples from, recorded during a seeded call; the reference models for p);
:func:`first_tokens` counts the first token of seeded adapter calls.
:mod:`bench.gallery.generation_confirm` turns them into the gallery's confirmations.

References
----------
Leviathan et al., Fast Inference from Transformers via Speculative Decoding, ICML 2023;
transformers ``generation/candidate_generator.py`` (``AssistantToTargetTranslator``,
``_PruneReindexingLMHead``) and ``generation/utils.py`` (``_speculative_sampling``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The scenario a confirmation uses when the report names no failing small-vocabulary scenario:
#: the first of the referee's ``quick`` and ``standard`` budgets (pair, prompt index, T, top_k, top_p).
DEFAULT_SCENARIO: tuple[str, int, float, int, float] = ("close", 1, 0.5, 0, 1.0)
#: ``assistant_ensemble_weight`` of the ``hf-assisted:ensemble`` adapter.
ENSEMBLE_WEIGHT: float = 0.5


def first_token_law(
    p: np.ndarray, q_draw: np.ndarray, q_verify: np.ndarray, *, ensemble_weight: float | None = None
) -> np.ndarray:
    r"""Exact law of the first token transformers' ``_speculative_sampling`` emits (see the module formula).

    Parameters
    ----------
    p : ndarray, shape [V], float64
        The target's processed next-token law (sums to 1).
    q_draw : ndarray, shape [..., V], float64
        The law the first draft token is drawn from (leading dimensions: several cases at once).
    q_verify : ndarray, shape [..., V], float64
        The law ``_speculative_sampling`` reads as q (``softmax(candidate_logits)``).
    ensemble_weight : float, optional
        ``assistant_ensemble_weight`` w in (0, 1): acceptance ratio ``1 - w + w p / q_v`` and the
        fallback to p on an all-zero residual; None for speculative sampling.

    Returns
    -------
    ndarray, shape [..., V], float64
        The emitted first token's law (a draft token x with ``q_v(x) = 0`` is accepted when
        ``p(x) > 0``: the ratio is inf, and rejected when ``p(x) = 0``: 0/0 is NaN and ``r < NaN``
        is false).

    Raises
    ------
    ValueError
        Speculative sampling (no weight) that rejects with positive probability where the
        residual ``(p - q_v)+`` is all zero: transformers divides by 0 and ``torch.multinomial``
        raises there, so the loop has no law.

    Examples
    --------
    >>> p, q = np.array([0.5, 0.5, 0.0]), np.array([0.2, 0.3, 0.5])
    >>> first_token_law(p, q, q).round(12).tolist()  # q_s = q_v: the target law
    [0.5, 0.5, 0.0]
    >>> first_token_law(p, q, q, ensemble_weight=0.5).round(12).tolist()  # 0.5 p + 0.5 q
    [0.35, 0.4, 0.25]
    """
    p = np.asarray(p, dtype=np.float64)
    qs = np.asarray(q_draw, dtype=np.float64)
    qv = np.asarray(q_verify, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(qv > 0, p / np.where(qv > 0, qv, 1.0), np.where(p > 0, np.inf, np.nan))
        if ensemble_weight is not None:
            ratio = 1.0 - ensemble_weight + ensemble_weight * ratio
        accept = np.where(np.isnan(ratio), 0.0, np.minimum(1.0, ratio))
    accepted = qs * accept
    reject = np.clip(1.0 - accepted.sum(axis=-1, keepdims=True), 0.0, 1.0)
    residual = np.clip(p - qv, 0.0, None)
    mass = residual.sum(axis=-1, keepdims=True)
    empty = mass <= 0
    if ensemble_weight is None and bool(np.any(empty & (reject > 1e-15))):
        raise ValueError("q_verify: rejects with positive probability where the residual (p - q_v)+ is all zero")
    residual = np.where(empty, np.broadcast_to(p, residual.shape), residual / np.where(empty, 1.0, mass))
    return accepted + reject * residual


def total_variation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Total variation ``0.5 * sum |a - b|`` over the last axis (float64, broadcasting)."""
    return 0.5 * np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).sum(axis=-1)


@dataclass
class FirstTokenLaws:
    """Exact first-token laws of one scenario, as transformers runs it.

    Attributes
    ----------
    scenario : tuple
        (pair, prompt index, T, top_k, top_p).
    prompt : list of int
    p : ndarray [V], float64
        The target's processed law (temperature, top-k, top-p).
    q_draw, q_verify : ndarray [V], float64
        The law the draft token is drawn from, and the law the verifier reads as q.
    law : ndarray [V], float64
        :func:`first_token_law` of the three.
    order : list of int or None
        ``assistant_overlap_token_ids`` of the translator used (universal assisted decoding only).
    """

    scenario: tuple[str, int, float, int, float]
    prompt: list[int]
    p: np.ndarray
    q_draw: np.ndarray
    q_verify: np.ndarray
    law: np.ndarray
    order: list[int] | None = None


def scenario_inputs(scenario: tuple[str, int, float, int, float]) -> tuple[Any, list[int], Any]:
    """The reference pair (seed 0), prompt and ``SamplingSettings`` of ``(pair, prompt index, T, top_k, top_p)``."""
    from spectr_gbv.gpu.models.reference_pairs import reference_pair  # noqa: PLC0415
    from spectr_gbv.gpu.models.sequence_law import SamplingSettings  # noqa: PLC0415

    name, idx, temperature, top_k, top_p = scenario
    pair = reference_pair(name)
    return pair, list(pair.prompts[idx % len(pair.prompts)]), SamplingSettings(temperature, top_k, top_p)


def first_tokens(adapter: str, scenario: tuple[str, int, float, int, float], num: int) -> np.ndarray:
    """Counts of the first token over ``num`` seeded calls (seeds 0..num-1, ``max_new_tokens=2``) of a ready adapter.

    Parameters
    ----------
    adapter : str
        A name of :data:`spectr_gbv.validate.generation.adapters.ADAPTERS`.
    scenario : tuple
        (pair, prompt index, T, top_k, top_p) on the reference pairs of seed 0.
    num : int
        Calls (>= 1).

    Returns
    -------
    ndarray, shape [V], int64
    """
    from spectr_gbv.validate.generation.adapters import resolve_adapter  # noqa: PLC0415

    fn = resolve_adapter(adapter)
    pair, prompt, settings = scenario_inputs(scenario)
    counts = np.zeros(pair.vocab_size, dtype=np.int64)
    for seed in range(num):
        out = fn(pair.target, pair.draft, prompt, 2, **settings.as_kwargs(), seed=seed)
        counts[int(out[0])] += 1
    return counts


def usd_translator(pair: Any) -> Any:
    """The ``AssistantToTargetTranslator`` transformers uses for ``hf-assisted:usd`` on ``pair``'s target.

    Parameters
    ----------
    pair : ReferencePair
        A reference pair (:func:`spectr_gbv.gpu.models.reference_pairs.reference_pair`).

    Returns
    -------
    transformers.generation.candidate_generator.AssistantToTargetTranslator
        The object cached for the adapter's tokenizers; the adapter is run once first when the
        assistant is not pruned yet (transformers builds the translator, and prunes the
        assistant in place, on the first call).
    """
    from transformers.generation.candidate_generator import AssistantVocabTranslatorCache  # noqa: PLC0415

    from spectr_gbv.validate.generation.adapters import resolve_adapter  # noqa: PLC0415
    from spectr_gbv.validate.generation.adapters.hf_usd import usd_kit  # noqa: PLC0415

    V = int(pair.vocab_size)
    kit = usd_kit(V)
    if not hasattr(kit.assistant.get_output_embeddings(), "pruned_lm_head"):
        prompt = list(pair.prompts[0])
        fn = resolve_adapter("hf-assisted:usd")
        fn(pair.target, pair.draft, prompt, 2, temperature=1.0, top_k=0, top_p=1.0, seed=0)
    cache = AssistantVocabTranslatorCache
    return cache.get_translator(kit.target_tokenizer, kit.assistant_tokenizer, V, kit.assistant, True)


def usd_laws(scenario: tuple[str, int, float, int, float] = DEFAULT_SCENARIO) -> FirstTokenLaws:
    """Exact first-token laws of ``hf-assisted:usd`` on ``scenario``, from the translator this process uses.

    One seeded call of the adapter runs with ``get_target_logits`` of the cached translator
    wrapped to record its argument: the assistant's processed scores over the pruned head's V
    columns at the first draft position (what the assistant samples from; they do not depend
    on the seed). ``q_draw`` places the softmax of column j on ``get_target_ids`` of j,
    ``q_verify`` is the softmax of ``get_target_logits`` of the same row, p the target's
    processed law (:func:`spectr_gbv.gpu.models.sequence_law.conditional_law`).

    Parameters
    ----------
    scenario : tuple
        (pair, prompt index, T, top_k, top_p) on the reference pairs of seed 0.

    Returns
    -------
    FirstTokenLaws
        With ``order`` = ``assistant_overlap_token_ids``.
    """
    import torch  # noqa: PLC0415

    from spectr_gbv.gpu.models.sequence_law import conditional_law  # noqa: PLC0415
    from spectr_gbv.validate.generation.adapters import resolve_adapter  # noqa: PLC0415

    pair, prompt, settings = scenario_inputs(scenario)
    V = int(pair.vocab_size)
    translator = usd_translator(pair)
    real = translator.get_target_logits
    seen: list[Any] = []

    def record(assistant_logits: Any) -> Any:
        seen.append(assistant_logits.detach().to("cpu").clone())
        return real(assistant_logits)

    translator.get_target_logits = record
    try:
        resolve_adapter("hf-assisted:usd")(pair.target, pair.draft, prompt, 2, **settings.as_kwargs(), seed=0)
    finally:
        del translator.get_target_logits
    scores = seen[0][0, 0]
    pruned = _softmax64(scores.to(torch.float64).numpy())
    empty = torch.zeros((1, 0), dtype=torch.long)
    q_draw = np.zeros(V)
    for j in range(len(pruned)):
        tid = int(translator.get_target_ids(empty, empty, torch.tensor([[j]]))[0, -1])
        q_draw[tid] += pruned[j]
    q_verify = _softmax64(real(scores.reshape(1, 1, -1)).to(torch.float64)[0, 0].numpy())
    p = conditional_law(pair.target, prompt, settings)
    order = [int(i) for i in translator.assistant_overlap_token_ids.tolist()]
    return FirstTokenLaws(scenario, prompt, p, q_draw, q_verify, first_token_law(p, q_draw, q_verify), order)


def _softmax64(scores: np.ndarray) -> np.ndarray:
    out = np.zeros_like(scores, dtype=np.float64)
    live = np.isfinite(scores)
    w = np.exp(scores[live] - scores[live].max())
    out[live] = w / w.sum()
    return out


def all_orders_tv(laws: FirstTokenLaws) -> np.ndarray:
    """TV from p of the first-token law under every ``get_vocab()`` order of the shared tokens (V! of them).

    The draft law ``q_draw`` does not depend on the order (the pruned head's column j is the
    assistant's row ``order[j]`` and is drafted as that token); the verifier reads
    ``q_verify[j] = q_draw[order[j]]``. Valid for the adapter's tokenizers, where assistant id i
    is target id i for i < V.

    Parameters
    ----------
    laws : FirstTokenLaws
        From :func:`usd_laws` (V <= 9).

    Returns
    -------
    ndarray, shape [V!], float64
        In ``itertools.permutations`` order (the first, the increasing order, gives 0).

    Raises
    ------
    ValueError
        More than 9 tokens (over 362,880 orders).
    """
    V = len(laws.p)
    if V > 9:
        raise ValueError(f"laws: V = {V} has too many orders to enumerate (at most 9 tokens)")
    perms = np.array(list(itertools.permutations(range(V))), dtype=np.int64)
    return total_variation(first_token_law(laws.p, laws.q_draw, laws.q_draw[perms]), laws.p)


def ensemble_laws(
    scenario: tuple[str, int, float, int, float] = DEFAULT_SCENARIO, weight: float = ENSEMBLE_WEIGHT
) -> FirstTokenLaws:
    """Exact first-token laws of ``hf-assisted:ensemble`` on ``scenario``, q read from transformers' own call.

    One seeded call of the adapter runs with ``transformers.generation.utils._speculative_sampling``
    wrapped to record ``candidate_logits``: the assistant's processed scores at the first draft
    position, the law the draft token is drawn from and the q the verifier reads (they do not
    depend on the seed). p is the target's processed law
    (:func:`spectr_gbv.gpu.models.sequence_law.conditional_law`).

    Parameters
    ----------
    scenario : tuple
        (pair, prompt index, T, top_k, top_p) on the reference pairs of seed 0.
    weight : float
        ``assistant_ensemble_weight`` w in (0, 1).

    Returns
    -------
    FirstTokenLaws
        ``q_draw = q_verify`` = that q; ``law`` = ``first_token_law(p, q, q, ensemble_weight=weight)``.
    """
    import torch  # noqa: PLC0415
    import transformers.generation.utils as hf_utils  # noqa: PLC0415

    from spectr_gbv.gpu.models.sequence_law import conditional_law  # noqa: PLC0415
    from spectr_gbv.validate.generation.adapters import resolve_adapter  # noqa: PLC0415

    pair, prompt, settings = scenario_inputs(scenario)
    real = hf_utils._speculative_sampling
    seen: list[Any] = []

    def record(candidate_input_ids: Any, candidate_logits: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(candidate_logits.detach().to("cpu", torch.float64).clone())
        return real(candidate_input_ids, candidate_logits, *args, **kwargs)

    hf_utils._speculative_sampling = record
    try:
        resolve_adapter("hf-assisted:ensemble")(pair.target, pair.draft, prompt, 2, **settings.as_kwargs(), seed=0)
    finally:
        hf_utils._speculative_sampling = real
    q = _softmax64(seen[0][0, 0].numpy())
    p = conditional_law(pair.target, prompt, settings)
    return FirstTokenLaws(scenario, prompt, p, q, q, first_token_law(p, q, q, ensemble_weight=weight))


__all__ = [
    "DEFAULT_SCENARIO",
    "ENSEMBLE_WEIGHT",
    "FirstTokenLaws",
    "all_orders_tv",
    "ensemble_laws",
    "first_token_law",
    "first_tokens",
    "scenario_inputs",
    "total_variation",
    "usd_laws",
    "usd_translator",
]
