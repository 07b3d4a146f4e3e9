"""Ready adapters for the generation referee: complete speculative generation loops under the generation interface.

Every adapter is a plain function

    ``generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p, seed)``

returning the ``max_new_tokens`` new ids (``interface = "generation"``), or the batched form
(``interface = "generation_batched"``: ``prompt_ids`` a list of B prompts, B lists returned),
with the attributes of :data:`~spectr_gbv.validate.generation.adapters.common.ADAPTER_ATTRIBUTES`
(``interface``, ``description``, ``family``, ``lossless``, ``deterministic``). Two families:

* ``hf-assisted...`` - transformers' ``generate(assistant_model=..., do_sample=True)``, one
  adapter per candidate-generator path with a separate draft model
  (:mod:`~spectr_gbv.validate.generation.adapters.hf_assisted`; universal assisted decoding,
  ``hf-assisted:usd``, in :mod:`~spectr_gbv.validate.generation.adapters.hf_usd`);
* ``spectr-decoder...`` and ``spectr-decoder-batched...`` - this package's
  ``SpeculativeDecoder``, every lossless method with tree and flat scoring, one prompt or B
  (:mod:`~spectr_gbv.validate.generation.adapters.spectr_decoder`).

Two adapters are lossy by design, registered as controls (``lossless = False``):
``hf-assisted:ensemble`` and ``spectr-decoder:released``.

Importing this package imports neither torch nor transformers; running an adapter needs the
``gpu`` extra.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spectr_gbv.validate.generation.adapters.common import GENERATION_INTERFACES
from spectr_gbv.validate.generation.adapters.hf_assisted import HF_ASSISTED_ADAPTERS
from spectr_gbv.validate.generation.adapters.hf_usd import HF_USD_ADAPTERS
from spectr_gbv.validate.generation.adapters.spectr_decoder import DECODER_ADAPTERS

#: Registry name -> ready adapter (every family).
ADAPTERS: dict[str, Callable[..., Any]] = {**HF_ASSISTED_ADAPTERS, **HF_USD_ADAPTERS, **DECODER_ADAPTERS}


def adapter_names(*, interface: str | None = None, lossless: bool | None = None) -> tuple[str, ...]:
    """Names of the registered adapters, in registry order.

    Parameters
    ----------
    interface : str, optional
        Keep only adapters of this interface (``"generation"`` or ``"generation_batched"``).
    lossless : bool, optional
        Keep only the lossless adapters (``True``) or the lossy-by-design controls (``False``).

    Returns
    -------
    tuple of str

    Raises
    ------
    ValueError
        ``interface`` is not a generation interface.

    Examples
    --------
    >>> adapter_names(lossless=False)
    ('hf-assisted:ensemble', 'spectr-decoder:released')
    """
    if interface is not None and interface not in GENERATION_INTERFACES:
        raise ValueError(f"interface must be one of {', '.join(GENERATION_INTERFACES)}, got {interface!r}")
    return tuple(
        name
        for name, fn in ADAPTERS.items()
        if (interface is None or fn.interface == interface) and (lossless is None or fn.lossless == lossless)
    )


def resolve_adapter(name: str) -> Callable[..., Any]:
    """The ready adapter registered as ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`ADAPTERS`, e.g. ``"hf-assisted:heuristic"`` or ``"spectr-decoder:mdbv:tree"``.

    Returns
    -------
    callable
        The adapter (see the package docstring for its signature and attributes).

    Raises
    ------
    ValueError
        ``unknown adapter 'x'; known: ...`` (every registered name), also for a name that is not a str.

    Examples
    --------
    >>> resolve_adapter("spectr-decoder:mdbv").interface
    'generation'
    """
    fn = ADAPTERS.get(name) if isinstance(name, str) else None
    if fn is None:
        raise ValueError(f"unknown adapter {name!r}; known: {', '.join(ADAPTERS)}")
    return fn


__all__ = ["ADAPTERS", "adapter_names", "resolve_adapter"]
