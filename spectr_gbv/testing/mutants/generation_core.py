r"""The machinery of the planted-bug generation loops: laws, draws, the cached loop and the batched loop.

Shared by the correct loops of :mod:`~spectr_gbv.testing.mutants.generation_loops` (which
re-exports these names) and their planted bugs in
:mod:`~spectr_gbv.testing.mutants.generation_bugs`: :func:`processed_law` (transformers'
warpers, then a float64 softmax), :func:`gumbel_argmax`, :class:`LoopNoise` (an iteration's
random numbers), :class:`SpeculativeLoop` (one prompt, ``DynamicCache`` caches),
:class:`BatchedSpeculativeLoop` (B ragged prompts, left padding, no cache), :func:`run_loop` and
:func:`generation_function` (the generation interface around a loop class) and :func:`tag`
(the attributes the referee's bench reads).

References
----------
Leviathan, Kalman & Matias, Fast Inference from Transformers via Speculative Decoding, ICML 2023.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from spectr_gbv.gpu.models.sequence_law import SamplingSettings

#: Draft tokens per iteration (L, ``gamma`` in Leviathan et al.).
DEFAULT_GAMMA = 3


# ============================================================================ laws and draws
def processed_law(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """The law transformers samples from: ``logits`` through its temperature, top-k and top-p warpers, softmaxed.

    Parameters
    ----------
    logits : Tensor [N, V], float
        Next-token logits, one row per position (cast to float32, as transformers does).
    settings : SamplingSettings
        A warper is skipped where transformers skips it (temperature 1, top-k 0, top-p 1).

    Returns
    -------
    Tensor [N, V], float64
        Each row sums to 1; removed tokens have probability 0.
    """
    scores = logits.detach().to(torch.float32).reshape(-1, logits.shape[-1])
    unused = torch.empty(scores.shape[0], 0, dtype=torch.long)
    if settings.temperature != 1.0:
        scores = TemperatureLogitsWarper(float(settings.temperature))(unused, scores)
    if settings.top_k:
        scores = TopKLogitsWarper(int(settings.top_k))(unused, scores)
    if settings.top_p < 1.0:
        scores = TopPLogitsWarper(float(settings.top_p))(unused, scores)
    return torch.softmax(scores.to(torch.float64), dim=-1)


def gumbel_argmax(weights: torch.Tensor, uniforms: torch.Tensor) -> int:
    r"""One draw from ``weights`` (unnormalised) by the Gumbel-max trick: :math:`\arg\max_x \log w_x - \log(-\log U_x)`.

    Parameters
    ----------
    weights : Tensor [V], float64
        Non-negative, positive sum; zero entries are never drawn.
    uniforms : Tensor [V], float64
        Independent uniforms in [0, 1).

    Returns
    -------
    int
        The token id drawn; its law is ``weights / weights.sum()``.
    """
    return int(torch.argmax(torch.log(weights) - torch.log(-torch.log(uniforms))))


class LoopNoise:
    """The random numbers of one iteration of one row: three separate draws from the loop's generator.

    Parameters
    ----------
    generator : torch.Generator
        The loop's only source of randomness.
    gamma : int
        Draft tokens per iteration.
    vocab_size : int
        V.

    Attributes
    ----------
    draft : Tensor [gamma, V], float64
        Uniforms of the draft's Gumbel noise, row i for ``d_{i+1}``.
    accept : Tensor [gamma], float64
        Acceptance uniforms.
    final : Tensor [V], float64
        Uniforms of the Gumbel noise of the recovery or bonus draw.
    """

    def __init__(self, generator: torch.Generator, gamma: int, vocab_size: int) -> None:
        self.draft = torch.rand(gamma, vocab_size, generator=generator, dtype=torch.float64)
        self.accept = torch.rand(gamma, generator=generator, dtype=torch.float64)
        self.final = torch.rand(vocab_size, generator=generator, dtype=torch.float64)

    def draft_row(self, i: int) -> torch.Tensor:
        """Uniforms [V] of the draft's draw at position ``i`` (0-based)."""
        return self.draft[i]

    def coin(self, i: int, token: int) -> float:
        """The acceptance uniform of the draft token ``token`` at position ``i``."""
        return float(self.accept[i])

    def final_row(self, position: int) -> torch.Tensor:
        """Uniforms [V] of the token emitted at ``position`` (the rejection's, or ``gamma`` for the bonus)."""
        return self.final


