r"""The exact law of the first m tokens a sampling loop draws from a model, after temperature, top-k and top-p.

transformers samples a token from ``softmax(w(logits))`` where ``w`` is its warpers in this
order (``GenerationMixin._get_logits_processor`` with ``do_sample=True``):

1. ``TemperatureLogitsWarper``: ``scores / temperature`` (float32; skipped at 1.0);
2. ``TopKLogitsWarper``: ``-inf`` for every score below the k-th largest (ties with it are
   kept; skipped at 0);
3. ``TopPLogitsWarper``: sort ascending, ``cumsum(softmax)``, ``-inf`` where the cumulative
   probability is ``<= 1 - top_p``, the largest always kept (skipped at 1.0).

:func:`processed_probs` runs those same float32 operations (so the kept set is the one
transformers keeps) and returns the float64 softmax of the kept scores: the law a correct loop
samples from, up to float32 rounding of the softmax (relative 1e-7, far below what any sample
size resolves). Settings whose kept set is fragile (a top-p cumulative probability within
:data:`BOUNDARY_TOL` of ``1 - top_p``, or a tie at the k-th largest score) would make two
correct implementations keep different sets, so they raise instead of being tested.

:func:`sequence_law` enumerates the joint law of the first m generated tokens by the chain rule
over the model's support (:meth:`~spectr_gbv.gpu.models.reference_lm.ReferenceLM.next_logits`),
never by sampling.

References
----------
Holtzman et al., The Curious Case of Neural Text Degeneration, ICLR 2020 (top-p); Fan et al.,
Hierarchical Neural Story Generation, ACL 2018 (top-k); transformers' ``logits_process.py``
(the warpers' exact semantics reproduced here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

#: The largest number of sequences (support size ** m) :func:`sequence_law` enumerates.
MAX_ENUMERATION = 200_000
#: A top-p cumulative probability this close to ``1 - top_p`` makes the kept set fragile.
BOUNDARY_TOL = 1e-5


@dataclass(frozen=True)
class SamplingSettings:
    """Sampling settings as transformers reads them: temperature, then top-k, then top-p.

    Parameters
    ----------
    temperature : float
        > 0 and finite (1.0 = unchanged).
    top_k : int
        >= 0 (0 = off).
    top_p : float
        In (0, 1] (1.0 = off).

    Raises
    ------
    ValueError
        A value outside its range, named.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        t, k, p = self.temperature, self.top_k, self.top_p
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"temperature: expected a finite float > 0, got {t!r}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"top_k: expected an int >= 0 (0 = off), got {k!r}")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise ValueError(f"top_p: expected a float in (0, 1] (1.0 = off), got {p!r}")

    def label(self) -> str:
        """A short label, e.g. ``"T=0.7,top_k=3"`` (``"T=1"`` when nothing is on)."""
        parts = [f"T={self.temperature:g}"]
        if self.top_k:
            parts.append(f"top_k={self.top_k}")
        if self.top_p < 1.0:
            parts.append(f"top_p={self.top_p:g}")
        return ",".join(parts)

    def as_kwargs(self) -> dict[str, Any]:
        """``{"temperature", "top_k", "top_p"}`` as the generation interface takes them."""
        return {"temperature": float(self.temperature), "top_k": int(self.top_k), "top_p": float(self.top_p)}


