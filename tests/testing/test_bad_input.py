"""Bad sizes given to the hypothesis strategies of :mod:`spectr_gbv.testing.strategies`."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.parametrize("name", ["instances", "configs", "cases", "verify_inputs"])
def test_strategy_sizes_above_max_cells_are_refused_when_built(name: str) -> None:
    """`instances(n=8, L=(5, 6))` made hypothesis raise Unsatisfiable without naming max_cells."""
    from spectr_gbv.testing import strategies

    with pytest.raises(ValueError) as info:
        getattr(strategies, name)(n=8, L=(5, 6))  # building it, before any example is drawn
    assert str(info.value) == (
        "max_cells=64 is below the smallest table requested, n=8, L=5: n**L = 32768 cells; "
        "raise max_cells to at least 32768 or lower n / L"
    )


def test_strategy_ranges_partly_above_max_cells_draw_only_fitting_sizes() -> None:
    """A range whose large end does not fit is clipped, not filtered (no Unsatisfiable, no health check)."""
    from hypothesis import given, settings

    from spectr_gbv.testing.strategies import configs

    seen: set[tuple[int, int]] = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(configs(n=(2, 30), L=(2, 6), K=1, max_cells=16))
    def check(cfg: Any) -> None:
        assert cfg.n**cfg.L <= 16
        seen.add((cfg.n, cfg.L))

    check()
    assert seen <= {(2, 2), (2, 3), (2, 4), (3, 2), (4, 2)} and len(seen) >= 2
