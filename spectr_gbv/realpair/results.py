r"""Results of ``spectr-gbv bench``: per-configuration aggregates, speed-ups, step costs and the run estimate.

Counting (THEORY.md section 2, :mod:`spectr_gbv.gpu.decoding.stats`): block efficiency BE = tokens
emitted / target calls (prefill excluded; hardware-independent); tokens/s = tokens generated /
wall time (prefill included); speed-up SR = tokens/s / the tokens/s of ``ar`` at the same
temperature, measured in the same run on the same prompts with the same number of new tokens
(so SR of ``ar`` is exactly 1).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from spectr_gbv.realpair.config import SINGLE_DRAFT, BenchConfig


@dataclass
class RunRow:
    """Aggregate of one (dataset, grid point) over the prompts.

    Attributes
    ----------
    dataset, method : str
    num_drafts, draft_length : int
        K, L (L = 0 for ``ar``).
    temperature : float
    sweeps : str
        ``";"``-joined sweeps of the point.
    prompts, tokens_generated, tokens_emitted, row_iterations, target_calls, draft_calls : int
        Sums over prompts (``target_calls`` excludes prefills).
    time_total, time_draft, time_target, time_verify : float
        Seconds, summed.
    accepted_hist : list of int, length L + 1
        Summed histogram of tau; sums to ``row_iterations``.
    speedup : float
        tokens/s over ``ar``'s at the same temperature (NaN until :func:`add_speedups`).
    ar_tokens_per_second : float
    """

    dataset: str
    method: str
    num_drafts: int
    draft_length: int
    temperature: float
    sweeps: str
    prompts: int = 0
    tokens_generated: int = 0
    tokens_emitted: int = 0
    row_iterations: int = 0
    target_calls: int = 0
    draft_calls: int = 0
    time_total: float = 0.0
    time_draft: float = 0.0
    time_target: float = 0.0
    time_verify: float = 0.0
    accepted_hist: list[int] = field(default_factory=list)
    speedup: float = math.nan
    ar_tokens_per_second: float = math.nan

    def add(self, stats: Any) -> None:
        """Add one prompt's :class:`~spectr_gbv.gpu.decoding.stats.DecodeStats`."""
        self.prompts += 1
        for name in ("tokens_generated", "tokens_emitted", "row_iterations", "target_calls", "draft_calls"):
            setattr(self, name, getattr(self, name) + getattr(stats, name))
        for name in ("time_total", "time_draft", "time_target", "time_verify"):
            setattr(self, name, getattr(self, name) + getattr(stats, name))
        hist = list(stats.accepted_hist)
        self.accepted_hist = [a + b for a, b in zip(self.accepted_hist or [0] * len(hist), hist, strict=True)]

    @property
    def block_efficiency(self) -> float:
        """Tokens emitted per target call, E[tau + 1]."""
        return self.tokens_emitted / self.row_iterations if self.row_iterations else math.nan

    @property
    def block_efficiency_se(self) -> float:
        """Standard error of BE from the histogram (iterations treated as independent)."""
        n = self.row_iterations
        if n < 2:
            return math.nan
        mean = self.block_efficiency - 1
        var = sum(c * (t - mean) ** 2 for t, c in enumerate(self.accepted_hist)) / (n - 1)
        return math.sqrt(var / n)

    @property
    def tokens_per_second(self) -> float:
        """Tokens generated per second of wall time (prefill included)."""
        return self.tokens_generated / self.time_total if self.time_total > 0 else math.nan

    @property
    def target_calls_per_token(self) -> float:
        """Target forwards (prefill excluded) per generated token."""
        return self.target_calls / self.tokens_generated if self.tokens_generated else math.nan

    def summary(self) -> dict[str, Any]:
        """Plain dict with the derived rates (one CSV / JSON row)."""
        out = asdict(self)
        out.update(
            block_efficiency=self.block_efficiency,
            block_efficiency_se=self.block_efficiency_se,
            tokens_per_second=self.tokens_per_second,
            target_calls_per_token=self.target_calls_per_token,
        )
        return out


def add_speedups(rows: Sequence[RunRow]) -> None:
    """Set ``speedup`` = tokens/s over ``ar``'s on the same dataset and temperature (in place).

    Rows without an ``ar`` row at their (dataset, T) keep NaN; ``ar`` rows get exactly 1.
    """
    ar = {(r.dataset, r.temperature): r.tokens_per_second for r in rows if r.method == "ar"}
    for r in rows:
        base = ar.get((r.dataset, r.temperature), math.nan)
        r.ar_tokens_per_second = base
        r.speedup = 1.0 if r.method == "ar" else r.tokens_per_second / base