def warped_scores(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """The float32 scores transformers samples from: ``logits`` through temperature, top-k and top-p.

    Parameters
    ----------
    logits : Tensor [V], float
        One row of next-token logits (converted to float32, as transformers does).
    settings : SamplingSettings

    Returns
    -------
    Tensor [V], float32
        The processed scores; removed tokens are ``-inf``.

    Raises
    ------
    ValueError
        A fragile kept set: a tie at the k-th largest score, or a top-p cumulative probability
        within :data:`BOUNDARY_TOL` of ``1 - top_p``.
    """
    scores = logits.detach().to(device="cpu", dtype=torch.float32).reshape(1, -1)
    if settings.temperature != 1.0:
        scores = scores / settings.temperature
    if settings.top_k:
        k = min(settings.top_k, scores.shape[-1])
        top = torch.topk(scores, k)[0]
        kth = top[..., -1, None]
        finite = int(torch.isfinite(scores).sum())
        if k < finite and bool((scores == kth).sum() > 1):
            raise ValueError(f"top_k: {settings.top_k} cuts through tied scores; pick another top_k")
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if settings.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        cut = 1 - settings.top_p
        live = torch.isfinite(sorted_scores)
        if bool((live & ((cumulative - cut).abs() < BOUNDARY_TOL)).any()):
            raise ValueError(
                f"top_p: {settings.top_p} lies within {BOUNDARY_TOL:g} of a cumulative probability; pick another top_p"
            )
        remove = cumulative <= cut
        remove[..., -1:] = False
        scores = scores.masked_fill(remove.scatter(1, order, remove), float("-inf"))
    return scores[0]


def processed_probs(logits: torch.Tensor, settings: SamplingSettings) -> np.ndarray:
    """The law a correct loop samples a token from, given the model's ``logits`` and ``settings``.

    Parameters
    ----------
    logits : Tensor [V], float
    settings : SamplingSettings

    Returns
    -------
    ndarray [V], float64
        Softmax (in float64) of :func:`warped_scores`; sums to 1 within 1e-12.

    Raises
    ------
    ValueError
        A fragile kept set (:func:`warped_scores`) or no finite logit.
    """
    scores = warped_scores(logits, settings).to(torch.float64).numpy()
    finite = np.isfinite(scores)
    if not finite.any():
        raise ValueError("logits: no finite logit (no token can be drawn)")
    out = np.zeros_like(scores)
    z = scores[finite] - scores[finite].max()
    w = np.exp(z)
    out[finite] = w / w.sum()
    return out


def conditional_law(model: Any, context: Sequence[int], settings: SamplingSettings) -> np.ndarray:
    """The law of the next token after ``context`` (prompt + generated ids) under ``settings``.

    Parameters
    ----------
    model : ReferenceLM
        Anything with ``next_logits(context) -> Tensor [V]``.
    context : sequence of int
    settings : SamplingSettings

    Returns
    -------
    ndarray [V], float64
    """
    return processed_probs(model.next_logits(list(context)), settings)


def enumeration_size(model: Any, m: int) -> int:
    """Sequences :func:`sequence_law` would enumerate: ``len(model.support) ** m`` (V ** m without a support)."""
    n = len(getattr(model, "support", ())) or int(model.config.vocab_size)
    return n**m


def sequence_law(
    model: Any, prompt_ids: Sequence[int], m: int, settings: SamplingSettings
) -> dict[tuple[int, ...], float]:
    """The exact joint law of the first ``m`` tokens a correct sampling loop generates after ``prompt_ids``.

    Parameters
    ----------
    model : ReferenceLM
        Anything with ``next_logits(context) -> Tensor [V]`` and ``support``.
    prompt_ids : sequence of int
        At least one id.
    m : int
        Generated tokens, >= 1.
    settings : SamplingSettings

    Returns
    -------
    dict
        ``{(x_1, ..., x_m): probability}`` over the sequences of positive probability (float64,
        summing to 1 within 1e-12).

    Raises
    ------
    ValueError
        ``m`` < 1, or more than :data:`MAX_ENUMERATION` sequences to enumerate (named ``m``); an
        empty prompt; a fragile setting (:func:`warped_scores`).
    """
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m: expected an int >= 1, got {m!r}")
    size = enumeration_size(model, m)
    if size > MAX_ENUMERATION:
        raise ValueError(
            f"m: {m} generated tokens means {size:,} sequences to enumerate, more than {MAX_ENUMERATION:,}; "
            "use a smaller m"
        )
    prompt = [int(i) for i in prompt_ids]
    if not prompt:
        raise ValueError("prompt_ids: expected at least one id")
    law: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(m):
        grown: dict[tuple[int, ...], float] = {}
        for prefix, mass in law.items():
            row = conditional_law(model, prompt + list(prefix), settings)
            for tok in np.flatnonzero(row):
                grown[prefix + (int(tok),)] = mass * float(row[tok])
        law = grown
    return law
