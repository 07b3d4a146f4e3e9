r"""Planted robustness bugs of public verifiers: coins of exactly 0, all-zero residuals, no coin at all.

Each function reproduces the verification step of a public speculative-decoding verifier on
draft 0 (K drafts for ``target_only_tree``) at the places where the robustness probes
(:mod:`spectr_gbv.validate.probes`) once had blind spots:

``litgpt_like``
    behaviour (public code it follows): draws and discards one sample per target row, then rejects
    when ``u <= 1 - p/q``; divides an all-zero residual by its sum and ``torch.multinomial`` raises
    (LitGPT ``speculative_decoding``); diagnosis: ``raises``
``bf16_coin``
    behaviour (public code it follows): bfloat16 probabilities and coins (``u > min(1, p/q)``
    rejects), an argmax over exponentials of the residual ``where(p - q > 0)/sum``: 0/0 gives token
    0; a bfloat16 coin of exactly 0 (probability about ``2**-9``) accepts a token of target
    probability 0 (gpt-fast); diagnosis: ``zero_probability_token``
``float64_zero_coin``
    behaviour (public code it follows): accepts when ``p/q >= u`` with float64 coins (a coin of 0,
    probability ``2**-53``, accepts ``p = 0``); recovered token ``argmax(max(p - q, 0)/e)``, token 0
    when the residual is all zero (vLLM V1 rejection sampler); diagnosis: ``zero_probability_token``
``sample_and_match``
    behaviour (public code it follows): no coin: samples the target and accepts the draft token when
    they agree (mlx-lm); diagnosis: ``ok`` (lossless; the coin probes are inconclusive)
``target_only_tree``
    behaviour (public code it follows): accepts child j when ``u < p(c_1) + ... + p(c_j)``; after
    rejecting drafts that cover the target's support samples an all-zero residual and falls off its
    end to id V - 1 (SGLang target-only tree verification); diagnosis: ``zero_probability_token``

Interfaces: ``litgpt_like``, ``bf16_coin`` and ``float64_zero_coin`` take the ``generic_torch``
interface (CPU tensors and a ``torch.Generator``; torch is imported when they run);
``sample_and_match`` and ``target_only_tree`` the ``generic`` one (a numpy Generator). Every
one is lossless wherever it returns, apart from the events above.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.testing.mutants.inputs import tag_verifier


def _torch() -> Any:
    import torch  # noqa: PLC0415 - optional dependency, needed only when a torch mutant runs

    return torch


def _draft0(draft_tokens: Any, draft_probs: Any, target_probs: Any, dtype: str) -> tuple[Any, Any, Any, Any]:
    """``(torch, d, q, p)``: draft 0's ids and its q and p rows cast to ``torch.<dtype>``."""
    torch = _torch()
    return torch, draft_tokens[0], draft_probs[0].to(getattr(torch, dtype)), target_probs[0].to(getattr(torch, dtype))


def litgpt_like(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: Any) -> list[int]:
    """LitGPT-style verification: discarded samples first, ``reject when u <= 1 - p/q``, no residual guard.

    Parameters
    ----------
    draft_tokens : torch.Tensor, shape [K, L], int64
    draft_probs : torch.Tensor, shape [K, L, V], float
    target_probs : torch.Tensor, shape [K, L+1, V], float
    generator : torch.Generator
        Every draw: ``V`` float32 uniforms per target row (an exponential-race sample, discarded),
        then one float32 coin per position with ``p < q``, then ``torch.multinomial``.

    Returns
    -------
    list of int
        The accepted prefix of draft 0 plus one token.

    Raises
    ------
    RuntimeError
        ``torch.multinomial`` after a rejection whose residual ``max(p - q, 0)`` is all zero.

    Attributes
    ----------
    bug = "raises", interface = "generic_torch".
    """
    torch, d, q, p = _draft0(draft_tokens, draft_probs, target_probs, "float32")
    L, V = q.shape
    for t in range(L + 1):  # sample() of every target row; the token is not used
        torch.argmax(p[t] / -torch.log(torch.rand(V, generator=generator)))
    out: list[int] = []
    for t in range(L):
        x = int(d[t])
        if p[t, x] >= q[t, x]:
            out.append(x)
            continue
        u = torch.rand(1, generator=generator)
        if bool(u <= 1 - p[t, x] / q[t, x]):
            res = torch.clamp(p[t] - q[t], min=0.0)
            res = res / res.sum()
            out.append(int(torch.multinomial(res, 1, generator=generator)))
            return out
        out.append(x)
    out.append(int(torch.multinomial(p[L], 1, generator=generator)))
    return out


def _argmax_race(probs: Any, generator: Any) -> int:
    """``argmax(probs / e)`` with ``e`` standard exponentials (a NaN wins: torch.argmax treats it as largest)."""
    torch = _torch()
    e = torch.empty_like(probs).exponential_(1, generator=generator)
    return int(torch.argmax(probs / e))


def bf16_coin(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: Any) -> list[int]:
    """gpt-fast-style verification in bfloat16: ``torch.rand`` coins of exactly 0 and a 0/0 residual.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, generator
        As :func:`litgpt_like`; the probabilities are cast to bfloat16, the L coins drawn at once
        as bfloat16 uniforms (output 0 onward).

    Returns
    -------
    list of int

    Attributes
    ----------
    bug = "zero_probability_token", interface = "generic_torch".
    """
    torch, d, q, p = _draft0(draft_tokens, draft_probs, target_probs, "bfloat16")
    L = len(d)
    idx = torch.arange(L)
    accept = torch.minimum(torch.ones((), dtype=torch.bfloat16), p[idx, d] / q[idx, d])
    u = torch.rand(L, generator=generator, dtype=torch.bfloat16)
    rejected = (u > accept).nonzero()
    if len(rejected) == 0:
        return [*d.tolist(), _argmax_race(p[L], generator)]
    t = int(rejected[0, 0])
    new = p[t] - q[t]
    new = torch.where(new > 0, new, torch.zeros_like(new))
    new = new / new.sum()
    return [*d[:t].tolist(), _argmax_race(new, generator)]


