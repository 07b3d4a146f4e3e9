"""Registry of verifiers by stable method name.

``METHODS`` lists the registered names in the stable order of :data:`STABLE_METHOD_NAMES`
(names outside it follow in registration order). :func:`register` rebinds ``METHODS``; code
that must see later registrations should read ``registry.METHODS`` or call
:func:`available_methods` rather than keep an imported copy.
"""

from __future__ import annotations

from spectr_gbv.reference.ar import AutoregressiveVerifier
from spectr_gbv.reference.base import Verifier
from spectr_gbv.reference.bv import BlockVerifier
from spectr_gbv.reference.gbv_multipath import MultiPathGreedyVerifier
from spectr_gbv.reference.hsd import (
    HierarchicalVerifier,
    MultiDraftHierarchicalVerifier,
    ReleasedHierarchicalVerifier,
)
from spectr_gbv.reference.independent_bv import IndependentBlockVerifier
from spectr_gbv.reference.khisti_is import ImportanceSamplingVerifier
from spectr_gbv.reference.mdbv import MultiDraftBlockVerifier
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier
from spectr_gbv.reference.optimal_multidraft import OptimalMultiDraftVerifier
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier
from spectr_gbv.reference.rrs_random import RandomOrderRecursiveRejectionVerifier
from spectr_gbv.reference.sd import SpeculativeDecodingVerifier
from spectr_gbv.reference.spectr import SpecTrVerifier
from spectr_gbv.reference.spectr_gbv_released import ReleasedSpecTrGBVVerifier
from spectr_gbv.reference.traversal import TraversalVerifier

#: Every stable method name, in report order (``greedy_bv`` and ``lp_oracle`` are registered
#: by other modules).
STABLE_METHOD_NAMES: tuple[str, ...] = (
    "ar",
    "sd",
    "bv",
    "greedy_bv",
    "spectr",
    "rrs",
    "gbv_multipath",
    "mdbv",
    "lp_oracle",
    "spectr_gbv_released",
    "independent_bv",
    "traversal",
    "khisti_is",
    "rrs_random",
    "hsd",
    "hsd_released",
    "hsd_multidraft",
    "optimal_multidraft",
    "near_opt_bv",
)

_REGISTRY: dict[str, type[Verifier]] = {}

#: Registered method names, in stable order (rebound by :func:`register`).
METHODS: tuple[str, ...] = ()


def _refresh() -> None:
    global METHODS
    stable = [m for m in STABLE_METHOD_NAMES if m in _REGISTRY]
    extra = [m for m in _REGISTRY if m not in STABLE_METHOD_NAMES]
    METHODS = tuple(stable + extra)


def register(cls: type[Verifier], *, replace: bool = False) -> type[Verifier]:
    """Register a verifier class under its ``name`` (usable as a class decorator).

    Parameters
    ----------
    cls : type
        A :class:`~spectr_gbv.reference.base.Verifier` subclass with the class attributes
        ``name``, ``lossless``, ``symmetric`` and ``citation``.
    replace : bool
        Allow replacing a class already registered under the same name.

    Returns
    -------
    type
        ``cls`` unchanged.

    Raises
    ------
    ValueError
        Not a Verifier subclass, a missing class attribute, or a name already taken.
    """
    if not (isinstance(cls, type) and issubclass(cls, Verifier)):
        raise ValueError(f"register: expected a Verifier subclass, got {cls!r}")
    for attr, kind in (("name", str), ("lossless", bool), ("symmetric", bool), ("citation", str)):
        if not isinstance(getattr(cls, attr, None), kind):
            raise ValueError(f"register: {cls.__name__}.{attr} must be a {kind.__name__}")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls and not replace:
        raise ValueError(f"register: method name {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    _refresh()
    return cls


def check_method(name: str) -> str:
    """Return ``name`` if it is one of :data:`STABLE_METHOD_NAMES`, else ValueError listing them.

    Unlike :func:`get_verifier` this accepts ``greedy_bv`` and ``lp_oracle`` (they need an
    instance; see :func:`spectr_gbv.simulate.methods.simulate_method`).

    Raises
    ------
    TypeError
        ``name`` is not a str.
    ValueError
        An unknown name.
    """
    _check_name(name)
    if name not in STABLE_METHOD_NAMES:
        raise ValueError(f"unknown method {name!r}; valid: {', '.join(STABLE_METHOD_NAMES)}")
    return name


def _check_name(name: object) -> None:
    """TypeError unless ``name`` is a str (a list or a dict is unhashable and gave numpy-free noise)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a method name (a str), got {type(name).__name__} {name!r:.60}")


def available_methods() -> tuple[str, ...]:
    """The registered names (the current value of ``METHODS``)."""
    return METHODS


def get_verifier(name: str) -> Verifier:
    """A fresh instance of the verifier registered under ``name``.

    Raises
    ------
    TypeError
        ``name`` is not a str (e.g. ``['sd']``); the message names ``name``.
    ValueError
        Unknown name; the message lists the valid names (and says when a stable name is
        reserved but not registered yet).
    """
    _check_name(name)
    cls = _REGISTRY.get(name)
    if cls is None:
        valid = ", ".join(METHODS)
        if name in STABLE_METHOD_NAMES:
            raise ValueError(f"method {name!r} is reserved but not registered; valid: {valid}")
        raise ValueError(f"unknown method {name!r}; valid: {valid}")
    return cls()


for _cls in (
    AutoregressiveVerifier,
    SpeculativeDecodingVerifier,
    BlockVerifier,
    SpecTrVerifier,
    RecursiveRejectionVerifier,
    MultiPathGreedyVerifier,
    MultiDraftBlockVerifier,
    ReleasedSpecTrGBVVerifier,
    IndependentBlockVerifier,
    TraversalVerifier,
    ImportanceSamplingVerifier,
    RandomOrderRecursiveRejectionVerifier,
    OptimalMultiDraftVerifier,
    NearOptBlockVerifier,
    HierarchicalVerifier,
    ReleasedHierarchicalVerifier,
    MultiDraftHierarchicalVerifier,
):
    register(_cls)
del _cls
