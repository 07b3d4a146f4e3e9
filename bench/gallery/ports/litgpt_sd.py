"""Port of LitGPT's ``speculative_decoding`` verify step (interface ``generic_torch``).

Upstream: Lightning-AI/litgpt, ``litgpt/generate/speculative_decoding.py``, functions ``speculative_decoding``
(Steps 3-4) and ``sample``, with ``sample_top_p`` from ``litgpt/generate/base.py``, at commit
``26857050fe3ff627cd714fe92f5838f51a3d5efa`` (the file last changed in ``8c3ce130d52f``). Batch size 1, one
iteration per call, the global torch RNG upstream (here the harness's ``torch.Generator``, same draws, same order).

What the step does, in upstream's order:

1. (drafting, Step 1) each draft token comes from ``sample(draft_logits)``; the draft probabilities are that call's
   ``probs``. Here the harness supplies the drafts (drawn from q, the law the draft model samples) and the port
   computes ``probs`` with the same transform (``top_k``, temperature, ``top_p``, softmax, float32 logits
   ``log q``), without drawing: the port's draws start at Step 3;
2. (Step 3) ``sample(target_logit)`` on each of the L+1 target rows: it returns ``probs`` **and draws one token
   with** ``torch.multinomial(probs, 1)``, **which is discarded**: L+1 multinomial draws before any coin;
3. (Step 4) for each draft position: accept without a coin when ``target_prob >= draft_prob``; else
   ``discard_prob = 1 - target_prob / draft_prob`` (float32) and one float32 coin ``torch.rand(1)``; the token is
   rejected when ``coin <= discard_prob`` (so a coin of exactly 0 rejects: no zero-coin defect);
4. on rejection ``adjusted = clamp(target_probs - draft_probs, 0) / sum`` and ``sample(adjusted, apply_softmax=
   False)``: the residual goes through the sampling transform again *as logits* (``top_k`` keeps its k largest
   entries, filling 0; temperature divides it; ``top_p < 1`` runs ``sample_top_p`` on it, which masks entries with
   ``-inf``), then ``torch.multinomial``;
5. after L acceptances, the bonus ``sample(target_logits)`` on the last target row (one more multinomial draw).

Failure modes that follow from this logic (pinned in ``tests/gallery/test_ports.py``):

- a rejection at a row where ``p <= q`` on every token (rows that agree up to rounding): ``adjusted.sum()`` is 0,
  ``0 / 0`` gives NaN and ``torch.multinomial`` raises ``RuntimeError`` (invalid probability tensor);
- ``top_p < 1``: on a rejection ``sample_top_p`` sees the residual as logits; whenever the smallest entry of
  ``softmax(residual)`` is at most ``1 - top_p`` it is set to ``-inf`` and ``torch.multinomial`` raises on the
  negative entry (with top_p = 0.5 and V >= 2 always; with top_p = 0.9 only when V is large enough);
- a drafted token with ``p = 0 < q`` is always rejected (``discard_prob = 1 >= coin``): where the rows otherwise
  agree up to rounding the residual is all zero and the call raises every time; elsewhere the residual has mass
  and the correction is an ordinary draw;
- ``torch.multinomial(probs, 1)`` on CPU is ``argmax(probs / E)`` with E i.i.d. Exp(1) (ATen
  ``Distributions.cpp``, ``multinomial``, whose comment acknowledges it): an exponential of exactly 0 (one float64
  uniform of 0, probability 2^-53) at an entry of probability 0 gives ``0 / 0 = NaN``, which ``argmax`` returns,
  so the correction or the bonus can be a token of probability 0 (2^-53 per zero entry and draw).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def _as_tensor(x: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(dtype)


def _log_float32(probs: torch.Tensor) -> torch.Tensor:
    """float32 logits ``log(probs)`` (``-inf`` at 0): softmax of them gives the probabilities back."""
    return torch.log(probs.to(torch.float64)).to(torch.float32)


def _coin(generator: torch.Generator) -> torch.Tensor:
    """Upstream's acceptance coin ``torch.rand(1)``: float32 ``[1]``."""
    return torch.rand(1, generator=generator)


