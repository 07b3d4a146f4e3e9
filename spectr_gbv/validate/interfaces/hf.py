"""Adapter of the ``hf`` interface: Hugging Face transformers' ``_speculative_sampling``.

:class:`HFAdapter` feeds logits (log q, log p in float32) at batch size 1, seeds torch's global
RNG from the harness rng (or installs a given torch state), restores the caller's RNG state
afterwards, and reads ``(valid_tokens, n_matches)`` as the emitted tokens.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.validate.interfaces.adapter import Adapter, import_torch
from spectr_gbv.validate.interfaces.outputs import Emitted, read_sequence, to_numpy
from spectr_gbv.validate.isolation.failures import as_raised
from spectr_gbv.validate.isolation.guard import CallGuard


class HFAdapter(Adapter):
    """transformers' ``_speculative_sampling`` (logits in, global torch RNG; batch size 1)."""

    interface = "hf"
    family = "hf"
    single_draft = True
    torch_native = True

    def __init__(self, fn: Callable[..., Any], guard: CallGuard, name: str) -> None:
        super().__init__(fn, guard, name)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        self.extra: dict[str, Any] = {"is_done_candidate": False} if "is_done_candidate" in params else {}

    def _job(
        self,
        d: np.ndarray,
        q: np.ndarray,
        p: np.ndarray,
        rng: np.random.Generator,
        uniforms: np.ndarray | None,
        torch_state: Any = None,
    ) -> Callable[[], Emitted]:
        torch = import_torch()
        B, _, L = d.shape
        with np.errstate(divide="ignore"):
            logq = torch.from_numpy(np.log(q[:, 0]).astype(np.float32))
            logp = torch.from_numpy(np.log(p[:, 0]).astype(np.float32))
        ids = torch.from_numpy(np.array(d[:, 0], dtype=np.int64))
        seed = int(rng.integers(0, 2**62)) if torch_state is None else None
        fn, guard, extra = self.fn, self.guard, self.extra

        def job() -> Emitted:
            res = Emitted(np.full((B, L + 1), -1, dtype=np.int64), np.zeros(B, dtype=np.int64))
            saved = torch.random.get_rng_state()
            if seed is None:
                torch.random.set_rng_state(torch_state)
            else:
                torch.manual_seed(seed)
            try:
                for b in range(B):
                    guard.tick()
                    try:
                        out = fn(ids[b : b + 1], logq[b : b + 1], L, logp[b : b + 1], **extra)
                    except Exception as exc:  # noqa: BLE001
                        raise as_raised(exc, b) from exc
                    try:
                        valid, n_matches = out
                        toks, problem = read_sequence(to_numpy(valid).reshape(-1))
                        n = int(n_matches)
                    except Exception as exc:  # noqa: BLE001
                        res.problems[b] = (
                            "bad_output",
                            f"expected (valid_tokens, n_matches), got {type(exc).__name__}",
                        )
                        continue
                    if problem is not None:
                        res.problems[b] = problem
                    elif len(toks) != n + 1 or not 1 <= len(toks) <= L + 1:
                        res.problems[b] = ("bad_output", f"valid_tokens {list(toks)} with n_matches = {n}")
                    else:
                        res.tokens[b, : len(toks)] = toks
                        res.lengths[b] = len(toks)
            finally:
                torch.random.set_rng_state(saved)
            return res

        return job


__all__ = ["HFAdapter"]
