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
Any temperature T > 0, however small or large, gives the exact law
:math:`\mathrm{softmax}(\ell / T)`: the logits are shifted by their row maximum before the
division (so nothing overflows; a tiny T's law is the arg-max law with exact ties split
evenly, the limit of the softmax), and a T outside float32's normal range
(:data:`FLOAT32_TEMPERATURE_RANGE`) is applied in float64.

References
----------
Holtzman et al., The Curious Case of Neural Text Degeneration (top-p), ICLR 2020;
Fan et al., Hierarchical Neural Story Generation (top-k), ACL 2018;
THEORY.md section 1 (p and q are next-token laws); ECOSYSTEM.md B2-B4.
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass

import torch

#: Temperatures T applied in the float32 arithmetic of ``process_logits(..., dtype=torch.float32)``:
#: float32's normal range, ``[2**-126, (2 - 2**-23) * 2**127]`` (about 1.18e-38 to 3.40e38),
#: where T itself is a normal float32. A T > 0 outside it (e.g. 1e-38, 1e-300 or 1e300) is
#: applied in float64 (T is a Python float, so the division is by T exactly) and the law cast
#: to float32; T = 0 is greedy.
FLOAT32_TEMPERATURE_RANGE: tuple[float, float] = (
    float(torch.finfo(torch.float32).tiny),
    float(torch.finfo(torch.float32).max),
)


def _finite_float(x: int | float) -> bool:
    """``math.isfinite(float(x))``, False for an int too large for a float (instead of ``OverflowError``)."""
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


@dataclass(frozen=True)
class SamplingConfig:
    r"""Logit processing shared by the target and the draft.

    Attributes
    ----------
    temperature : float
        >= 0 and finite. ``0`` means greedy (one-hot laws at the first arg-max), ``1`` leaves
        logits as they are; every T > 0 gives the exact law :math:`\mathrm{softmax}(\ell/T)`
        (see :func:`process_logits`; a tiny T gives the arg-max law, exact ties split evenly).
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
        if isinstance(t, bool) or not isinstance(t, int | float) or not _finite_float(t) or t < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {reprlib.repr(t)}")
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
        Float dtype of the result (computation happens in it; default float32), except for a
        temperature outside its normal range (:data:`FLOAT32_TEMPERATURE_RANGE` for float32),
        which is applied in float64.

    Returns
    -------
    Tensor [..., V], ``dtype``
        Rows summing to 1; tokens removed by top-k/top-p have probability exactly 0. With
        ``temperature == 0`` each row is the one-hot vector of its first arg-max; with a tiny
        T > 0 (e.g. 1e-38) it is the arg-max law, exact ties split evenly.

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
    >>> process_logits(torch.tensor([1.0, 3.0, 3.0]), SamplingConfig(temperature=1e-38)).tolist()
    [0.0, 0.5, 0.5]
    """
    x = logits.to(dtype)
    finite = torch.isfinite(x)
    nan_or_posinf, no_finite_row = torch.stack(
        [(~finite & (x != -math.inf)).any(), ~finite.any(dim=-1).all()]
    ).tolist()  # one host sync for both checks
    if nan_or_posinf:
        raise ValueError("process_logits: logits contain NaN or +inf; the next-token law is undefined")
    if no_finite_row:
        raise ValueError("process_logits: a row of logits has no finite entry")
    if config.greedy:
        return torch.nn.functional.one_hot(x.argmax(dim=-1), x.shape[-1]).to(dtype)
    T = float(config.temperature)
    if T != 1:
        fi = torch.finfo(dtype)
        lo, hi = FLOAT32_TEMPERATURE_RANGE if dtype == torch.float32 else (fi.tiny, fi.max)
        if dtype != torch.float64 and not lo <= T <= hi:
            x = x.to(torch.float64)
        # shift by the row maximum first: (l - max) / T <= 0 never overflows to +inf (a tiny T
        # sends the non-maximal logits to -inf, exact ties stay at 0: the arg-max law)
        x = (x - x.amax(dim=-1, keepdim=True)) / T
    if config.top_k is not None:
        x = x.masked_fill(~top_k_mask(x, config.top_k), -math.inf)
    probs = torch.softmax(x, dim=-1)
    if config.top_p is not None and config.top_p < 1:
        probs = probs.masked_fill(~top_p_mask(probs, config.top_p), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs.to(dtype)


def sample_from(
    probs: torch.Tensor, generator: torch.Generator | None = None, num_samples: int | None = None
) -> torch.Tensor:
    r"""Tokens drawn from each row of ``probs`` (zero-probability tokens are never drawn).

    Inverse-CDF sampling in float64: with :math:`c_i = \sum_{j \le i} w_j` (float64 running sums
    of the row's weights) and one uniform :math:`u \in [0, 1)` per draw, the token is the least
    i with :math:`c_i > u\,c_{V-1}`. The law drawn from is ``w / sum(w)`` up to float64 rounding
    of the running sums (relative error about ``V * 2**-53``, 5e-12 at V = 49,152); a token of
    weight 0 has an empty interval and is never drawn. The cost is one cumulative sum per row,
    O(V), and one binary search per draw, O(log V): well below ``torch.multinomial``'s CPU kernel
    on wide rows.

    Parameters
    ----------
    probs : Tensor [R, V], float
        Rows of non-negative weights with a positive sum (not necessarily normalised).
    generator : torch.Generator, optional
        On ``probs``' device; ``None`` uses the global RNG.
    num_samples : int, optional
        n >= 1 i.i.d. draws per row; ``None`` draws one and drops that dimension.

    Returns
    -------
    Tensor [R] (or [R, n]), int64
        A row whose weights do not have a positive finite sum gets ``-1`` (never a token id:
        the verification kernels refuse it), so a degenerate law is surfaced, not sampled.

    References
    ----------
    Devroye, Non-Uniform Random Variate Generation, 1986, section III.2 (inversion);
    ECOSYSTEM.md B3 (sample from exactly the reported law).
    """
    n = 1 if num_samples is None else int(num_samples)
    if n < 1:
        raise ValueError(f"num_samples must be None or an int >= 1, got {num_samples!r}")
    w = probs.to(torch.float64)
    c = w.cumsum(dim=-1)
    total = c[:, -1:]
    u = torch.rand(w.shape[0], n, dtype=torch.float64, device=w.device, generator=generator)
    idx = torch.searchsorted(c, u * total, right=True).clamp(max=w.shape[-1] - 1)
    # u * total rounds up to total with probability ~2**-53: take the last token of positive weight
    last = w.shape[-1] - 1 - torch.flip(w > 0, dims=[-1]).to(torch.uint8).argmax(dim=-1, keepdim=True)
    idx = torch.where(w.gather(-1, idx) > 0, idx, last.expand_as(idx))
    idx = torch.where((total > 0) & torch.isfinite(total), idx, -1)
    return idx.squeeze(-1) if num_samples is None else idx
