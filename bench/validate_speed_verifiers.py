"""Verifiers of a fixed cost per call, for ``bench/validate_speed.py``.

Textbook speculative sampling (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023) on draft
0, written in torch, padded with a busy wait to a fixed cost per call: what a Python/torch
verifier of a serving stack costs (0.3-3.6 ms per call were measured on ports of published
code). The wait holds the GIL and a core, like real work.

* :func:`single_row`: one iteration per call (``generic`` or ``generic_torch`` interface),
  :data:`COST_S` per call; ``rng`` may be a numpy ``Generator`` (today's harness) or a
  ``torch.Generator`` (the torch flavour), so both harnesses run the same verifier.
* :func:`batched`: ``[B, K, L]`` rows per call (``batched_torch`` interface), :data:`COST_S`
  per started block of :data:`ROWS_PER_COST` rows; :func:`chain_batched` is the same in the
  ``chain`` layout (``[B, L]`` rows, supplied uniforms) for harnesses without that interface.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

#: Seconds of work per call (single row) or per block of ROWS_PER_COST rows (batched).
COST_S = 1e-3
#: Rows that one COST_S of the batched verifier covers.
ROWS_PER_COST = 64


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _uniform(rng: Any, n: int) -> torch.Tensor:
    if isinstance(rng, torch.Generator):
        return torch.rand(n, generator=rng, dtype=torch.float64)
    return torch.from_numpy(rng.random(n))


def _inverse_cdf(rows: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The smallest token whose cumulative probability exceeds ``u * total``: rows [B, V], u [B] -> [B]."""
    cdf = torch.cumsum(rows, -1)
    z = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1).contiguous(), right=True).squeeze(-1)
    return z.clamp(max=rows.shape[-1] - 1)


def _sd_rows(d: torch.Tensor, q: torch.Tensor, p: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Vectorised SD: d [B, L], q [B, L, V], p [B, L+1, V], u [B, L+1] -> emitted [B, L+1], -1 padded.

    ``u[:, t]`` is the coin of position t (accept iff ``u q(x) < p(x)``), ``u[:, t + 1]`` draws the
    correction after a rejection at t (that coin is never used then), ``u[:, L]`` the bonus token.
    """
    B, L = d.shape
    rows = torch.arange(B)
    out = torch.full((B, L + 1), -1, dtype=torch.int64)
    alive = torch.ones(B, dtype=torch.bool)
    for t in range(L):
        x = d[:, t]
        accept = u[:, t] * q[rows, t, x] < p[rows, t, x]
        res = torch.clamp(p[:, t] - q[:, t], min=0.0)
        tot = res.sum(-1, keepdim=True)
        res = torch.where(tot > 0, res / tot.clamp_min(1e-300), p[:, t])  # all-zero residual: p
        z = _inverse_cdf(res, u[:, t + 1])
        keep, rej = alive & accept, alive & ~accept
        out[keep, t] = x[keep]
        out[rej, t] = z[rej]
        alive = keep
    z = _inverse_cdf(p[:, L], u[:, L])
    out[alive, L] = z[alive]
    return out


def single_row(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    """Generic interface: verify draft 0 of one iteration ([K, L], [K, L, V], [K, L+1, V]) in COST_S seconds."""
    t0 = time.perf_counter()
    d = torch.as_tensor(draft_tokens)[0:1]
    q = torch.as_tensor(draft_probs, dtype=torch.float64)[0:1]
    p = torch.as_tensor(target_probs, dtype=torch.float64)[0:1]
    u = _uniform(rng, d.shape[1] + 1).unsqueeze(0)
    toks = [int(v) for v in _sd_rows(d, q, p, u)[0].tolist() if v >= 0]
    _spin(COST_S - (time.perf_counter() - t0))
    return toks


def batched(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> torch.Tensor:
    """Batched interface: [B, K, L] rows per call, COST_S seconds per started block of ROWS_PER_COST rows."""
    t0 = time.perf_counter()
    d = torch.as_tensor(draft_tokens)[:, 0]
    q = torch.as_tensor(draft_probs, dtype=torch.float64)[:, 0]
    p = torch.as_tensor(target_probs, dtype=torch.float64)[:, 0]
    B, L = d.shape
    u = _uniform(rng, B * (L + 1)).reshape(B, L + 1)
    out = _sd_rows(d, q, p, u)
    _spin(COST_S * math.ceil(B / ROWS_PER_COST) - (time.perf_counter() - t0))
    return out


def chain_batched(draft_ids: Any, draft_probs: Any, target_probs: Any, uniforms: Any) -> torch.Tensor:
    """Chain interface (the old harness's batched layout): [B, L] rows, the same cost as :func:`batched`."""
    t0 = time.perf_counter()
    d = torch.as_tensor(draft_ids)
    q = torch.as_tensor(draft_probs, dtype=torch.float64)
    p = torch.as_tensor(target_probs, dtype=torch.float64)
    u = torch.as_tensor(uniforms, dtype=torch.float64)
    out = _sd_rows(d, q, p, u)
    _spin(COST_S * math.ceil(d.shape[0] / ROWS_PER_COST) - (time.perf_counter() - t0))
    return out
