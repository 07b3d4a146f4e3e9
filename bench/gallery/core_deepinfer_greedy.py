"""core-deepinfer's ``core_deepinfer.speculative.verify_greedy`` (greedy speculative semantics), chain interface.

``verify_greedy(logits [gamma + 1, V], drafts, *, eos_id=None)`` computes ``predictions = logits.argmax(axis=1)``
and commits predictions while each draft equals the prediction (core_deepinfer/speculative.py, used by
``generate_speculative``): the output is the target's greedy (argmax) continuation, whatever the drafts. It is
deterministic, so the wrapper ignores the uniforms, and the harness's exact level applies.

The function rejects non-finite logits (``ValueError``), so the wrapper passes ``log(max(p, tiny))`` (a probability
of 0 becomes about -708 instead of ``-inf``; the argmax, all the function reads, is unchanged) and the drafts as
Python ints, as its check requires.
"""

from __future__ import annotations

import numpy as np
from core_deepinfer.speculative import verify_greedy


def verify(
    draft_ids: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, uniforms: np.ndarray | None
) -> np.ndarray:
    """Chain interface: ``int64 [B, L+1]`` emitted tokens, -1 padded.

    Parameters
    ----------
    draft_ids : ndarray, shape [B, L], int64
    draft_probs : ndarray, shape [B, L, V], float
        Unused (greedy verification reads only the target).
    target_probs : ndarray, shape [B, L+1, V], float
    uniforms : ndarray, shape [B, L+1], float, or None
        Unused (deterministic).

    Returns
    -------
    ndarray, shape [B, L+1], int64
    """
    B, L = np.shape(draft_ids)
    logits = np.log(np.maximum(np.asarray(target_probs, dtype=np.float64), np.finfo(np.float64).tiny))
    out = np.full((B, L + 1), -1, dtype=np.int64)
    for b in range(B):
        res = verify_greedy(logits[b], tuple(int(t) for t in draft_ids[b]))
        out[b, : len(res.tokens)] = res.tokens
    return out


def exact_defect(instance: object) -> object:
    """The wrapper's exact validity defect on ``instance``, by enumerating every draft of positive probability.

    Independent of the harness's bisection: the output is deterministic, so its law is
    ``a(o) = sum over drafts d with verify(d) = o of q(d)``, computed in the instance's own arithmetic (exact
    rationals for an exact instance), and the defect is :func:`spectr_gbv.simulate.exact.validity_defect`.

    Parameters
    ----------
    instance : spectr_gbv.core.instance.Instance

    Returns
    -------
    Fraction or float
    """
    from spectr_gbv.simulate.exact import DraftTable, validity_defect  # noqa: PLC0415

    table = DraftTable.from_instance(instance)
    law: dict[tuple[int, ...], object] = {}
    L = instance.L
    for d, w, rows in zip(table.tokens, table.probs, table.target_rows, strict=True):
        p_rows = np.asarray(rows, dtype=np.float64)[None]
        out = verify(d[None, :], np.zeros((1, L, instance.n)), p_rows, None)[0]
        o = tuple(int(t) for t in out if t >= 0)
        law[o] = law.get(o, 0) + w
    return validity_defect(instance.target, law, L)
