"""sequential-speculative-decoding's ``seqspecdecod.standard_sd.standard_speculative_step`` (chain interface).

``standard_speculative_step(draft_model, target_model, input_ids, gamma, draft_temperature, target_temperature)``
is one whole round: it drafts gamma tokens with ``sample_from_probs`` (``torch.multinomial``), scores them with the
target, then runs the accept / reject-and-resample loop inline, drawing ``torch.rand(1)`` coins and residual /
bonus tokens from torch's **global** RNG. The wrapper drives it unchanged with two stand-in models and one
substitution:

- the models return logits ``log q`` (draft, row after the current prefix) and ``log p`` (target, rows
  ``seq_len - 1 + t``), and temperatures are 1.0, so ``apply_temperature`` (a softmax) gives back q and p;
- the module's ``sample_from_probs`` is replaced, for the gamma draft draws only, by one that returns the harness's
  draft tokens (which the harness drew from q, the law the function would draw them from); every later call (the
  residual and bonus draws) goes to the package's own ``sample_from_probs``;
- torch's global CPU generator is seeded once per batch from a hash of the batch's uniforms
  (``torch.default_generator.manual_seed``) and restored after the batch.
"""

from __future__ import annotations

import numpy as np
import torch
from seqspecdecod import standard_sd

from bench.gallery._common import chain_rows_seeded

_ORIGINAL = standard_sd.sample_from_probs


class _Out:
    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits


class _Rows:
    """A stand-in causal LM: ``model(ids).logits[0, i]`` is the log-law after ``ids[0, : i + 1]``."""

    def __init__(self, rows: torch.Tensor, offset: int) -> None:
        self.rows = rows  # [R, V] log-probabilities; row r is the law after prompt + r tokens
        self.offset = offset

    def __call__(self, ids: torch.Tensor) -> _Out:
        n = ids.shape[1]
        V = self.rows.shape[1]
        logits = torch.zeros((1, n, V), dtype=self.rows.dtype)
        for i in range(n):
            r = i + 1 - self.offset
            if 0 <= r < self.rows.shape[0]:
                logits[0, i] = self.rows[r]
        return _Out(logits)


def _one_row(draft: np.ndarray, q: np.ndarray, p: np.ndarray) -> list[int]:
    L = len(draft)
    with np.errstate(divide="ignore", invalid="ignore"):
        logq = torch.from_numpy(np.log(np.asarray(q, dtype=np.float64))).float()
        logp = torch.from_numpy(np.log(np.asarray(p, dtype=np.float64))).float()
    prompt = torch.zeros((1, 1), dtype=torch.int64)
    queue = [torch.tensor(int(t)) for t in draft]

    def sample_from_probs(probs: torch.Tensor) -> torch.Tensor:
        if queue:
            return queue.pop(0)
        return _ORIGINAL(probs)

    standard_sd.sample_from_probs = sample_from_probs
    try:
        new_ids, _n_acc, _gamma = standard_sd.standard_speculative_step(
            _Rows(logq, 1), _Rows(logp, 1), prompt, gamma=L, draft_temperature=1.0, target_temperature=1.0
        )
    finally:
        standard_sd.sample_from_probs = _ORIGINAL
    return [int(t) for t in new_ids[0, 1:]]


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
        Seed torch's global CPU generator with ``seed_from_uniforms(uniforms)`` for the batch.

    Returns
    -------
    ndarray, shape [B, L+1], int64
    """
    return chain_rows_seeded(_one_row, draft_ids, draft_probs, target_probs, uniforms)
