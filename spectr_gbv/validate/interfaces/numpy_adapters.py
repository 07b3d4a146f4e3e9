"""Adapters of the numpy interfaces: ``generic``, ``chain`` and ``batched``.

:class:`GenericAdapter` (one multi-draft iteration per call, a numpy Generator),
:class:`ChainAdapter` (single-draft rows with their uniforms, up to
:data:`~spectr_gbv.validate.interfaces.names.CHAIN_BATCH` rows per call) and
:class:`BatchedAdapter` (many multi-draft iterations per call).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.interfaces.names import CHAIN_BATCH
from spectr_gbv.validate.interfaces.outputs import Emitted, read_padded, read_sequence
from spectr_gbv.validate.isolation.failures import as_raised
from spectr_gbv.validate.isolation.guard import CallGuard


class GenericAdapter(Adapter):
    """``verify(draft_tokens [K, L], draft_probs [K, L, V], target_probs [K, L+1, V], rng)``."""

    interface = "generic"

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        fn, conv = self.fn, self._convert
        row = self.guard.clock_row()
        rng_of = self._rng_arg(rng, B, torch_state)
        plain = self.arrays == "numpy" and not self.torch_native
        monotonic = time.monotonic

        def job() -> Emitted:
            outs = []
            append = outs.append
            b = 0
            try:
                if plain:
                    for b in range(B):
                        row[0] = monotonic()  # inlined tick() on the hot path
                        row[1] += 1
                        append(fn(d[b], q[b], p[b], rng))
                else:
                    for b in range(B):
                        args = (conv(d[b]), conv(q[b]), conv(p[b]), rng_of(b))
                        row[0] = monotonic()
                        row[1] += 1
                        append(fn(*args))
            except Exception as exc:  # noqa: BLE001 - reported as a failed check
                raise as_raised(exc, b) from exc
            res = Emitted(np.full((B, L + 1), -1, dtype=np.int64), np.zeros(B, dtype=np.int64))
            for b, out in enumerate(outs):
                toks, problem = read_sequence(out)
                if problem is not None:
                    res.problems[b] = problem
                elif not 1 <= len(toks) <= L + 1:
                    res.problems[b] = (
                        "bad_output",
                        f"emitted {len(toks)} tokens {list(toks)}, expected 1..L+1={L + 1}",
                    )
                else:
                    res.tokens[b, : len(toks)] = toks
                    res.lengths[b] = len(toks)
            return res

        return job


def _chunked(B: int, L: int, call: Callable[[int, int, int], Any], guard: CallGuard) -> Callable[[], Emitted]:
    """Job calling ``call(lo, hi, i)`` on row chunks of :data:`CHAIN_BATCH`, outputs read as padded rows."""

    def job() -> Emitted:
        parts = []
        for i, lo in enumerate(range(0, B, CHAIN_BATCH)):
            hi = min(B, lo + CHAIN_BATCH)
            try:
                out = call(lo, hi, i)
            except Exception as exc:  # noqa: BLE001
                raise as_raised(exc, lo) from exc
            parts.append((lo, read_padded(out, hi - lo, L)))
        res = Emitted(np.full((B, L + 1), -1, dtype=np.int64), np.zeros(B, dtype=np.int64))
        for lo, part in parts:
            res.tokens[lo : lo + len(part.lengths)] = part.tokens
            res.lengths[lo : lo + len(part.lengths)] = part.lengths
            res.problems.update({lo + b: v for b, v in part.problems.items()})
        return res

    return job


class ChainAdapter(Adapter):
    """``verify(draft_ids [B, L], draft_probs [B, L, V], target_probs [B, L+1, V], uniforms [B, L+1])``."""

    interface = "chain"
    family = "chain"
    single_draft = True

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        u = rng.random((B, L + 1)) if uniforms is None else np.asarray(uniforms, dtype=np.float64)
        u.flags.writeable = False
        fn, guard, conv = self.fn, self.guard, self._convert

        def call(lo: int, hi: int, i: int) -> Any:
            args = (conv(d[lo:hi, 0]), conv(q[lo:hi, 0]), conv(p[lo:hi, 0]), conv(u[lo:hi]))
            guard.tick()
            return fn(*args)

        return _chunked(B, L, call, guard)


class BatchedAdapter(Adapter):
    """``verify(draft_tokens [B, K, L], draft_probs [B, K, L, V], target_probs [B, K, L+1, V], rng) -> [B, L+1]``."""

    interface = "batched"

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        B, _, L = d.shape
        fn, guard, conv = self.fn, self.guard, self._convert
        rng_of = self._rng_arg(rng, -(-B // CHAIN_BATCH), torch_state)

        def call(lo: int, hi: int, i: int) -> Any:
            args = (conv(d[lo:hi]), conv(q[lo:hi]), conv(p[lo:hi]), rng_of(i))
            guard.tick()
            return fn(*args)

        return _chunked(B, L, call, guard)


__all__ = ["BatchedAdapter", "ChainAdapter", "GenericAdapter"]
