"""Choosing the adapter of an interface: :func:`make_adapter`.

Maps each interface name to its :class:`~spectr_gbv.validate.interfaces.adapter.Adapter`
subclass (the torch ones imported only when asked for), checks that torch is installed for a
torch interface, and wraps a verifier (or an
:class:`~spectr_gbv.validate.interfaces.loading.UnloadableVerifier`) with its guard.
"""

from __future__ import annotations

from typing import Any

from spectr_gbv.validate.interfaces.adapter import Adapter, has_torch
from spectr_gbv.validate.interfaces.hf import HFAdapter
from spectr_gbv.validate.interfaces.loading import UnloadableVerifier, as_callable, verifier_name
from spectr_gbv.validate.interfaces.names import TORCH_INTERFACES, check_interface
from spectr_gbv.validate.interfaces.numpy_adapters import BatchedAdapter, ChainAdapter, GenericAdapter
from spectr_gbv.validate.isolation.guard import CallGuard

_ADAPTERS: dict[str, type[Adapter]] = {
    "generic": GenericAdapter,
    "chain": ChainAdapter,
    "hf": HFAdapter,
    "batched": BatchedAdapter,
}


def _adapter_class(interface: str) -> type[Adapter]:
    if interface in _ADAPTERS:
        return _ADAPTERS[interface]
    from spectr_gbv.validate.interfaces import torch_adapters  # noqa: PLC0415 - torch adapters, torch imported lazily

    return torch_adapters.ADAPTERS[interface]


def make_adapter(verify: Any, interface: str, guard: CallGuard) -> Adapter:
    """Wrap ``verify`` (a callable in ``interface``) as an :class:`Adapter`.

    Parameters
    ----------
    verify : callable or UnloadableVerifier
    interface : str
        One of :data:`INTERFACES`.
    guard : CallGuard
        Runs the calls (``CallGuard(time_limit_s, isolation="process"|"thread", workers=n)``).

    Returns
    -------
    Adapter

    Raises
    ------
    ValueError
        Unknown interface, ``verify`` not callable, or a torch interface without torch.
    """
    check_interface(interface)
    if interface in TORCH_INTERFACES and not has_torch():
        extra = " transformers" if interface == "hf" else ""
        raise ValueError(f"interface {interface!r} needs torch (pip install torch{extra})")
    if isinstance(verify, UnloadableVerifier):
        guard.fail(verify.failure)
        return _adapter_class(interface)(verify, guard, verifier_name(verify))
    fn = as_callable(verify, interface)
    return _adapter_class(interface)(fn, guard, verifier_name(fn))


__all__ = ["make_adapter"]
