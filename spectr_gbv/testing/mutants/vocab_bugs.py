r"""Planted bugs in how token ids are stored: right for small ids, wrong past 8 or 16 bits.

Each mutant is textbook token-level speculative sampling on draft 0 (as
:mod:`spectr_gbv.examples.textbook_sd`) that keeps the draft ids in a narrow integer type
somewhere, as kernels that pack ids do. Every id below the type's range is handled right, so
a battery whose vocabularies stop at a few tokens passes them; the battery's ``wide_vocab``
instance (ids 7, 256, 32,768 and 32,999 of V = 33,000) is there for them:

=======================  ====================================================  ==========================
mutant                   bug                                                   lossless exactly when
=======================  ====================================================  ==========================
``uint8_id_lookup``      ``p[x] / q[x]`` read at ``x`` cast to ``uint8``         every drafted id < 256
                         (x mod 256): the ratio of another token, or 0/0
``int16_id_buffer``      ids held in an ``int16`` buffer: id 32,768 becomes     every drafted id < 32,768
                         -32,768 (read from the end of the row, and emitted)
=======================  ====================================================  ==========================

Both emit valid tokens with a wrong acceptance (``not_lossless``): on ``wide_vocab`` the
narrowed ids point at columns of probability 0, so the ratio is 0/0 and the draft token is never
accepted (``int16_id_buffer`` would emit the negative id of an accepted one). Interface: the generic one of
:mod:`spectr_gbv.testing.mutants` (numpy arrays; no ``outcome_law``: their law is SD's on
every instance whose ids fit the type).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spectr_gbv.testing.mutants.inputs import check_rng, generic_arrays, inverse_cdf, ratio, tag_verifier


def _sd_with_ids(
    lookup: np.ndarray, emit: np.ndarray, q: np.ndarray, p: np.ndarray, rng: np.random.Generator
) -> list[int]:
    """Textbook SD on draft 0 reading ``p``/``q`` at ``lookup`` ids and emitting ``emit`` ids when accepted."""
    out: list[int] = []
    for t in range(len(lookup)):
        x = int(lookup[t])
        if rng.random() < ratio(p[t, x], q[t, x]):
            out.append(int(emit[t]))
            continue
        residual = np.maximum(p[t] - q[t], 0.0)
        out.append(inverse_cdf(residual if residual.sum() > 0 else p[t], rng.random()))
        return out
    out.append(inverse_cdf(p[len(lookup)], rng.random()))
    return out


def uint8_id_lookup(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    """SD whose probability gather reads the draft ids cast to ``uint8`` (planted; wrong for ids >= 256).

    The acceptance ratio of draft token x is read at ``x mod 256``: another token's ratio, or
    ``0/0`` (never accepted) where that id has no mass. Emitted ids are right.

    Parameters
    ----------
    draft_tokens : array, shape [K, L], int
    draft_probs : array, shape [K, L, V], float
    target_probs : array, shape [K, L+1, V], float
    rng : numpy.random.Generator

    Returns
    -------
    list of int
        The accepted prefix of draft 0, then one token.

    Raises
    ------
    ValueError
        Malformed arrays, or ``rng`` not a numpy Generator.
    """
    rng = check_rng(rng)
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    return _sd_with_ids(d[0].astype(np.uint8), d[0], q[0], p[0], rng)


def int16_id_buffer(draft_tokens: Any, draft_probs: Any, target_probs: Any, rng: Any) -> list[int]:
    """SD that holds the draft ids in an ``int16`` buffer (planted; wrong for ids >= 32,768).

    Id 32,768 + j becomes -32,768 + j: its ratio is read from the end of the row (numpy's
    negative index: another token's, or 0/0, never accepted) and, when accepted, the negative
    id is emitted.

    Parameters
    ----------
    draft_tokens : array, shape [K, L], int
    draft_probs : array, shape [K, L, V], float
    target_probs : array, shape [K, L+1, V], float
    rng : numpy.random.Generator

    Returns
    -------
    list of int
        The accepted prefix of draft 0 (through the ``int16`` buffer), then one token.

    Raises
    ------
    ValueError
        Malformed arrays, or ``rng`` not a numpy Generator.
    """
    rng = check_rng(rng)
    d, q, p = generic_arrays(draft_tokens, draft_probs, target_probs)
    buf = d[0].astype(np.int16)
    return _sd_with_ids(buf, buf, q[0], p[0], rng)


tag_verifier(uint8_id_lookup, "not_lossless", "generic", "sd")
tag_verifier(int16_id_buffer, "not_lossless", "generic", "sd")

__all__ = ["int16_id_buffer", "uint8_id_lookup"]
