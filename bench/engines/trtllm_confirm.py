"""Independent confirmation of the TensorRT-LLM port's failures: the exact law of the code on the float32 coin lattice.

For one draft token (L = 1) the first emitted token of ``bench.engines.trtllm_sampler`` (TensorRT-LLM 1.2.1's
``get_rejected_indices`` + ``sample_rejected``, ported) has an exact law that needs no harness:

- the rows the code sees are ``t = softmax(float32 log p)`` and ``d = softmax(float32 log q)`` (computed here with
  torch exactly as the adapter does, then read as exact binary fractions);
- the drafted token ``x`` is drawn from q (the law the harness and a draft model draw it from);
- the coin is torch's CPU float32 ``torch.rand``: ``u = k 2^-24`` with ``k`` uniform on ``0..2^24 - 1`` (ATen
  ``uniform_real_distribution<float>``: the top 24 bits of a 32-bit word times 2^-24); the draft is accepted iff
  ``not (u > a)`` with ``a = min(1, float32(t[x] / d[x]))``, i.e. with probability ``min(2^24, floor(a 2^24) + 1)
  / 2^24``;
- on a rejection the code draws ``torch.multinomial`` from ``new = where(t - d > 0, t - d, 0)`` (float32): token
  ``y`` with probability ``new[y] / sum(new)``, and raises when ``sum(new) = 0``.

(The exponential race inside ``torch.multinomial`` adds NaN events of probability 2^-53 per zero entry; they are
left out, which can only understate a failure.) The law is compared with the target p: its total variation, the
probability of a token with ``p = 0``, and the probability that the call raises. A Monte Carlo run of the port itself
(its own generator, ordinary randomness) is set beside each exact rate.

Instances: the referee's forcing-free probes (``spectr_gbv.validate.probes.free_probes.degenerate_rows``, rows
copied here as literals so that this module does not depend on the harness), one row written for the zero coin, and
a control with nothing degenerate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from bench.engines.trtllm_sampler import process_draft_tokens_rejection_sampling

__all__ = [
    "INSTANCES",
    "ExactLaw",
    "confirm",
    "exact_first_token_law",
    "monte_carlo",
    "planted_resample_target",
    "planted_shared_coin",
    "planted_unnormalised_residual",
    "rule_law",
    "run_upstream_procedure_on_port",
    "tv",
    "upstream_detection_table",
    "referee_on_upstream_instance",
    "upstream_instance",
    "upstream_instance_for_referee",
    "upstream_power",
    "upstream_statistic",
]

_H = 0.5 - 2.0**-34
_G = 1.0 - 2.0**-31 - 2.0**-34
#: name -> (q row, p row, drafted token or None): one position, V = 3. With a drafted token the law is conditional
#: on it (the probes fix the draft); with None the draft is drawn from q and the law is the unconditional one.
INSTANCES: dict[str, tuple[list[float], list[float], int | None]] = {
    # free_probes.degenerate_rows("zero_target_draft"): the drafted token is 0
    "zero_target_draft": ([2.0**-34, 0.5, _H], [0.0, 0.5, _H - 2.0**-31], 0),
    # free_probes.degenerate_rows("near_identical_rows"): the drafted token is 1
    "near_identical_rows": ([2.0**-34, 2.0**-31, _G], [0.0, 2.0**-32, _G], 1),
    # a drafted token of target probability 0 with a residual of mass 1/2 (the zero coin alone)
    "zero_coin": ([0.5, 0.25, 0.25], [0.0, 0.5, 0.5], None),
    # control: nothing degenerate
    "control": ([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], None),
}

_COINS = 2**24


@dataclass(frozen=True)
class ExactLaw:
    """Exact law of the first emitted token of the ported code on one instance.

    Attributes
    ----------
    probs : tuple of Fraction
        ``P(first token = y)``, y = 0..V-1.
    p_raise : Fraction
        Probability that the call raises (rejection onto an all-zero float32 residual).
    tv : Fraction
        ``sum_y |P(y) - p(y)| / 2 + p_raise / 2`` (the raise counted as an extra outcome of target probability 0),
        with p the float64 target row read exactly.
    p_zero_token : Fraction
        Probability of emitting a token whose target probability is 0.
    """

    probs: tuple[Fraction, ...]
    p_raise: Fraction
    tv: Fraction
    p_zero_token: Fraction


def _f32_rows(row: list[float]) -> torch.Tensor:
    """``softmax(float32 log row)``: the probabilities the ported code sees (float32)."""
    logits = torch.log(torch.tensor(row, dtype=torch.float64)).to(torch.float32)
    return torch.softmax(logits, dim=-1)


def exact_first_token_law(qrow: list[float], prow: list[float], draft: int | None = None) -> ExactLaw:
    """Exact law of the ported TRT-LLM code's first emitted token for L = 1 (module docstring).

    Parameters
    ----------
    qrow, prow : list of float, length V
        The draft and target rows as the harness gives them (float64, sum 1 within 1e-9).
    draft : int, optional
        Condition on this drafted token (``tv`` is then against p all the same: it measures the conditional law,
        which is not p for a correct verifier either; read ``p_raise`` and ``p_zero_token``).

    Returns
    -------
    ExactLaw
    """
    d = _f32_rows(qrow)
    t = _f32_rows(prow)
    V = len(prow)
    new = torch.where(t - d > 0, t - d, 0.0)
    new_f = [Fraction(float(v)) for v in new.tolist()]
    new_sum = sum(new_f, Fraction(0))
    probs = [Fraction(0)] * V
    p_raise = Fraction(0)
    for x in range(V):
        qx = Fraction(qrow[x]) if draft is None else Fraction(int(x == draft))
        if qx == 0:
            continue
        a = torch.minimum(torch.ones((), dtype=torch.float32), t[x : x + 1] / d[x : x + 1])
        a_f = Fraction(float(a.item()))
        accept = Fraction(min(_COINS, math.floor(a_f * _COINS) + 1), _COINS)
        probs[x] += qx * accept
        if new_sum == 0:
            p_raise += qx * (1 - accept)
        else:
            for y in range(V):
                probs[y] += qx * (1 - accept) * new_f[y] / new_sum
    p = [Fraction(v) for v in prow]
    tv = (sum((abs(probs[y] - p[y]) for y in range(V)), Fraction(0)) + p_raise) / 2
    p_zero = sum((probs[y] for y in range(V) if p[y] == 0), Fraction(0))
    return ExactLaw(tuple(probs), p_raise, tv, p_zero)


def monte_carlo(
    qrow: list[float], prow: list[float], calls: int, seed: int = 0, draft: int | None = None
) -> tuple[int, int, np.ndarray]:
    """Run the port's per-request path ``calls`` times (its own generator) and count outcomes.

    Parameters
    ----------
    qrow, prow : list of float, length V
    calls : int
    draft : int, optional
        The drafted token; None: drawn from q.
    seed : int

    Returns
    -------
    raised : int
        Calls that raised ``RuntimeError``.
    ran : int
        Calls that returned.
    counts : ndarray, shape [V], int64
        First emitted token counts over the calls that returned.
    """
    g = torch.Generator().manual_seed(seed)
    d_logits = torch.log(torch.tensor([qrow], dtype=torch.float64)).to(torch.float32)
    t_probs = _f32_rows(prow).repeat(2, 1)
    qx = torch.tensor(qrow, dtype=torch.float64)
    counts = np.zeros(len(prow), dtype=np.int64)
    raised = 0
    for _ in range(calls):
        x = int(torch.multinomial(qx, 1, generator=g).item()) if draft is None else draft
        try:
            out = process_draft_tokens_rejection_sampling(d_logits, t_probs, [x], [0, 0], g)
        except RuntimeError:
            raised += 1
            continue
        counts[out[0]] += 1
    return raised, calls - raised, counts


def confirm(report_text: str | None = None, calls: int = 2000, seed: int = 0) -> str:
    """Markdown: the exact law of the ported code on :data:`INSTANCES`, beside a Monte Carlo run of the port.

    Parameters
    ----------
    report_text : str, optional
        The referee's report (``bench/engines/run_engines.py`` passes it); not read: the confirmation is
        independent of the harness.
    calls : int
        Port calls per instance for the Monte Carlo column.
    seed : int

    Returns
    -------
    str
        An explanation, a markdown table and one line per instance.
    """
    del report_text
    lines = [
        "`python -m bench.engines.trtllm_confirm` computes the law of the first emitted token (L = 1) without the "
        "harness: the float32 rows the code sees (`softmax(float32 log p)`, computed with torch as the adapter does, "
        "read as exact binary fractions), the acceptance probability on torch's float32 coin lattice "
        "`min(2^24, floor(a 2^24) + 1) / 2^24` for `a = min(1, float32(t/d))`, and on a rejection the correction law "
        "`new / sum(new)`, or a raise when `sum(new) = 0`. Beside each exact rate, a Monte Carlo run of the port "
        f"itself ({calls} calls, its own generator). `zero_target_draft` and `near_identical_rows` are the "
        "referee's forcing-free probes (rows copied as literals); `zero_coin` is a row written for the zero coin "
        "(q = (1/2, 1/4, 1/4), p = (0, 1/2, 1/2)); `control` has nothing degenerate.",
        "",
        "| instance | drafted token | exact P(raise) | exact P(token with p = 0) | exact TV to p (raise as an outcome;"
        f" unconditional rows only) | port, {calls} calls: raised |",
        "|---|---|---|---|---|---|",
    ]
    laws = {}
    for name, (qrow, prow, draft) in INSTANCES.items():
        law = exact_first_token_law(qrow, prow, draft)
        raised, _, _ = monte_carlo(qrow, prow, calls, seed, draft)
        laws[name] = (law, raised)
        tv_cell = "-" if draft is not None else _fmt(law.tv)
        lines.append(
            f"| {name} | {'x ~ q' if draft is None else draft} | {_fmt(law.p_raise)} | {_fmt(law.p_zero_token)} "
            f"| {tv_cell} | {raised}/{calls} ({raised / calls:.4f}) |"
        )
    z, zr = laws["zero_target_draft"]
    n, nr = laws["near_identical_rows"]
    c, _ = laws["zero_coin"]
    k, _ = laws["control"]
    lines += [
        "",
        f"- `zero_target_draft`: the code raises with probability {_fmt(z.p_raise)} and otherwise (a coin of "
        f"exactly 0, {_fmt(z.p_zero_token)}) emits token 0, of target probability 0; the port raised in "
        f"{zr}/{calls} calls. A correct verifier emits token 1 or 2.",
        f"- `near_identical_rows`: every rejection raises: P(raise) = {_fmt(n.p_raise)}; the port raised {nr}/{calls}.",
        f"- `zero_coin`: the token of target probability 0 is emitted with probability {_fmt(c.p_zero_token)} "
        "(drafted with probability 1/2, accepted by the zero coin, 2^-24): the law's TV from p is "
        f"{_fmt(c.tv)}, lossy, far below any sampling budget, reached by the referee through the forced coin only.",
        f"- `control`: TV {float(k.tv):.2g} (float32 rounding of the rows), no raise, no token of probability 0.",
    ]
    return "\n".join(lines) + "\n"


def _fmt(x: Fraction) -> str:
    if x == 0:
        return "0"
    if x.denominator & (x.denominator - 1) == 0:
        k = x.denominator.bit_length() - 1
        if x.numerator == 1:
            return f"2^-{k}"
        if x.numerator == x.denominator - 1:
            return f"1 - 2^-{k}"
        return f"{x.numerator}/2^{k} ({float(x):.9g})"
    return f"{float(x):.6g}"


if __name__ == "__main__":
    print(confirm())


# --------------------------------------------------------------------------------------------------------------
# TensorRT-LLM's own test, measured: tests/unittest/_torch/speculative/hw_agnostic/test_torch_rejection_sampling.py
# --------------------------------------------------------------------------------------------------------------

#: The upstream test's constants (``test_get_rejected_indices``).
UPSTREAM_V, UPSTREAM_DRAWS, UPSTREAM_KEEP, UPSTREAM_THRESHOLD = 500, 50_000, 100, 0.01


def upstream_instance(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The upstream test's rows: q and p uniform on [0, 1) with the 400 smallest entries set to 0, normalised.

    Upstream draws them from torch's unseeded global RNG (a new instance each run); here from
    ``torch.Generator().manual_seed(seed)``, in upstream's order (``rand(1, V)`` for q, ``rand(2, V)`` for p,
    of which row 0 is verified).

    Returns
    -------
    q, p : ndarray, shape [V], float64
        The draft row and the target row 0 (float32 values, widened).
    """
    g = torch.Generator().manual_seed(seed)
    V = UPSTREAM_V
    draft = torch.rand(1, V, generator=g)
    draft[0, torch.topk(draft[0], k=V - UPSTREAM_KEEP, largest=False)[1]] = 0.0
    draft = draft / draft.sum(dim=-1, keepdim=True)
    target = torch.rand(2, V, generator=g)
    target[0, torch.topk(target[0], k=V - UPSTREAM_KEEP, largest=False)[1]] = 0.0
    target = target / target.sum(dim=-1, keepdim=True)
    return draft[0].double().numpy(), target[0].double().numpy()


