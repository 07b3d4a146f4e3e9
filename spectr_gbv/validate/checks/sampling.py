"""Sampling the verifier on a battery instance: drafts from q, batched calls, completion by p.

:func:`collect` draws K i.i.d. drafts from q per iteration (vectorised), runs the verifier on
batches of :data:`BATCH` iterations (up to ``adapter.guard.workers`` batches at once, each with
its own rng derived in order, so the outputs do not depend on the number of workers), keeps the
structurally valid outputs and completes each by fresh sampling from p to L+1 tokens: the
:class:`Samples` the statistical checks (:mod:`spectr_gbv.validate.checks.statistical`) and the
adversarial search test. Imports: battery, isolation, checks.structural, interfaces.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    tokens : ndarray, shape [N, L+1], int64
        Emitted tokens left-aligned, -1 after.
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
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    invalid = 0
    done = 0
    raised, first_error, in_a_row = 0, None, 0
    while done < num and in_a_row < 3:
        # one group of up to `workers` batches, run concurrently; each batch has its own rng
        # (derived in order from ``rng``), so the outputs do not depend on the number of workers
        group = []
        for _ in range(workers):
            if done >= num:
                break
            c = min(BATCH, max(1, -(-(num - done) // (workers - len(group)))))
            drafts = tables.sample_drafts(c, K, rng)
            q, p = tables.rows(drafts)
            group.append((drafts, q, p, np.random.default_rng(int(rng.integers(0, 2**63)))))
            done += c
        for (drafts, _, p, _), em in zip(group, _emit_group(adapter, group), strict=True):
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
            parts.append((drafts[ok], em.tokens[ok], em.lengths[ok]))
    drafts = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, K, L), dtype=np.int64)
    tokens = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, L + 1), dtype=np.int64)
    lengths = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    completed = tables.complete(np.maximum(tokens, 0), lengths, rng)
    out = Samples(bi, tables, drafts, tokens, lengths, completed, num, invalid, raised, first_error)
    if into is None:
        return out
    return Samples(
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


__all__ = ["BATCH", "Samples", "collect"]
