"""flashspec's batch-1 verification step, ``flashspec.sampling.rejection.rejection_step``, in the chain interface.

``rejection_step(draft_token_ids [B, gamma], draft_logprobs [B, gamma, V], target_logprobs [B, gamma+1, V], *,
generator)`` returns ``[B, 2]``: the number of accepted drafts, then the residual token (after a rejection) or the
bonus token (after a full accept). It is what ``SpeculativeEngine._generate_single`` calls for a sampled draft
(flashspec/engine/speculative.py). The wrapper feeds it float32 log-probabilities (``log q``, ``log p``; ``-inf`` for
a probability of 0, as a log-softmax gives) and a ``torch.Generator`` seeded from a hash of the harness's uniforms
(the function draws its own coins, so the exact level does not apply). With ``flashspec-asm-kernel`` installed on an
AVX2 CPU the residual is computed by that assembly kernel (``residual_backend_status()``, printed by
``run_gallery.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from flashspec.sampling.rejection import rejection_step

from bench.gallery._common import chain_output, log_probs, seed_from_uniforms, tensor


def verify(
    draft_ids: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, uniforms: np.ndarray | None
) -> np.ndarray:
    """Chain interface: ``int64 [B, L+1]`` emitted tokens, -1 padded (see ``docs/validate.md``).

    Parameters
    ----------
    draft_ids : ndarray, shape [B, L], int64
    draft_probs : ndarray, shape [B, L, V], float
    target_probs : ndarray, shape [B, L+1, V], float
    uniforms : ndarray, shape [B, L+1], float, or None
        Only seeds flashspec's generator (``seed_from_uniforms``).

    Returns
    -------
    ndarray, shape [B, L+1], int64
    """
    gen = torch.Generator().manual_seed(seed_from_uniforms(uniforms))
    ids = tensor(draft_ids, torch.int64)
    step = rejection_step(ids, log_probs(draft_probs), log_probs(target_probs), generator=gen)
    step = step.numpy()
    return chain_output(np.asarray(draft_ids), step[:, 0], step[:, 1])