def upstream_statistic(sampled: np.ndarray, regular: np.ndarray, p: np.ndarray) -> float:
    """``|KL(p || hist(sampled)) - KL(p || hist(regular))|`` as the upstream test computes it (scipy ``entropy``).

    Parameters
    ----------
    sampled, regular : ndarray, shape [V], int
        Token counts of the speculative sampler and of direct sampling from p (``np.histogram`` with unit bins and
        ``density=True`` is counts / N).
    p : ndarray, shape [V]

    Returns
    -------
    float
        ``inf`` or ``nan`` when a token with ``p > 0`` has no count in one histogram (the test then fails).
    """
    from scipy.stats import entropy

    with np.errstate(divide="ignore", invalid="ignore"):
        kl = entropy(p, sampled / sampled.sum())
        kl_regular = entropy(p, regular / regular.sum())
    return float(abs(kl - kl_regular))


def rule_law(rule: str, q: np.ndarray, p: np.ndarray, eps: float = 0.0) -> np.ndarray:
    """Exact law of the first token (K = 1, one draft ``x ~ q``) of a correct or a planted-bias verifier.

    Rules: ``"ideal"`` (standard rejection sampling: the law is p); ``"scaled_accept"`` (acceptance
    ``min(1, (1 + eps) p/q)``, correction from the normalised residual ``max(p - q, 0)``); ``"resample_target"``
    (correction drawn from p instead of the residual); ``"unnormalised_residual"`` (inverse CDF of the residual
    ``max(p - q, 0)`` without dividing by its sum, the overflow going to the last token); ``"shared_coin"`` (the
    acceptance coin u is reused for the correction's inverse CDF: given a rejection, u is uniform on (a, 1), not on
    (0, 1)).

    Returns
    -------
    ndarray, shape [V], float64
    """
    V = len(p)
    ratio = np.divide(p, q, out=np.zeros(V), where=q > 0)
    if rule == "scaled_accept":
        ratio = ratio * (1 + eps)
    a = np.minimum(1.0, ratio)
    accepted = q * a
    rej = 1.0 - accepted.sum()
    res = np.maximum(p - q, 0.0)
    if rule in ("ideal",):
        return p.copy()
    if rule == "scaled_accept":
        return accepted + rej * res / res.sum()
    if rule == "resample_target":
        return accepted + rej * p
    if rule == "unnormalised_residual":
        law = accepted + rej * res
        law[V - 1] += rej * (1.0 - res.sum())
        return law
    if rule == "shared_coin":
        cdf_hi = np.cumsum(res / res.sum())
        cdf_lo = cdf_hi - res / res.sum()
        law = accepted.copy()
        for x in np.nonzero(q * (1 - a) > 0)[0]:
            # u uniform on (a_x, 1): token y takes the part of (a_x, 1) inside [cdf_lo, cdf_hi)
            overlap = np.clip(np.minimum(cdf_hi, 1.0) - np.maximum(cdf_lo, a[x]), 0.0, None)
            law += q[x] * overlap
        return law
    raise ValueError(f"unknown rule {rule!r}")


