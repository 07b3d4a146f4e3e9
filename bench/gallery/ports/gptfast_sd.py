"""Port of gpt-fast's ``speculative_decode`` verify step in its default dtype, bf16 (interface ``generic_torch``).

Upstream: pytorch-labs/gpt-fast, ``generate.py``, functions ``speculative_decode``, ``logits_to_probs`` and
``multinomial_sample_one_no_sync``, at commit ``32971d3129541c5bfb4f715abc33d1c5f408d204``. ``main`` loads both
models with ``precision = torch.bfloat16``, so the logits, the softmax output (``target_probs``, ``draft_probs``)
and every tensor of the verify step are bf16. Batch size 1, one iteration per call; upstream draws from the global
torch RNG, the port from the harness's ``torch.Generator`` (same draws, same order, same dtype).

The step (upstream names its target probabilities ``q`` and its draft probabilities ``p``):

1. ``accept_draft_prob = torch.minimum(torch.ones(()), q / p)`` at the L drafted tokens (bf16 division, bf16
   result);
2. L bf16 coins ``torch.rand_like(accept_draft_prob)``, all drawn at once; the first position with
   ``coin > accept_draft_prob`` is the rejection (so a token is accepted iff ``coin <= ratio``);
3. after a rejection at t: ``new = q[t] - p[t]``, ``torch.where(new > 0, new, 0.0)``, ``new / new.sum()`` (bf16),
   then ``multinomial_sample_one_no_sync``: V bf16 exponentials ``exponential_(1)`` and ``argmax(probs / E)``;
4. after L acceptances, the same exponential-race draw from the last target row (the bonus).

The port feeds the harness's probability rows rounded to bf16 (``p.to(torch.bfloat16)``: what a bf16 softmax
returns for them); the drafts are the harness's (drawn from q).

Why its law is not the target law: **the bf16 coin**. On torch 2.13 (CPU) ``torch.rand`` in bf16 draws the float32
uniform ``k 2^-24`` (``k`` the low 24 bits of one mt19937 output) and rounds it to bf16 (round to nearest even); a
result equal to the upper bound 1.0 is replaced by the lower bound 0 (ATen's CPU ``uniform_kernel`` for reduced
floating types; older ATen masked 8 bits, ``(r & 0xFF) / 256``, ``TransformationHelper.h`` ``uniform_real``). So
the coin lives on a lattice: exactly 0 with probability ``(2^15 + 1) / 2^24`` (about 2^-9, 0.195 %: the
``k >= 2^24 - 2^15`` that round up to 1.0, plus ``k = 0``), and ``P(coin <= r)`` is a staircase in r, not r.
Consequences, computed exactly by :mod:`bench.gallery.ports.gptfast_law`:

- a drafted token with ``p = 0 < q`` (e.g. outside the target's top-k: ``logits_to_probs`` gives it probability
  0) has ratio 0 and is accepted iff the coin is exactly 0: probability ``(2^15 + 1) / 2^24`` per such token
  (the 0.2 % reported); under ordinary randomness that is about one call in 512, so a 20-call run usually sees
  none (the count is pinned in the tests);
- every other ratio is accepted with ``P(coin <= r)`` instead of r (plus bf16 rounding of p, q and of the ratio),
  which moves the output law by a TV of order 1e-3 on small instances.

A rejection at a row whose residual is all zero (``p <= q`` everywhere after bf16 rounding) divides 0 by 0: the
NaN row makes ``argmax`` return index 0, so token 0 is emitted whatever its target probability. And the race
``argmax(probs / E)`` returns an entry of probability 0 whose exponential is exactly 0 (``0 / 0 = NaN``; a float64
uniform of 0 on torch's CPU generator, 2^-53 per entry and draw).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def _as_tensor(x: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(dtype)


def multinomial_sample_one_no_sync(probs_sort: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Upstream's exponential race: ``argmax(probs / E)``, E i.i.d. Exp(1) in ``probs``' dtype; ``int32 [1]``."""
    q = torch.empty_like(probs_sort).exponential_(1, generator=generator)
    return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)


def bf16_rows(probs: Any) -> torch.Tensor:
    """The probability rows as gpt-fast's bf16 softmax returns them: ``probs`` rounded to bf16."""
    return _as_tensor(probs, torch.float64).to(torch.bfloat16)


def accept_ratios(draft_ids: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """``minimum(1, q / p)`` at the drafted tokens, bf16 ``[L]`` (upstream's q: target, p: draft).

    Parameters
    ----------
    draft_ids : Tensor, shape [L], int64
    draft_probs : Tensor, shape [L, V], bfloat16
    target_probs : Tensor, shape [L+1, V], bfloat16

    Returns
    -------
    Tensor, shape [L], bfloat16
    """
    speculate_k = draft_ids.shape[0]
    p = draft_probs[torch.arange(0, speculate_k), draft_ids]
    q = target_probs[torch.arange(0, speculate_k), draft_ids]
    return torch.minimum(torch.ones(()), q[:speculate_k] / p)


def residual(draft_row: torch.Tensor, target_row: torch.Tensor) -> torch.Tensor:
    """Upstream's correction law ``max(q - p, 0) / sum`` in bf16 ``[V]`` (NaN when the sum is 0)."""
    new = target_row - draft_row
    new = torch.where(new > 0, new, 0.0)
    return new / new.sum()


def verify(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> list[int]:
    """gpt-fast's verify step on draft 0 (``generic_torch``): the emitted tokens.

    Parameters
    ----------
    draft_tokens : Tensor or ndarray, shape [K, L], int64
        Only draft 0 is verified (gpt-fast drafts one sequence).
    draft_probs : Tensor or ndarray, shape [K, L, V], float64
        Rounded to bf16.
    target_probs : Tensor or ndarray, shape [K, L+1, V], float64
        Rounded to bf16.
    generator : torch.Generator
        L bf16 coins, then V bf16 exponentials (one categorical draw).

    Returns
    -------
    list of int
        Accepted draft prefix plus one token (length 1..L+1).
    """
    draft_ids = _as_tensor(draft_tokens, torch.int64)[0]
    d_probs = bf16_rows(_as_tensor(draft_probs, torch.float64)[0])
    t_probs = bf16_rows(_as_tensor(target_probs, torch.float64)[0])
    accept_draft_prob = accept_ratios(draft_ids, d_probs, t_probs)
    coins = torch.rand(accept_draft_prob.shape, dtype=accept_draft_prob.dtype, generator=generator)
    rejected_locations = (coins > accept_draft_prob).nonzero()
    if rejected_locations.shape[0] == 0:
        last_token = multinomial_sample_one_no_sync(t_probs[-1], generator)
        return [int(t) for t in draft_ids] + [int(last_token)]
    accept_length = int(rejected_locations[0].item())
    next_token = multinomial_sample_one_no_sync(residual(d_probs[accept_length], t_probs[accept_length]), generator)
    return [int(t) for t in draft_ids[:accept_length]] + [int(next_token)]
