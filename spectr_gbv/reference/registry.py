"""Registry of verifiers by stable method name.

``METHODS`` lists the registered names in the stable order of :data:`STABLE_METHOD_NAMES`
(names outside it follow in registration order). :func:`register` rebinds ``METHODS``; code
that must see later registrations should read ``registry.METHODS`` or call
:func:`available_methods` rather than keep an imported copy.
"""

from __future__ import annotations

from spectr_gbv.core.methods import METHOD_NAMES, METHOD_TABLE, import_path, method_hint
from spectr_gbv.reference.base import Verifier

#: Every stable method name, in report order: the names of
#: :data:`~spectr_gbv.core.methods.METHOD_TABLE` (``greedy_bv`` is stateful and ``lp_oracle``
#: solved per instance: :func:`~spectr_gbv.simulate.methods.simulate_method` runs them).
STABLE_METHOD_NAMES: tuple[str, ...] = METHOD_NAMES

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
    """Return ``name`` if it names a method: a table entry or a class added by :func:`register`.

    Unlike :func:`get_verifier` this accepts ``greedy_bv`` and ``lp_oracle`` (they need an
    instance; see :func:`spectr_gbv.simulate.methods.simulate_method`). A user's own rule
    (``"module:attribute"``) is resolved by :func:`spectr_gbv.reference.user_rules.resolve_rule`.

    Raises
    ------
    TypeError
        ``name`` is not a str.
    ValueError
        An unknown name.
    """
    _check_name(name)
    if name not in STABLE_METHOD_NAMES and name not in _REGISTRY:
        valid = ", ".join(STABLE_METHOD_NAMES + tuple(m for m in METHODS if m not in STABLE_METHOD_NAMES))
        own = "or 'module:attribute' naming your own rule"
        raise ValueError(f"unknown method {name!r}{method_hint(name)}; valid: {valid}, {own}")
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
        raise ValueError(f"unknown method {name!r}{method_hint(name)}; valid: {valid}")
    return cls()


for _spec in METHOD_TABLE:
    if _spec.reference is not None and not _spec.needs_instance:
        register(import_path(_spec.reference))
del _spec