def _sample_top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Upstream ``sample_top_p``: mask (``-inf``) the ascending-sorted entries whose softmax cumsum is <= 1 - top_p."""
    sorted_logits, sorted_indices = torch.sort(logits, descending=False)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    sorted_indices_to_remove[-1:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(0, sorted_indices, sorted_indices_to_remove)
    return logits.masked_fill(indices_to_remove, float("-inf"))


def _transform(
    logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float, apply_softmax: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Upstream ``sample`` up to its draw: ``(probs, None)`` when it draws, ``(softmax, argmax token)`` when greedy."""
    if top_p < 0.0 or top_p > 1.0:
        raise ValueError(f"top_p must be in [0, 1], got {top_p}")
    if top_k is not None:
        v, i = torch.topk(logits, min(top_k, logits.size(-1)))
        fill_value = float("-inf") if apply_softmax else float(0)
        logits = torch.full_like(logits, fill_value).scatter_(-1, i, v)
    if temperature > 0.0 and top_p > 0.0:
        logits = logits / temperature
        if top_p < 1.0:
            logits = _sample_top_p(logits, top_p)
        return (torch.nn.functional.softmax(logits, dim=-1) if apply_softmax else logits), None
    return torch.nn.functional.softmax(logits, dim=-1), torch.argmax(logits, dim=-1, keepdim=True)


def _sample(
    logits: torch.Tensor,
    generator: torch.Generator,
    temperature: float,
    top_k: int | None,
    top_p: float,
    apply_softmax: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream ``sample`` on one row ``[V]``: ``(token [1] int64, probs [V])``, one multinomial draw when sampling."""
    probs, greedy = _transform(logits, temperature, top_k, top_p, apply_softmax)
    if greedy is None:
        return torch.multinomial(probs, num_samples=1, generator=generator), probs
    return greedy, probs


def verify(
    draft_tokens: Any,
    draft_probs: Any,
    target_probs: Any,
    generator: torch.Generator,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
) -> list[int]:
    """LitGPT's verify step on draft 0 (``generic_torch``): the emitted tokens.

    Parameters
    ----------
    draft_tokens : Tensor or ndarray, shape [K, L], int64
        Only draft 0 is verified (LitGPT drafts one sequence).
    draft_probs : Tensor or ndarray, shape [K, L, V], float64
        ``q`` rows; used as float32 logits ``log q``.
    target_probs : Tensor or ndarray, shape [K, L+1, V], float64
        ``p`` rows; used as float32 logits ``log p``.
    generator : torch.Generator
        Every draw: L+1 discarded multinomial draws, then float32 coins, then one multinomial draw.
    temperature, top_k, top_p : float, int or None, float
        Upstream's sampling arguments (defaults: the untruncated target law).

    Returns
    -------
    list of int
        Accepted draft prefix plus one token (length 1..L+1).

    Raises
    ------
    RuntimeError
        From ``torch.multinomial`` on a rejection whose residual is all zero, or (``top_p < 1``) masked.
    ValueError
        ``top_p`` outside [0, 1] (upstream's check).
    """
    drafts = _as_tensor(draft_tokens, torch.int64)[0]
    logq = _log_float32(_as_tensor(draft_probs, torch.float64)[0])
    logp = _log_float32(_as_tensor(target_probs, torch.float64)[0])
    L = drafts.shape[0]
    q_rows = [_transform(logq[t], temperature, top_k, top_p, True)[0] for t in range(L)]
    p_rows = [_sample(logp[t], generator, temperature, top_k, top_p)[1] for t in range(L + 1)]
    accepted: list[torch.Tensor] = []
    for idx in range(L):
        draft_token = drafts[idx].unsqueeze(0)
        draft_prob = q_rows[idx][draft_token]
        target_prob = p_rows[idx][draft_token]
        if target_prob >= draft_prob:
            accepted.append(draft_token)
            continue
        discard_prob = 1 - target_prob / draft_prob
        should_discard_token = _coin(generator) <= discard_prob
        if not should_discard_token:
            accepted.append(draft_token)
            continue
        adjusted = torch.clamp(p_rows[idx] - q_rows[idx], 0.0)
        adjusted = adjusted / adjusted.sum()
        new_token, _ = _sample(adjusted, generator, temperature, top_k, top_p, apply_softmax=False)
        return [int(t) for t in torch.cat((*accepted, new_token))]
    new_token, _ = _sample(logp[L], generator, temperature, top_k, top_p)
    return [int(t) for t in torch.cat((*accepted, new_token))]


def verify_top_p(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> list[int]:
    """:func:`verify` with ``top_p=0.5`` (the target law is then p truncated to its top-p nucleus, by design)."""
    return verify(draft_tokens, draft_probs, target_probs, generator, top_p=0.5)
