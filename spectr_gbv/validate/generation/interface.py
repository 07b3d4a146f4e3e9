"""The generation interface: what a complete speculative generation loop must look like, and its output.

A system under test is a callable

``generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p, seed) -> new ids``

(interface ``"generation"``) or the same with ``prompt_ids`` a list of B prompts and a list of
B outputs back (``"generation_batched"``). :func:`check_signature` inspects the callable
before any call (a wrong signature is a usage error, :class:`ValueError`); :func:`read_output`
and :func:`read_batch` turn what a call returned into ``int64`` arrays or raise
:class:`BadOutput`, which the runner reports as the failure category ``bad_output`` naming the
case; :func:`load_generate` imports ``MODULE:FUNC`` or resolves a ready adapter's name (a name
whose module part contains ``-``, which no Python module name can).

Imports: numpy, the standard library, :mod:`spectr_gbv.validate.interfaces.loading`; torch
and the adapters only inside the functions that need them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

#: The generation interfaces: one prompt per call, or a batch of B prompts per call.
GENERATION_INTERFACES: tuple[str, ...] = ("generation", "generation_batched")
#: Positional parameters of a generate callable, in order.
POSITIONAL: tuple[str, ...] = ("target", "draft", "prompt_ids", "max_new_tokens")
#: Keyword parameters of a generate callable.
KEYWORDS: tuple[str, ...] = ("temperature", "top_k", "top_p", "seed")


class BadOutput(Exception):
    """A generate call returned something that is not ``max_new_tokens`` token ids in [0, V).

    The message names what was wrong (type, shape, length, the offending id); the runner
    prefixes the case (scenario, seed) and reports the failure category ``bad_output``.
    """


def check_interface_name(interface: str) -> str:
    """``interface`` if it is one of :data:`GENERATION_INTERFACES`.

    Raises
    ------
    ValueError
        Any other value, naming the argument.
    """
    if interface not in GENERATION_INTERFACES:
        raise ValueError(f"interface: expected one of {', '.join(GENERATION_INTERFACES)}, got {interface!r}")
    return interface


def check_signature(generate: Any, interface: str = "generation") -> None:
    """Check that ``generate`` can be called as the generation interface calls it.

    The interface calls ``generate(target, draft, prompt_ids, max_new_tokens, temperature=...,
    top_k=..., top_p=..., seed=...)``: the four positional parameters (any names, or
    ``*args``) and the four keywords (by name, or ``**kwargs``) must be accepted; further
    parameters need defaults.

    Parameters
    ----------
    generate : callable
        The system under test.
    interface : str
        One of :data:`GENERATION_INTERFACES` (both share the signature).

    Raises
    ------
    ValueError
        ``generate`` is not callable, or its signature cannot take the call; the message names
        the missing or extra parameters and the expected signature.
    """
    check_interface_name(interface)
    want = f"generate(target, draft, prompt_ids, max_new_tokens, *, {', '.join(KEYWORDS)})"
    if not callable(generate):
        raise ValueError(f"generate: expected a callable {want}, got {type(generate).__name__}")
    try:
        sig = inspect.signature(generate)
    except (TypeError, ValueError):  # a builtin without a signature: the first call will tell
        return
    try:
        sig.bind(*POSITIONAL, **{k: None for k in KEYWORDS})
    except TypeError as exc:
        params = sig.parameters.values()
        names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        kwargs = any(p.kind == p.VAR_KEYWORD for p in params)
        missing = [k for k in KEYWORDS if k not in names and not kwargs]
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        why = []
        if missing:
            why.append(f"no keyword parameter {', '.join(missing)}")
        if len(positional) < len(POSITIONAL) and not varargs:
            why.append(f"{len(positional)} positional parameters where {len(POSITIONAL)} are passed")
        reason = "; ".join(why) or str(exc)
        name = getattr(generate, "__qualname__", type(generate).__name__)
        raise ValueError(f"generate: {name}{sig} cannot be called as {want}: {reason}") from None


def check_declared_interface(generate: Any, interface: str) -> None:
    """Refuse a callable whose ``interface`` attribute declares the other generation interface.

    Ready adapters and the planted-bug loops carry ``interface = "generation"`` or
    ``"generation_batched"``; calling a batched loop with one prompt (or the reverse) would
    report its refusal as a failure of the system instead of a usage error.

    Raises
    ------
    ValueError
        The declared interface is one of :data:`GENERATION_INTERFACES` and not ``interface``.
    """
    declared = getattr(generate, "interface", None)
    if isinstance(declared, str) and declared in GENERATION_INTERFACES and declared != interface:
        raise ValueError(f"interface: the generate callable declares interface {declared!r}; got {interface!r}")


def _as_array(out: Any) -> np.ndarray:
    """``out`` as a numpy array (torch tensors moved to the CPU); raises BadOutput for other types."""
    if isinstance(out, np.ndarray):
        return out
    if isinstance(out, list | tuple):
        try:
            return np.asarray(out)
        except (ValueError, TypeError) as exc:
            raise BadOutput(f"a {type(out).__name__} that is not a flat sequence of ids ({exc})") from None
    if type(out).__module__.startswith("torch") and hasattr(out, "detach"):
        return out.detach().cpu().numpy()
    raise BadOutput(f"a {type(out).__name__}, expected a list, numpy array or torch tensor of token ids")


def read_output(out: Any, length: int, vocab_size: int) -> np.ndarray:
    """The token ids of one generate call as ``int64 [length]``.

    Parameters
    ----------
    out : list, tuple, numpy array or torch tensor
        What the call returned: the new token ids only, 1-D, of length ``length``. A
        ``[1, length]`` array (a batch of one) is accepted.
    length : int
        ``max_new_tokens`` of the call.
    vocab_size : int
        V; every id must lie in [0, V).

    Returns
    -------
    numpy.ndarray, shape [length], int64

    Raises
    ------
    BadOutput
        Not a sequence of integers, the wrong shape or length, or an id outside [0, V); the
        message names the first offending entry.
    """
    arr = _as_array(out)
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 1:
        raise BadOutput(f"shape {tuple(arr.shape)}, expected ({length},): the new token ids only")
    if len(arr) != length:
        raise BadOutput(f"{len(arr)} token ids, expected max_new_tokens = {length} (the new tokens only)")
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == object):
        raise BadOutput(f"ids of dtype {arr.dtype}, expected integers")
    if arr.dtype == object:
        bad = [i for i, v in enumerate(arr) if not isinstance(v, int | np.integer) or isinstance(v, bool)]
        if bad:
            raise BadOutput(f"entry {bad[0]} is {arr[bad[0]]!r}, not an integer token id")
    ids = arr.astype(np.int64)
    oov = np.flatnonzero((ids < 0) | (ids >= vocab_size))
    if len(oov):
        j = int(oov[0])
        raise BadOutput(f"token id {int(ids[j])} at position {j} is outside the vocabulary [0, {vocab_size})")
    return ids


def read_batch(out: Any, rows: int, length: int, vocab_size: int) -> np.ndarray:
    """The token ids of one batched generate call as ``int64 [rows, length]``.

    Parameters
    ----------
    out : sequence of B outputs, or a 2-D numpy array / torch tensor
        One entry per prompt, in order, each as :func:`read_output` reads it.
    rows : int
        B, the number of prompts passed.
    length, vocab_size : int
        As :func:`read_output`.

    Returns
    -------
    numpy.ndarray, shape [rows, length], int64

    Raises
    ------
    BadOutput
        Not B outputs, or a row :func:`read_output` refuses (the message names the row).
    """
    if isinstance(out, np.ndarray) or (type(out).__module__.startswith("torch") and hasattr(out, "detach")):
        out = list(_as_array(out)) if _as_array(out).ndim == 2 else out
    if not isinstance(out, list | tuple):
        raise BadOutput(f"a {type(out).__name__}, expected a list of {rows} outputs (one per prompt)")
    if len(out) != rows:
        raise BadOutput(f"{len(out)} outputs for a batch of {rows} prompts")
    res = np.empty((rows, length), dtype=np.int64)
    for b, row in enumerate(out):
        try:
            res[b] = read_output(row, length, vocab_size)
        except BadOutput as exc:
            raise BadOutput(f"row {b}: {exc}") from None
    return res


def load_generate(path: str, *, isolation: str | None = None) -> Callable[..., Any]:
    """The system under test named by ``path``: a ready adapter's name, or ``MODULE:FUNC``.

    Parameters
    ----------
    path : str
        A name of :data:`spectr_gbv.validate.generation.adapters.ADAPTERS` (its part before any
        ``:`` contains ``-``, e.g. ``"hf-assisted"`` or ``"hf-assisted:heuristic"``), else
        ``"package.module:function"`` imported as :func:`~spectr_gbv.validate.load_verifier` does
        (the import is first tried in a forked child under process isolation).
    isolation : str, optional
        As :func:`~spectr_gbv.validate.load_verifier`.

    Returns
    -------
    callable
        The generate callable, or an
        :class:`~spectr_gbv.validate.interfaces.loading.UnloadableVerifier` when the module ended
        or hung the process on import (the run reports it as a failed check).

    Raises
    ------
    ValueError
        One line: an unknown adapter name, a bad path, a module that cannot be imported, a
        missing attribute.
    """
    if not isinstance(path, str):
        raise ValueError(f"generate: expected 'module:function' or an adapter name, got {type(path).__name__}")
    if "-" in path.split(":", 1)[0]:
        from spectr_gbv.validate.generation.adapters import resolve_adapter  # noqa: PLC0415 - imports torch

        return resolve_adapter(path)
    from spectr_gbv.validate.interfaces.loading import load_verifier  # noqa: PLC0415

    return load_verifier(path, "chain", isolation=isolation)


__all__ = [
    "GENERATION_INTERFACES",
    "KEYWORDS",
    "POSITIONAL",
    "BadOutput",
    "check_declared_interface",
    "check_interface_name",
    "check_signature",
    "load_generate",
    "read_batch",
    "read_output",
]
