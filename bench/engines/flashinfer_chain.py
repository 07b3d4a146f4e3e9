"""FlashInfer's ``chain_speculative_sampling``, called as FlashInfer 0.7.4 exposes it, in the ``chain_torch`` interface.

Entry point: ``flashinfer.sampling.chain_speculative_sampling(draft_probs, draft_token_ids, target_probs,
maybe_output_accepted_token_num=None, maybe_output_emitted_draft_token_num=None, deterministic=True,
generator=None, seed=None, offset=None) -> (output_token_ids, output_accepted_token_num,
output_emitted_draft_token_num)`` (flashinfer-python 0.7.4, ``flashinfer/sampling.py``; read from the wheel
``flashinfer_python-0.7.4-py3-none-any.whl``, 101.3 MB). Layouts, as documented there:

- ``draft_probs`` ``[B, L, V]`` and ``target_probs`` ``[B, L + 1, V]``, cast to float32 by the wrapper; row ``L`` of
  the target is the bonus position;
- ``draft_token_ids`` ``[B, L]``, cast to int32;
- ``output_token_ids`` ``[B, L + 1]`` int32: the accepted drafts, then the correction or the bonus, then ``-1``;
- randomness: the kernel's own Philox stream, keyed by ``seed`` and ``offset`` (ints, or int64 tensors of length 1
  or B); with both ``None`` the wrapper takes them from ``generator`` (``get_seed_and_offset``: the generator's
  ``(seed, offset)`` state, advanced by ``B * (L + 2)`` rounded up to a multiple of 4). The output row index also
  feeds the Philox subsequence.

The kernel is CUDA only (the module is JIT-compiled for the GPU; there is no CPU path), so this adapter runs only on
a machine with a GPU and flashinfer installed (``bench/device_check.sh``). It adapts layouts and the source of
randomness only: ``seed`` is a hash of the harness's uniforms (so every call is deterministic given the harness's
seed), ``offset = 0``; the exact level and coin probes do not reach the Philox draws (statistical level only).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["FLASHINFER_VERSION", "call_chain", "chain", "philox_seed"]

#: The release whose signature this adapter follows.
FLASHINFER_VERSION = "0.7.4"


def philox_seed(uniforms: Any) -> int:
    """A seed in ``[0, 2^63)`` from the harness's uniforms (BLAKE2b of their float64 bytes).

    Parameters
    ----------
    uniforms : Tensor or ndarray, shape [B, L+1], float64

    Returns
    -------
    int
    """
    u = uniforms.detach().cpu().numpy() if isinstance(uniforms, torch.Tensor) else np.asarray(uniforms)
    digest = hashlib.blake2b(np.ascontiguousarray(u, dtype=np.float64).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def chain(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> torch.Tensor:
    """FlashInfer 0.7.4 ``chain_speculative_sampling`` on CUDA (``chain_torch``).

    Parameters
    ----------
    draft_ids : Tensor or ndarray, shape [B, L], int64
        Moved to CUDA as int32 (``draft_token_ids``).
    draft_probs : Tensor or ndarray, shape [B, L, V], float64
        Moved to CUDA as float32.
    target_probs : Tensor or ndarray, shape [B, L+1, V], float64
        Moved to CUDA as float32; row L is the bonus row.
    uniforms : Tensor or ndarray, shape [B, L+1], float64
        Only hashed into the Philox ``seed`` (:func:`philox_seed`); ``offset = 0``.

    Returns
    -------
    Tensor, shape [B, L+1], int64, CPU
        ``output_token_ids``: emitted tokens, then -1.

    Raises
    ------
    RuntimeError
        No CUDA device (the kernel has no CPU path).
    ImportError
        flashinfer is not installed.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("flashinfer.sampling.chain_speculative_sampling is CUDA only: no CUDA device")
    from flashinfer.sampling import chain_speculative_sampling

    return call_chain(chain_speculative_sampling, torch.device("cuda"), draft_ids, draft_probs, target_probs, uniforms)


def call_chain(
    chain_fn: Callable[..., Any],
    device: torch.device,
    draft_ids: Any,
    draft_probs: Any,
    target_probs: Any,
    uniforms: Any,
) -> torch.Tensor:
    """The layout of :func:`chain` around any function with FlashInfer's signature (tests pass a stand-in on CPU).

    Parameters
    ----------
    chain_fn : callable
        ``chain_speculative_sampling(draft_probs, draft_token_ids, target_probs, *, deterministic, seed, offset)``
        returning ``(output_token_ids [B, L+1] int32, accepted [B], emitted [B])``.
    device : torch.device
    draft_ids, draft_probs, target_probs, uniforms : as :func:`chain`

    Returns
    -------
    Tensor, shape [B, L+1], int64, CPU
    """
    ids = torch.as_tensor(np.asarray(draft_ids) if not isinstance(draft_ids, torch.Tensor) else draft_ids)
    q = torch.as_tensor(np.asarray(draft_probs) if not isinstance(draft_probs, torch.Tensor) else draft_probs)
    p = torch.as_tensor(np.asarray(target_probs) if not isinstance(target_probs, torch.Tensor) else target_probs)
    out, _, _ = chain_fn(
        q.to(device, torch.float32),
        ids.to(device, torch.int32),
        p.to(device, torch.float32),
        deterministic=True,
        seed=philox_seed(uniforms),
        offset=0,
    )
    return out.to("cpu", torch.int64)
