r"""Losslessness on a real model: the law of the first generated tokens against the target's exact law.

The decoder (:class:`~spectr_gbv.gpu.SpeculativeDecoder`) runs ``runs`` independent copies of
one prompt in batched rows; the first m = ``num_tokens`` (1 or 2) generated tokens of each
run are counted and compared with the target's exact law at the same temperature:

* m = 1: :math:`p(x_1)`, the processed law after the prompt (one target forward);
* m = 2: :math:`p(x_1)\,p(x_2 | x_1)`, with :math:`p(\cdot | x_1)` from ONE batched target
  forward over the candidates :math:`x_1` with :math:`N p(x_1) \ge 5` (the prompt's KV cache
  computed once and shared; chunks of :data:`EXACT_CHUNK` rows); no other :math:`x_1` can
  carry a pair with expected count >= 5.

Binning. With V = 49152 (V^2 = 2.4e9 pairs) most outcomes have tiny expected counts, so the
outcomes are binned: one bin per outcome whose expected count ``N * P(outcome)`` is >= 5
(:data:`MIN_EXPECTED`), plus one pooled "rest" bin holding every other outcome, with expected
count ``N * (1 - sum of the named bins' probabilities)`` and observed count ``N - (runs that
fell in a named bin)``. If the rest bin's expected count is below 5 it is merged into the named
bin with the smallest expected count (so every bin has expected count >= 5), except when its
probability is ~0 (<= :data:`ZERO_REST`; at temperature 0 the law is one-hot) and it was
observed: then G = inf, p = 0. The G-test (:func:`scipy.stats.power_divergence`,
``lambda_="log-likelihood"``) compares the observed bin counts with the expected ones,
dof = bins - 1.

Power. :func:`spectr_gbv.simulate.monte_carlo.g_test_power`: the worst-direction power of the
test at level ``alpha`` against any output law whose *binned* law is at total-variation
distance ``power_tv`` from the target's (non-central chi-square, non-centrality
4 N d^2). Errors that only move mass among outcomes of the rest bin are invisible to a
binned test; the rest bin's probability is reported (``rest_probability``) so this blind spot
is visible. A test that passes at low power is inconclusive.

References
----------
THEORY.md section 2 (validity: the output law must be p); McDonald, Handbook of Biological
Statistics (G-test); Cohen 1988, chapter 7 (power); ``tests/gpu/decoding/test_end_to_end.py`` (the
same test on tiny models, by enumeration of V^m).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from scipy import stats

from spectr_gbv.gpu.decoding.cache import RowCache, model_vocab_size
from spectr_gbv.gpu.decoding.decoder import SpeculativeDecoder
from spectr_gbv.gpu.decoding.draft_sources import DraftSource
from spectr_gbv.gpu.decoding.sampling import SamplingConfig, process_logits
from spectr_gbv.gpu.kernels.rules import UnverifiedRuleWarning
from spectr_gbv.simulate.monte_carlo import g_test_power

#: The law test a user's rule is sent to by the bench's notes
#: (:meth:`~spectr_gbv.gpu.kernels.rules.KernelRule.unverified_note`): :func:`first_tokens_law_test`.
LAW_TEST = "spectr_gbv.realpair.real_lossless.first_tokens_law_test"
#: Smallest expected count of a named bin (the usual G/chi-square rule of thumb).
MIN_EXPECTED = 5.0
#: Default significance level.
ALPHA = 1e-3
#: Default total-variation error whose detection power is reported.
POWER_TV = 0.05
#: A rest bin of at most this probability counts as impossible (observing it rejects outright).
ZERO_REST = 1e-12
#: Rows per ``generate`` call of the decoder.
DEFAULT_CHUNK_ROWS = 256
#: Candidate first tokens per batched target forward in the exact law (m = 2).
EXACT_CHUNK = 256


@dataclass(frozen=True)
class LawTestResult:
    """Binned G-test of the first generated tokens against the target's exact law.

    Attributes
    ----------
    g_statistic : float
        G = 2 sum O log(O / E) over the bins (inf if a bin of expected count 0 is observed).
    p_value : float
    dof : int
        Bins - 1 (0 when all the mass is in one bin: nothing to test, p = 1, power 0).
    runs : int
        N, number of independent runs (rows).
    power : float
        Worst-direction power against a binned TV error of ``power_tv`` at ``alpha``.
    power_tv : float
    alpha : float
    observed_tv : float
        Total-variation distance between the observed and expected binned laws (includes
        sampling noise, about ``sqrt(bins / N)`` in size).
    passed : bool
        ``p_value > alpha`` (not rejected). Conclusive only when ``power`` is high.
    bins : int
        Number of bins, the rest bin included when present.
    method : str
    num_drafts, draft_length, num_tokens : int
    temperature : float
    rest_probability : float
        Target probability of the rest bin (outcomes not binned individually).
    """

    g_statistic: float
    p_value: float
    dof: int
    runs: int
    power: float
    power_tv: float
    alpha: float
    observed_tv: float
    passed: bool
    bins: int
    method: str = ""
    num_drafts: int = 0
    draft_length: int = 0
    num_tokens: int = 0
    temperature: float = float("nan")
    rest_probability: float = float("nan")

    def summary(self) -> dict[str, float | int | str | bool]:
        """Plain dict of every field (for printing / JSON)."""
        return asdict(self)


@dataclass(frozen=True)
class BinnedLaw:
    """The exact law of the first m tokens, binned.

    Attributes
    ----------
    outcomes : ndarray [B], int64
        Named outcomes, encoded ``x_1`` (m = 1) or ``x_1 * V + x_2`` (m = 2), sorted.
    probs : ndarray [B], float64
        Their exact probabilities (each >= ``MIN_EXPECTED / runs``).
    rest : float
        Probability of everything else, ``1 - probs.sum()`` (clipped at 0).
    vocab_size, num_tokens : int
    """

    outcomes: np.ndarray
    probs: np.ndarray
    rest: float
    vocab_size: int
    num_tokens: int


@torch.no_grad()
def exact_first_tokens_law(
    target: torch.nn.Module, prompt: torch.Tensor, num_tokens: int, temperature: float, runs: int
) -> BinnedLaw:
    r"""Exact law of the first ``num_tokens`` tokens after ``prompt``, binned for ``runs`` runs.

    .. math::
        P(x_1) = p(x_1 | c),\qquad P(x_1, x_2) = p(x_1 | c)\,p(x_2 | c, x_1)

    Parameters
    ----------
    target : transformers PreTrainedModel
        Causal LM p (its device is used).
    prompt : Tensor [T], int64
        The context c (T >= 1).
    num_tokens : int
        m in {1, 2}.
    temperature : float
        T >= 0, processing of :func:`spectr_gbv.gpu.decoding.sampling.process_logits` (float64).
    runs : int
        N; outcomes with ``N * P >= 5`` are kept as named bins.

    Returns
    -------
    BinnedLaw

    Raises
    ------
    ValueError
        ``num_tokens`` not in {1, 2}, ``runs`` < 1, a malformed prompt.

    References
    ----------
    THEORY.md section 1 (joint prefix probabilities).
    """
    if num_tokens not in (1, 2):
        raise ValueError(f"num_tokens must be 1 or 2, got {num_tokens!r}")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    device = next(target.parameters()).device
    V = model_vocab_size(target)
    sampling = SamplingConfig(float(temperature))
    ids = prompt.to(device=device, dtype=torch.int64).view(1, -1)
    cache = RowCache(1, device)
    p1 = process_logits(cache.forward(target, ids)[0, -1], sampling, dtype=torch.float64)
    threshold = MIN_EXPECTED / runs
    if num_tokens == 1:
        keep = (p1 >= threshold).nonzero().squeeze(1)
        outcomes, probs = keep, p1[keep]
    else:
        cands = (p1 >= threshold).nonzero().squeeze(1)
        outcomes_list, probs_list = [], []
        for start in range(0, cands.numel(), EXACT_CHUNK):
            chunk = cands[start : start + EXACT_CHUNK]
            sub = RowCache(1, device)
            if ids.shape[1] > 1:
                sub.forward(target, ids[:, :-1])
            sub.repeat(chunk.numel())
            step = torch.stack([ids[0, -1].expand(chunk.numel()), chunk], dim=1)
            p2 = process_logits(sub.forward(target, step)[:, -1], sampling, dtype=torch.float64)
            joint = p1[chunk, None] * p2  # [n, V]
            rows, cols = (joint >= threshold).nonzero(as_tuple=True)
            outcomes_list.append(chunk[rows] * V + cols)
            probs_list.append(joint[rows, cols])
        outcomes = torch.cat(outcomes_list) if outcomes_list else torch.zeros(0, dtype=torch.int64, device=device)
        probs = torch.cat(probs_list) if probs_list else torch.zeros(0, dtype=torch.float64, device=device)
    order = torch.argsort(outcomes)
    out = outcomes[order].cpu().numpy().astype(np.int64)
    pr = probs[order].cpu().numpy().astype(np.float64)
    return BinnedLaw(out, pr, max(0.0, 1.0 - math.fsum(pr)), V, num_tokens)


def binned_g_test(
    law: BinnedLaw, observed: np.ndarray, *, alpha: float = ALPHA, power_tv: float = POWER_TV
) -> tuple[float, float, int, float, float, int]:
    """G-test of observed outcomes against a :class:`BinnedLaw` (bins as in the module docstring).

    Parameters
    ----------
    law : BinnedLaw
    observed : ndarray [N], int64
        One encoded outcome per run (same encoding as ``law.outcomes``).
    alpha : float
        In (0, 1).
    power_tv : float
        TV error for the power.

    Returns
    -------
    (g, p_value, dof, power, observed_tv, bins)
        ``g = inf, p = 0`` when the rest bin has probability <= :data:`ZERO_REST` (an outcome
        the target gives probability ~0) but was observed; ``dof = 0, p = 1, power = 0`` when
        a single bin remains (nothing to test).

    Raises
    ------
    ValueError
        Empty ``observed`` or ``alpha`` outside (0, 1).

    References
    ----------
    :func:`scipy.stats.power_divergence`; :func:`spectr_gbv.simulate.monte_carlo.g_test_power`.
    """
    observed = np.asarray(observed, dtype=np.int64).reshape(-1)
    n = int(observed.size)
    if n < 1:
        raise ValueError("observed is empty")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    size = law.outcomes.size
    if size:
        idx = np.minimum(np.searchsorted(law.outcomes, observed), size - 1)
        named = law.outcomes[idx] == observed
        obs = np.bincount(idx[named], minlength=size).astype(np.float64)
    else:
        named, obs = np.zeros(n, dtype=bool), np.zeros(0)
    exp = law.probs * n
    obs_rest, exp_rest = float(n - int(named.sum())), law.rest * n
    if exp_rest >= MIN_EXPECTED or size == 0:
        obs, exp = np.append(obs, obs_rest), np.append(exp, exp_rest)
    elif law.rest <= ZERO_REST and obs_rest > 0:
        tv = 0.5 * (float(np.abs(obs - exp).sum()) + obs_rest) / n
        return math.inf, 0.0, max(size - 1, 1), g_test_power(n, max(size - 1, 1), alpha, power_tv), tv, size + 1
    else:  # merge the small rest bin into the named bin of smallest expected count
        j = int(np.argmin(exp))
        obs[j] += obs_rest
        exp[j] += exp_rest
    bins = int(obs.size)
    tv = 0.5 * float(np.abs(obs - exp).sum()) / n
    dof = bins - 1
    if dof < 1:
        return 0.0, 1.0, 0, 0.0, tv, bins
    exp = exp * (n / exp.sum())  # remove the float rounding of the total
    g, p = stats.power_divergence(obs, exp, lambda_="log-likelihood")
    return float(g), float(p), dof, g_test_power(n, dof, alpha, power_tv), tv, bins


def _check_prompt(prompt: torch.Tensor, vocab_size: int) -> None:
    if not isinstance(prompt, torch.Tensor) or prompt.ndim != 1 or prompt.numel() < 1 or prompt.dtype.is_floating_point:
        raise ValueError(f"prompt must be a non-empty 1-D integer tensor, got {getattr(prompt, 'shape', prompt)!r}")
    if bool(((prompt < 0) | (prompt >= vocab_size)).any()):
        raise ValueError(f"prompt holds an id outside the vocabulary 0..{vocab_size - 1}")


@torch.no_grad()
def first_tokens_law_test(
    target: torch.nn.Module,
    draft: torch.nn.Module | DraftSource | None,
    prompt: torch.Tensor,
    method: Any,
    num_drafts: int,
    draft_length: int,
    temperature: float,
    runs: int,
    num_tokens: int,
    seed: int,
    *,
    alpha: float = ALPHA,
    power_tv: float = POWER_TV,
    allow_lossy: bool = False,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> LawTestResult:
    r"""Run the decoder ``runs`` times on ``prompt`` and G-test the first ``num_tokens`` tokens against p.

    .. math::
        H_0:\ \text{law of } (X_1..X_m) = p(x_1|c)\cdots p(x_m|c, x^{m-1}),\quad m \in \{1, 2\}

    Parameters
    ----------
    target : transformers PreTrainedModel
        Causal LM p (its device is used for the decoder too).
    draft : PreTrainedModel or DraftSource or None
        q (``None`` only for ``ar``).
    prompt : Tensor [T], int64
    method : str or rule
        A decoder method (:data:`~spectr_gbv.gpu.decoding.decoder.LOSSLESS_METHODS`, or a lossy one with
        ``allow_lossy=True``), or a user's rule: ``"module:attribute"``, a torch rule with the kernel
        signature or a reference rule (:mod:`spectr_gbv.gpu.kernels.rules`), the test that checks a
        rule's losslessness on a real pair (its result's ``method`` is the rule's label).
    num_drafts, draft_length : int
        K and L of the decoder (K = 1 for ``sd``/``bv``).
    temperature : float
        T >= 0 for p and q.
    runs : int
        N >= 1 independent runs (rows of batched ``generate`` calls of ``chunk_rows`` rows).
    num_tokens : int
        m in {1, 2}.
    seed : int
        Seed of the decoder's generator.
    alpha : float
        Significance level (default 1e-3).
    power_tv : float
        TV error whose detection power is reported (default 0.05).
    allow_lossy : bool
        Needed for ``spectr_gbv_released`` (the negative control).
    chunk_rows : int
        Rows per ``generate`` call.

    Returns
    -------
    LawTestResult

    Raises
    ------
    ValueError
        Bad prompt, m not in {1, 2}, N < 1, an invalid decoder configuration (unknown or
        refused lossy method, K != 1 for a single-draft method, ...).

    References
    ----------
    THEORY.md section 2; ``tests/gpu/decoding/test_end_to_end.py`` (tiny-model version); module docstring
    (bins, power).
    """
    V = model_vocab_size(target)
    _check_prompt(prompt, V)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    if num_tokens not in (1, 2):
        raise ValueError(f"num_tokens must be 1 or 2, got {num_tokens!r}")
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be an int >= 1, got {chunk_rows!r}")
    device = next(target.parameters()).device
    with warnings.catch_warnings():  # this test is what checks a rule that claims nothing
        warnings.simplefilter("ignore", UnverifiedRuleWarning)
        decoder = SpeculativeDecoder(
            target,
            draft,
            method=method,
            num_drafts=num_drafts,
            draft_length=draft_length,
            temperature=float(temperature),
            seed=seed,
            device=device,
            allow_lossy=allow_lossy,
        )
    ids = prompt.to(device=device, dtype=torch.int64)
    firsts = []
    for start in range(0, runs, chunk_rows):
        rows = min(chunk_rows, runs - start)
        tokens, _ = decoder.generate(ids.expand(rows, -1), max_new_tokens=num_tokens)
        firsts.append(tokens[:, ids.numel() :].cpu())
    first = torch.cat(firsts).numpy().astype(np.int64)
    observed = first[:, 0] if num_tokens == 1 else first[:, 0] * V + first[:, 1]
    law = exact_first_tokens_law(target, ids, num_tokens, float(temperature), runs)
    g, p, dof, power, tv, bins = binned_g_test(law, observed, alpha=alpha, power_tv=power_tv)
    return LawTestResult(
        g_statistic=g,
        p_value=p,
        dof=dof,
        runs=runs,
        power=power,
        power_tv=power_tv,
        alpha=alpha,
        observed_tv=tv,
        passed=bool(p > alpha),
        bins=bins,
        method=decoder.config.method_name,
        num_drafts=num_drafts,
        draft_length=draft_length,
        num_tokens=num_tokens,
        temperature=float(temperature),
        rest_probability=law.rest,
    )