# ============================================================================ the single-prompt loop
class SpeculativeLoop:
    """Token-level speculative sampling with ``DynamicCache`` caches cropped after each rejection.

    Parameters
    ----------
    target, draft : transformers causal LMs
        Same vocabulary; called with ``input_ids [1, W]``, ``position_ids [1, W]``,
        ``past_key_values`` and ``use_cache=True``.
    settings : SamplingSettings
        Applied to both models' logits (:func:`processed_law`).
    seed : int
        >= 0: seeds the loop's ``torch.Generator``.
    gamma : int
        >= 1: draft tokens per iteration.

    Attributes
    ----------
    trace : list of dict
        One entry per iteration: ``accepted`` (n), ``token`` (the emitted non-draft token),
        ``target_cache`` and ``draft_cache`` (each cache's length after the rollback) and
        ``kept`` (the context length the caches must hold).

    Raises
    ------
    ValueError
        Different vocabularies, ``seed`` < 0 or ``gamma`` < 1, named.
    """

    noise_class: type[LoopNoise] = LoopNoise

    def __init__(self, target: Any, draft: Any, settings: SamplingSettings, *, seed: int, gamma: int) -> None:
        vt, vd = int(target.config.vocab_size), int(draft.config.vocab_size)
        if vt != vd:
            raise ValueError(f"draft: vocabulary {vd} differs from the target's {vt}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
        if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
            raise ValueError(f"gamma: expected an int >= 1, got {gamma!r}")
        self.target, self.draft, self.settings, self.gamma, self.vocab_size = target, draft, settings, gamma, vt
        self.generator = torch.Generator().manual_seed(seed)
        self.trace: list[dict[str, int]] = []
        self._caches = {"target": DynamicCache(), "draft": DynamicCache()}
        self._fed = {"target": 0, "draft": 0}  # tokens of the context each cache holds

    # ------------------------------------------------------------------ overridable steps
    def draft_laws(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The law the draft samples from and the law ``q`` handed to the verifier (the same, here).

        Parameters
        ----------
        logits : Tensor [N, V], float32
            The draft's logits.

        Returns
        -------
        sample_law, q : Tensor [N, V], float64
        """
        q = processed_law(logits, self.settings)
        return q, q

    def target_law(self, logits: torch.Tensor) -> torch.Tensor:
        """``p``: the target's processed law, Tensor [N, V] float64, from its logits [N, V]."""
        return processed_law(logits, self.settings)

    def final_row(self, accepted: int) -> int:
        """The row of ``p`` (and ``q``) the emitted non-draft token is drawn from: ``accepted`` (n)."""
        return accepted

    def rollback(self, kept: int) -> None:
        """Crop both caches to the first ``kept`` tokens of the context (the accepted prefix)."""
        for name in ("target", "draft"):
            extra = self._caches[name].get_seq_length() - kept
            if extra > 0:
                self._caches[name].crop(-extra)  # a negative count removes that many slots (transformers 4 and 5)
            self._fed[name] = min(self._fed[name], kept)

    # ------------------------------------------------------------------ steps
    def _feed(self, name: str, context: Sequence[int]) -> torch.Tensor:
        """Feed the tokens of ``context`` the cache ``name`` lacks; their logits [W, V] float32."""
        model = self.target if name == "target" else self.draft
        start = self._fed[name]
        new = torch.tensor([list(context[start:])], dtype=torch.long)
        positions = torch.arange(start, len(context), dtype=torch.long)[None]
        # transformers 5 renames ``past_key_values`` to ``cache`` (the old name is deprecated): use what forward takes
        key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        out = model(input_ids=new, position_ids=positions, use_cache=True, **{key: self._caches[name]})
        self._fed[name] = len(context)
        return out.logits[0].to(torch.float32)

    def propose(self, ids: list[int], noise: LoopNoise) -> tuple[list[int], torch.Tensor]:
        """Draw ``gamma`` draft tokens after ``ids``; returns them and ``q`` [gamma, V] float64."""
        drafts: list[int] = []
        rows: list[torch.Tensor] = []
        for i in range(self.gamma):
            logits = self._feed("draft", ids + drafts)[-1:]
            sample_law, q = self.draft_laws(logits)
            drafts.append(gumbel_argmax(sample_law[0], noise.draft_row(i)))
            rows.append(q[0])
        return drafts, torch.stack(rows)

    def score(self, ids: list[int], drafts: list[int]) -> torch.Tensor:
        """``p`` [gamma + 1, V] float64: the target's laws after ``ids`` and after each draft prefix."""
        logits = self._feed("target", ids + drafts)
        return self.target_law(logits[-(self.gamma + 1) :])

    def verify(self, drafts: list[int], q: torch.Tensor, p: torch.Tensor, noise: LoopNoise) -> tuple[int, int]:
        """Leviathan et al.'s rule: ``(n accepted, token)`` from drafts [gamma], q [gamma, V], p [gamma + 1, V]."""
        n = 0
        while n < self.gamma and noise.coin(n, drafts[n]) * float(q[n, drafts[n]]) < float(p[n, drafts[n]]):
            n += 1
        row = self.final_row(n)
        if n == self.gamma:
            return n, gumbel_argmax(p[row], noise.final_row(n))
        residual = torch.clamp(p[row] - q[n], min=0.0)
        if not float(residual.sum()) > 0.0:  # p_n <= q_n everywhere (rounding): p_n itself
            residual = p[row]
        return n, gumbel_argmax(residual, noise.final_row(n))

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int) -> list[int]:
        """The first ``max_new_tokens`` new ids after ``prompt_ids`` (list of int)."""
        ids = [int(i) for i in prompt_ids]
        start = len(ids)
        with torch.no_grad():
            while len(ids) - start < max_new_tokens:
                noise = self.noise_class(self.generator, self.gamma, self.vocab_size)
                drafts, q = self.propose(ids, noise)
                p = self.score(ids, drafts)
                n, token = self.verify(drafts, q, p, noise)
                self.rollback(len(ids) + n)
                ids += drafts[:n] + [token]
                self.trace.append(
                    {
                        "accepted": n,
                        "token": token,
                        "kept": len(ids) - 1,
                        "target_cache": self._caches["target"].get_seq_length(),
                        "draft_cache": self._caches["draft"].get_seq_length(),
                    }
                )
        return ids[start : start + max_new_tokens]


# ============================================================================ the batched loop
class BatchedSpeculativeLoop(SpeculativeLoop):
    """:class:`SpeculativeLoop` on B ragged prompts: left-padded batches recomputed without a cache.

    Each forward feeds every row's whole context, left-padded to the longest with the target's
    ``pad_token_id`` (0 without one), a 2-D attention mask (0 on padding) and position ids
    counted from the row's first real token; rows draw their own :class:`LoopNoise` (in row
    order) and accept independently. Parameters and errors as :class:`SpeculativeLoop`.
    """

    def batch_inputs(self, rows: list[list[int]]) -> dict[str, torch.Tensor]:
        """One forward's keyword arguments for ``rows``: ``input_ids``, ``attention_mask``, ``position_ids`` [B, T]."""
        width = max(len(r) for r in rows)
        pad = getattr(self.target.config, "pad_token_id", None) or 0
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}

    def _last_logits(self, model: Any, rows: list[list[int]], k: int) -> torch.Tensor:
        """Logits [B, k, V] float32 of the last ``k`` positions of every row."""
        out = model(**self.batch_inputs(rows), use_cache=False, logits_to_keep=k)
        return out.logits[:, -k:].to(torch.float32)

    def generate_batch(self, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> list[list[int]]:
        """The first ``max_new_tokens`` new ids of every prompt (list of B lists of int)."""
        ids = [[int(i) for i in p] for p in prompts]
        starts = [len(r) for r in ids]
        with torch.no_grad():
            while min(len(r) - s for r, s in zip(ids, starts, strict=True)) < max_new_tokens:
                noises = [self.noise_class(self.generator, self.gamma, self.vocab_size) for _ in ids]
                drafts: list[list[int]] = [[] for _ in ids]
                qs: list[list[torch.Tensor]] = [[] for _ in ids]
                for i in range(self.gamma):
                    logits = self._last_logits(self.draft, [r + d for r, d in zip(ids, drafts, strict=True)], 1)
                    sample_law, q = self.draft_laws(logits[:, 0])
                    for b, noise in enumerate(noises):
                        drafts[b].append(gumbel_argmax(sample_law[b], noise.draft_row(i)))
                        qs[b].append(q[b])
                scored = [r + d for r, d in zip(ids, drafts, strict=True)]
                logits = self._last_logits(self.target, scored, self.gamma + 1)
                ps = [self.target_law(logits[b]) for b in range(len(ids))]
                for b, (n, token) in enumerate(self.verify_rows(drafts, [torch.stack(q) for q in qs], ps, noises)):
                    ids[b] += drafts[b][:n] + [token]
        return [r[s : s + max_new_tokens] for r, s in zip(ids, starts, strict=True)]

    def verify_rows(
        self, drafts: list[list[int]], qs: list[torch.Tensor], ps: list[torch.Tensor], noises: list[LoopNoise]
    ) -> list[tuple[int, int]]:
        """``verify`` on each row alone: ``[(n_b, token_b)]`` from B drafts, q [gamma, V], p [gamma + 1, V]."""
        return [self.verify(d, q, p, noise) for d, q, p, noise in zip(drafts, qs, ps, noises, strict=True)]


# ============================================================================ interface functions
def _check_request(prompt_ids: Any, max_new_tokens: Any, vocab_size: int, name: str = "prompt_ids") -> list[int]:
    """``prompt_ids`` as a list of ids in [0, V) after checking it and ``max_new_tokens``."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens: expected an int >= 0, got {max_new_tokens!r}")
    ids = [int(i) for i in prompt_ids]
    if not ids or min(ids) < 0 or max(ids) >= vocab_size:
        raise ValueError(f"{name}: expected at least one id in [0, {vocab_size}), got {ids}")
    return ids


def run_loop(
    loop_class: type[SpeculativeLoop],
    target: Any,
    draft: Any,
    prompt_ids: Sequence[int] | Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
    gamma: int,
    batched: bool = False,
) -> list[int] | list[list[int]]:
    """Run ``loop_class`` behind the generation interface (single, or batched when ``batched``).

    Parameters
    ----------
    loop_class : type
        :class:`SpeculativeLoop` or a subclass (:class:`BatchedSpeculativeLoop` or a subclass
        when ``batched``).
    target, draft, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, gamma
        As :func:`speculative_generate` (``prompt_ids`` a list of B prompts when ``batched``).
    batched : bool
        The ``"generation_batched"`` interface.

    Returns
    -------
    list of int, or list of B lists of int
        ``max_new_tokens`` new ids (per prompt).

    Raises
    ------
    ValueError
        A sampling setting out of range, an empty prompt or an id outside the vocabulary, a
        negative ``max_new_tokens`` or ``seed``, ``gamma`` < 1, models of different vocabularies.
    """
    settings = SamplingSettings(temperature=temperature, top_k=top_k, top_p=top_p)
    loop = loop_class(target, draft, settings, seed=seed, gamma=gamma)
    if not batched:
        return loop.generate(_check_request(prompt_ids, max_new_tokens, loop.vocab_size), max_new_tokens)
    if not isinstance(loop, BatchedSpeculativeLoop):
        raise ValueError(f"loop_class: {loop_class.__name__} is not a BatchedSpeculativeLoop")
    prompts = [_check_request(p, max_new_tokens, loop.vocab_size, f"prompt_ids[{b}]") for b, p in enumerate(prompt_ids)]
    if not prompts:
        raise ValueError("prompt_ids: expected at least one prompt")
    return loop.generate_batch(prompts, max_new_tokens)


def tag(
    *, interface: str, bug: str, description: str, caught_by: str, source: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator setting a loop function's ``interface``, ``bug``, ``description``, ``caught_by`` and ``source``."""

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for key, value in dict(
            interface=interface, bug=bug, description=description, caught_by=caught_by, source=source
        ).items():
            setattr(fn, key, value)
        return fn

    return apply


def generation_function(loop_class: type[SpeculativeLoop], *, batched: bool = False) -> Callable[..., Any]:
    """The generation-interface function (``"generation_batched"`` when ``batched``) that runs ``loop_class``.

    Parameters
    ----------
    loop_class : type
        :class:`SpeculativeLoop` or a subclass (a :class:`BatchedSpeculativeLoop` one when ``batched``).
    batched : bool

    Returns
    -------
    callable
        ``generate(target, draft, prompt_ids, max_new_tokens, *, temperature=1.0, top_k=0,
        top_p=1.0, seed=0, gamma=DEFAULT_GAMMA)``, as :func:`run_loop`.
    """

    def generate(
        target: Any,
        draft: Any,
        prompt_ids: Sequence[Any],
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        gamma: int = DEFAULT_GAMMA,
    ) -> list[Any]:
        return run_loop(
            loop_class,
            target,
            draft,
            prompt_ids,
            max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            gamma=gamma,
            batched=batched,
        )

    return generate
