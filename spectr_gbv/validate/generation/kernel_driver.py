"""``validate_self_drafting(kernel, ...)``: the generation referee for kernels that draw their own drafts.

The kernel (interface ``"self_drafting"``, :mod:`~spectr_gbv.validate.generation.self_drafting`)
is driven as a generation loop over the referee's reference models and judged by the checks of
:func:`~spectr_gbv.validate.generation.validate_generation`: the exact sequence law and the
positional laws of the first m tokens per scenario, draft invariance (the pair's second draft),
determinism (advisory), and a ``runs`` check for raises, hangs, exits and bad outputs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from spectr_gbv.validate.generation.driver import check_seed, run_referee
from spectr_gbv.validate.generation.plan import build_plan
from spectr_gbv.validate.generation.runner import GenerationRunner
from spectr_gbv.validate.generation.self_drafting import (
    SELF_DRAFTING,
    KernelJob,
    check_kernel_signature,
    check_num_draft_tokens,
)
from spectr_gbv.validate.harness.support import make_guard
from spectr_gbv.validate.interfaces.loading import UnloadableVerifier, load_verifier

#: Most rows of one kernel call (a chunk of seeds run together in one worker call).
ROWS_PER_CALL = 512


def validate_self_drafting(
    kernel: Callable[..., Any] | str,
    *,
    num_draft_tokens: int = 2,
    budget: str = "standard",
    seed: int = 0,
    time_limit_s: float = 600.0,
    isolation: str | None = None,
    workers: int | None = None,
    pairs: Any = None,
    m: int | None = None,
    rows_per_call: int = ROWS_PER_CALL,
    quiet: bool | None = None,
) -> Any:
    """Check that a kernel which drafts and verifies with its own randomness samples the target's law.

    Parameters
    ----------
    kernel : callable or str
        ``kernel(draft_logits, target_logits, *, num_draft_tokens, last_tokens, positions, seeds,
        temperature) -> int [B, L+1]`` (:mod:`~spectr_gbv.validate.generation.self_drafting`); a
        string ``"MODULE:FUNC"`` is imported (a failed import is reported, not raised).
    num_draft_tokens : int
        L, drafts per round, in [1, 8] (default 2).
    budget : str
        ``"quick"``, ``"standard"`` or ``"thorough"``: the scenarios, TV targets and sample sizes
        of :func:`~spectr_gbv.validate.generation.validate_generation`.
    seed : int
        Harness seed (>= 0); sample i of the run is request seed
        :func:`~spectr_gbv.validate.generation.self_drafting.row_seed` of ``seed * 10**6 + i``.
    time_limit_s : float
        Seconds one kernel-loop call (a chunk of up to ``rows_per_call`` rows, all its rounds)
        may take (default 600: interpreted Triton kernels are slow).
    isolation, workers
        As :func:`~spectr_gbv.validate.generation.validate_generation`.
    pairs, m
        Restrict the reference pairs; the tested length (default the budget's).
    rows_per_call : int
        Most rows (requests) per kernel call, >= 1.
    quiet : bool, optional
        Hide the progress bar.

    Returns
    -------
    ValidationReport
        Interface ``"self_drafting"``, level ``"statistical"``; ``settings`` adds
        ``num_draft_tokens`` and ``rows_per_call``.

    Raises
    ------
    ValueError
        One line: a bad ``num_draft_tokens``, ``rows_per_call``, seed, budget, pair or ``m``, or a
        kernel with the wrong signature.

    References
    ----------
    Leviathan et al. 2023 (the output law must be the target's); vLLM PR #54282 (a draft's
    Gumbel noise shared with the recovery draw); docs/validate.md, "Serving engines".
    """
    t0 = time.perf_counter()
    L = check_num_draft_tokens(num_draft_tokens)
    seed = check_seed(seed)
    if not isinstance(rows_per_call, int) or isinstance(rows_per_call, bool) or rows_per_call < 1:
        raise ValueError(f"rows_per_call: expected an int >= 1, got {rows_per_call!r}")
    if isinstance(kernel, str):
        kernel = load_verifier(kernel, "chain", isolation=isolation)
    if not isinstance(kernel, UnloadableVerifier):
        check_kernel_signature(kernel)
    guard = make_guard(time_limit_s, isolation, workers)
    plan = build_plan(budget, interface="generation", pairs=pairs, m=m, max_new_tokens=None)
    job = functools.partial(KernelJob, num_draft_tokens=L)

    def runner(bar: Any) -> GenerationRunner:
        return GenerationRunner(kernel, plan.pairs, guard, False, seed, bar.update, job=job, chunk=rows_per_call)

    extra = {"num_draft_tokens": L, "rows_per_call": rows_per_call}
    return run_referee(kernel, SELF_DRAFTING, plan, guard, runner, seed, budget, time_limit_s, quiet, t0, extra)


__all__ = ["ROWS_PER_CALL", "validate_self_drafting"]
