"""Sampling the verifier on a battery instance: drafts from q, batched calls, completion by p.

:func:`collect` draws K i.i.d. drafts from q per iteration (vectorised), runs the verifier on
batches of :data:`BATCH` iterations (up to ``adapter.guard.workers`` batches at once, each with
its own rng derived in order, so the outputs do not depend on the number of workers), keeps the
structurally valid outputs and completes each by fresh sampling from p to L+1 tokens: the
:class:`Samples` the statistical checks (:mod:`spectr_gbv.validate.checks.statistical`) and the
adversarial search test. Imports: battery, isolation, checks.structural, interfaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks.structural import StructuralTally, classify
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.isolation.failures import VerifierRaised

#: Iterations per verifier batch.
BATCH = 8192


@dataclass
class Samples:
    """Valid outputs of the verifier on one battery instance.

    Attributes
    ----------
    bi : BatteryInstance
    tables : Tables
    drafts : ndarray, shape [N, K, L], int64
        Tokens of ``bi.instance`` (a wide instance's ids mapped back to its small vocabulary).
    tokens : ndarray, shape [N, L+1], int64
        Emitted tokens left-aligned, -1 after (same vocabulary as ``drafts``).
    lengths : ndarray, shape [N], int64
    completed : ndarray, shape [N], int64
        Base-n index of "output, then fresh p" in V^{L+1}.
    calls : int
        Verifier calls made (invalid outputs included).
    invalid : int
        Outputs that broke a structural rule (excluded from the arrays).
    raised : int
        Batches dropped because the verifier raised.
    first_error : VerifierRaised or None
        The first of those exceptions.
    stopped_at : tuple of (int, int, int) or None
        Set by a sequential collection that stopped early: (the 1-based look, the looks
        planned, the iterations planned).
    diagnosis_samples : Samples or None
        These samples plus more drawn after an early stop, for a diagnosis that the stopped
        samples left inconclusive (the law tests keep to the stopped samples).
    zero_token_lengths : ndarray, shape [M], int64
        Emitted lengths of the outputs excluded for a token of target probability 0 only (their
        accepted prefix is a draft's: the accepted-length law counts them).
    """

    bi: BatteryInstance
    tables: Tables
    drafts: np.ndarray
    tokens: np.ndarray
    lengths: np.ndarray
    completed: np.ndarray
    calls: int
    invalid: int
    raised: int = 0
    first_error: VerifierRaised | None = None
    stopped_at: tuple[int, int, int] | None = None
    diagnosis_samples: Samples | None = None
    zero_token_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def all_lengths(self) -> np.ndarray:
        """Emitted lengths of the valid outputs and of those excluded for a zero-probability token only."""
        return np.concatenate([self.lengths, self.zero_token_lengths])


def collect(
    adapter: Adapter,
    bi: BatteryInstance,
    num: int,
    rng: np.random.Generator,
    tally: StructuralTally | None = None,
    tables: Tables | None = None,
    into: Samples | None = None,
) -> Samples:
    """Run ``num`` iterations of the verifier on ``bi`` (drafts from q, batched).

    A batch whose call raises (:class:`~spectr_gbv.validate.isolation.failures.VerifierRaised`) is
    dropped and counted in ``Samples.raised`` (the first error kept in ``first_error``); the
    other batches still run, so a verifier that raises now and then still has its law
    tested. Three raising batches in a row stop the collection.

    Parameters
    ----------
    into : Samples, optional
        Earlier samples of the same instance to extend (sequential looks).

    Raises
    ------
    VerifierTimedOut
        The verifier hung (or exited): nothing more can be collected.
    """
    tables = tables or (into.tables if into is not None else Tables(bi.float_instance))
    L, K = bi.instance.L, bi.K
    workers = max(1, int(getattr(adapter.guard, "workers", 1) or 1))
    cap = BATCH if bi.vocab is None else min(BATCH, bi.vocab.batch_cap(K, L))
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    invalid = 0
    done = 0
    raised, first_error, in_a_row = 0, None, 0
    zero_lengths: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    while done < num and in_a_row < 3:
        # one group of up to `workers` batches, run concurrently; each batch has its own rng
        # (derived in order from ``rng``), so the outputs do not depend on the number of workers
        group = []
        small = []
        for _ in range(workers):
            if done >= num:
                break
            c = min(cap, max(1, -(-(num - done) // (workers - len(group)))))
            drafts = tables.sample_drafts(c, K, rng)
            q, p = tables.rows(drafts)
            small.append(drafts)
            group.append((*widen(bi, drafts, q, p), np.random.default_rng(int(rng.integers(0, 2**63)))))
            done += c
        for (drafts, _, p, _), em, d_small in zip(group, _emit_group(adapter, group), small, strict=True):
            if isinstance(em, VerifierRaised):
                raised += 1
                in_a_row += 1
                first_error = first_error or em
                continue
            in_a_row = 0
            problems = classify(em, drafts, p)
            if tally is not None:
                tally.add(bi, drafts, problems, len(drafts))
            ok = np.ones(len(drafts), dtype=bool)
            if problems:
                ok[list(problems)] = False
                invalid += len(problems)
                zero = [b for b, (diag, _) in problems.items() if diag == "zero_probability_token"]
                zero_lengths.append(em.lengths[zero])
            tokens = em.tokens if bi.vocab is None else bi.vocab.narrow_ids(em.tokens)
            parts.append((d_small[ok], tokens[ok], em.lengths[ok]))
    drafts = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, K, L), dtype=np.int64)
    tokens = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, L + 1), dtype=np.int64)
    lengths = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    completed = tables.complete(np.maximum(tokens, 0), lengths, rng)
    zeros = np.concatenate(zero_lengths).astype(np.int64)
    out = Samples(bi, tables, drafts, tokens, lengths, completed, num, invalid, raised, first_error)
    out.zero_token_lengths = zeros
    if into is None:
        return out
    merged = Samples(
        bi,
        tables,
        np.concatenate([into.drafts, drafts]),
        np.concatenate([into.tokens, tokens]),
        np.concatenate([into.lengths, lengths]),
        np.concatenate([into.completed, completed]),
        into.calls + num,
        into.invalid + invalid,
        into.raised + raised,
        into.first_error or first_error,
    )
    merged.zero_token_lengths = np.concatenate([into.zero_token_lengths, zeros])
    return merged


def widen(
    bi: BatteryInstance, drafts: np.ndarray, q: np.ndarray, p: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays the verifier sees: ``(drafts, q, p)`` in the ids and width of ``bi.vocab`` (unchanged without one).

    Parameters
    ----------
    bi : BatteryInstance
    drafts : ndarray, shape [B, K, L], int64
        Tokens of the small instance.
    q, p : ndarray, shapes [B, K, L, n] and [B, K, L+1, n], float64
        Rows of the small instance.

    Returns
    -------
    (ndarray, ndarray, ndarray)
        Drafts [B, K, L] int64 in vocabulary ids, rows [..., V] float64 (zero outside the ids).
    """
    if bi.vocab is None:
        return drafts, q, p
    return bi.vocab.widen_ids(drafts), bi.vocab.widen_rows(q), bi.vocab.widen_rows(p)


def _emit_group(adapter: Adapter, group: list[tuple[Any, ...]]) -> list[Any]:
    """Emit the batches of ``group`` (concurrently where the adapter can); a raising batch gives its error.

    Raises
    ------
    VerifierTimedOut
        A batch hung or ended the verifier's worker.
    """
    if len(group) > 1 and hasattr(adapter, "emit_many"):
        states = [g[3].bit_generator.state for g in group]
        try:
            return list(
                adapter.emit_many(
                    [{"drafts": d, "draft_probs": q, "target_probs": p, "rng": r} for d, q, p, r in group]
                )
            )
        except VerifierRaised:
            for g, st in zip(group, states, strict=True):  # redo one by one to keep the batches that run
                g[3].bit_generator.state = st
    out: list[Any] = []
    for d, q, p, r in group:
        try:
            out.append(adapter.emit(d, q, p, r))
        except VerifierRaised as err:
            out.append(err)
    return out


__all__ = ["BATCH", "Samples", "collect", "widen"]
