"""Loading a verifier from ``"module:function"``, the import first tried in a forked child.

:func:`load_verifier` imports the verifier the CLI and :func:`~spectr_gbv.validate.validate`
name by path; with process isolation the import is first probed in a fork (a
:class:`~spectr_gbv.validate.isolation.guard.CallGuard` one-shot run), so that a module that exits or
hangs on import gives an :class:`UnloadableVerifier` instead of ending the caller.
:func:`as_callable` turns a reference :class:`~spectr_gbv.reference.Verifier` into its ``sample``
and :func:`verifier_name` gives the display name; both are shared with
:func:`~spectr_gbv.validate.interfaces.registry.make_adapter`.

Imports: :mod:`spectr_gbv.validate.isolation.guard` and :mod:`spectr_gbv.validate.interfaces.names`
at module level, :mod:`spectr_gbv.reference` only inside the functions that use them; the
adapters' registry imports this module, never the reverse.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from spectr_gbv.validate.interfaces.names import check_interface
from spectr_gbv.validate.isolation.failures import VerifierExited, VerifierTimedOut
from spectr_gbv.validate.isolation.guard import CallGuard, default_isolation

#: Seconds the import of a verifier's module may take in :func:`load_verifier`'s probe.
IMPORT_TIME_LIMIT_S = 120.0


def verifier_name(verify: Any) -> str:
    """Display name ``module:qualname`` of a callable (or its repr)."""
    owner = getattr(verify, "__self__", None)
    if owner is not None and not isinstance(owner, type) and hasattr(owner, "name"):
        return f"{type(owner).__module__}:{type(owner).__qualname__}.{getattr(verify, '__name__', 'sample')}"
    mod = getattr(verify, "__module__", None)
    qual = getattr(verify, "__qualname__", None)
    return f"{mod}:{qual}" if mod and qual else repr(verify)[:80]


def as_callable(verify: Any, interface: str) -> Callable[..., Any]:
    """The callable behind ``verify``: a reference :class:`~spectr_gbv.reference.Verifier`
    instance or subclass (generic interface) becomes its bound ``sample``.

    Raises
    ------
    ValueError
        ``verify`` is not callable.
    """
    from spectr_gbv.reference.base import Verifier  # noqa: PLC0415 - keeps import time low

    if interface == "generic":
        if isinstance(verify, type) and issubclass(verify, Verifier):
            verify = verify()
        if isinstance(verify, Verifier):
            return verify.sample
    if not callable(verify):
        raise ValueError(f"verify: expected a callable in the {interface!r} interface, got {type(verify).__name__}")
    return verify


class UnloadableVerifier:
    """Stands for a verifier whose module ended or hung the process when imported.

    Returned by :func:`load_verifier` instead of the function;
    :func:`~spectr_gbv.validate.interfaces.registry.make_adapter` turns it into an adapter whose guard
    is already dead, so the harness reports ``failure`` (a
    :class:`~spectr_gbv.validate.isolation.failures.VerifierExited` or ``VerifierTimedOut``) as a failed
    ``runs`` check instead of ending.

    Parameters
    ----------
    path : str
        ``"module:function"`` as given.
    failure : VerifierTimedOut
        What happened on import.
    """

    def __init__(self, path: str, failure: VerifierTimedOut) -> None:
        self.path = path
        self.failure = failure
        self.__module__, self.__qualname__ = path.split(":")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Always raises: the verifier could not be imported.

        Raises
        ------
        RuntimeError
            With the failure's message.
        """
        raise RuntimeError(f"verifier {self.path!r} could not be loaded: {self.failure}")


def _probe_import(mod_name: str, attr: str) -> None:
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)


def load_verifier(
    path: str,
    interface: str,
    *,
    isolation: str | None = None,
    time_limit_s: float = IMPORT_TIME_LIMIT_S,
) -> Callable[..., Any]:
    """Import a verifier from ``"module:function"`` (``function`` may be dotted).

    With process isolation the import is first tried in a forked child: a module that calls
    ``sys.exit``/``os._exit`` or hangs on import gives an :class:`UnloadableVerifier` (reported
    by the harness as a failed check, diagnosis ``exits`` or ``timeout``) instead of ending
    the caller; only then is the module imported here.

    Parameters
    ----------
    path : str
        ``"package.module:name"``; ``name`` may be a function, a callable object, or (generic
        interface) a reference :class:`~spectr_gbv.reference.Verifier` instance or subclass,
        whose ``sample`` is used.
    interface : str
        One of :data:`~spectr_gbv.validate.interfaces.names.INTERFACES`.
    isolation : str, optional
        ``"process"`` (default where fork exists) probes the import in a child; ``"thread"``
        imports directly.
    time_limit_s : float
        Seconds the import may take in the probe (default :data:`IMPORT_TIME_LIMIT_S`).

    Returns
    -------
    callable or UnloadableVerifier

    Raises
    ------
    ValueError
        One line: unknown interface, a path without ``:``, a module that cannot be imported
        (it raised), a missing attribute, or an object that is not callable.

    Examples
    --------
    >>> fn = load_verifier("spectr_gbv.reference.sd:SpeculativeDecodingVerifier", "generic")
    >>> fn.__name__
    'sample'
    """
    check_interface(interface)
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"bad verifier path {path!r}: expected 'module:function'")
    mod_name, attr = path.split(":")
    isolation = default_isolation() if isolation is None else isolation
    if isolation == "process" and mod_name not in sys.modules:
        guard = CallGuard(time_limit_s, "process", 1)
        try:
            guard.run(lambda: _probe_import(mod_name, attr))
        except VerifierExited as err:
            return UnloadableVerifier(path, VerifierExited(f"on import of module {mod_name!r}: {err}"))
        except VerifierTimedOut:
            return UnloadableVerifier(
                path,
                VerifierTimedOut(
                    f"importing module {mod_name!r} took longer than {time_limit_s:g} s; the verifier was not called"
                ),
            )
        except Exception:  # noqa: BLE001, S110 - the import below raises the same error as a ValueError
            pass
        finally:
            guard.close()
    try:
        obj: Any = importlib.import_module(mod_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is a usage error
        raise ValueError(f"cannot import module {mod_name!r}: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ValueError(f"module {mod_name!r} has no attribute {attr!r}") from exc
    return as_callable(obj, interface)


__all__ = [
    "IMPORT_TIME_LIMIT_S",
    "UnloadableVerifier",
    "as_callable",
    "load_verifier",
    "verifier_name",
]
