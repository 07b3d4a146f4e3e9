r"""Ready adapters for transformers' assisted generation: ``generate(assistant_model=draft, do_sample=True)``.

Each adapter runs the call a user makes,

    ``target.generate(input_ids, attention_mask=1, assistant_model=draft, do_sample=True,
    temperature=T, top_k=k, top_p=p, max_new_tokens=N, min_new_tokens=N, eos_token_id=None,
    pad_token_id=-1)``

after ``torch.manual_seed(seed)`` inside ``torch.random.fork_rng`` (transformers samples with
``torch.multinomial`` from torch's global generator, so the seed fixes every draw and the
caller's RNG state is restored afterwards), and returns the N new ids. ``top_k=0`` and
``top_p=1.0`` are transformers' own "off" values; the other warpers are pinned to their neutral
values (``typical_p=1``, ``epsilon_cutoff=eta_cutoff=0``, ``repetition_penalty=1``) so that a
model's stored generation config cannot add one. ``eos_token_id=None`` (the reference models
have no EOS; with one, ``min_new_tokens`` would mask it and change the law) and
``pad_token_id=-1``, an id no token has (an in-vocabulary pad id makes the assistant's inner
``generate`` mask every drafted token equal to it out of its attention; see
:mod:`spectr_gbv.realpair.peer`). Batch size 1 only: transformers refuses more, so every
adapter has the ``generation`` interface.

Candidate-generator paths (transformers ``GenerationMixin._get_candidate_generator``) and what
covers them. The draft-length settings are read from ``assistant_model.generation_config``,
not from the ``generate`` keywords; :func:`assisted_generate` sets them on the draft for the
call and restores the draft's config afterwards (so no adapter leaves state behind, and each
call starts from the same draft length):

* ``AssistedCandidateGenerator`` (one draft model, one vocabulary): ``hf-assisted`` (the
  library defaults: ``constant`` schedule, ``num_assistant_tokens`` 20, confidence threshold
  0.4), ``hf-assisted:constant-1`` and ``hf-assisted:constant-3`` (fixed draft length,
  threshold off), ``hf-assisted:heuristic`` and ``hf-assisted:heuristic_transient`` (+2 after a
  fully accepted round, -1 otherwise, from 5; threshold off), ``hf-assisted:confidence``
  (constant 8; the draft stops a round early when its processed probability of the token it
  drew falls below 0.5);
* ``_speculative_sampling`` with ``assistant_ensemble_weight``: ``hf-assisted:ensemble``
  (weight 0.5), LOSSY BY DESIGN: it accepts against the mixture 0.5 p + 0.5 q. Registered with
  ``lossless = False`` as a control the referee must reject, never a default;
* ``UniversalSpeculativeDecodingGenerator`` (different tokenizers, ``do_sample=True``):
  ``hf-assisted:usd``, in :mod:`~spectr_gbv.validate.generation.adapters.hf_usd`.

The confidence threshold adapts (a ROC-curve rule in ``update_candidate_strategy``) only when
scikit-learn is importable; otherwise it stays at its start value. :func:`confidence_adapts`
says which path runs here (it is recorded with every verdict). Both are lossless in law: the
decision to stop drafting depends only on the drafted prefix.

Heuristic schedule and state: with ``"heuristic"`` transformers writes the last draft length
back into ``assistant_model.generation_config.num_assistant_tokens`` at the end of a call, so
the next call starts there (``"heuristic_transient"`` does not). The adapter restores the
config, so each call starts from 5; the law of one call is the same either way.

Out of scope (no separate draft model): prompt lookup (``prompt_lookup_num_tokens``, drafts
copied from the context: no draft law), assistant early exit (``assistant_early_exit``: the
target's own first layers draft), multi-token prediction (``use_mtp``: the target's MTP heads),
DFlash (``speculation_type="dflash"``: a block-diffusion drafter fed the target's embeddings
and hidden states) and Gemma 4 assistants (``SinglePositionMultiTokenCandidateGenerator``:
need a Gemma 3n / 4 target's shared KV states).

References
----------
Leviathan et al., Fast Inference from Transformers via Speculative Decoding, ICML 2023
(Algorithm 1); Hugging Face, "Assisted Generation" (blog, 2023); transformers
``generation/utils.py::_assisted_decoding`` and ``generation/candidate_generator.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from spectr_gbv.validate.generation.adapters.common import (
    bound_adapter,
    check_prompt,
    check_settings,
    model_device,
    stamp,
)

#: ``num_assistant_tokens_schedule`` values of transformers' ``AssistedCandidateGenerator``.
SCHEDULES: tuple[str, ...] = ("constant", "heuristic", "heuristic_transient")


@dataclass(frozen=True)
class AssistedSettings:
    """The draft-length settings of one assisted-generation adapter (set on the draft's generation config).

    Attributes
    ----------
    schedule : str
        One of :data:`SCHEDULES` (``num_assistant_tokens_schedule``).
    num_assistant_tokens : int
        >= 1: tokens drafted per round (the start value for the heuristic schedules).
    confidence_threshold : float
        In [0, 1) (``assistant_confidence_threshold``): the draft stops a round early when the
        processed probability of the token it just drew is below it; 0 turns it off.
    ensemble_weight : float or None
        ``assistant_ensemble_weight`` in (0, 1) (lossy: verification against a mixture of p and
        q), ``None`` for speculative sampling.

    Raises
    ------
    ValueError
        A value outside the ranges above, named.
    """

    schedule: str = "constant"
    num_assistant_tokens: int = 20
    confidence_threshold: float = 0.4
    ensemble_weight: float | None = None

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        n = self.num_assistant_tokens
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"num_assistant_tokens must be an int >= 1, got {n!r}")
        if not 0 <= self.confidence_threshold < 1:
            raise ValueError(f"confidence_threshold must lie in [0, 1), got {self.confidence_threshold!r}")
        w = self.ensemble_weight
        if w is not None and not 0 < w < 1:
            raise ValueError(f"ensemble_weight must be None or lie in (0, 1), got {w!r}")


def confidence_adapts() -> bool:
    """Whether transformers adapts the confidence threshold here (it needs scikit-learn).

    Returns
    -------
    bool
        ``transformers.utils.is_sklearn_available()``: ``True`` runs the ROC-curve update of
        ``AssistedCandidateGenerator.update_candidate_strategy``, ``False`` keeps the threshold
        at its start value for the whole call.
    """
    from transformers.utils import is_sklearn_available

    return bool(is_sklearn_available())


@contextmanager
def _assistant_config(draft: Any, settings: AssistedSettings) -> Iterator[None]:
    """Set the draft's assisted-generation settings for the call, then restore its generation config."""
    saved = draft.generation_config
    config = copy.deepcopy(saved)
    config.num_assistant_tokens = settings.num_assistant_tokens
    config.num_assistant_tokens_schedule = settings.schedule
    config.assistant_confidence_threshold = settings.confidence_threshold
    draft.generation_config = config
    try:
        yield
    finally:
        draft.generation_config = saved


def assisted_generate(
    target: Any,
    draft: Any,
    prompt_ids: Any,
    max_new_tokens: int,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
    settings: AssistedSettings,
    assistant: Any = None,
    tokenizers: tuple[Any, Any] | None = None,
) -> list[int]:
    """Run transformers' assisted generation once, seeded, and return the new ids.

    Parameters
    ----------
    target, draft : transformers causal LMs
        One vocabulary; the draft is the ``assistant_model`` (its generation config is set from
        ``settings`` for the call and restored afterwards).
    prompt_ids : sequence of int
        One prompt, T >= 1 ids.
    max_new_tokens : int
        N >= 1, also ``min_new_tokens``.
    temperature, top_k, top_p : float, int, float
        transformers' warpers, in that order (``top_k=0``, ``top_p=1.0`` = off); T > 0.
    seed : int
        ``torch.manual_seed(seed)`` inside ``torch.random.fork_rng`` (the caller's RNG state is
        restored).
    settings : AssistedSettings
        Set on the assistant's ``generation_config`` for the call (swapped in and out: calls
        sharing one assistant must not run concurrently in threads of one process).
    assistant : transformers causal LM, optional
        The ``assistant_model`` when it is not ``draft`` (universal assisted decoding, see
        :mod:`~spectr_gbv.validate.generation.adapters.hf_usd`); default ``draft``.
    tokenizers : (target tokenizer, assistant tokenizer), optional
        Passed as ``tokenizer`` and ``assistant_tokenizer`` (they select transformers'
        different-tokenizer candidate generators).

    Returns
    -------
    list of int
        The ids ``generate`` appended after the prompt (N of them from a conforming run;
        whatever came back otherwise, for the referee to judge).

    Raises
    ------
    ValueError
        An argument outside the generation interface's ranges
        (:func:`~spectr_gbv.validate.generation.adapters.common.check_settings`), a bad prompt, or
        a draft that is the target object itself. Errors raised by ``generate`` propagate.
    """
    import torch
    from transformers.utils import logging as hf_logging

    ids = check_prompt(prompt_ids)
    check_settings(max_new_tokens, temperature, top_k, top_p, seed)
    assistant = draft if assistant is None else assistant
    if assistant is target:
        raise ValueError("draft is the target object itself; assisted generation needs a separate assistant model")
    device = model_device(target)
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    kwargs: dict[str, Any] = dict(
        attention_mask=torch.ones_like(input_ids),
        assistant_model=assistant,
        do_sample=True,
        temperature=float(temperature),
        top_k=int(top_k),
        top_p=float(top_p),
        typical_p=1.0,
        epsilon_cutoff=0.0,
        eta_cutoff=0.0,
        repetition_penalty=1.0,
        no_repeat_ngram_size=0,
        max_new_tokens=int(max_new_tokens),
        min_new_tokens=int(max_new_tokens),
        eos_token_id=None,
        pad_token_id=-1,
    )
    if settings.ensemble_weight is not None:
        kwargs["assistant_ensemble_weight"] = settings.ensemble_weight
    if tokenizers is not None:
        kwargs["tokenizer"], kwargs["assistant_tokenizer"] = tokenizers
    devices = [device] if device.type == "cuda" else []
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # per-call advisories (pad id, deprecated argument mixes)
    try:
        with torch.random.fork_rng(devices=devices), _assistant_config(assistant, settings), torch.no_grad():
            torch.manual_seed(int(seed))
            out = target.generate(input_ids, **kwargs)
    finally:
        hf_logging.set_verbosity(level)
    return [int(x) for x in out[0, len(ids) :].tolist()]


def make_assisted_adapter(
    name: str, settings: AssistedSettings, description: str, *, lossless: bool = True
) -> Callable[..., list[int]]:
    """An adapter with the generation interface that runs :func:`assisted_generate` with ``settings``.

    Parameters
    ----------
    name : str
        Registry name (``"hf-assisted..."``).
    settings : AssistedSettings
    description : str
        One line for listings and verdict pages.
    lossless : bool
        ``False`` for lossy-by-design settings (``ensemble_weight``).

    Returns
    -------
    callable
        ``generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p,
        seed) -> list[int]`` with the attributes of
        :data:`~spectr_gbv.validate.generation.adapters.common.ADAPTER_ATTRIBUTES` and
        ``settings``.
    """

    generate = bound_adapter(assisted_generate, settings=settings)
    generate.settings = settings  # type: ignore[attr-defined]
    return stamp(
        generate, name, interface="generation", description=description, family="hf-assisted", lossless=lossless
    )


_OFF = 0.0  # confidence threshold off

#: Registry name -> adapter, for every candidate-generator path with a separate draft model.
HF_ASSISTED_ADAPTERS: dict[str, Callable[..., list[int]]] = {
    name: make_assisted_adapter(name, settings, description, lossless=settings.ensemble_weight is None)
    for name, settings, description in (
        (
            "hf-assisted",
            AssistedSettings("constant", 20, 0.4),
            "transformers assisted generation with its defaults (constant schedule, 20 draft tokens, "
            "confidence threshold 0.4)",
        ),
        (
            "hf-assisted:constant-1",
            AssistedSettings("constant", 1, _OFF),
            "transformers assisted generation, constant schedule, 1 draft token, threshold off",
        ),
        (
            "hf-assisted:constant-3",
            AssistedSettings("constant", 3, _OFF),
            "transformers assisted generation, constant schedule, 3 draft tokens, threshold off",
        ),
        (
            "hf-assisted:heuristic",
            AssistedSettings("heuristic", 5, _OFF),
            "transformers assisted generation, heuristic schedule from 5 draft tokens, threshold off",
        ),
        (
            "hf-assisted:heuristic_transient",
            AssistedSettings("heuristic_transient", 5, _OFF),
            "transformers assisted generation, heuristic_transient schedule from 5 draft tokens, threshold off",
        ),
        (
            "hf-assisted:confidence",
            AssistedSettings("constant", 8, 0.5),
            "transformers assisted generation, constant schedule, 8 draft tokens, confidence threshold 0.5 "
            "(adaptive only where scikit-learn is installed)",
        ),
        (
            "hf-assisted:ensemble",
            AssistedSettings("constant", 3, _OFF, ensemble_weight=0.5),
            "transformers assisted generation with assistant_ensemble_weight 0.5, 3 draft tokens: LOSSY BY "
            "DESIGN (accepts against 0.5 p + 0.5 q), a control the referee must reject",
        ),
    )
}
