r"""Bound-based predictions of block efficiency on a real pair: B(K) and B_BV(K) by Monte Carlo.

For one context c the CIC bound and its lossless analogue (THEORY.md section 4) are
expectations over a target block Y = (Y_1..Y_L) ~ p(. | c):

.. math::
    B(K) = E_{Y\sim p}\Big[\sum_{i=1}^{L} 1 - (1 - r(Y^i))^K\Big],\qquad
    B_{BV}(K) = E_{Y\sim p}\Big[\sum_{i=1}^{L} 1 - (1 - \beta(Y^i))^K\Big],

with the prefix ratio :math:`r(Y^i) = \min\{1, q(Y^i)/p(Y^i)\}` (joint prefix probabilities
given c) and :math:`\beta(Y^i) = \min_{j\le i} r(Y^j)`, because
:math:`\sum_{x^i} p(x^i) f(x^i) = E_{Y\sim p}[f(Y^i)]` for each i. Both are expected
*accepted* tokens per iteration; add 1 for block efficiency (tokens per target call).
At K = 1, B(1) is the greedy value :math:`\sum_i\sum_{x^i}\min\{p(x^i), q(x^i)\}` and
B_BV(1) the BV value :math:`\sum_i\sum_{x^i} p(x^i)\beta(x^i)` (THEORY.md sections 3-4).

Estimator. Per context, ``samples`` target continuations of length L are drawn at the given
temperature (one context forward, then L - 1 batched one-token forwards over all the
samples' paths, with the context's KV cache computed once and shared); the target laws they
were drawn from give :math:`\log p(Y_t | c, Y^{t-1})`; the draft scores every path in one
batched forward (context cache computed once), giving :math:`\log q(Y_t | c, Y^{t-1})`.
Along each path, in float64, :math:`\log r(Y^i) = \min\{0, \sum_{t\le i} \log q_t - \log p_t\}`
(``-inf``, i.e. r = 0, where the draft gives a path token probability 0) and
:math:`\beta(Y^i)` is its running minimum. The per-sample sums are averaged (common random
numbers: the same paths serve every K); the standard error of a context is the sample
standard deviation over ``sqrt(samples)``. Over C contexts the prediction is the plain mean of
the per-context estimates (each context weighs the same, like one decoding step in it) with
standard error ``sqrt(sum_c se_c^2) / C``.

Also reported: ``alpha``, the mean over contexts, samples and positions t = 1..L of
:math:`\sum_v \min\{p(v|c, Y^{t-1}), q(v|c, Y^{t-1})\}`, the per-token acceptance of a
draft on target continuations (the acceptance rate alpha of docs/bench.md), and ``sd_value``, the E[tau] of token-level
speculative decoding, :math:`E_{Y\sim p}[\sum_i\prod_{t\le i}\min\{1, q_t/p_t\}]` (exact
for SD, whereas B_BV(1) is the BV value and B(1) the greedy value).

References
----------
Lin et al., SpecTr-GBV, arXiv 2604.25925 (Theorem 5.3, as reported); Sun et al. 2024,
arXiv 2403.10444 (BV weights); THEORY.md sections 3-4; exact tabular counterparts
:func:`spectr_gbv.theory.bounds.cic_bound` and :func:`spectr_gbv.theory.bounds.cic_bound_lossless`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from spectr_gbv.gpu.decoding.cache import RowCache, model_vocab_size
from spectr_gbv.gpu.decoding.draft_sources import DraftSource
from spectr_gbv.gpu.decoding.sampling import SamplingConfig, process_logits, sample_from

#: Rows (sample paths) per batched forward; larger ``samples`` are split into chunks of this size.
DEFAULT_BATCH_ROWS = 64


@dataclass(frozen=True)
class Prediction:
    """Monte Carlo estimate of B(K) and B_BV(K) (expected accepted tokens) over a set of contexts.

    Attributes
    ----------
    num_drafts, draft_length : int
        K and L.
    temperature : float
        T of both p and q.
    contexts : int
        C, number of contexts averaged.
    samples : int
        Target continuations per context.
    cic_bound, cic_bound_se : float
        Mean over contexts of the estimated B(K), E[tau] units (add 1 for block efficiency),
        and its standard error.
    bv_bound, bv_bound_se : float
        Same for B_BV(K).
    alpha : float
        Mean per-token acceptance :math:`\\sum_v \\min\\{p, q\\}` along target continuations.
    sd_value, sd_value_se : float
        Estimated E[tau] of token-level speculative decoding (one draft; the same for every K)
        and its standard error, E over Y ~ p of :math:`\\sum_i\\prod_{t\\le i}\\min\\{1, q_t/p_t\\}`.
    per_context_cic, per_context_cic_se, per_context_bv, per_context_bv_se : tuple of float
        The per-context estimates and standard errors (length C, in the order given).
    """

    num_drafts: int
    draft_length: int
    temperature: float
    contexts: int
    samples: int
    cic_bound: float
    cic_bound_se: float
    bv_bound: float
    bv_bound_se: float
    alpha: float = float("nan")
    sd_value: float = float("nan")
    sd_value_se: float = float("nan")
    per_context_cic: tuple[float, ...] = ()
    per_context_cic_se: tuple[float, ...] = ()
    per_context_bv: tuple[float, ...] = ()
    per_context_bv_se: tuple[float, ...] = ()

    @property
    def cic_block_efficiency(self) -> float:
        """``cic_bound + 1``: the CIC bound as tokens per target call."""
        return self.cic_bound + 1

    @property
    def bv_block_efficiency(self) -> float:
        """``bv_bound + 1``: the lossless analogue as tokens per target call."""
        return self.bv_bound + 1

    def summary(self) -> dict[str, float | int]:
        """Scalar fields plus ``cic_block_efficiency`` and ``bv_block_efficiency`` (no per-context lists)."""
        keys = (
            "num_drafts",
            "draft_length",
            "temperature",
            "contexts",
            "samples",
            "cic_bound",
            "cic_bound_se",
            "bv_bound",
            "bv_bound_se",
            "alpha",
            "sd_value",
            "sd_value_se",
        )
        out: dict[str, float | int] = {k: getattr(self, k) for k in keys}
        out.update(cic_block_efficiency=self.cic_block_efficiency, bv_block_efficiency=self.bv_block_efficiency)
        return out


def _token_logprob(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``log probs[r, tokens[r]]`` in float64 (``-inf`` where the probability is 0)."""
    return probs.gather(-1, tokens[:, None]).squeeze(-1).to(torch.float64).log()