def find_row(rows: Sequence[RunRow], dataset: str, method: str, k: int, n: int, t: float) -> RunRow | None:
    """The row of (dataset, method, K, L, T) in ``rows``, or None (the first one when several match)."""
    for r in rows:
        if (r.dataset, r.method, r.num_drafts, r.draft_length, r.temperature) == (dataset, method, k, n, t):
            return r
    return None


@dataclass
class BenchResult:
    """Everything a run measured (see :func:`run_benchmark`); :meth:`to_dict` is ``results.json``."""

    config: BenchConfig
    rows: list[RunRow]
    step_costs: dict[str, Any]
    estimate_s: float
    elapsed_s: float
    prompts: dict[str, list[dict[str, Any]]]
    predictions: list[dict[str, Any]] = field(default_factory=list)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    peer: list[dict[str, Any]] = field(default_factory=list)
    lossless: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def row(self, dataset: str, method: str, k: int, n: int, t: float) -> RunRow | None:
        """The row of (dataset, method, K, L, T), or None (:func:`find_row`)."""
        return find_row(self.rows, dataset, method, k, n, t)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the whole result."""
        return {
            "config": self.config.summary(),
            "models": self.models,
            "estimate_s": self.estimate_s,
            "elapsed_s": self.elapsed_s,
            "step_costs": self.step_costs,
            "prompts": self.prompts,
            "rows": [r.summary() for r in self.rows],
            "predictions": self.predictions,
            "predicted_vs_measured": self.comparisons,
            "peer": self.peer,
            "lossless": self.lossless,
            "samples": self.samples,
            "errors": self.errors,
        }


# ----------------------------------------------------------------------------- costs


@torch.no_grad()
def measure_step_costs(
    target: torch.nn.Module,
    draft: Any,
    context: torch.Tensor,
    widths: Sequence[tuple[int, int]],
    draft_rows: Sequence[int] = (1,),
    repeats: int = 2,
) -> dict[str, Any]:
    """Wall time of one target decode step, of scoring calls and of draft steps after ``context``.

    Parameters
    ----------
    target : causal LM
    draft : causal LM or DraftSource
        Draft steps are timed only for a ``torch.nn.Module``.
    context : Tensor [T], int64
        Cached before each timed call (not timed).
    widths : sequence of (K, W)
        Scoring calls of K rows x W positions (W = L + 1 in the decoder).
    draft_rows : sequence of int
        Row counts K of the timed one-token draft steps.
    repeats : int
        Best of this many timings.

    Returns
    -------
    dict
        ``decode_s`` (1 row x 1 position), ``score_s`` {"KxW": s}, ``score_over_decode``
        {"KxW": ratio}, ``draft_step_s`` {K: s} and ``draft_over_decode`` {K: ratio}.
    """
    from spectr_gbv.gpu.decoding.cache import RowCache

    dev = next(target.parameters()).device
    ctx = context.to(dev)[None]

    def best(model: torch.nn.Module, rows: int, width: int) -> float:
        times = []
        for _ in range(repeats):
            cache = RowCache(1, dev)
            cache.forward(model, ctx)
            cache.repeat(rows)
            tokens = ctx[:, -1:].expand(rows, width).contiguous()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            start = time.perf_counter()
            cache.forward(model, tokens)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - start)
        return min(times)

    decode = best(target, 1, 1)
    score = {f"{k}x{w}": best(target, k, w) for k, w in widths}
    out: dict[str, Any] = {
        "decode_s": decode,
        "score_s": score,
        "score_over_decode": {key: s / decode for key, s in score.items()},
        "draft_step_s": {},
        "draft_over_decode": {},
    }
    if isinstance(draft, torch.nn.Module):
        for k in draft_rows:
            s = best(draft.to(dev).eval(), k, 1)
            out["draft_step_s"][k], out["draft_over_decode"][k] = s, s / decode
    return out


def estimate_seconds(
    config: BenchConfig,
    costs: dict[str, Any],
    assumed_be: float = 2.0,
    lossless_prompt_tokens: dict[str, int] | None = None,
    prompt_tokens: float = 100.0,
) -> dict[str, float]:
    """Rough wall time of a run from measured step costs.

    Per speculative run, ``max_new_tokens / min(assumed_be, L + 1)`` iterations, each costing
    L draft steps of K rows plus one scoring call of K x (L + 1) positions (interpolated
    linearly in the number of positions between the measured widths); ``ar`` costs one decode
    step per token. The extras are sized from the same costs (order of magnitude only). The
    measured costs are first made non-decreasing in the number of positions (their running
    maximum), so timings made noisy by a loaded machine never give a negative estimate.

    Parameters
    ----------
    config : BenchConfig
    costs : dict
        From :func:`measure_step_costs` (the draft step defaults to 0.25 decode steps when not
        measured).
    assumed_be : float
        Block efficiency assumed for every speculative run.
    lossless_prompt_tokens : dict name -> int, optional
        Token counts of the law test's prompts (default 32 each); every batched run pays its
        prompt, so they dominate the law test's cost.
    prompt_tokens : float
        Mean prompt length of the grid's prompts (each run pays a target and a draft prefill).

    Returns
    -------
    dict
        ``grid_s``, ``extras_s``, ``total_s`` (seconds) and ``runs`` (generate calls).
    """
    d = costs["decode_s"]
    lossless_prompt_tokens = lossless_prompt_tokens or {}
    pts = sorted((int(k) * int(w), s) for key, s in costs["score_s"].items() for k, w in [key.split("x")])
    xs, ys = [1] + [p for p, _ in pts], [d] + [s for _, s in pts]
    # Timings on a loaded machine can come out non-monotone in the number of positions (a wider
    # call timed faster than a narrower one); a call never costs less than a narrower one, so the
    # curve is the running maximum, and its extrapolation never slopes down (nor goes below 0).
    ys = list(itertools.accumulate(ys, max))

    def score(n: float) -> float:
        if n >= xs[-1]:
            slope = (ys[-1] - ys[-2]) / max(xs[-1] - xs[-2], 1) if len(xs) > 1 else d
            return ys[-1] + slope * (n - xs[-1])
        i = next(j for j in range(1, len(xs)) if n <= xs[j])
        return ys[i - 1] + (ys[i] - ys[i - 1]) * (n - xs[i - 1]) / max(xs[i] - xs[i - 1], 1)

    steps = {int(k): s for k, s in costs.get("draft_step_s", {}).items()}

    def draft_step(k: int) -> float:
        if not steps:
            return 0.25 * d * (1 + 0.1 * (k - 1))
        near = min(steps, key=lambda x: abs(x - k))
        return steps[near] * max(k, 1) ** 0.5 / max(near, 1) ** 0.5

    n_tok, per_prompt = config.max_new_tokens, 0.0
    per_position = ys[-1] / xs[-1]  # mean cost of a position in the widest measured call
    draft_share = draft_step(1) / d
    prefill = score(prompt_tokens)
    grid = config.grid()
    for p in grid:
        if p.method == "ar":
            per_prompt += prefill + n_tok * d
        else:
            iters = n_tok / min(assumed_be, p.draft_length + 1)
            per_prompt += prefill * (1 + draft_share) + iters * (
                p.draft_length * draft_step(p.num_drafts) + score(p.num_drafts * (p.draft_length + 1))
            )
    n_sets = len(config.datasets) * config.num_prompts
    kc, lc, _ = config.centre
    extras = 0.0
    if config.peer:
        extras += n_sets * n_tok / assumed_be * (lc * draft_step(1) + score(lc + 1))
    if config.predict:
        points = len(config.ls) + len(config.ts) if config.predict_sweeps else 1
        extras += len(config.datasets) * points * 2 * config.num_prompts * (lc + 1) * score(config.predict_samples)
    if config.lossless:
        # batched runs: each row pays its prompt (target and draft prefill) and ~1.5 scoring iterations
        for name in config.lossless_prompts:
            t_prompt = lossless_prompt_tokens.get(name, 32)
            for m in config.lossless_methods:
                k = 1 if m in SINGLE_DRAFT else config.lossless_drafts
                per_run = t_prompt * (1 + draft_share) + 1.5 * k * (config.lossless_length + 1)
                extras += config.lossless_runs * per_run * per_position
    grid_s = per_prompt * n_sets
    return {"grid_s": grid_s, "extras_s": extras, "total_s": grid_s + extras, "runs": len(grid) * n_sets}
