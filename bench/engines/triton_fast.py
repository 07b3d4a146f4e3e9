"""Speed up Triton's interpreter (``TRITON_INTERPRET=1``) without changing any result, bit for bit.

Import after :mod:`bench.engines.triton_interpret` and before the engine. Two interpreter internals of triton
3.9.0 are replaced by equivalents; no engine code and no Triton semantics change:

1. ``triton.runtime.interpreter._patch_builtin`` runs ``inspect.getmembers`` over ``triton.language`` on every
   device-function call (about a third of the interpreted run time of vLLM's sampling kernels). The names of the
   builtins of each patched module are collected once, on the unpatched modules, and only those are re-patched
   (the same attributes, the same wrappers).
2. ``triton.language.random.philox_impl`` (the 10 Philox-4x32 rounds behind ``tl.randint`` / ``tl.rand`` /
   ``tl.randint4x``) runs each 32-bit operation through Triton's semantic layer. It is replaced, for ``uint32``
   counters, by the same rounds in numpy ``uint32`` / ``uint64`` arithmetic (``umulhi`` as the high word of the
   64-bit product); ``uint64`` counters keep the original. :func:`check_philox` compares both on random seeds and
   offsets (bitwise); ``tests/engines/test_vllm_adapters.py`` cannot run it (no Triton in CI), the engine
   scripts do (``record_vllm.py``).

Source: ``triton/runtime/interpreter.py`` (``_patch_builtin``, ``_patch_lang``) and ``triton/language/random.py``
(``philox_impl``), triton 3.9.0.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import triton.language as tl
from triton.language import random as _random
from triton.runtime import interpreter as _interp

_ORIGINAL_PHILOX_IMPL = _random.philox_impl
_ORIGINAL_PATCH_BUILTIN = _interp._patch_builtin
_BUILTIN_NAMES: dict[int, list[str]] = {}


def _builtin_names(pkg: Any) -> list[str]:
    """Names of ``pkg``'s Triton builtins, collected once (on the unpatched module)."""
    names = _BUILTIN_NAMES.get(id(pkg))
    if names is None:
        names = [name for name, member in inspect.getmembers(pkg) if tl.core.is_builtin(member)]
        _BUILTIN_NAMES[id(pkg)] = names
    return names


for _pkg in (tl, tl.core, tl.tensor, tl.math, tl.core.tensor_descriptor_base):
    _builtin_names(_pkg)


def _patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
    """``_patch_builtin`` of triton 3.9.0 over the cached builtin names (same attributes, same wrappers)."""
    for name in _builtin_names(pkg):
        member = getattr(pkg, name)
        if tl.core.is_builtin(member):
            _interp._patch_attr(pkg, name, member, builder, scope)


_A = np.uint64(0xD2511F53)
_B = np.uint64(0xCD9E8D57)
_KA = np.uint32(0x9E3779B9)
_KB = np.uint32(0xBB67AE85)
_M32 = np.uint64(0xFFFFFFFF)


def philox_rounds_np(
    c0: np.ndarray, c1: np.ndarray, c2: np.ndarray, c3: np.ndarray, k0: np.ndarray, k1: np.ndarray, n_rounds: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox-4x32 rounds of ``triton.language.random.philox_impl`` in numpy.

    Parameters
    ----------
    c0, c1, c2, c3, k0, k1 : numpy.ndarray
        ``uint32`` counters and key words (broadcastable).
    n_rounds : int
        Number of rounds (10 by default in Triton).

    Returns
    -------
    tuple of numpy.ndarray
        The four ``uint32`` output words, broadcast to the counters' shape.
    """
    shape = np.broadcast_shapes(c0.shape, c1.shape, c2.shape, c3.shape, k0.shape, k1.shape)
    c0, c1, c2, c3, k0, k1 = (np.broadcast_to(np.asarray(x, dtype=np.uint32), shape).copy()
                              for x in (c0, c1, c2, c3, k0, k1))
    for _ in range(n_rounds):
        p_b = _B * c2.astype(np.uint64)
        p_a = _A * c0.astype(np.uint64)
        n0 = (p_b >> np.uint64(32)).astype(np.uint32) ^ c1 ^ k0
        n2 = (p_a >> np.uint64(32)).astype(np.uint32) ^ c3 ^ k1
        c1 = (p_b & _M32).astype(np.uint32)
        c3 = (p_a & _M32).astype(np.uint32)
        c0, c2 = n0, n2
        k0 = k0 + _KA
        k1 = k1 + _KB
    return c0, c1, c2, c3


def _philox_impl(c0: Any, c1: Any, c2: Any, c3: Any, k0: Any, k1: Any, n_rounds: Any = 10) -> Any:
    """Drop-in for ``philox_impl`` inside the interpreter (``uint32`` counters; else the original)."""
    if getattr(c0, "dtype", None) != tl.uint32:
        return _ORIGINAL_PHILOX_IMPL(c0, c1, c2, c3, k0, k1, n_rounds)
    rounds = int(getattr(n_rounds, "value", n_rounds))
    arrays = [np.asarray(x.handle.data) for x in (c0, c1, c2, c3, k0, k1)]
    outs = philox_rounds_np(*arrays, rounds)
    ref = max((c0, c1, c2, c3), key=lambda x: np.asarray(x.handle.data).ndim)
    return tuple(tl.core.tensor(_interp.TensorHandle(o.reshape(np.asarray(ref.handle.data).shape), tl.uint32),
                                ref.type) for o in outs)


_interp._patch_builtin = _patch_builtin
_random.philox_impl = _philox_impl


def check_philox(num: int = 4096, seed: int = 0) -> int:
    """Compare the numpy Philox with Triton's own (interpreted) on random seeds and offsets, bitwise.

    Parameters
    ----------
    num : int
        Offsets per seed (a block of ``num`` int32 / int64 offsets).
    seed : int
        Seed of the numpy generator choosing Philox seeds and offsets.

    Returns
    -------
    int
        The number of words compared (all equal).

    Raises
    ------
    AssertionError
        A word differs.
    """
    import torch
    import triton

    @triton.jit
    def _kern(out_ptr, off_ptr, seed, N: tl.constexpr):  # noqa: ANN001, ANN202 - a Triton kernel
        i = tl.arange(0, N)
        off = tl.load(off_ptr + i)
        a, b, c, d = tl.randint4x(seed, off)
        tl.store(out_ptr + i, a)
        tl.store(out_ptr + N + i, b)
        tl.store(out_ptr + 2 * N + i, c)
        tl.store(out_ptr + 3 * N + i, d)

    rng = np.random.default_rng(seed)
    compared = 0
    for dtype in (torch.int32, torch.int64):
        for s in [int(x) for x in rng.integers(0, 2**62, size=3)] + [0, 2**31 - 1]:
            hi = 2**31 if dtype == torch.int32 else 2**40
            off = torch.as_tensor(rng.integers(0, hi, size=num), dtype=dtype)
            got = torch.empty(4 * num, dtype=torch.int32)
            want = torch.empty(4 * num, dtype=torch.int32)
            _kern[(1,)](got, off, s, N=num)
            _random.philox_impl = _ORIGINAL_PHILOX_IMPL
            try:
                _kern[(1,)](want, off, s, N=num)
            finally:
                _random.philox_impl = _philox_impl
            assert torch.equal(got, want), f"numpy Philox differs from Triton's (seed {s}, offsets {dtype})"
            compared += 4 * num
    return compared
