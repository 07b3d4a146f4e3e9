"""lucidrains' ``speculative_decoding.speculative_decoding`` (PyPI ``speculative-decoding``), chain interface.

``speculative_decoding(net, small_net, prompt, seq_len, gamma=5, temperature=1., filter_thres=0.9, lenience=1.,
pad_id=0)`` is a whole generation loop (speculative_decoding/speculative_decoding.py, "eq. algorithm 1 in paper
https://arxiv.org/abs/2211.17192"); its verification is inline: ``r = zeros_like(q).float().uniform_(0, 1)``,
``accepted = find_first_true_index(r > (p / q))``, the residual ``relu(prob - small_prob)`` renormalised at the first
rejection, else the target's next row, and ``torch.multinomial(prob_next, 1)``, all on torch's **global** RNG.

The wrapper runs exactly one round of that loop, unchanged, per row:

- ``net`` / ``small_net`` are stand-ins returning logits ``log p`` (the last ``gamma + 1`` rows) and ``log q`` (the
  row after the current prefix) with a dummy KV cache; ``temperature=1.0`` and ``filter_thres=0.0`` (top-k keeps
  all V tokens; the default 0.9 would truncate both laws to their top 10%, a different target), ``lenience=1.0``
  (the default; larger values are lossy by design);
- the module's ``gumbel_sample`` is replaced, for the gamma draft draws, by one that returns the harness's draft
  tokens (drawn by the harness from q, the law the loop would draw them from);
- ``seq_len = len(prompt) + gamma + 1``; when the round ends with a rejection the loop would start a second round,
  so the stand-in draft model stops it there (a private exception carrying the sequence), and the round's tokens
  are read from the sequence it was handed;
- torch's global CPU generator is seeded once per batch from a hash of the batch's uniforms and restored after.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch

from bench.gallery._common import chain_rows_seeded

# the package's __init__ re-exports the function under the submodule's name: fetch the module itself
sd_module = importlib.import_module("speculative_decoding.speculative_decoding")
_ORIGINAL_GUMBEL = sd_module.gumbel_sample
_PROMPT = 1


class _Stop(Exception):  # noqa: N818 - control flow, never escapes the wrapper
    def __init__(self, out: torch.Tensor) -> None:
        super().__init__("second round")
        self.out = out


class _SmallNet:
    """Stand-in draft model: call t (t = 0..L-1) returns ``log q[t]`` as its last row; call L is a second round."""

    def __init__(self, logq: torch.Tensor) -> None:
        self.logq = logq  # [L, V]
        self.calls = 0

    def __call__(
        self, out: torch.Tensor, seq_start_pos: object = None, cache: object = None, return_cache: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, None]]:
        t = self.calls
        self.calls += 1
        if t >= self.logq.shape[0]:
            raise _Stop(out.clone())
        n = out.shape[-1]
        logits = torch.zeros((1, n, self.logq.shape[1]), dtype=self.logq.dtype)
        logits[0, -1] = self.logq[t]
        return logits, (torch.zeros((1, 1, n, 1)), None)


class _Net:
    """Stand-in target model: its last ``L + 1`` rows are ``log p[0..L]``."""

    def __init__(self, logp: torch.Tensor) -> None:
        self.logp = logp  # [L+1, V]

    def __call__(
        self, out: torch.Tensor, seq_start_pos: object = None, cache: object = None, return_cache: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, None]]:
        n = out.shape[-1]
        R, V = self.logp.shape
        logits = torch.zeros((1, n, V), dtype=self.logp.dtype)
        logits[0, n - R :] = self.logp
        return logits, (torch.zeros((1, 1, n, 1)), None)


def _one_row(draft: np.ndarray, q: np.ndarray, p: np.ndarray) -> list[int]:
    L = len(draft)
    with np.errstate(divide="ignore", invalid="ignore"):
        logq = torch.from_numpy(np.log(np.asarray(q, dtype=np.float64))).float()
        logp = torch.from_numpy(np.log(np.asarray(p, dtype=np.float64))).float()
    queue = [torch.tensor([int(t)]) for t in draft]

    def gumbel_sample(t: torch.Tensor, temperature: float = 1.0, dim: int = -1) -> torch.Tensor:
        return queue.pop(0)

    prompt = torch.zeros((1, _PROMPT), dtype=torch.int64)
    sd_module.gumbel_sample = gumbel_sample
    try:
        out, _rate = sd_module.speculative_decoding(
            _Net(logp),
            _SmallNet(logq),
            prompt,
            _PROMPT + L + 1,
            gamma=L,
            temperature=1.0,
            filter_thres=0.0,
            lenience=1.0,
        )
        toks = out[0]
    except _Stop as stop:
        toks = stop.out[0, _PROMPT:]
    finally:
        sd_module.gumbel_sample = _ORIGINAL_GUMBEL
    return [int(t) for t in toks]


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
