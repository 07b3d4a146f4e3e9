"""Port of vLLM V1's rejection sampler, random-sampling path, batched (interface ``batched_torch``).

Upstream: vllm-project/vllm, ``vllm/v1/sample/rejection_sampler.py`` at commit
``7f6fc1c5ce8d02f473b1b923debbfef3fa0b7a6a``: ``RejectionSampler.forward``, ``rejection_sample``,
``generate_uniform_probs``, ``sample_recovered_tokens``, and the Triton kernels ``rejection_random_sample_kernel``
and ``sample_recovered_tokens_kernel`` (written here as their torch equivalents, element for element); the bonus
token comes from the V1 ``Sampler``'s torch path (``TopKTopPSampler.forward_native`` -> ``random_sample``:
``probs.div_(q).argmax(dim=-1)`` with ``q`` float32 Exp(1)). One request per row of the batch, each with its own
seeded generator upstream (``sampling_metadata.generators``); here every request draws from the harness's one
``torch.Generator``, request by request, in upstream's order:

1. the bonus token of every request (``forward`` samples it first): ``q[i].exponential_(generator)`` over the V
   float32 entries, ``argmax(softmax(bonus logits) / q)``;
2. the acceptance uniforms: ``uniform_probs[start:end].uniform_(generator)`` in **float64**, one per draft token
   (upstream first fills the buffer with the global RNG and then overwrites every seeded request's slice; the
   port allocates it empty, as every request here is seeded);
3. the recovered-token exponentials: one float32 vector ``q[i].exponential_(generator)`` per request with drafts,
   shared by all its positions; the recovered token at a position is ``argmax(max(target - draft, 0) / q[i])``
   (no normalisation: the argmax does not need it);
4. the kernel: accept the draft token iff ``draft_prob > 0 and target_prob / draft_prob >= uniform`` (float32
   ratio against the float64 uniform), else emit the recovered token and stop; after L acceptances the bonus.

Target probabilities are ``softmax(float32 logits)`` (here ``log p`` in float32, so the rows come back rounded to
float32); draft probabilities are float32.

Facts that follow (pinned in ``tests/gallery/test_ports.py``):

- a drafted token with ``p = 0 < q`` is accepted iff the uniform is exactly 0.0: ``0 >= u``. torch's CPU
  float64 uniform is ``(r64 & (2^53 - 1)) 2^-53``, so that has probability 2^-53 per draw: under ordinary
  randomness it never happens (0 in 20 calls, and in any feasible number); upstream switched these uniforms from
  float32 (2^-24) to float64 for exactly this reason. A forced zero coin does emit the probability-0 token;
- a rejection at a row with ``p <= q`` everywhere (all-zero residual) makes ``0 / q`` all zero and ``argmax``
  returns index 0: token 0 is emitted whatever its target probability;
- both exponential races (bonus, recovered) take ``argmax(probs / E)``: an exponential of exactly 0 (a float64
  uniform of 0 on torch's CPU generator, 2^-53) at an entry of probability 0 gives NaN, which ``argmax`` returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: vLLM's placeholder id for the unused output slots.
PLACEHOLDER_TOKEN_ID = -1


def _as_tensor(x: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(dtype)


def _probs_float32(probs: torch.Tensor) -> torch.Tensor:
    """``softmax(log probs)`` in float32: the rows as a float32 softmax of the target's logits returns them."""
    return torch.log(probs.to(torch.float64)).to(torch.float32).softmax(dim=-1, dtype=torch.float32)


def random_sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The V1 sampler's ``random_sample`` with a generator for every request: ``argmax(probs / Exp(1))``, ``[B]``."""
    q = torch.empty_like(probs)
    for i in range(probs.shape[0]):
        q[i].exponential_(generator=generator)
    return probs.div_(q).argmax(dim=-1).view(-1)


def generate_uniform_probs(batch_size: int, num_draft_tokens: int, generator: torch.Generator) -> torch.Tensor:
    """Upstream ``generate_uniform_probs`` with every request seeded: float64 ``[B * L]``, request by request."""
    uniform_probs = torch.empty((batch_size * num_draft_tokens,), dtype=torch.float64)
    for req in range(batch_size):
        uniform_probs[req * num_draft_tokens : (req + 1) * num_draft_tokens].uniform_(generator=generator)
    return uniform_probs


def rejection_sample(
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """Upstream ``rejection_sample`` for all-random requests with L drafts each, ``int32 [B, L+1]``.

    Parameters
    ----------
    draft_token_ids : Tensor, shape [B, L], int64
    draft_probs : Tensor, shape [B, L, V], float32
    target_probs : Tensor, shape [B, L, V], float32
    bonus_token_ids : Tensor, shape [B], int64
    generator : torch.Generator
        Float64 uniforms (L per request, request by request), then float32 exponentials (V per request).

    Returns
    -------
    Tensor, shape [B, L+1], int32
        Emitted tokens, then ``PLACEHOLDER_TOKEN_ID``.
    """
    B, L = draft_token_ids.shape
    output = torch.full((B, L + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
    uniform_probs = generate_uniform_probs(B, L, generator).view(B, L)
    q = torch.empty((B, target_probs.shape[-1]), dtype=torch.float32)
    for req in range(B):
        q[req].exponential_(generator=generator)
    residual = torch.clamp_min(target_probs - draft_probs, 0)  # tl.maximum(target_prob - draft_prob, 0)
    recovered = torch.argmax(residual / q[:, None, :], dim=-1)
    rows = torch.arange(B)
    rejected = torch.zeros(B, dtype=torch.bool)
    for pos in range(L):
        tok = draft_token_ids[:, pos]
        draft_prob = draft_probs[rows, pos, tok]
        target_prob = target_probs[rows, pos, tok]
        ratio = (target_prob / torch.where(draft_prob > 0, draft_prob, 1)).to(torch.float64)
        accept = (draft_prob > 0) & (ratio >= uniform_probs[:, pos])
        token = torch.where(accept, tok, recovered[:, pos])
        output[:, pos] = torch.where(rejected, output[:, pos], token.to(torch.int32))
        rejected |= ~accept
    output[:, L] = torch.where(rejected, output[:, L], bonus_token_ids.to(torch.int32))
    return output


def verify(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> torch.Tensor:
    """vLLM V1's random-sampling rejection step on draft 0 of each row (``batched_torch``).

    Parameters
    ----------
    draft_tokens : Tensor or ndarray, shape [B, K, L], int64
        Only draft 0 of each row is verified (vLLM verifies one draft per request).
    draft_probs : Tensor or ndarray, shape [B, K, L, V], float64
        Cast to float32.
    target_probs : Tensor or ndarray, shape [B, K, L+1, V], float64
        Float32 softmax of ``log p``; row L is the bonus row.
    generator : torch.Generator
        Bonus exponentials, then float64 uniforms, then recovered-token exponentials (see module doc).

    Returns
    -------
    Tensor, shape [B, L+1], int64
        Emitted tokens, then -1.
    """
    drafts = _as_tensor(draft_tokens, torch.int64)[:, 0]
    q = _as_tensor(draft_probs, torch.float64)[:, 0].to(torch.float32)
    p = _probs_float32(_as_tensor(target_probs, torch.float64)[:, 0])
    bonus_token_ids = random_sample(p[:, -1].clone(), generator)
    out = rejection_sample(drafts, q.contiguous(), p[:, :-1].contiguous(), bonus_token_ids, generator)
    return out.to(torch.int64)
