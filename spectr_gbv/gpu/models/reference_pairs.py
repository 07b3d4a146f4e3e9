r"""Target/draft pairs of :class:`~spectr_gbv.gpu.models.reference_lm.ReferenceLM` models for the generation referee.

Each pair (:func:`reference_pair`) is a target, a draft and a second draft for the same target
(``alt_draft``: two drafts must give the same output law, which catches a loop whose q is not
the law its drafts were drawn from), on one of two vocabularies:

========================  =========  ==========================================================
name                      V          what it exercises
========================  =========  ==========================================================
``close``                 8          q near p (high acceptance); alt_draft is ``far``'s draft
``far``                   8          q independent of p (low acceptance, residual draws)
``identical``             8          p = q (every draft accepted: the bonus token's position)
``draft_zeros``           8          q = 0 on ids 2 and 6 where p > 0 (the residual supplies them)
``target_zeros``          8          p = 0 on id 4 in half of the states and on id 7 in a third,
                                     where q > 0 (such drafts must never be emitted)
``peaked``                8          low-entropy p and q (logits 4x wider)
``wide``                  1000       ids 3, 255, 256, 511, 998, 999 of V = 1000 (tiled and
                                     wide-vocabulary code paths; ids past 255 and 32767 bytes)
========================  =========  ==========================================================

Every law is context-dependent (16 states: last two tokens, the history's sum, the position's
parity: :func:`~spectr_gbv.gpu.models.reference_lm.context_state`), support 6 tokens, logits
offset by :data:`OFFSET` (64: large logits, as real models' largest, where bfloat16 rounds to
0.5). Tables are drawn from a seeded ``torch.Generator`` (float64 normal draws), so a pair is
the same on every machine for a given ``seed``.

References
----------
Leviathan et al. 2023 (acceptance rate alpha = 1 - TV(p, q): close and far pairs);
Chen et al. 2023 (the residual ``(p - q)+`` that draft_zeros exercises).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from spectr_gbv.gpu.models.reference_lm import ReferenceLM, ReferenceLMConfig

#: Pair names, in the order the referee's plans use them.
REFERENCE_PAIRS: tuple[str, ...] = ("close", "far", "identical", "draft_zeros", "target_zeros", "peaked", "wide")

NUM_STATES = 16
SMALL_VOCAB = 8
SMALL_SUPPORT: tuple[int, ...] = (0, 1, 2, 4, 6, 7)
WIDE_VOCAB = 1000
WIDE_SUPPORT: tuple[int, ...] = (3, 255, 256, 511, 998, 999)
SMALL_PROMPTS: tuple[tuple[int, ...], ...] = ((1, 2), (4, 0, 6, 1), (7,))
WIDE_PROMPTS: tuple[tuple[int, ...], ...] = ((3, 256), (999, 511, 255), (998,))
NEG_INF = float("-inf")
#: Constant added to every logit: cancels in the softmax; at 64 bfloat16's spacing is 0.5, so a draft law
#: computed from bfloat16 logits is off by up to 0.25 in a logit (TV 0.06-0.13 per token at T = 1 to 0.5).
OFFSET = 64.0


@dataclass(frozen=True)
class ReferencePair:
    """A target, its draft and a second draft for the same target.

    Attributes
    ----------
    name : str
        One of :data:`REFERENCE_PAIRS`.
    target, draft, alt_draft : ReferenceLM
        Same vocabulary and support; in eval mode.
    vocab_size : int
    support : tuple of int
    prompts : tuple of tuples of int
        Prompts to condition on (ids in the vocabulary).
    description : str
    """

    name: str
    target: ReferenceLM
    draft: ReferenceLM
    alt_draft: ReferenceLM
    vocab_size: int
    support: tuple[int, ...]
    prompts: tuple[tuple[int, ...], ...]
    description: str


def _normal(seed: int, scale: float, shape: tuple[int, int] = (NUM_STATES, len(SMALL_SUPPORT))) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


def _model(table: torch.Tensor, vocab: int, support: tuple[int, ...], offset: float) -> ReferenceLM:
    cfg = ReferenceLMConfig(vocab_size=vocab, support=support, table=table.tolist(), offset=offset)
    return ReferenceLM(cfg).eval()


def _tables(name: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float, str]:
    """(target, draft, alt_draft) tables, the offset and the description of pair ``name``."""
    base = 1000 * seed
    p = _normal(base + 1, 1.0)
    close = p + _normal(base + 2, 0.35)
    far = _normal(base + 3, 1.5)
    if name == "close":
        return p, close, far, OFFSET, "q near p (high acceptance)"
    if name == "far":
        return p, far, close, OFFSET, "q independent of p (low acceptance, residual draws)"
    if name == "identical":
        return p, p.clone(), far, OFFSET, "p = q (every draft accepted)"
    if name == "draft_zeros":
        q = close.clone()
        q[:, [SMALL_SUPPORT.index(2), SMALL_SUPPORT.index(6)]] = NEG_INF
        return p, q, close, OFFSET, "q = 0 on ids 2 and 6 where p > 0"
    if name == "target_zeros":
        t = p.clone()
        t[::2, SMALL_SUPPORT.index(4)] = NEG_INF
        t[::3, SMALL_SUPPORT.index(7)] = NEG_INF
        return t, close, far, OFFSET, "p = 0 on ids 4 and 7 in some states, where q > 0"
    if name == "peaked":
        return 4.0 * p, 4.0 * p + _normal(base + 4, 1.0), far, OFFSET, "low-entropy p and q"
    if name == "wide":
        return p, close, far, OFFSET, f"ids {', '.join(map(str, WIDE_SUPPORT))} of V = {WIDE_VOCAB}"
    raise ValueError(f"name: unknown reference pair {name!r}; known: {', '.join(REFERENCE_PAIRS)}")


def reference_pair(name: str, *, seed: int = 0) -> ReferencePair:
    """Build the reference pair ``name`` (see the module table).

    Parameters
    ----------
    name : str
        One of :data:`REFERENCE_PAIRS`.
    seed : int
        >= 0; selects the tables (0 is the referee's default).

    Returns
    -------
    ReferencePair

    Raises
    ------
    ValueError
        Unknown ``name`` or a negative ``seed``.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    p, q, alt, offset, description = _tables(name, seed)
    wide = name == "wide"
    vocab = WIDE_VOCAB if wide else SMALL_VOCAB
    support = WIDE_SUPPORT if wide else SMALL_SUPPORT
    return ReferencePair(
        name=name,
        target=_model(p, vocab, support, offset),
        draft=_model(q, vocab, support, offset),
        alt_draft=_model(alt, vocab, support, offset),
        vocab_size=vocab,
        support=support,
        prompts=WIDE_PROMPTS if wide else SMALL_PROMPTS,
        description=description,
    )
