r"""Logits -> probabilities: temperature, top-k and top-p, applied identically to p and q.

The verifier is lossless with respect to the law the *target* side reports, and needs ``q`` to
be exactly the law each draft token was drawn from (ECOSYSTEM.md B2-B4, B11). This module is
the single place where logits become laws, and the decoder calls it with one
:class:`SamplingConfig` for the target rows, the draft rows, the bonus row and the correction
draw alike; draft tokens are sampled from the very tensor that is reported as ``q``.

Order of operations (the Hugging Face ``LogitsProcessor`` order): temperature, then top-k on
the tempered logits, then top-p on the softmax of what top-k kept, then a softmax over the
kept tokens. Temperature 0 is greedy: the law is the one-hot vector of the first arg-max
(ties broken toward the smallest token id), on both sides, and top-k/top-p are then moot.

References
----------
Holtzman et al., The Curious Case of Neural Text Degeneration (top-p), ICLR 2020;
Fan et al., Hierarchical Neural Story Generation (top-k), ACL 2018;
THEORY.md section 1 (p and q are next-token laws); ECOSYSTEM.md B2-B4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingConfig:
    """Logit processing shared by the target and the draft.

    Attributes
    ----------
    temperature : float
        >= 0. ``0`` means greedy (one-hot laws at the first arg-max), ``1`` leaves logits as
        they are.
    top_k : int or None
        Keep the tokens whose tempered logit is >= the k-th largest one (ties at the boundary
        are all kept, as in Hugging Face's ``TopKLogitsWarper``). ``None`` disables it.
    top_p : float or None
        In (0, 1]. Keep the smallest set of most probable tokens whose mass reaches ``top_p``
        (a token is kept iff the mass of the tokens strictly before it, in descending order of
        probability with ties broken by token id, is < ``top_p``). ``None`` or 1 disables it.

    Raises
    ------
    ValueError
        Negative or non-finite temperature, ``top_k < 1``, ``top_p`` outside (0, 1].
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")
        k = self.top_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"top_k must be None or an int >= 1, got {k!r}")
        p = self.top_p
        if p is not None and (isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1):
            raise ValueError(f"top_p must be None or a number in (0, 1], got {p!r}")

    @property
    def greedy(self) -> bool:
        """True when ``temperature == 0`` (one-hot laws)."""
        return self.temperature == 0


def top_k_mask(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Boolean mask of the tokens top-k keeps.

    Parameters
    ----------
    logits : Tensor [..., V], float
    top_k : int
        >= 1; values >= V keep everything.

    Returns
    -------
    Tensor [..., V], bool
        ``logits >= kth_largest(logits)`` (ties at the boundary kept).
    """
    if top_k >= logits.shape[-1]:
        return torch.ones_like(logits, dtype=torch.bool)
    kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
    return logits >= kth


def top_p_mask(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Boolean mask of the nucleus: the smallest most-probable set of mass >= ``top_p``.

    Parameters
    ----------
    probs : Tensor [..., V], float
        Rows summing to 1 (zeros allowed).
    top_p : float
        In (0, 1].

    Returns
    -------
    Tensor [..., V], bool
        Token kept iff the mass strictly before it in descending order (stable: ties by
        token id) is < ``top_p``. The most probable token is always kept.
    """
    sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    before = torch.cumsum(sorted_p, dim=-1) - sorted_p
    keep_sorted = before < top_p
    keep_sorted[..., 0] = True
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def process_logits(logits: torch.Tensor, config: SamplingConfig, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    r"""Next-token laws from logits: temperature, top-k, top-p, softmax.

    .. math::
        \pi(v) \propto \exp(\ell_v / T)\,[v \in \mathrm{topk}]\,[v \in \mathrm{nucleus}]

    Parameters
    ----------
    logits : Tensor [..., V], float (any float dtype, any device)
        Raw model logits.
    config : SamplingConfig
    dtype : torch.dtype
        Float dtype of the result (computation happens in it; default float32).

    Returns
    -------
    Tensor [..., V], ``dtype``
        Rows summing to 1; tokens removed by top-k/top-p have probability exactly 0. With
        ``temperature == 0`` each row is the one-hot vector of its first arg-max.

    Raises
    ------
    ValueError
        If a row of ``logits`` holds NaN or +inf, or has no finite entry (the law would be
        undefined; ECOSYSTEM.md B5: surface the numerical fault instead of emitting garbage).

    References
    ----------
    ECOSYSTEM.md B2-B4 (one processing for both sides); THEORY.md section 1.

    Examples
    --------
    >>> import torch
    >>> process_logits(torch.tensor([0.0, 0.0, 1.0, 2.0]), SamplingConfig(top_k=2)).tolist()
    [0.0, 0.0, 0.2689414322376251, 0.7310585975646973]
    >>> process_logits(torch.tensor([1.0, 3.0, 3.0]), SamplingConfig(temperature=0)).tolist()
    [0.0, 1.0, 0.0]
    """
    x = logits.to(dtype)
    if torch.isnan(x).any() or torch.isposinf(x).any():
        raise ValueError("process_logits: logits contain NaN or +inf; the next-token law is undefined")
    if not torch.isfinite(x).any(dim=-1).all():
        raise ValueError("process_logits: a row of logits has no finite entry")
    if config.greedy:
        return torch.nn.functional.one_hot(x.argmax(dim=-1), x.shape[-1]).to(dtype)
    if config.temperature != 1:
        x = x / config.temperature
    if config.top_k is not None:
        x = x.masked_fill(~top_k_mask(x, config.top_k), -math.inf)
    probs = torch.softmax(x, dim=-1)
    if config.top_p is not None and config.top_p < 1:
        probs = probs.masked_fill(~top_p_mask(probs, config.top_p), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample_from(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row, drawn from ``probs`` (zero-probability tokens are never drawn).

    Parameters
    ----------
    probs : Tensor [R, V], float
        Rows of non-negative weights with a positive sum.
    generator : torch.Generator, optional
        On ``probs``' device; ``None`` uses the global RNG.

    Returns
    -------
    Tensor [R], int64
    """
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
