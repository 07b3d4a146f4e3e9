r"""Side-by-side peer: Hugging Face ``transformers`` assisted generation on the same pair and prompts.

The peer is ``target.generate(input_ids, assistant_model=draft, do_sample=True, ...)``: one
draft of ``num_assistant_tokens`` tokens per round, verified by token-level speculative
sampling (Leviathan et al. 2023, Algorithm 1; ``transformers.generation.utils._speculative_sampling``),
i.e. the single-draft ``sd`` method of this package implemented by someone else.

What transformers 5.x does, read from its source (``generation/utils.py::_assisted_decoding``,
``generation/candidate_generator.py::AssistedCandidateGenerator``), and how this module pins it:

* The draft length and its schedule are read from ``assistant_model.generation_config``, not
  from the ``generate`` keywords: ``num_assistant_tokens`` (default 20),
  ``num_assistant_tokens_schedule`` (default ``"constant"``) and
  ``assistant_confidence_threshold`` (default 0.4: the draft stops early when its own top
  probability falls below it). The run sets them on the draft for its duration (``constant``
  schedule, threshold 0, so every round drafts exactly ``num_assistant_tokens`` tokens, fewer
  only where ``max_new_tokens`` caps them) and restores the draft's config afterwards.
* Sampling: ``do_sample=True, top_k=0, top_p=1.0`` (plus neutral values for the other
  warpers) and temperature T, the same law as :func:`spectr_gbv.gpu.decoding.sampling.process_logits`
  with ``SamplingConfig(T)``; ``top_k`` must be 0 explicitly (the library default is 50). The
  draft is sampled with the same processors and its processed scores are the q of the
  acceptance test. Passing ``temperature=T`` to ``generate`` would apply T twice on the draft
  side (a transformers 5.x quirk, see :func:`generate_kwargs`), so T goes in as a custom
  ``TemperatureLogitsWarper``. ``temperature == 0`` runs greedy assisted decoding
  (``do_sample=False``), the counterpart of this package's greedy mode.
* Length: ``eos_token_id=None`` so EOS neither stops generation nor gets masked (with an EOS
  id, ``min_new_tokens`` would set its logit to -inf and change the target law; this
  package's decoder never masks EOS either) and ``min_new_tokens = max_new_tokens``. Every
  run returns exactly ``max_new_tokens`` new tokens (checked).
* ``pad_token_id=-1``, an id no token has. With an in-vocabulary pad id (SmolLM2's is 2 =
  EOS) the assistant's inner ``generate`` infers its attention mask from the padding
  (``_prepare_attention_mask_for_generation``: the pad id occurs and differs from EOS, here
  None) and masks every generated token equal to the pad id out of the draft's attention
  (measured on a tiny model with pad 0: from the third round on the draft's logits differ
  from a fresh forward by up to 24 and the acceptance collapses; the target is unaffected,
  so the output law stays exact but the peer looks worse than it is).
* A draft whose head returns full-vocabulary logits with ``-inf`` outside a token subset
  works unchanged: its q is 0 there, such tokens are never drafted and are reached through
  the residual ``max(p - q, 0)`` (tested in ``tests/realpair/test_peer.py``).
* Batch size 1 only (the library refuses more), so prompts run one at a time.

Counting. A forward hook on the ``target`` module counts every target forward. In assisted
generation there is no separate prefill call: the prompt is encoded inside the first
verification forward (prompt + first draft), and every forward, that one included, verifies
one draft and emits at least one token. So ``target_calls`` is the number of verification
rounds, nothing is excluded, and ``block_efficiency = tokens_generated / target_calls`` is the
counterpart of :attr:`spectr_gbv.gpu.decoding.stats.DecodeStats.block_efficiency` (tokens per target
call, this package's own prefill call excluded). The last round is truncated to
``max_new_tokens`` by the library, so tokens past the budget are not counted (the package's
``DecodeStats.tokens_emitted`` counts them; ``tokens_generated`` does not). Draft forwards
are counted separately (``draft_calls``; one per drafted token plus the draft's own prefill).

References
----------
Leviathan et al., Fast Inference from Transformers via Speculative Decoding, ICML 2023
(Algorithm 1); Hugging Face, "Assisted Generation" (blog, 2023); THEORY.md sections 2-3.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class PeerResult:
    """Totals of one :func:`assisted_generation_run` over all prompts.

    Attributes
    ----------
    tokens_generated : int
        New tokens over all prompts (``len(prompts) * max_new_tokens``).
    time_s : float
        Wall-clock seconds inside ``generate`` (``time.perf_counter``, CUDA synchronised),
        summed over prompts; tokenisation-free, includes the draft's work.
    target_calls : int
        Target forwards (verification rounds; the prompt is encoded in the first one).
    tokens_per_second : float
        ``tokens_generated / time_s``.
    target_calls_per_token : float
        ``target_calls / tokens_generated``.
    block_efficiency : float
        ``tokens_generated / target_calls``: tokens per target call. No prefill call is
        excluded because the library makes none (see the module docstring).
    num_assistant_tokens : int
        Draft length per round (``constant`` schedule), the first round's (``heuristic``).
    temperature : float
    prompts : int
        Number of prompts run.
    draft_calls : int
        Draft-model forwards.
    schedule : str
        One of :data:`SCHEDULES`.
    """

    tokens_generated: int
    time_s: float
    target_calls: int
    tokens_per_second: float
    target_calls_per_token: float
    block_efficiency: float
    num_assistant_tokens: int
    temperature: float
    prompts: int = 0
    draft_calls: int = 0
    schedule: str = "constant"

    def summary(self) -> dict[str, float | int | str]:
        """Plain dict of every field, with ``peer = "transformers assisted generation"`` (for JSON)."""
        return {"peer": "transformers assisted generation", **asdict(self)}


@contextmanager
def _forward_counter(module: torch.nn.Module) -> Iterator[list[int]]:
    """Count calls of ``module.forward`` (a one-element list, updated in place) while inside."""
    count = [0]

    def hook(_module: torch.nn.Module, _args: tuple, _output: object) -> None:
        count[0] += 1

    handle = module.register_forward_hook(hook)
    try:
        yield count
    finally:
        handle.remove()


#: Draft-length schedules of transformers' assisted generation that :func:`assisted_generation_run` runs:
#: ``constant`` (every round drafts ``num_assistant_tokens``) and ``heuristic`` (start there; +2 after a
#: fully accepted round, -1 otherwise, at least 1; ``candidate_generator.py::update_candidate_strategy``).
SCHEDULES: tuple[str, ...] = ("constant", "heuristic")


@contextmanager
def _assistant_settings(
    draft: torch.nn.Module, num_assistant_tokens: int, schedule: str = "constant"
) -> Iterator[None]:
    """Pin the draft's assisted-generation settings (read from its ``generation_config``), then restore."""
    saved = draft.generation_config
    config = copy.deepcopy(saved)
    config.num_assistant_tokens = num_assistant_tokens
    config.num_assistant_tokens_schedule = schedule
    config.assistant_confidence_threshold = 0.0
    draft.generation_config = config
    try:
        yield
    finally:
        draft.generation_config = saved


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' per-call advisory warnings (restored afterwards)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def generate_kwargs(max_new_tokens: int, temperature: float) -> dict[str, object]:
    """Keyword arguments of ``generate`` that make the peer sample the package's law at ``temperature``.

    The temperature is passed as a custom ``logits_processor`` (a ``TemperatureLogitsWarper``)
    with ``temperature=1.0`` in the generation config, not as ``temperature=T``: transformers
    5.x hands the target's processor list to the assistant's own ``generate`` and then appends
    the warpers of the (copied) generation config after merging the lists, so ``temperature=T``
    is applied twice on the draft side (its logits divided by T^2; measured: draft scores =
    target logits / T^2 for an identical draft, acceptance far below 1). Passed this way it is
    applied exactly once on both sides. The output law is the target's at T either way; only
    the draft's law (and so the acceptance) differs.

    Parameters
    ----------
    max_new_tokens : int
        N >= 1; also ``min_new_tokens``.
    temperature : float
        T >= 0; 0 means greedy (``do_sample=False``).

    Returns
    -------
    dict
        ``do_sample``, ``temperature=1.0``, ``logits_processor`` (the T warper; empty at T in
        {0, 1}), ``top_k=0``, ``top_p=1.0``, neutral ``typical_p``, ``epsilon_cutoff``,
        ``eta_cutoff``, ``repetition_penalty``, ``no_repeat_ngram_size``,
        ``max_new_tokens = min_new_tokens = N``, ``eos_token_id=None``, ``pad_token_id=-1``.

    References
    ----------
    transformers 5.x ``GenerationMixin._get_logits_processor`` (merge, then warpers) and
    ``AssistedCandidateGenerator``; library default ``top_k`` is 50;
    :func:`spectr_gbv.gpu.decoding.sampling.process_logits`.
    """
    from transformers import LogitsProcessorList, TemperatureLogitsWarper

    processors = LogitsProcessorList()
    if temperature > 0 and temperature != 1:
        processors.append(TemperatureLogitsWarper(float(temperature)))
    return dict(
        do_sample=temperature > 0,
        temperature=1.0,
        logits_processor=processors,
        top_k=0,
        top_p=1.0,
        typical_p=1.0,
        epsilon_cutoff=0.0,
        eta_cutoff=0.0,
        repetition_penalty=1.0,
        no_repeat_ngram_size=0,
        max_new_tokens=max_new_tokens,
        min_new_tokens=max_new_tokens,
        eos_token_id=None,
        pad_token_id=-1,
    )


