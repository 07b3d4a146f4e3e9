"""flashspec's batched verification: ``flashspec.sampling.rejection.rejection_sample`` plus the engine's bonus draw.

``SpeculativeEngine._generate_generic`` (flashspec/engine/speculative.py, the loop for batches > 1) calls
``rejection_sample(input_ids, draft_logprobs, target_logprobs, draft_token_ids, gamma, generator=...)`` on the
gamma draft rows; it returns ``accepted_ids [B, gamma]`` (accepted drafts, then the residual token at the first
rejection, -1 after it) and ``first_rejection [B]``. After a full accept the engine draws the bonus token itself,
with exactly these lines of that loop (copied verbatim, nothing else is reimplemented)::

    probs = bonus_logprobs[local].exp()
    probs = probs / probs.sum().clamp(min=1e-9)
    bonus_id = torch.multinomial(probs, num_samples=1, generator=generator)

The wrapper runs the two steps on one ``torch.Generator`` seeded from a hash of the harness's uniforms, in the
engine's order (``rejection_sample`` first, then the bonus draws row by row for the fully accepted rows).
"""

from __future__ import annotations

import numpy as np
import torch
from flashspec.sampling.rejection import rejection_sample

from bench.gallery._common import log_probs, seed_from_uniforms, tensor


def verify(
    draft_ids: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, uniforms: np.ndarray | None
) -> np.ndarray:
    """Chain interface: ``int64 [B, L+1]`` emitted tokens, -1 padded.

    Parameters
    ----------
    draft_ids : ndarray, shape [B, L], int64
    draft_probs : ndarray, shape [B, L, V], float
    target_probs : ndarray, shape [B, L+1, V], float
    uniforms : ndarray, shape [B, L+1], float, or None
        Only seeds flashspec's generator.

    Returns
    -------
    ndarray, shape [B, L+1], int64
    """
    B, L = np.shape(draft_ids)
    generator = torch.Generator().manual_seed(seed_from_uniforms(uniforms))
    ids = tensor(draft_ids, torch.int64)
    target_logprobs = log_probs(target_probs)
    bonus_logprobs = target_logprobs[:, L, :]
    accepted_ids, first_rejection, _alpha = rejection_sample(
        input_ids=torch.zeros((B, 1), dtype=torch.int64),
        draft_logprobs=log_probs(draft_probs),
        target_logprobs=target_logprobs[:, :L, :],
        draft_token_ids=ids,
        gamma=L,
        generator=generator,
    )
    out = np.full((B, L + 1), -1, dtype=np.int64)
    out[:, :L] = accepted_ids.numpy()
    for local in range(B):
        if int(first_rejection[local].item()) == L:
            probs = bonus_logprobs[local].exp()
            probs = probs / probs.sum().clamp(min=1e-9)
            bonus_id = torch.multinomial(probs, num_samples=1, generator=generator)
            out[local, L] = int(bonus_id.item())
    return out
