"""Exact output law of the gpt-fast port at bf16 (:mod:`bench.gallery.ports.gptfast_sd`), in Fractions.

The bf16 coin of torch 2.13's CPU ``torch.rand(dtype=torch.bfloat16)`` is ``c(k) = bf16(k 2^-24)`` (round to
nearest even) with ``c(k) = 1.0`` replaced by 0, for ``k`` uniform on ``0 .. 2^24 - 1`` (the low 24 bits of one
mt19937 output). :func:`coin_cdf` enumerates the 2^24 values of ``k`` once and gives ``P(coin <= r)`` exactly.

The law of one verify call on fixed rows is then exact, given one modelling step stated here: the two categorical
draws (the correction after a rejection and the bonus) are taken as exact draws from the bf16 vector they are
made from, normalised (``P(y) = v_y / sum v``), whereas upstream's exponential race ``argmax(v / E)`` with bf16
exponentials deviates from that by the rounding of E and of the quotient (ties go to the smaller index). Every
other step is the port's own bf16 arithmetic, run by torch and read back as exact binary fractions: the rounding
of p and q to bf16, the bf16 ratio ``min(1, p/q)``, the residual ``max(p - q, 0) / sum`` (a NaN residual sends
the exponential race to token 0: probability 1 on token 0).
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from bench.gallery.ports.gptfast_sd import accept_ratios, bf16_rows, residual

#: Values of the float32 uniform lattice ``k 2^-24`` that torch rounds to a bf16 coin.
LATTICE = 2**24


@functools.lru_cache(maxsize=1)
def _coin_table() -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct bf16 coin values (float64) and the cumulative number of ``k`` mapping to each.

    Rounding is monotone, so ``bf16(k 2^-24)`` is non-decreasing in k and runs of equal values are counted without
    a sort; the run of 1.0 (``k >= 2^24 - 2^15``) is then moved onto 0.
    """
    k = torch.arange(LATTICE, dtype=torch.int32)
    c = (k.to(torch.float32) * 2.0**-24).to(torch.bfloat16)
    values, counts = torch.unique_consecutive(c, return_counts=True)
    values, counts = values.to(torch.float64).numpy(), counts.numpy().astype(np.int64)
    if values[-1] == 1.0:
        counts[0] += counts[-1]
        values, counts = values[:-1], counts[:-1]
    return values, np.cumsum(counts)


def coin_model(u32: torch.Tensor) -> torch.Tensor:
    """The bf16 coin torch derives from the float32 uniform ``u32`` of the same generator draw (see module doc).

    Parameters
    ----------
    u32 : Tensor, float32
        ``torch.rand`` float32 draws (``k 2^-24``).

    Returns
    -------
    Tensor, bfloat16
        ``bf16(u32)``, with 1.0 replaced by 0.
    """
    c = u32.to(torch.bfloat16)
    return torch.where(c == 1.0, torch.zeros_like(c), c)


def coin_cdf(r: float) -> Fraction:
    """``P(coin <= r)`` for torch's CPU bf16 uniform coin, exactly.

    Parameters
    ----------
    r : float
        A threshold (gpt-fast's bf16 acceptance ratio, in [0, 1]).

    Returns
    -------
    Fraction
        ``#{k : c(k) <= r} / 2^24``; ``coin_cdf(0) = (2^15 + 1) / 2^24``.
    """
    values, cum = _coin_table()
    i = int(np.searchsorted(values, float(r), side="right"))
    return Fraction(int(cum[i - 1]) if i else 0, LATTICE)


def _normalised(v: torch.Tensor) -> list[Fraction]:
    vals = [Fraction(float(x)) if not np.isnan(float(x)) else None for x in v.to(torch.float64)]
    if any(x is None for x in vals):  # the NaN residual: argmax of a NaN row is index 0
        return [Fraction(1)] + [Fraction(0)] * (len(vals) - 1)
    total = sum(vals, Fraction(0))
    return [x / total for x in vals]