def upstream_power(law: np.ndarray, p: np.ndarray, reps: int, seed: int = 0) -> tuple[float, float]:
    """Fraction of upstream test runs that fail when the sampler's law is ``law``, and the median statistic.

    Each run is the upstream procedure in distribution: ``UPSTREAM_DRAWS`` tokens from ``law`` and as many from p,
    histogrammed, compared with :func:`upstream_statistic` against ``UPSTREAM_THRESHOLD`` (``nan`` fails, as
    ``nan < 0.01`` is False).
    """
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(reps):
        s = rng.multinomial(UPSTREAM_DRAWS, law / law.sum())
        r = rng.multinomial(UPSTREAM_DRAWS, p / p.sum())
        stats.append(upstream_statistic(s, r, p))
    arr = np.array(stats)
    fails = np.sum(~(arr < UPSTREAM_THRESHOLD))
    return float(fails / reps), float(np.nanmedian(np.where(np.isinf(arr), np.nan, arr)))


def tv(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation ``sum |a - b| / 2``."""
    return float(np.abs(a - b).sum() / 2)


def run_upstream_procedure_on_port(seed: int, num_iter: int = UPSTREAM_DRAWS) -> float:
    """The upstream test's loop, verbatim in its calls, on the PORTED functions; returns its statistic.

    Calls ``get_rejected_indices`` and ``sample_rejected`` of :mod:`bench.engines.trtllm_sampler` with the same
    shapes (``draft_probs [1, V]``, ``target_probs [2, V]``) and one generator for the draft draw, the coin, the
    correction and the regular sample, in upstream's order.
    """
    from bench.engines.trtllm_sampler import get_rejected_indices, sample_rejected

    q, p = upstream_instance(seed)
    draft_probs = torch.from_numpy(q).float()[None]
    target_probs = torch.stack([torch.from_numpy(p).float(), torch.from_numpy(p).float()])
    generator = torch.Generator()
    sampled, regular = np.zeros(UPSTREAM_V, dtype=np.int64), np.zeros(UPSTREAM_V, dtype=np.int64)
    for _ in range(num_iter):
        draft_tokens = [int(torch.multinomial(draft_probs, num_samples=1, generator=generator).item())]
        rejected = get_rejected_indices(draft_probs, target_probs, generator, draft_tokens)
        if rejected.shape[0] == 0:
            sampled[draft_tokens[0]] += 1
        else:
            sampled[sample_rejected(draft_probs, target_probs, generator, 0)] += 1
        regular[int(torch.multinomial(target_probs[0], num_samples=1, generator=generator).item())] += 1
    return upstream_statistic(sampled, regular, p)


def _planted_request(
    d_logits: torch.Tensor,
    t_probs: torch.Tensor,
    drafts: list[int],
    target_tokens: list[int],
    g: torch.Generator,
    rule: str,
) -> list[int]:
    """The port's per-request path with ONE planted change on a rejection (draws in the port's order).

    ``rule="resample_target"``: the correction is drawn from the target row instead of the residual;
    ``rule="shared_coin"``: the correction is the inverse CDF of the normalised residual at the rejecting coin u
    (the acceptance coin reused, no new draw); ``rule="unnormalised_residual"``: the inverse CDF of the residual
    without dividing by its sum at a fresh float64 coin, a coin above the sum giving the last token.
    """
    d_probs = torch.softmax(d_logits, dim=-1)
    torch.multinomial(d_probs, 1, generator=g)  # the port's discarded draft re-sampling
    L = len(drafts)
    idx = torch.arange(L)
    ids = torch.tensor(drafts)
    a = torch.minimum(torch.ones((), dtype=torch.float32), t_probs[idx, ids] / d_probs[idx, ids])
    u = torch.rand(L, generator=g)
    rejected = (u > a).nonzero()
    if rejected.numel() == 0:
        return [int(x) for x in drafts] + [int(target_tokens[L])]
    k = int(rejected[0].item())
    new = torch.where(t_probs[k] - d_probs[k] > 0, t_probs[k] - d_probs[k], 0.0)
    if rule == "resample_target":
        y = int(torch.multinomial(t_probs[k], 1, generator=g).item())
    elif rule == "shared_coin":
        cdf = torch.cumsum(new.double() / new.double().sum(), 0)
        y = min(int(torch.searchsorted(cdf, u[k].double(), right=True).item()), len(cdf) - 1)
        while new[y] <= 0:  # land on the support (float rounding at the top of the CDF)
            y -= 1
    elif rule == "unnormalised_residual":
        cdf = torch.cumsum(new.double(), 0)  # no division by the sum: a coin above it falls off the end
        coin = torch.rand(1, generator=g, dtype=torch.float64)
        y = min(int(torch.searchsorted(cdf, coin, right=True).item()), len(cdf) - 1)
    else:
        raise ValueError(f"unknown rule {rule!r}")
    return [int(x) for x in drafts[:k]] + [y]


def _planted_verify(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator, rule: str
) -> torch.Tensor:
    from bench.engines.trtllm_sampler import _as_tensor, _logits_float32, temperature_sampling_batch

    drafts = _as_tensor(draft_tokens, torch.int64)[:, 0]
    q_logits = _logits_float32(_as_tensor(draft_probs, torch.float64)[:, 0])
    p_logits = _logits_float32(_as_tensor(target_probs, torch.float64)[:, 0])
    B, L = drafts.shape
    V = p_logits.shape[-1]
    tokens, softmax = temperature_sampling_batch(p_logits.reshape(B * (L + 1), V), temperature=1.0, generator=generator)
    tokens, softmax = tokens.view(B, L + 1), softmax.view(B, L + 1, V)
    out = torch.full((B, L + 1), -1, dtype=torch.int64)
    for b in range(B):
        emitted = _planted_request(q_logits[b], softmax[b], drafts[b].tolist(), tokens[b].tolist(), generator, rule)
        out[b, : len(emitted)] = torch.tensor(emitted)
    return out


def planted_resample_target(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator
) -> torch.Tensor:
    """NEGATIVE CONTROL (``batched_torch``): the port with the correction drawn from p instead of the residual."""
    return _planted_verify(draft_tokens, draft_probs, target_probs, generator, "resample_target")


def planted_unnormalised_residual(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator
) -> torch.Tensor:
    """NEGATIVE CONTROL (``batched_torch``): the port with an inverse CDF of the unnormalised residual."""
    return _planted_verify(draft_tokens, draft_probs, target_probs, generator, "unnormalised_residual")


def planted_shared_coin(
    draft_tokens: Any, draft_probs: Any, target_probs: Any, generator: torch.Generator
) -> torch.Tensor:
    """NEGATIVE CONTROL (``batched_torch``): the port with the acceptance coin reused for the correction."""
    return _planted_verify(draft_tokens, draft_probs, target_probs, generator, "shared_coin")


def upstream_detection_table(seeds: tuple[int, ...] = (0, 1, 2, 3, 4), reps: int = 100) -> str:
    """Markdown: what bias TensorRT-LLM's own test detects, on its own instances (one per seed).

    For each planted rule r (:func:`rule_law`) the sampler's law is moved from p towards r, ``p + lam (r - p)``, on a
    grid of ``lam`` (TV from p grows linearly in ``lam``); the table gives TV(r, p) and the smallest TV on the grid at
    which the upstream test fails in at least half, and in at least 99 %, of ``reps`` runs (``-``: not reached at
    ``lam = 1``), and the test's failure rate on the exact law (``ideal``: its false-failure rate).
    """
    import sys

    lams = np.linspace(0.05, 1.0, 20)
    rules = ("resample_target", "unnormalised_residual", "shared_coin")
    head = "| instance seed | false failures (ideal) | " + " | ".join(
        f"{r}: TV(r, p); TV at 50 % / 99 % failures" for r in rules
    )
    lines = [head + " |", "|---" * (2 + len(rules)) + "|"]
    for seed in seeds:
        q, p = upstream_instance(seed)
        p = p / p.sum()
        fails_ideal, _ = upstream_power(p, p, reps, seed)
        cells = [str(seed), f"{fails_ideal:.2f}"]
        for rule in rules:
            r = rule_law(rule, q, p)
            r = r / r.sum()
            at50 = at99 = "-"
            for lam in lams:
                law = p + lam * (r - p)
                rate, _ = upstream_power(law, p, reps, seed + 1)
                if at50 == "-" and rate >= 0.5:
                    at50 = f"{tv(law, p):.4f}"
                if rate >= 0.99:
                    at99 = f"{tv(law, p):.4f}"
                    break
            cells.append(f"{tv(r, p):.4f}; {at50} / {at99}")
            print(f"upstream_detection_table: seed {seed} {rule} done", file=sys.stderr)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def upstream_instance_for_referee(seed: int = 0) -> Any:
    """The upstream test's instance as a referee :class:`~spectr_gbv.Instance` (V = 500, L = 1).

    q is the draft row at the empty prefix; p is the target row at the empty prefix and, for want of a second
    target model position in the upstream test (its row 1 is never used for the verified token), at every
    one-token prefix too (the bonus position).
    """
    from spectr_gbv import Instance, TabularAR

    q, p = upstream_instance(seed)
    q, p = q / q.sum(), p / p.sum()
    target = {"": p.tolist(), **{str(x): p.tolist() for x in range(UPSTREAM_V)}}
    return Instance(
        TabularAR(UPSTREAM_V, target, name="target"),
        TabularAR(UPSTREAM_V, {"": q.tolist()}, name="draft"),
        L=1,
        name=f"trtllm_upstream_test_seed{seed}",
    )


def referee_on_upstream_instance(target: str, seed: int = 0, budget: str = "standard") -> Any:
    """Run the referee (statistical law only: no probes, no search) on the upstream test's instance, K = 1.

    Parameters
    ----------
    target : str
        ``"module:function"`` of a ``batched_torch`` verifier (the port or a planted rule).
    seed : int
        Instance seed (:func:`upstream_instance`); the harness seed is 0.
    budget : str

    Returns
    -------
    spectr_gbv.validate.ValidationReport
    """
    import importlib

    from spectr_gbv.validate import validate

    module, function = target.split(":")
    return validate(
        getattr(importlib.import_module(module), function),
        interface="batched_torch",
        budget=budget,
        instances=[(upstream_instance_for_referee(seed), 1)],
        probes=False,
        search=False,
    )
