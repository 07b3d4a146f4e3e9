"""economize's lossless ``"rejection"`` verifier (``economize.decoding.verifiers.RejectionVerifier``), 3 entry points.

- :func:`verify` (chain interface): ``RejectionVerifier.verify_batch``, the vectorised chain path the decoding loop
  uses for a batch whose selector exposes ``distributions()`` (economize/decoding/verifiers.py).
- :func:`verify_rowwise` (chain interface): ``RejectionVerifier.verify``, the row-by-row path (one call per row).
- :func:`verify_tree` (generic interface, K drafts): ``RejectionVerifier.verify_tree``, recursive rejection
  sampling over a draft tree (SpecInfer), fed the K i.i.d. drafts as K chains hanging from the root (node
  ``k * L + t`` is position t of draft k; its parent is ``k * L + t - 1``, or -1 at t = 0; siblings in draft order).

The selector is economize's own ``TopPSampler(temperature=1.0, top_p=1.0, seed=...)``: its ``distributions()`` is
``softmax(logits)`` (every token kept at ``top_p = 1``), so the target logits ``log p`` give back p, and the
verifier draws every coin from the sampler's ``torch.Generator``, seeded here from the harness's randomness (a hash
of the uniforms for the chain entry points, ``rng`` for the generic one). Draft distributions ``Draft.probs`` are
the harness's q in float32, as the drafter would record them.
"""

from __future__ import annotations

import numpy as np
import torch
from economize.decoding.config import DecodeConfig
from economize.decoding.protocols import Draft
from economize.decoding.selectors import TopPSampler
from economize.decoding.verifiers import RejectionVerifier

from bench.gallery._common import chain_output, log_probs, seed_from_rng, seed_from_uniforms, tensor

_VERIFIER = RejectionVerifier(DecodeConfig(verifier="rejection"))


def _sampler(seed: int) -> TopPSampler:
    return TopPSampler(temperature=1.0, top_p=1.0, seed=seed)


def verify(
    draft_ids: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, uniforms: np.ndarray | None
) -> np.ndarray:
    """Chain interface through ``RejectionVerifier.verify_batch``.

    Parameters
    ----------
    draft_ids : ndarray, shape [B, L], int64
    draft_probs : ndarray, shape [B, L, V], float
    target_probs : ndarray, shape [B, L+1, V], float
    uniforms : ndarray, shape [B, L+1], float, or None
        Only seeds the sampler's generator.

    Returns
    -------
    ndarray, shape [B, L+1], int64
    """
    B, L = np.shape(draft_ids)
    draft = Draft(tokens=tensor(draft_ids, torch.int64), lengths=[L] * B, probs=tensor(draft_probs, torch.float32))
    seq = torch.zeros((B, 1), dtype=torch.int64)
    accepted, following = _VERIFIER.verify_batch(
        log_probs(target_probs), draft, _sampler(seed_from_uniforms(uniforms)), seq, [0] * B
    )
    return chain_output(np.asarray(draft_ids), accepted.numpy(), following.numpy())


def verify_rowwise(
    draft_ids: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, uniforms: np.ndarray | None
) -> np.ndarray:
    """Chain interface through ``RejectionVerifier.verify``, one call per row (same arguments as :func:`verify`).

    Each row's sampler is seeded from that row's uniforms.

    Returns
    -------
    ndarray, shape [B, L+1], int64
    """
    B, L = np.shape(draft_ids)
    logits = log_probs(target_probs)
    probs = tensor(draft_probs, torch.float32)
    history = torch.zeros(L + 1, dtype=torch.int64)
    n = np.zeros(B, dtype=np.int64)
    nxt = np.zeros(B, dtype=np.int64)
    for b in range(B):
        row_u = None if uniforms is None else uniforms[b]
        drafts = [int(t) for t in draft_ids[b]]
        n[b], nxt[b] = _VERIFIER.verify(logits[b], drafts, probs[b], _sampler(seed_from_uniforms(row_u)), history, 0)
    return chain_output(np.asarray(draft_ids), n, nxt)


def verify_tree(
    draft_tokens: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, rng: np.random.Generator
) -> list[int]:
    """Generic interface through ``RejectionVerifier.verify_tree`` (K drafts as K chains from the root).

    Parameters
    ----------
    draft_tokens : ndarray, shape [K, L], int64
    draft_probs : ndarray, shape [K, L, V], float
    target_probs : ndarray, shape [K, L+1, V], float
    rng : numpy.random.Generator
        Seeds the sampler's generator.

    Returns
    -------
    list[int]
        The tokens of the accepted path, then the next token.
    """
    K, L = np.shape(draft_tokens)
    V = np.shape(draft_probs)[-1]
    T = K * L
    parents = np.array([[-1 if t == 0 else k * L + t - 1 for k in range(K) for t in range(L)]], dtype=np.int64)
    rows = np.empty((T + 1, V), dtype=np.float64)
    rows[0] = target_probs[0, 0]
    rows[1:] = np.asarray(target_probs)[:, 1:].reshape(T, V)
    draft = Draft(
        tokens=tensor(np.asarray(draft_tokens).reshape(1, T), torch.int64),
        lengths=[T],
        parents=torch.from_numpy(parents),
        probs=tensor(np.asarray(draft_probs).reshape(1, T, V), torch.float32),
    )
    paths, nexts = _VERIFIER.verify_tree(log_probs(rows[None]), draft, _sampler(seed_from_rng(rng)))
    flat = np.asarray(draft_tokens).reshape(T)
    return [int(flat[i]) for i in paths[0]] + [int(nexts[0])]