@torch.no_grad()
def _target_paths(
    target: torch.nn.Module,
    context: torch.Tensor,
    rows: int,
    length: int,
    sampling: SamplingConfig,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``rows`` continuations Y ~ p(. | context): tokens [R, L], log p(Y_t | .) [R, L] and laws p [R, L, V]."""
    cache = RowCache(1, context.device)
    logits = cache.forward(target, context[None])[:, -1]
    cache.repeat(rows)
    probs = process_logits(logits, sampling).expand(rows, -1)
    tokens, logp, laws = [], [], []
    for t in range(length):
        if t:
            probs = process_logits(cache.forward(target, tokens[-1][:, None])[:, -1], sampling)
        y = sample_from(probs, generator)
        tokens.append(y)
        logp.append(_token_logprob(probs, y))
        laws.append(probs)
    return torch.stack(tokens, 1), torch.stack(logp, 1), torch.stack(laws, 1)


@torch.no_grad()
def _draft_laws(
    draft: torch.nn.Module | DraftSource,
    context: torch.Tensor,
    tokens: torch.Tensor,
    sampling: SamplingConfig,
    generator: torch.Generator,
) -> torch.Tensor:
    """Draft laws q(. | context, Y^{t-1}) along every path, t = 1..L: Tensor [R, L, V]."""
    R, L = tokens.shape
    if isinstance(draft, torch.nn.Module):
        cache = RowCache(1, context.device)
        first = cache.forward(draft, context[None])[:, -1:]  # [1, 1, V]
        if L == 1:
            return process_logits(first, sampling).expand(R, 1, -1)
        cache.repeat(R)
        rest = cache.forward(draft, tokens[:, :-1])  # [R, L-1, V]
        return process_logits(torch.cat([first.expand(R, 1, -1), rest], dim=1), sampling)
    # Any DraftSource: the law of a fresh one-token draft, then commit the path's token.
    draft.begin(context[None].expand(R, -1))
    zeros = torch.zeros(R, dtype=torch.int64, device=tokens.device)
    laws = []
    for t in range(L):
        _, q = draft.propose(1, 1, sampling, generator)
        laws.append(q[:, 0, 0].to(tokens.device))
        draft.commit(zeros, zeros, tokens[:, t])
    return torch.stack(laws, 1)


def path_values(
    logp: torch.Tensor, logq: torch.Tensor, num_drafts: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Per-path sums of the CIC, lossless-analogue and SD integrands.

    .. math::
        \sum_i 1 - (1 - r(Y^i))^K,\qquad \sum_i 1 - (1 - \beta(Y^i))^K,\qquad
        \sum_i \prod_{t\le i}\min\{1, q(Y_t|Y^{t-1})/p(Y_t|Y^{t-1})\}

    Parameters
    ----------
    logp, logq : Tensor [R, L], float64
        :math:`\log p(Y_t | c, Y^{t-1})` (finite: Y was drawn from p) and
        :math:`\log q(Y_t | c, Y^{t-1})` (``-inf`` allowed).
    num_drafts : sequence of int
        The K values.

    Returns
    -------
    cic, bv : ndarray [len(num_drafts), R], float64
    sd : ndarray [R], float64
        The SD integrand: its mean over Y ~ p is SD's E[tau] (THEORY.md section 3, since
        :math:`\prod_t \min\{p_t, q_t\} = p(Y^i)\prod_t\min\{1, q_t/p_t\}`).

    References
    ----------
    THEORY.md sections 3-4 (SD, r, beta, B(K), B_BV(K)).

    Examples
    --------
    >>> import torch
    >>> lp = torch.log(torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    >>> lq = torch.log(torch.tensor([[0.25, 1.0]], dtype=torch.float64))
    >>> cic, bv, sd = path_values(lp, lq, [1])  # r = (1/2, 1), beta = (1/2, 1/2), SD (1/2, 1/2)
    >>> cic.tolist(), bv.tolist(), sd.tolist()
    ([[1.5]], [[1.0]], [1.0])
    """
    diff = logq - logp
    r = torch.exp(torch.clamp(torch.cumsum(diff, dim=1), max=0.0)).cpu().numpy()
    sd = torch.exp(torch.cumsum(torch.clamp(diff, max=0.0), dim=1)).sum(dim=1).cpu().numpy()
    beta = np.minimum.accumulate(r, axis=1)
    cic = np.stack([(1 - (1 - r) ** k).sum(axis=1) for k in num_drafts])
    bv = np.stack([(1 - (1 - beta) ** k).sum(axis=1) for k in num_drafts])
    return cic, bv, sd


def _check_args(
    contexts: Sequence[torch.Tensor], num_drafts: Sequence[int], draft_length: int, temperature: float, samples: int
) -> None:
    if not contexts:
        raise ValueError("contexts is empty")
    for i, c in enumerate(contexts):
        if not isinstance(c, torch.Tensor) or c.ndim != 1 or c.numel() < 1 or c.dtype.is_floating_point:
            raise ValueError(f"contexts[{i}] must be a non-empty 1-D integer tensor, got {getattr(c, 'shape', c)!r}")
    if not num_drafts or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in num_drafts):
        raise ValueError(f"num_drafts must be a non-empty list of ints >= 1, got {num_drafts!r}")
    for name, v, lo in (("draft_length", draft_length, 1), ("samples", samples, 2)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")


@torch.no_grad()
def predict_block_efficiency(
    target: torch.nn.Module,
    draft: torch.nn.Module | DraftSource,
    contexts: list[torch.Tensor],
    num_drafts: list[int],
    draft_length: int,
    temperature: float,
    samples: int,
    seed: int,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> list[Prediction]:
    r"""Estimate B(K) and B_BV(K) per context by Monte Carlo over target continuations; average over contexts.

    .. math::
        \hat B(K) = \frac{1}{C}\sum_{c}\frac{1}{S}\sum_{s=1}^{S}\sum_{i=1}^{L}
        \big[1 - (1 - r(Y^{(c,s),i}))^K\big],\quad Y^{(c,s)} \sim p(\cdot | c)

    and :math:`\hat B_{BV}(K)` with :math:`\beta` in place of r (module docstring).

    Parameters
    ----------
    target : transformers PreTrainedModel
        Causal LM p (full attention; its device is used).
    draft : PreTrainedModel or DraftSource
        q on the same vocabulary. A model scores all paths in one batched forward; any other
        :class:`~spectr_gbv.gpu.decoding.draft_sources.DraftSource` (e.g. an n-gram draft) is queried
        position by position through its protocol (``propose(1, 1)`` then ``commit``).
    contexts : list of Tensor [T_c], int64
        The contexts (prompt plus accepted tokens) at which a decoding step starts.
    num_drafts : list of int
        K values (>= 1); one :class:`Prediction` per K, all from the same paths.
    draft_length : int
        L >= 1.
    temperature : float
        T >= 0 for p and q alike (processing of :func:`spectr_gbv.gpu.decoding.sampling.process_logits`;
        0 = greedy one-hot laws).
    samples : int
        S >= 2 continuations per context.
    seed : int
        Seed of the ``torch.Generator`` of the target continuations (a DraftSource's own
        draws, which do not affect the estimate, use ``seed + 1``). The paths depend on
        ``seed`` and ``batch_rows`` only, not on the draft.
    batch_rows : int
        Paths per batched forward (memory: the p and q laws of a chunk, about
        ``2 * batch_rows * L * V * 4`` bytes, plus the target's KV cache of ``batch_rows`` rows).

    Returns
    -------
    list of Prediction
        In the order of ``num_drafts``. ``cic_bound`` and ``bv_bound`` are expected accepted
        tokens E[tau]; ``cic_block_efficiency`` / ``bv_block_efficiency`` add 1.

    Raises
    ------
    ValueError
        Empty or malformed contexts, K or L < 1, S < 2, negative temperature, or target and
        draft vocabularies of different sizes.

    References
    ----------
    Lin et al., SpecTr-GBV, arXiv 2604.25925 (Theorem 5.3, as reported); THEORY.md section 4;
    exact tabular values: :func:`spectr_gbv.theory.bounds.cic_bound`,
    :func:`spectr_gbv.theory.bounds.cic_bound_lossless`.

    Examples
    --------
    >>> import copy, torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> cfg = LlamaConfig(vocab_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
    ...                   num_attention_heads=2, num_key_value_heads=1)
    >>> _ = torch.manual_seed(0); target = LlamaForCausalLM(cfg).eval()
    >>> pred = predict_block_efficiency(target, copy.deepcopy(target), [torch.tensor([1, 2])], [1, 3],
    ...                                 draft_length=4, temperature=1.0, samples=8, seed=0)
    >>> [round(p.cic_bound, 6) for p in pred], [round(p.bv_bound, 6) for p in pred]  # q = p: every r is 1
    ([4.0, 4.0], [4.0, 4.0])
    """
    _check_args(contexts, num_drafts, draft_length, temperature, samples)
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows must be an int >= 1, got {batch_rows!r}")
    V = model_vocab_size(target)
    dv = draft.vocab_size if isinstance(draft, DraftSource) else model_vocab_size(draft)
    if dv != V:
        raise ValueError(f"vocabulary mismatch: the target has {V} logits, the draft {dv}")
    device = next(target.parameters()).device
    sampling = SamplingConfig(float(temperature))
    generator = torch.Generator(device=device).manual_seed(seed)
    draft_generator = torch.Generator(device=device).manual_seed(seed + 1)  # a DraftSource's own draws
    nk = len(num_drafts)
    cic_mean, cic_se = np.empty((nk, len(contexts))), np.empty((nk, len(contexts)))
    bv_mean, bv_se = np.empty((nk, len(contexts))), np.empty((nk, len(contexts)))
    alphas, sd_mean, sd_se = np.empty(len(contexts)), np.empty(len(contexts)), np.empty(len(contexts))
    for c, ctx in enumerate(contexts):
        ctx = ctx.to(device=device, dtype=torch.int64)
        if bool(((ctx < 0) | (ctx >= V)).any()):
            raise ValueError(f"contexts[{c}] holds an id outside the vocabulary 0..{V - 1}")
        cic_rows, bv_rows, sd_rows, overlap = [], [], [], 0.0
        for start in range(0, samples, batch_rows):
            rows = min(batch_rows, samples - start)
            tokens, logp, p_laws = _target_paths(target, ctx, rows, draft_length, sampling, generator)
            q_laws = _draft_laws(draft, ctx, tokens, sampling, draft_generator)
            logq = _token_logprob(q_laws.reshape(rows * draft_length, V), tokens.reshape(-1)).view(rows, -1)
            cic, bv, sd = path_values(logp, logq, num_drafts)
            cic_rows.append(cic)
            bv_rows.append(bv)
            sd_rows.append(sd)
            overlap += float(torch.minimum(p_laws, q_laws.to(p_laws.dtype)).sum(-1).double().sum())
        cic, bv = np.concatenate(cic_rows, axis=1), np.concatenate(bv_rows, axis=1)
        cic_mean[:, c], bv_mean[:, c] = cic.mean(axis=1), bv.mean(axis=1)
        cic_se[:, c] = cic.std(axis=1, ddof=1) / math.sqrt(samples)
        bv_se[:, c] = bv.std(axis=1, ddof=1) / math.sqrt(samples)
        sd = np.concatenate(sd_rows)
        sd_mean[c], sd_se[c] = sd.mean(), sd.std(ddof=1) / math.sqrt(samples)
        alphas[c] = overlap / (samples * draft_length)
    C = len(contexts)
    out = []
    for j, k in enumerate(num_drafts):
        out.append(
            Prediction(
                num_drafts=k,
                draft_length=draft_length,
                temperature=float(temperature),
                contexts=C,
                samples=samples,
                cic_bound=float(cic_mean[j].mean()),
                cic_bound_se=float(math.sqrt((cic_se[j] ** 2).sum()) / C),
                bv_bound=float(bv_mean[j].mean()),
                bv_bound_se=float(math.sqrt((bv_se[j] ** 2).sum()) / C),
                alpha=float(alphas.mean()),
                sd_value=float(sd_mean.mean()),
                sd_value_se=float(math.sqrt((sd_se**2).sum()) / C),
                per_context_cic=tuple(float(v) for v in cic_mean[j]),
                per_context_cic_se=tuple(float(v) for v in cic_se[j]),
                per_context_bv=tuple(float(v) for v in bv_mean[j]),
                per_context_bv_se=tuple(float(v) for v in bv_se[j]),
            )
        )
    return out