def _check_args(
    target: torch.nn.Module,
    draft: torch.nn.Module,
    prompts: Sequence[torch.Tensor],
    max_new_tokens: int,
    temperature: float,
    num_assistant_tokens: int,
) -> None:
    if draft is target:
        raise ValueError("draft is the target object itself; pass a separate model (e.g. copy.deepcopy(target))")
    if not hasattr(draft, "generation_config"):
        raise ValueError(f"draft must be a transformers model with a generation_config, got {type(draft).__name__}")
    if not prompts:
        raise ValueError("prompts is empty")
    for i, p in enumerate(prompts):
        if not isinstance(p, torch.Tensor) or p.ndim != 1 or p.numel() < 1 or p.dtype.is_floating_point:
            raise ValueError(f"prompts[{i}] must be a non-empty 1-D integer tensor, got {getattr(p, 'shape', p)!r}")
    for name, v in (("max_new_tokens", max_new_tokens), ("num_assistant_tokens", num_assistant_tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")


def _timed_generations(
    target: torch.nn.Module,
    draft: torch.nn.Module,
    prompts: Sequence[torch.Tensor],
    kwargs: dict[str, object],
    device: torch.device,
    outputs: list[torch.Tensor] | None,
) -> tuple[float, int]:
    """One assisted ``generate`` per prompt; returns (seconds inside ``generate``, new tokens)."""
    sync = device.type == "cuda"
    max_new_tokens = kwargs["max_new_tokens"]
    total_time, tokens = 0.0, 0
    for i, prompt in enumerate(prompts):
        ids = prompt.to(device=device, dtype=torch.int64).view(1, -1)
        mask = torch.ones_like(ids)
        if sync:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        out = target.generate(ids, attention_mask=mask, assistant_model=draft, **kwargs)
        if sync:
            torch.cuda.synchronize(device)
        total_time += time.perf_counter() - start
        new = out.shape[-1] - ids.shape[-1]
        if new != max_new_tokens:
            raise RuntimeError(f"assisted generation returned {new} new tokens for prompts[{i}], not {max_new_tokens}")
        tokens += new
        if outputs is not None:
            outputs.append(out[0, ids.shape[-1] :].cpu())
    return total_time, tokens


@torch.no_grad()
def assisted_generation_run(
    target: torch.nn.Module,
    draft: torch.nn.Module,
    prompts: list[torch.Tensor],
    max_new_tokens: int,
    temperature: float,
    num_assistant_tokens: int,
    seed: int,
    *,
    outputs: list[torch.Tensor] | None = None,
    warmup_tokens: int = 0,
    schedule: str = "constant",
) -> PeerResult:
    r"""Run transformers' assisted generation on each prompt (batch 1) and count target calls.

    .. math::
        \mathrm{BE}_{peer} = \frac{\text{tokens generated}}{\text{target forwards}}

    Parameters
    ----------
    target : transformers PreTrainedModel
        Causal LM p (its device is used; eval mode is assumed).
    draft : transformers PreTrainedModel
        Assistant q on the same vocabulary, a different object from ``target`` (parameters may
        be shared, e.g. :func:`spectr_gbv.realpair.models.draft.truncated_draft`). Its
        ``generation_config`` is changed for the run and restored.
    prompts : list of Tensor [T_i], int64
        Token ids, one prompt per generation.
    max_new_tokens : int
        N >= 1 new tokens per prompt (exactly; EOS does not stop the run).
    temperature : float
        T >= 0 for target and draft alike (0 = greedy assisted decoding).
    num_assistant_tokens : int
        Draft length per round, >= 1 (the counterpart of L with K = 1).
    seed : int
        ``torch.manual_seed`` inside a forked RNG state (the caller's global RNG is untouched).
    outputs : list, optional
        When given, the N new tokens of each prompt (Tensor [N], int64, CPU) are appended to it
        (for law tests of the peer).
    warmup_tokens : int
        When > 0, one untimed, uncounted generation of this many tokens on ``prompts[0]``
        runs first (library and allocator warm-up), before the seed is set.
    schedule : str
        The draft-length schedule, one of :data:`SCHEDULES`: ``"constant"`` (default) or
        ``"heuristic"`` (the call starts at ``num_assistant_tokens``; as in transformers, the
        adapted length carries over from one prompt to the next, the warm-up's included, in the
        call's copy of the draft's generation config, which is restored at the end).
        The confidence threshold is 0 either way (no early stop on the draft's own confidence).

    Returns
    -------
    PeerResult

    Raises
    ------
    ValueError
        Empty or malformed prompts, N or ``num_assistant_tokens`` < 1, negative temperature
        or ``warmup_tokens``, ``draft is target``, an unknown ``schedule``.
    RuntimeError
        A generation returned a number of new tokens other than N.

    References
    ----------
    Leviathan et al. 2023 (Algorithm 1); transformers ``GenerationMixin._assisted_decoding``;
    THEORY.md sections 2-3 (block efficiency).

    Examples
    --------
    >>> import copy, torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> cfg = LlamaConfig(vocab_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
    ...                   num_attention_heads=2, num_key_value_heads=1)
    >>> _ = torch.manual_seed(0); target = LlamaForCausalLM(cfg).eval()
    >>> res = assisted_generation_run(target, copy.deepcopy(target), [torch.tensor([1, 2, 3])],
    ...                               max_new_tokens=12, temperature=0.0, num_assistant_tokens=3, seed=0)
    >>> res.tokens_generated, res.target_calls  # identical greedy draft: 4 tokens per call
    (12, 3)
    """
    _check_args(target, draft, prompts, max_new_tokens, temperature, num_assistant_tokens)
    if isinstance(warmup_tokens, bool) or not isinstance(warmup_tokens, int) or warmup_tokens < 0:
        raise ValueError(f"warmup_tokens must be an int >= 0, got {warmup_tokens!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    device = next(target.parameters()).device
    kwargs = generate_kwargs(max_new_tokens, float(temperature))
    sync = device.type == "cuda"
    fork = [device] if sync else []
    with (
        torch.random.fork_rng(devices=fork),
        _assistant_settings(draft, num_assistant_tokens, schedule),
        _quiet_transformers(),
    ):
        if warmup_tokens > 0:
            ids = prompts[0].to(device=device, dtype=torch.int64).view(1, -1)
            warm = generate_kwargs(int(warmup_tokens), float(temperature))
            target.generate(ids, attention_mask=torch.ones_like(ids), assistant_model=draft, **warm)
        with _forward_counter(target) as t_calls, _forward_counter(draft) as d_calls:
            torch.manual_seed(seed)
            total_time, tokens = _timed_generations(target, draft, prompts, kwargs, device, outputs)
    calls = t_calls[0]
    return PeerResult(
        tokens_generated=tokens,
        time_s=total_time,
        target_calls=calls,
        tokens_per_second=tokens / total_time if total_time > 0 else float("nan"),
        target_calls_per_token=calls / tokens,
        block_efficiency=tokens / calls if calls else float("nan"),
        num_assistant_tokens=num_assistant_tokens,
        temperature=float(temperature),
        prompts=len(prompts),
        draft_calls=d_calls[0],
        schedule=schedule,
    )
