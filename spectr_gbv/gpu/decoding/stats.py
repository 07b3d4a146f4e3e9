r"""Decoding statistics: calls, accepted lengths, block efficiency, time split.

Counting conventions (THEORY.md section 2). An *iteration* is one verification step of the
whole batch (one batched target forward); a *row-iteration* is one row taking part in it.
Per row-iteration the verifier accepts ``tau`` draft tokens and emits ``tau + 1``. Block
efficiency is tokens emitted per row-iteration, i.e. tokens per target call of a single
sequence (prefill excluded); for B = 1 it is ``tokens_emitted / target_calls``. The returned
sequences are truncated to ``max_new_tokens``, so ``tokens_generated <= tokens_emitted``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


@dataclass
class DecodeStats:
    """Counters of one :meth:`~spectr_gbv.gpu.decoding.decoder.SpeculativeDecoder.generate` call.

    Attributes
    ----------
    method : str
    num_drafts, draft_length : int
        K and L (L = 0 for ``ar``).
    batch_size : int
        B, number of independent rows.
    iterations : int
        Verification steps (batched target forwards after the prefill).
    row_iterations : int
        Sum over iterations of the rows still active.
    target_calls : int
        Target forwards, prefill excluded (= ``iterations``).
    prefill_calls : int
        Target forwards spent on the prompt (0 or 1).
    draft_calls : int
        Draft-model forwards (0 for ``ar`` and the n-gram source).
    tokens_emitted : int
        Sum of ``tau + 1`` over row-iterations (before truncation).
    tokens_generated : int
        New tokens returned (``B * max_new_tokens``).
    accepted_hist : list of int, length L + 1
        ``accepted_hist[t]`` = row-iterations with ``tau = t``; sums to ``row_iterations``.
    time_draft, time_target, time_verify, time_total : float
        Seconds (``time.perf_counter``; CUDA synchronised at each boundary on GPU).
    scoring : str
        ``"tree"`` (each distinct draft prefix scored once), ``"flat"`` (K rows of L + 1
        positions) or ``""`` for ``ar``.
    target_positions : int
        Positions the target scored in verification calls (padding excluded, prefill
        excluded): ``row_iterations * K * (L + 1)`` when flat, the distinct prefixes with a tree.
    draft_positions : int
        Laws the draft model computed while drafting (its prefill excluded; 0 for a draft source
        that does not count them).
    """

    method: str
    num_drafts: int
    draft_length: int
    batch_size: int = 1
    iterations: int = 0
    row_iterations: int = 0
    target_calls: int = 0
    prefill_calls: int = 0
    draft_calls: int = 0
    tokens_emitted: int = 0
    tokens_generated: int = 0
    accepted_hist: list[int] = field(default_factory=list)
    time_draft: float = 0.0
    time_target: float = 0.0
    time_verify: float = 0.0
    time_total: float = 0.0
    scoring: str = ""
    target_positions: int = 0
    draft_positions: int = 0

    def __post_init__(self) -> None:
        if not self.accepted_hist:
            self.accepted_hist = [0] * (self.draft_length + 1)

    def record(self, num_accepted: torch.Tensor) -> list[int]:
        """Count one iteration whose active rows accepted ``num_accepted`` (Tensor [R], int64); return it as a list."""
        taus = num_accepted.tolist()
        self.iterations += 1
        self.target_calls += 1
        self.row_iterations += len(taus)
        self.tokens_emitted += sum(taus) + len(taus)
        for t in taus:
            self.accepted_hist[t] += 1
        return taus

    @property
    def block_efficiency(self) -> float:
        """Tokens emitted per row-iteration, E[tau + 1] (NaN before the first iteration)."""
        return self.tokens_emitted / self.row_iterations if self.row_iterations else float("nan")

    @property
    def mean_accepted(self) -> float:
        """Mean tau over row-iterations."""
        return self.block_efficiency - 1

    @property
    def tokens_per_second(self) -> float:
        """``tokens_generated / time_total`` (NaN if no time was measured)."""
        return self.tokens_generated / self.time_total if self.time_total > 0 else float("nan")

    def summary(self) -> dict[str, float | int | str | list[int]]:
        """Plain dict of every counter and derived rate (for printing / JSON)."""
        out: dict[str, float | int | str | list[int]] = dict(self.__dict__)
        out.update(
            block_efficiency=self.block_efficiency,
            tokens_per_second=self.tokens_per_second,
            accepted_hist=list(self.accepted_hist),
        )
        return out


@contextmanager
def timed(stats: DecodeStats, attribute: str, device: torch.device) -> Iterator[None]:
    """Add the wall time of the ``with`` body to ``stats.<attribute>``.

    On CUDA the device is synchronised before reading the clock at both ends, so queued
    kernels are charged to the phase that launched them.
    """
    sync = device.type == "cuda"
    if sync:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    try:
        yield
    finally:
        if sync:
            torch.cuda.synchronize(device)
        setattr(stats, attribute, getattr(stats, attribute) + time.perf_counter() - start)
