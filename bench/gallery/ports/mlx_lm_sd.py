"""Port of mlx-lm's ``speculative_generate_step`` verify step, torch in place of mlx (interface ``generic_torch``).

Upstream: ml-explore/mlx-lm, ``mlx_lm/generate.py``, ``speculative_generate_step`` (its inner ``_step`` /
``_process_and_sample`` and the acceptance loop) at commit ``d78bf58e217c904ec282ed8da9b947491f78c022``, with
the sampler of ``mlx_lm/sample_utils.py`` ``make_sampler(temp)`` at temperature 1, ``categorical_sampling``:
``mx.random.categorical(logits * (1 / temp))``.

The verify step has **no acceptance coin**: the target model scores the L drafts in one call, the sampler draws
one token from *each* of the L+1 target rows (``logprobs = logits - logsumexp(logits)``, then the sampler on the
``[L+1, V]`` batch), and the loop emits ``tokens[n]`` while ``tokens[n] == draft_tokens[n]``, then ``tokens[n]``
at the first mismatch (or the bonus ``tokens[L]``). Sample-and-match: every emitted token is a sample of the target
row after the emitted prefix, so the output law is exactly p (lossless), at the cost of accepting a draft token
with probability ``p(x)`` instead of ``min(1, p(x)/q(x))``.

The port draws the L+1 categoricals by the Gumbel-max trick, as ``mx.random.categorical`` does: one float32
uniform per row and token from the harness's ``torch.Generator`` (row-major), ``g = -log(-log(u))`` and
``argmax(logprobs + g)`` per row. mlx's own uniform lattice and Gumbel clipping are not reproduced (a Gumbel-max
draw is exact for any continuous uniform; a uniform of exactly 0 gives ``g = -inf``, never selected unless every
entry of the row is ``-inf``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def _as_tensor(x: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).to(dtype)


def categorical(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Gumbel-max categorical draw per row of ``logits`` ``[R, V]`` (float32): ``int64 [R]``."""
    u = torch.rand(logits.shape, dtype=torch.float32, generator=generator)
    return torch.argmax(logits - torch.log(-torch.log(u)), dim=-1)


def verify(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator) -> list[int]:
    """mlx-lm's sample-and-match verify step on draft 0 (``generic_torch``): the emitted tokens.

    Parameters
    ----------
    draft_tokens : Tensor or ndarray, shape [K, L], int64
        Only draft 0 is verified (mlx-lm drafts one sequence).
    draft_probs : Tensor or ndarray, shape [K, L, V], float64
        Unused: the verify step never reads the draft's probabilities.
    target_probs : Tensor or ndarray, shape [K, L+1, V], float64
        Used as float32 logits ``log p``.
    generator : torch.Generator
        ``(L+1) V`` float32 uniforms (one Gumbel-max draw per target row).

    Returns
    -------
    list of int
        The matched draft prefix plus one target sample (length 1..L+1).
    """
    drafts = [int(t) for t in _as_tensor(draft_tokens, torch.int64)[0]]
    logits = torch.log(_as_tensor(target_probs, torch.float64)[0]).to(torch.float32)
    logprobs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    tokens = categorical(logprobs, generator).tolist()
    n = 0
    out: list[int] = []
    while n < len(drafts):
        if tokens[n] != drafts[n]:
            break
        out.append(tokens[n])
        n += 1
    out.append(tokens[n])
    return out