def float64_zero_coin(draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: Any) -> list[int]:
    """vLLM V1-style verification: ``p/q >= u`` on float64 coins, recovered token by an argmax race.

    Parameters
    ----------
    draft_tokens, draft_probs, target_probs, generator
        As :func:`litgpt_like`; the L coins are float64 uniforms drawn first (outputs 0..2L-1).

    Returns
    -------
    list of int

    Attributes
    ----------
    bug = "zero_probability_token", interface = "generic_torch".
    """
    torch, d, q, p = _draft0(draft_tokens, draft_probs, target_probs, "float64")
    L = len(d)
    u = torch.rand(L, generator=generator, dtype=torch.float64)
    out: list[int] = []
    for t in range(L):
        x = int(d[t])
        if bool(q[t, x] > 0) and bool(p[t, x] / q[t, x] >= u[t]):
            out.append(x)
            continue
        out.append(_argmax_race(torch.clamp(p[t] - q[t], min=0.0), generator))
        return out
    out.append(_argmax_race(p[L], generator))
    return out


def _choice(rng: np.random.Generator, row: np.ndarray) -> int:
    return int(rng.choice(len(row), p=row / row.sum()))


def sample_and_match(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """mlx-lm-style verification: sample the target, keep the draft token when they agree. No coin.

    Lossless (every emitted token is a sample of its target row); it never compares a uniform
    with ``p/q``, so a forced coin cannot be confirmed and the coin probes are inconclusive.

    Parameters
    ----------
    draft_tokens : array_like, shape [K, L], int
    draft_probs : array_like, shape [K, L, V] (unused)
    target_probs : array_like, shape [K, L+1, V]
    rng : numpy.random.Generator
        One ``choice`` per position.

    Returns
    -------
    list of int

    Attributes
    ----------
    bug = "ok", interface = "generic".
    """
    d = np.asarray(draft_tokens)[0]
    p = np.asarray(target_probs, dtype=np.float64)[0]
    out: list[int] = []
    for t in range(len(d)):
        y = _choice(rng, p[t])
        out.append(y)
        if y != int(d[t]):
            return out
    out.append(_choice(rng, p[len(d)]))
    return out


def target_only_tree(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: np.random.Generator) -> list[int]:
    """SGLang-style target-only tree verification over K drafts; falls off an all-zero residual.

    At each position the distinct child tokens ``c_1, c_2, ...`` (draft order) are tried with
    one coin ``u``: child j is accepted when ``u < p(c_1) + ... + p(c_j)`` (exactly ``p(c_j)``
    each: lossless). After every child is rejected the next token is drawn from ``p`` with the
    children zeroed, by the inverse CDF of ``v * sum`` with a second uniform ``v``; when the
    children cover the target's support that residual is all zero and the scan returns the
    last id, V - 1, whatever its probability.

    Parameters
    ----------
    draft_tokens : array_like, shape [K, L], int
    draft_probs : array_like, shape [K, L, V] (unused: target-only)
    target_probs : array_like, shape [K, L+1, V]
    rng : numpy.random.Generator

    Returns
    -------
    list of int

    Attributes
    ----------
    bug = "zero_probability_token", interface = "generic".
    """
    d = np.asarray(draft_tokens)
    p = np.asarray(target_probs, dtype=np.float64)
    K, L = d.shape
    V = p.shape[-1]
    alive = list(range(K))
    out: list[int] = []
    for t in range(L):
        u = rng.random()
        acc, chosen, children = 0.0, None, []
        for k in alive:
            c = int(d[k, t])
            if c in children:
                continue
            children.append(c)
            acc += p[k, t, c]
            if u < acc:
                chosen = c
                break
        if chosen is None:
            row = p[alive[0], t].copy()
            row[children] = 0.0
            idx = int(np.searchsorted(np.cumsum(row), rng.random() * row.sum(), side="right"))
            out.append(min(idx, V - 1))
            return out
        out.append(chosen)
        alive = [k for k in alive if int(d[k, t]) == chosen]
    out.append(_choice(rng, p[alive[0], L]))
    return out


tag_verifier(litgpt_like, "raises", "generic_torch", "sd")
tag_verifier(bf16_coin, "zero_probability_token", "generic_torch", "sd")
tag_verifier(float64_zero_coin, "zero_probability_token", "generic_torch", "sd")
tag_verifier(sample_and_match, "ok", "generic", "sd")
tag_verifier(target_only_tree, "zero_probability_token", "generic", "sd")

#: The mutants of this module by name.
ROBUSTNESS_MUTANTS: dict[str, Any] = {
    "litgpt_like": litgpt_like,
    "bf16_coin": bf16_coin,
    "float64_zero_coin": float64_zero_coin,
    "sample_and_match": sample_and_match,
    "target_only_tree": target_only_tree,
}

__all__ = [
    "ROBUSTNESS_MUTANTS",
    "bf16_coin",
    "float64_zero_coin",
    "litgpt_like",
    "sample_and_match",
    "target_only_tree",
]
