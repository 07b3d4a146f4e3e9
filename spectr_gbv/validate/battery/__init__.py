"""The instance battery of the conformance harness, and vectorised sampling on an instance.

Every battery instance is small enough that its laws can be enumerated (vocabulary 2-5, draft
length 1-5) and is built in exact rationals (its float64 copy is what the verifier sees at the
statistical level); ``wide_vocab`` shows its 4 tokens to the verifier as ids 7, 256, 32,768 and
32,999 of a vocabulary of 33,000 (:mod:`~spectr_gbv.validate.battery.wide`), so ids stored in
8 or 16 bits break. The kinds, each aimed at a class of public bug (ECOSYSTEM.md, shipped as
docs/project/ECOSYSTEM.md):

========================  ====  ====  ==  =================================================
kind                       n     L    K   what it exercises
========================  ====  ====  ==  =================================================
``dense``                  3     2    2   generic case, every token possible
``sparse_disjoint``        4     2    3   p and q with partly disjoint supports (q = 0 < p,
                                          p = 0 < q): residuals, zero-probability tokens
``p_equals_q``             3     2    2   q = p: everything accepted, residuals all zero
``low_temperature``        4     2    2   near one-hot rows (softmax at T = 0.15)
``tiny_probabilities``     5     1    2   entries of 1e-6 next to large ones (ratios ~1e5)
``long_block``             2     5    2   long blocks, late rejections and bonus tokens
``tied_ratios``            3     2    3   p >= q on several children (ratios tie at 1, and
                                          tie exactly before clamping) and a p = q row
``wide_tree``              4     1    4   four drafts; the root row puts its draft mass on
                                          tokens the target dislikes, so the root sees three
                                          or four sibling rejections and the residual
                                          changes at each (multi-draft interfaces only)
``wide_vocab``             4     1    2   the 4 tokens are ids 7, 256, 32768, 32999 of V =
                                          33,000: ids past 8 and 16 bits (uint8, int16)
========================  ====  ====  ==  =================================================

Chain and Hugging Face verifiers are single-draft: their battery uses K = 1 and leaves out the
kinds of :data:`MULTI_DRAFT_KINDS` (``wide_tree`` tests sibling rejections, which need K > 1).
The battery is fixed (seeded per kind, exact rationals), independent of the harness seed.

This package's face holds the battery itself (the kinds, :func:`default_battery`,
:func:`user_battery`) and re-exports the names of its modules:

* :mod:`~spectr_gbv.validate.battery.instance` - :class:`~spectr_gbv.validate.battery.instance.BatteryInstance`
  and :func:`~spectr_gbv.validate.battery.instance.instance_from_spec`;
* :mod:`~spectr_gbv.validate.battery.rows` - the rational rows the kinds are built from;
* :mod:`~spectr_gbv.validate.battery.tables` - :class:`~spectr_gbv.validate.battery.tables.Tables`,
  vectorised sampling on an instance;
* :mod:`~spectr_gbv.validate.battery.wide` - :class:`~spectr_gbv.validate.battery.wide.VocabEmbedding`,
  a small instance seen through a wide vocabulary.

Import rule: imports ``core`` only; every subpackage above the interfaces may import it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.validate.battery.instance import BatteryInstance, battery_instance_from_spec, instance_from_spec
from spectr_gbv.validate.battery.rows import (
    DEEP_RESIDUAL_ROW,
    deep_rows,
    dirichlet_row,
    softmax_row,
    tabular_model,
    tied_rows,
)
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.battery.wide import VocabEmbedding

#: Battery kinds in run order.
KINDS: tuple[str, ...] = (
    "dense",
    "sparse_disjoint",
    "p_equals_q",
    "low_temperature",
    "tiny_probabilities",
    "long_block",
    "tied_ratios",
    "wide_tree",
    "wide_vocab",
)
#: Number of drafts K of each kind for multi-draft (generic) interfaces.
KIND_K: dict[str, int] = {
    "dense": 2,
    "sparse_disjoint": 3,
    "p_equals_q": 2,
    "low_temperature": 2,
    "tiny_probabilities": 2,
    "long_block": 2,
    "tied_ratios": 3,
    "wide_tree": 4,
    "wide_vocab": 2,
}
#: Kinds left out of single-draft batteries (chain, hf): they test what only K > 1 shows.
MULTI_DRAFT_KINDS: tuple[str, ...] = ("wide_tree",)
#: ``wide_vocab``: the verifier sees its 4 tokens as these ids of a vocabulary of :data:`WIDE_VOCAB_SIZE`
#: (one below 256, the first ids past 8 bits and past 15 bits, the last id).
WIDE_VOCAB_IDS: tuple[int, ...] = (7, 256, 32768, 32999)
#: ``wide_vocab``: the vocabulary size the verifier sees (past 32,768, the int16 range).
WIDE_VOCAB_SIZE = 33000
#: ``wide_vocab``'s law tests are planned against this TV error when the budget's is smaller: each
#: iteration carries rows of 33,000 floats, and the id bugs it targets move its law by far more.
WIDE_VOCAB_TV = 0.1
#: ``wide_vocab``'s law tests are planned against at least this multiple of the budget's TV error:
#: 3 x 0.1 = 0.3 at budget ``quick`` (a reference verifier in Python spends 20-30 ms on one
#: iteration of 33,000-float rows; the id bugs it targets move the law by more), the floor
#: :data:`WIDE_VOCAB_TV` at ``standard`` and ``thorough``.
WIDE_VOCAB_TV_FACTOR = 3.0


def _build(kind: str, K: int) -> BatteryInstance:
    """The instance of one battery kind (fixed seed per kind)."""
    seed = 1000 + KINDS.index(kind)
    rng = np.random.default_rng(seed)
    den = 240
    if kind == "dense":
        n, L = 3, 2
        p = tabular_model(n, L, lambda _: dirichlet_row(rng, n), den, "target")
        q = tabular_model(n, L - 1, lambda _: dirichlet_row(rng, n), den, "draft")
    elif kind == "sparse_disjoint":
        n, L = 4, 2

        def supports(_: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
            # p on {a, b, c}, q on {b, c, d} in a random order: shared, p-only and q-only tokens
            perm = rng.permutation(n)
            wp = np.zeros(n)
            wq = np.zeros(n)
            wp[perm[:3]] = dirichlet_row(rng, 3) + 0.05
            wq[perm[1:]] = dirichlet_row(rng, 3) + 0.05
            return wp, wq

        rows = {pre: supports(pre) for t in range(L + 1) for pre in itertools.product(range(n), repeat=t)}
        p = tabular_model(n, L, lambda pre: rows[pre][0], den, "target")
        q = tabular_model(n, L - 1, lambda pre: rows[pre][1], den, "draft")
    elif kind == "p_equals_q":
        n, L = 3, 2
        p = tabular_model(n, L, lambda _: dirichlet_row(rng, n), den, "target")
        q = p.truncate(L - 1)
        q = TabularAR(n, dict(q.items()), depth=L - 1, name="draft")
    elif kind == "low_temperature":
        n, L, temp = 4, 2, 0.15
        logits = {pre: rng.normal(size=n) for t in range(L + 1) for pre in itertools.product(range(n), repeat=t)}
        noise = {pre: rng.normal(scale=0.5, size=n) for pre in logits}
        p = tabular_model(n, L, lambda pre: softmax_row(logits[pre], temp), 10**6, "target")
        q = tabular_model(n, L - 1, lambda pre: softmax_row(logits[pre] + noise[pre], temp), 10**6, "draft")
    elif kind == "tiny_probabilities":
        n, L = 5, 1
        # p: large on 0..2, 1e-6 on 3, 1e-4 on 4; q: large on 3 (p-tiny), 1e-6 on 0 (p-large)
        p_rows = [np.array([0.5, 0.3, 0.1998 - 1e-6, 1e-6, 2e-4]), np.array([0.4, 0.4, 0.2 - 2e-6, 1e-6, 1e-6])]
        q_row = np.array([1e-6, 0.3, 0.2, 0.5 - 1e-6 - 1e-4, 1e-4])
        p = tabular_model(n, L, lambda pre: p_rows[min(len(pre), 1)], 10**7, "target")
        q = tabular_model(n, L - 1, lambda _: q_row, 10**7, "draft")
    elif kind == "long_block":
        n, L = 2, 5
        p = tabular_model(n, L, lambda _: dirichlet_row(rng, n, 2.0), den, "target")
        q = tabular_model(n, L - 1, lambda _: dirichlet_row(rng, n, 2.0), den, "draft")
    elif kind == "tied_ratios":
        n, L = 3, 2
        p_rows, q_rows = tied_rows(rng, n, L)
        p = TabularAR(n, p_rows, depth=L, name="target")
        q = TabularAR(n, q_rows, depth=L - 1, name="draft")
    elif kind == "wide_tree":
        n, L = 4, 1
        p_rows, q_rows = deep_rows(rng, n, L)
        p = TabularAR(n, p_rows, depth=L, name="target")
        q = TabularAR(n, q_rows, depth=L - 1, name="draft")
    elif kind == "wide_vocab":
        n, L = len(WIDE_VOCAB_IDS), 1
        p = tabular_model(n, L, lambda _: dirichlet_row(rng, n, 2.0), den, "target")
        q = tabular_model(n, L - 1, lambda _: dirichlet_row(rng, n, 2.0), den, "draft")
        inst = Instance(p, q, L, name=f"battery:{kind}")
        return BatteryInstance(kind, inst, K, VocabEmbedding(WIDE_VOCAB_IDS, WIDE_VOCAB_SIZE))
    else:
        raise ValueError(f"kind: unknown battery kind {kind!r}; valid: {', '.join(KINDS)}")
    inst = Instance(p, q, L, name=f"battery:{kind}")
    return BatteryInstance(kind, inst, K)


def default_battery(max_drafts: int | None = None, kinds: Sequence[str] | None = None) -> list[BatteryInstance]:
    """The built-in battery.

    Parameters
    ----------
    max_drafts : int or None
        1 for single-draft interfaces (chain, hf): every instance gets K = 1, and the kinds of
        :data:`MULTI_DRAFT_KINDS` are left out unless named in ``kinds``. None: each kind's K
        of :data:`KIND_K` (2; 3 for ``sparse_disjoint`` and ``tied_ratios``; 4 for
        ``wide_tree``). Another int caps every K at it.
    kinds : sequence of str, optional
        Subset of :data:`KINDS` (default all), in battery order.

    Returns
    -------
    list of BatteryInstance

    Raises
    ------
    ValueError
        An unknown kind.
    """
    if kinds is None:
        chosen = [k for k in KINDS if not (max_drafts == 1 and k in MULTI_DRAFT_KINDS)]
    else:
        chosen = list(kinds)
    out = []
    for kind in chosen:
        if kind not in KINDS:
            raise ValueError(f"kinds: unknown battery kind {kind!r}; valid: {', '.join(KINDS)}")
        K = KIND_K[kind] if max_drafts is None else min(KIND_K[kind], max_drafts)
        out.append(_build(kind, K))
    return out


def user_battery(instances: Any, max_drafts: int | None) -> list[BatteryInstance]:
    """Normalise the ``instances=`` argument of :func:`~spectr_gbv.validate.validate`.

    Parameters
    ----------
    instances : Instance, (Instance, K), BatteryInstance, or a list of them
        An Instance alone gets K = 2 (generic) or 1 (single-draft interfaces).
    max_drafts : int or None
        1 for chain / hf.

    Returns
    -------
    list of BatteryInstance (kind ``"user<i>"`` unless given as BatteryInstance)

    Raises
    ------
    ValueError
        An item of another type, K < 1, K > 1 for a single-draft interface, or an empty list.
    """
    items = [instances] if isinstance(instances, Instance | BatteryInstance | tuple) else list(instances)
    if not items:
        raise ValueError("instances: expected at least one instance")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, BatteryInstance):
            bi = item
        elif isinstance(item, Instance):
            bi = BatteryInstance(f"user{i}", item, 1 if max_drafts == 1 else 2)
        elif (
            isinstance(item, tuple)
            and len(item) == 2
            and isinstance(item[0], Instance)
            and isinstance(item[1], int | np.integer)
        ):
            bi = BatteryInstance(f"user{i}", item[0], int(item[1]))
        else:
            raise ValueError(
                f"instances[{i}]: expected an Instance, an (Instance, K) pair or a BatteryInstance, "
                f"got {type(item).__name__}"
            )
        if bi.K < 1 or (max_drafts is not None and bi.K > max_drafts):
            allowed = f"1..{max_drafts}" if max_drafts is not None else ">= 1"
            raise ValueError(f"instances[{i}]: K = {bi.K} must be {allowed} for this interface")
        out.append(bi)
    return out


__all__ = [
    "DEEP_RESIDUAL_ROW",
    "KINDS",
    "KIND_K",
    "MULTI_DRAFT_KINDS",
    "WIDE_VOCAB_IDS",
    "WIDE_VOCAB_SIZE",
    "WIDE_VOCAB_TV",
    "WIDE_VOCAB_TV_FACTOR",
    "BatteryInstance",
    "Tables",
    "VocabEmbedding",
    "battery_instance_from_spec",
    "default_battery",
    "instance_from_spec",
    "user_battery",
]
