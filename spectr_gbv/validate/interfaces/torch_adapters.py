"""Adapters of the torch-flavoured interfaces: ``generic_torch``, ``batched_torch``, ``chain_torch``.

The verifier receives CPU torch tensors (int64 ids, float64 probabilities, read from the
harness's numpy arrays by copy) and, for ``generic_torch`` and ``batched_torch``, a CPU
:class:`torch.Generator` instead of the numpy Generator: one generator per batch, seeded from
the harness rng once per verifier call (``int(rng.integers(0, 2**62))``, drawn before the
first call), or set once from the ``torch_state`` given to
:meth:`~spectr_gbv.validate.interfaces.adapter.Adapter.emit` and then drawn on by every call of the
batch (the rng is then not consumed). ``chain_torch`` receives its uniforms as a float64
tensor [B, L+1] and nothing else. Importing this module imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.numpy_adapters import BatchedAdapter, ChainAdapter, GenericAdapter


def torch_generators(rng: np.random.Generator, calls: int, torch_state: Any) -> Callable[[int], torch.Generator]:
    """The generator of call ``i`` of a batch of ``calls`` verifier calls.

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of the seeds (``calls`` draws of ``rng.integers(0, 2**62)``, made now).
    calls : int
        Verifier calls of the batch.
    torch_state : torch.ByteTensor or None
        When given, one generator with this state serves every call (``rng`` is not used).

    Returns
    -------
    callable
        ``i -> torch.Generator`` (CPU), seeded per call, or the shared one.
    """
    gen = torch.Generator()
    if torch_state is not None:
        gen.set_state(torch_state)
        return lambda i: gen
    seeds = rng.integers(0, 2**62, size=max(calls, 0)).tolist()

    def of(i: int) -> torch.Generator:
        gen.manual_seed(seeds[i])
        return gen

    return of


class TorchGeneratorMixin(Adapter):
    """Adapters whose verifier draws from a ``torch.Generator`` (seeded per call from the harness rng,
    or set from ``torch_state``) and is fed CPU torch tensors."""

    torch_native = True

    def _rng_arg(self, rng: np.random.Generator, calls: int, torch_state: Any) -> Callable[[int], Any]:
        return torch_generators(rng, calls, torch_state)


class GenericTorchAdapter(TorchGeneratorMixin, GenericAdapter):
    """``verify(draft_tokens [K, L], draft_probs [K, L, V], target_probs [K, L+1, V], generator)``, torch."""

    interface = "generic_torch"


class BatchedTorchAdapter(TorchGeneratorMixin, BatchedAdapter):
    """``verify(draft_tokens [B, K, L], draft_probs [B, K, L, V], target_probs [B, K, L+1, V], generator)``, torch."""

    interface = "batched_torch"


class ChainTorchAdapter(ChainAdapter):
    """``verify(draft_ids [B, L], draft_probs [B, L, V], target_probs [B, L+1, V], uniforms [B, L+1])``, torch."""

    interface = "chain_torch"
    torch_native = True


#: Adapter class of each torch-flavoured interface.
ADAPTERS: dict[str, type[Adapter]] = {
    "generic_torch": GenericTorchAdapter,
    "batched_torch": BatchedTorchAdapter,
    "chain_torch": ChainTorchAdapter,
}

__all__ = [
    "ADAPTERS",
    "BatchedTorchAdapter",
    "ChainTorchAdapter",
    "GenericTorchAdapter",
    "TorchGeneratorMixin",
    "torch_generators",
]
