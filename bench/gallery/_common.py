"""Shared plumbing of the gallery wrappers: seeds from the harness's randomness, log-probabilities, output layout.

Nothing here touches a verifier's logic: it only turns the harness's arrays into the shapes a third-party function
takes, and derives that function's own random stream (a torch generator, or torch's global RNG) from the
randomness the harness hands the wrapper, so that a run is a deterministic function of the harness seed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def seed_from_uniforms(u: np.ndarray | None) -> int:
    """A 63-bit seed that is a deterministic function of the harness's uniforms.

    Parameters
    ----------
    u : ndarray, shape [B, L+1] or [L+1], float64, or None
        The chain interface's uniforms (``None``: seed 0).

    Returns
    -------
    int
        ``blake2b(u.tobytes())`` truncated to 63 bits.

    Notes
    -----
    The third-party functions wrapped here draw their own coins and cannot take the harness's uniforms. Seeding
    their generator from a hash of the uniforms keeps every output a deterministic function of the harness seed
    (the determinism check holds) while fresh uniforms give an effectively fresh stream. The output is therefore
    *not* a piecewise-constant function of the uniforms: the exact level (bisection of the uniforms) does not
    apply and the harness falls back to the statistical level, and the ``uniform_reuse`` sweep sees a dependence
    that is only the hash (informational).
    """
    if u is None:
        return 0
    digest = hashlib.blake2b(np.ascontiguousarray(u, dtype=np.float64).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def seed_from_rng(rng: np.random.Generator) -> int:
    """A 63-bit seed drawn from the harness's numpy generator (generic interface)."""
    return int(rng.integers(0, 2**63 - 1))


def log_probs(probs: np.ndarray, dtype: Any = None) -> Any:
    """``log(probs)`` as a torch tensor (``-inf`` where a probability is 0), as a log-softmax would give.

    Parameters
    ----------
    probs : ndarray, float
    dtype : torch.dtype, optional
        Default ``torch.float32`` (what the wrapped engines feed their verifiers).

    Returns
    -------
    torch.Tensor
    """
    import torch  # noqa: PLC0415

    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.asarray(probs, dtype=np.float64))
    return torch.from_numpy(out).to(torch.float32 if dtype is None else dtype)


def tensor(arr: np.ndarray, dtype: Any) -> Any:
    """A writable torch copy of a (possibly read-only) numpy array."""
    import torch  # noqa: PLC0415

    return torch.from_numpy(np.array(arr)).to(dtype)


def chain_output(drafts: np.ndarray, n_accepted: np.ndarray, next_token: np.ndarray) -> np.ndarray:
    """The chain layout ``int64 [B, L+1]``: the accepted draft prefix, the next token, then -1 padding.

    Parameters
    ----------
    drafts : ndarray, shape [B, L], int64
    n_accepted : ndarray, shape [B], int
        Accepted draft tokens per row, in ``0..L``.
    next_token : ndarray, shape [B], int
        The token emitted after them (the correction after a rejection, else the bonus).

    Returns
    -------
    ndarray, shape [B, L+1], int64
    """
    B, L = drafts.shape
    n = np.asarray(n_accepted, dtype=np.int64).reshape(B)
    out = np.full((B, L + 1), -1, dtype=np.int64)
    keep = np.arange(L)[None, :] < n[:, None]
    out[:, :L] = np.where(keep, drafts, -1)
    out[np.arange(B), n] = np.asarray(next_token, dtype=np.int64).reshape(B)
    return out


def chain_rows_seeded(
    one_row: Any, draft_ids: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, uniforms: np.ndarray | None
) -> np.ndarray:
    """Chain output ``int64 [B, L+1]`` (-1 padded) of ``one_row(draft [L], q [L, V], p [L+1, V]) -> list[int]``.

    torch's global CPU generator is seeded with :func:`seed_from_uniforms` for the batch and
    restored afterwards, for wrapped functions that draw their own coins from it.
    """
    import torch  # noqa: PLC0415 - the wrappers that need this already import torch

    B, L = np.shape(draft_ids)
    out = np.full((B, L + 1), -1, dtype=np.int64)
    saved = torch.random.get_rng_state()
    try:
        torch.default_generator.manual_seed(seed_from_uniforms(uniforms))
        for b in range(B):
            toks = one_row(draft_ids[b], draft_probs[b], target_probs[b])
            out[b, : len(toks)] = toks
    finally:
        torch.random.set_rng_state(saved)
    return out
