"""The sizes (n, L, K) the adversarial search walks, per budget, and the sizes a run covers.

Every budget searches :data:`SIZES_MULTI` (multi-draft interfaces) or :data:`SIZES_SINGLE`
(chain, hf), smallest first; higher budgets add the sizes of :data:`EXTRA_SIZES_MULTI` or
:data:`EXTRA_SIZES_SINGLE` (wide vocabularies, many drafts and long blocks, one at a time).
:func:`covered_sizes` reports the sizes of a run's battery and search.
"""

from __future__ import annotations

from typing import Any

from spectr_gbv.validate.battery.instance import BatteryInstance

#: Sizes (n, L, K) searched at every budget, smallest first (multi-draft interfaces).
SIZES_MULTI: tuple[tuple[int, int, int], ...] = (
    (2, 1, 1),
    (2, 1, 2),
    (3, 1, 2),
    (2, 2, 2),
    (4, 1, 3),
    (6, 1, 2),
)
#: Sizes searched at every budget for single-draft interfaces (chain, hf).
SIZES_SINGLE: tuple[tuple[int, int, int], ...] = ((2, 1, 1), (3, 1, 1), (2, 2, 1), (3, 2, 1), (4, 2, 1), (6, 1, 1))
#: Sizes added at each budget above quick (cumulative: thorough also searches standard's). Wide
#: vocabularies, many drafts and long blocks one at a time: the end-to-end test of a size has
#: n^(L+1) cells, so each stays at or below 81.
EXTRA_SIZES_MULTI: dict[str, tuple[tuple[int, int, int], ...]] = {
    "quick": (),
    "standard": ((3, 2, 2), (4, 1, 4), (2, 1, 6), (2, 3, 3), (2, 4, 2), (6, 1, 3), (8, 1, 2)),
    "thorough": ((3, 1, 6), (3, 3, 2), (5, 1, 5), (4, 2, 3)),
}
#: Sizes added to :data:`SIZES_SINGLE` per budget (single-draft interfaces), each at or below 81 cells.
EXTRA_SIZES_SINGLE: dict[str, tuple[tuple[int, int, int], ...]] = {
    "quick": (),
    "standard": ((2, 3, 1), (2, 4, 1), (5, 1, 1), (8, 1, 1)),
    "thorough": ((3, 3, 1), (2, 5, 1), (7, 1, 1)),
}


_BUDGET_ORDER = ("quick", "standard", "thorough")


def sizes(budget: str, single_draft: bool) -> tuple[tuple[int, int, int], ...]:
    """Sizes (n, L, K) the search walks at ``budget``, in walk order.

    Parameters
    ----------
    budget : str
        ``"quick"``, ``"standard"`` or ``"thorough"``.
    single_draft : bool
        True for the chain and hf interfaces (K = 1 everywhere).

    Returns
    -------
    tuple of (n, L, K)
        :data:`SIZES_MULTI` (or :data:`SIZES_SINGLE`), then the extra sizes of every budget up
        to ``budget`` (:data:`EXTRA_SIZES_MULTI`, :data:`EXTRA_SIZES_SINGLE`); each group
        smallest first, so the quick walk is a prefix of the standard one.

    Raises
    ------
    ValueError
        An unknown budget.

    Examples
    --------
    >>> sizes("quick", True)
    ((2, 1, 1), (3, 1, 1), (2, 2, 1), (3, 2, 1), (4, 2, 1), (6, 1, 1))
    >>> sizes("standard", False)[-3:]
    ((2, 4, 2), (6, 1, 3), (8, 1, 2))
    """
    if budget not in _BUDGET_ORDER:
        raise ValueError(f"budget: expected one of {', '.join(_BUDGET_ORDER)}, got {budget!r}")
    base, extra = (SIZES_SINGLE, EXTRA_SIZES_SINGLE) if single_draft else (SIZES_MULTI, EXTRA_SIZES_MULTI)
    out = list(base)
    for b in _BUDGET_ORDER[: _BUDGET_ORDER.index(budget) + 1]:
        out.extend(s for s in extra[b] if s not in out)
    return tuple(out)


def covered_sizes(battery: list[BatteryInstance], budget: str, single_draft: bool) -> dict[str, Any]:
    """The sizes a run checks: the battery's instances and the search's sizes at ``budget``.

    A passing report reads as "lossless on these sizes" (the battery's instances, and the
    sizes the adversarial search drew instances of), each up to the TV error its test detects.

    Parameters
    ----------
    battery : list of BatteryInstance
        The instances the run samples (:func:`~spectr_gbv.validate.battery.default_battery`).
    budget : str
    single_draft : bool

    Returns
    -------
    dict
        ``{"n": (min, max), "L": (min, max), "K": (min, max), "battery": [(n, L, K), ...],
        "search": [(n, L, K), ...]}`` (ranges over both lists; each list in run order). The
        ``battery`` list gives an instance seen through a wide vocabulary with the V its verifier
        sees; the ranges count its small n.

    Raises
    ------
    ValueError
        An unknown budget.
    """
    bat = [(bi.instance.n, bi.instance.L, bi.K) for bi in battery]
    shown = [(bi.V, bi.instance.L, bi.K) for bi in battery]
    found = list(sizes(budget, single_draft))
    every = bat + found
    return {
        "n": (min(s[0] for s in every), max(s[0] for s in every)),
        "L": (min(s[1] for s in every), max(s[1] for s in every)),
        "K": (min(s[2] for s in every), max(s[2] for s in every)),
        "battery": shown,
        "search": found,
    }


__all__ = ["EXTRA_SIZES_MULTI", "EXTRA_SIZES_SINGLE", "SIZES_MULTI", "SIZES_SINGLE", "covered_sizes", "sizes"]