def conditional_law(draft: Any, draft_rows: Any, target_rows: Any) -> dict[tuple[int, ...], Fraction]:
    """Law of the port's output given one draft, exactly (categorical draws modelled as in the module doc).

    Parameters
    ----------
    draft : array-like, shape [L], int
    draft_rows : array-like, shape [L, V], float64
        q rows along the draft.
    target_rows : array-like, shape [L+1, V], float64
        p rows along the draft.

    Returns
    -------
    dict of tuple of int to Fraction
        Output token tuples (length 1..L+1) and their probabilities (summing to 1).
    """
    ids = torch.as_tensor(np.asarray(draft, dtype=np.int64))
    q16, p16 = bf16_rows(draft_rows), bf16_rows(target_rows)
    ratios = accept_ratios(ids, q16, p16)
    law: dict[tuple[int, ...], Fraction] = {}
    reach = Fraction(1)
    prefix: tuple[int, ...] = ()
    for t in range(len(ids)):
        a = coin_cdf(float(ratios[t]))
        for y, w in enumerate(_normalised(residual(q16[t], p16[t]))):
            if w and reach * (1 - a):
                law[(*prefix, y)] = law.get((*prefix, y), Fraction(0)) + reach * (1 - a) * w
        reach *= a
        prefix = (*prefix, int(ids[t]))
    for y, w in enumerate(_normalised(p16[-1])):
        if w and reach:
            law[(*prefix, y)] = law.get((*prefix, y), Fraction(0)) + reach * w
    return law


def exact_law(instance: Any) -> dict[tuple[int, ...], Fraction]:
    """Output law of the port on an exact instance (K = 1), drafts drawn from q: ``sum_d q(d) law(. | d)``.

    Parameters
    ----------
    instance : spectr_gbv.core.instance.Instance
        With Fraction tables.

    Returns
    -------
    dict of tuple of int to Fraction
    """
    from spectr_gbv.simulate.exact import DraftTable  # noqa: PLC0415

    table = DraftTable.from_instance(instance)
    law: dict[tuple[int, ...], Fraction] = {}
    for d, w, q_rows, p_rows in zip(table.tokens, table.probs, table.draft_rows, table.target_rows, strict=True):
        cond = conditional_law(d, np.asarray(q_rows, dtype=np.float64), np.asarray(p_rows, dtype=np.float64))
        for o, v in cond.items():
            law[o] = law.get(o, Fraction(0)) + Fraction(w) * v
    return law


def bf16_target(target: Any) -> Any:
    """The target gpt-fast's own sampling follows: every row of ``target`` rounded to bf16 and normalised.

    Parameters
    ----------
    target : spectr_gbv.core.tabular.TabularAR
        Exact (Fraction) table.

    Returns
    -------
    spectr_gbv.core.tabular.TabularAR
        Same prefixes, rows ``bf16(p) / sum bf16(p)`` as Fractions.
    """
    from spectr_gbv.core.tabular import TabularAR  # noqa: PLC0415

    laws = {tuple(prefix): _normalised(bf16_rows(np.asarray(row, dtype=np.float64))) for prefix, row in target.items()}
    return TabularAR(target.n, laws, depth=target.depth, name="bf16 target")


def exact_defect(instance: Any, against: str = "p") -> Fraction:
    """Validity defect of the port on ``instance`` (K = 1), exactly.

    Parameters
    ----------
    instance : spectr_gbv.core.instance.Instance
        Exact tables.
    against : str
        ``"p"``: TV between "output, then fresh p" and p on V^(L+1) (what the harness measures); ``"bf16"``:
        the same against :func:`bf16_target`, the law gpt-fast's non-speculative decoding samples, so that only
        what the verify step adds (coin lattice, ratio and residual rounding) remains.

    Returns
    -------
    Fraction

    Raises
    ------
    ValueError
        Unknown ``against``.
    """
    from spectr_gbv.simulate.exact import validity_defect  # noqa: PLC0415

    if against not in ("p", "bf16"):
        raise ValueError(f"against: expected 'p' or 'bf16', got {against!r}")
    target = instance.target if against == "p" else bf16_target(instance.target)
    return validity_defect(target, exact_law(instance), instance.L)
